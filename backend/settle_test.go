package backend

import "context"

// waitSettled waits until frontend id's RDMA exchange on its current data
// connection has ended (the session is up, or reads go over TCP), or ctx
// ends.
func (p *rdmaPuller) waitSettled(ctx context.Context, id uint32) error {
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if pe := p.tcp.peer(id); pe != nil {
			if l := p.lookup(pe); l != nil {
				l.mu.Lock()
				done := l.conn != nil && l.isSettled()
				l.mu.Unlock()
				if done {
					return nil
				}
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
