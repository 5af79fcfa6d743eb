// Package shutdown is how Symphony's long-running processes (`symphony
// scheduler`, `symphony backend`) stop on signals: the first SIGINT or
// SIGTERM starts a graceful stop that drains the work in flight, a second
// cuts the drain short, and a third exits at once. An operator, or an
// orchestrator that escalates, can so always get a process down, without
// losing the clean stop by default.
//
// It lives beside the scheduler service, whose drain (Service.Close, cut
// short by Service.EndDrain) the backend agent's (Agent.Drain under a
// context) mirrors, and it imports nothing of either, so that every process
// can use it. Wait takes the signals as a channel and the stages as
// callbacks, so that tests drive it without sending real signals.
package shutdown

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Signals are the signals that stop a process: SIGINT (Ctrl-C) and SIGTERM
// (kill, systemd, Kubernetes).
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// Notify subscribes a channel to Signals, with room for buffer signals so
// that none sent while a stage runs is lost, and returns it with the
// function that unsubscribes it (after which a signal has its default
// effect again).
func Notify(buffer int) (<-chan os.Signal, func()) {
	sigs := make(chan os.Signal, max(buffer, 1))
	signal.Notify(sigs, Signals...)
	return sigs, func() { signal.Stop(sigs) }
}

// Wait waits for a first signal on sigs, then runs graceful and returns
// when it does. While graceful runs, each further signal runs the next of
// hurry (meant to cut the graceful stop short: end a drain, cancel its
// context), and a signal past the last of them runs exit (meant to exit
// the process at once, as os.Exit); a nil stage does nothing. Every stage
// runs at most once, and in the caller's order. Wait returns only when no
// stage is running any more, and reads nothing from sigs after it has
// returned.
//
// A closed sigs counts as a first signal, and ends the escalation: no
// hurry or exit runs.
func Wait(sigs <-chan os.Signal, graceful func(), hurry []func(), exit func()) {
	<-sigs
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, stage := range append(hurry[:len(hurry):len(hurry)], exit) {
			select {
			case _, ok := <-sigs:
				if !ok {
					return
				}
				if stage != nil {
					stage()
				}
			case <-done:
				return
			}
		}
	}()
	graceful()
	close(done)
	wg.Wait()
}
