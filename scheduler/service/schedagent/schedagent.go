// Package schedagent is a part's scheduler in the live control plane
// (partition/live): it stands the scheduler service for its part's
// election in etcd, and once elected routes the part to it, holds the
// models the controller's assignment gives the part, and reports what the
// part measured. It lives beside the service, not in partition, because
// the control plane's planning knows no running component: each component
// follows the registry itself.
package schedagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Config configures a part's scheduler in the live control plane.
type Config struct {
	Registry *registry.Registry
	// Service is the running scheduler. It serves the whole model
	// catalog; the models the assignment gives its part are loaded and
	// the others unloaded (service.Config.Unloaded: start with every
	// model unloaded, so that none is served before its part is decided).
	Service *service.Service
	// Part is the part it schedules; Name names the process within it.
	Part int
	Name string
	// Address is where frontends and backends reach Service.
	Address string
	// ReportEvery is how often the active scheduler puts its Report
	// (DefaultReportEvery if 0); the controller reads them at its epoch's
	// half and end, so a report is at most this old then.
	ReportEvery time.Duration
	Log         zerolog.Logger
}

// DefaultReportEvery is Config.ReportEvery's default.
const DefaultReportEvery = 250 * time.Millisecond

// onlineSample is how often the agent samples the GPUs online, for the
// report's Online time.
const onlineSample = 50 * time.Millisecond

// Run is a part's scheduler in the live control plane. From the start it
// holds the models the assignment gives its part (Assignment.Holds): it
// loads those it lacks and unloads, without losing a request, those it no
// longer holds. It stands for its part's election (registry.Campaign) and
// waits as a standby, a hot one: on a takeover the part's models are READY
// when the frontends switch to it. Once elected, its address is the
// part's route, so frontends and backends come to it, and until the
// leadership ends it puts its part's Report every ReportEvery under its
// lease. It returns when ctx
// ends (after resigning, so a standby takes over at once), or with an
// error when the leadership is lost: a deposed scheduler must stop
// serving, so the process exits.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Registry == nil || cfg.Service == nil {
		return errors.New("schedagent: no registry or no service")
	}
	if cfg.ReportEvery <= 0 {
		cfg.ReportEvery = DefaultReportEvery
	}
	log := cfg.Log.With().Str("component", "part-scheduler").Int("part", cfg.Part).Str("name", cfg.Name).Logger()
	a := &schedulerAgent{cfg: cfg, log: log, busyOps: map[string]bool{}}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg := &a.ops
	defer wg.Wait() // after cancel, deferred before it
	// A standby holds its part's models too, a hot standby: its backends
	// come only with the takeover, but frontends that switch to it find
	// the models READY, not refused as unloaded.
	wg.Add(1)
	go func() { defer wg.Done(); a.followAssignment(actx) }()
	log.Info().Msg("standing for election")
	lead, err := cfg.Registry.Campaign(ctx, registry.Scheduler{Name: cfg.Name, Part: cfg.Part, Address: cfg.Address})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("schedagent: part %d: %w", cfg.Part, err)
	}
	log.Info().Int64("term", lead.Term()).Msg("elected: the part's active scheduler")
	a.lead, a.start = lead, time.Now()
	wg.Add(1)
	go func() { defer wg.Done(); a.report(actx) }()
	select {
	case <-ctx.Done():
		cancel()
		wg.Wait()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		if err := lead.Resign(rctx); err != nil {
			log.Warn().Err(err).Msg("resign")
		}
		return nil
	case <-lead.Done():
		cancel()
		wg.Wait()
		return fmt.Errorf("schedagent: part %d: leadership lost (term %d): stopping, a standby takes over", cfg.Part, lead.Term())
	}
}

type schedulerAgent struct {
	cfg   Config
	log   zerolog.Logger
	lead  *registry.Leadership
	start time.Time

	// ops counts the agent's goroutines, the model ops included, so that
	// Run returns only once none touches the service any more.
	ops sync.WaitGroup

	mu sync.Mutex
	// busyOps are the models with a load or unload under way; want is
	// the latest assignment's set for this part (nil: none yet).
	busyOps map[string]bool
	want    map[string]bool
}

// opRetry is how often the agent retries the model ops that failed (a
// backend's load error, a timeout), standby or active.
const opRetry = time.Second

// followAssignment applies every assignment to the service's models,
// watching again from where it was when a watch ends (an etcd leader
// change, say), and retries failed model ops every opRetry.
func (a *schedulerAgent) followAssignment(ctx context.Context) {
	var next int64 // the revision to resume from (0: the current one)
	retry := time.NewTicker(opRetry)
	defer retry.Stop()
	transport.KeepDialing(ctx, transport.DefaultBackoff(), a.log, func(ctx context.Context) error {
		updates := a.cfg.Registry.WatchAssignment(ctx, next)
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-retry.C:
				a.reconcile(ctx)
			case u, ok := <-updates:
				if !ok {
					return errors.New("the assignment watch ended")
				}
				if err := a.apply(ctx, u); err != nil {
					if errors.Is(err, registry.ErrCompacted) {
						next = 0 // read the assignment afresh
					}
					return err
				}
				if u.Revision > 0 {
					next = u.Revision + 1
				}
			}
		}
	})
}

// apply takes one assignment update: a bad value is skipped (the last good
// one stands), an error that ended the watch is returned.
func (a *schedulerAgent) apply(ctx context.Context, u registry.AssignmentUpdate) error {
	{
		if u.Err != nil {
			if registry.IsDecodeError(u.Err) {
				a.log.Error().Err(u.Err).Msg("bad assignment: keeping the last good one")
				return nil
			}
			return u.Err
		}
		if u.Deleted {
			return nil // the controller starts over: keep serving what is held
		}
		want := map[string]bool{}
		for _, st := range a.cfg.Service.ModelStates() {
			name := a.cfg.Service.ModelName(int(st.Model))
			if u.Value.Holds(a.cfg.Part, name) {
				want[name] = true
			}
		}
		a.mu.Lock()
		a.want = want
		a.mu.Unlock()
		a.reconcile(ctx)
		return nil
	}
}

// reconcile starts a load for each wanted model not READY and an unload
// for each READY model not wanted, one op per model at a time; each op,
// when it ends, reconciles again, so the last assignment wins.
func (a *schedulerAgent) reconcile(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.want == nil || ctx.Err() != nil {
		return
	}
	for _, st := range a.cfg.Service.ModelStates() {
		name := a.cfg.Service.ModelName(int(st.Model))
		if a.busyOps[name] {
			continue
		}
		var op func(context.Context, string) error
		switch {
		case a.want[name] && st.State != wire.ModelReady:
			op = a.cfg.Service.LoadModel
		case !a.want[name] && st.State == wire.ModelReady:
			op = a.cfg.Service.UnloadModel
		default:
			continue
		}
		a.busyOps[name] = true
		a.ops.Add(1)
		go func() {
			defer a.ops.Done()
			err := op(ctx, name)
			if err != nil && ctx.Err() == nil {
				a.log.Error().Err(err).Str("model", name).Dur("retry_in", opRetry).Msg("model op failed")
			}
			a.mu.Lock()
			delete(a.busyOps, name)
			a.mu.Unlock()
			if err == nil {
				a.reconcile(ctx)
			}
		}()
	}
}

// report puts the part's Report every ReportEvery, integrating the GPUs
// online in between.
func (a *schedulerAgent) report(ctx context.Context) {
	tick := time.NewTicker(onlineSample)
	defer tick.Stop()
	var online time.Duration
	last, lastPut := time.Now(), time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		st := a.cfg.Service.Snapshot()
		online += time.Duration(st.OnlineGPUs) * now.Sub(last)
		last = now
		if now.Sub(lastPut) < a.cfg.ReportEvery {
			continue
		}
		lastPut = now
		rep := a.buildReport(&st, now, online)
		pctx, cancel := context.WithTimeout(ctx, a.cfg.ReportEvery)
		if err := a.cfg.Registry.PutReport(pctx, rep, a.lead.Lease()); err != nil && ctx.Err() == nil {
			a.log.Warn().Err(err).Msg("report not put")
		}
		cancel()
	}
}

func (a *schedulerAgent) buildReport(st *service.Stats, now time.Time, online time.Duration) registry.Report {
	rep := registry.Report{Part: a.cfg.Part, Scheduler: a.cfg.Name, Start: a.start.UnixNano(), At: now.UnixNano(),
		Models: make(map[string]registry.Counts, len(st.Models)), Busy: st.Busy, Online: online}
	for _, ms := range a.cfg.Service.ModelStates() {
		if ms.State == wire.ModelReady {
			rep.Ready = append(rep.Ready, a.cfg.Service.ModelName(int(ms.Model)))
		}
	}
	for _, m := range st.Models {
		// Every request ended badly counts, refusals included: a
		// request refused as "not loaded" is one a move failed.
		bad := m.Failed + m.DroppedLate
		for _, n := range m.Dropped {
			bad += n
		}
		if m.Tasks == 0 && bad == 0 {
			continue
		}
		rep.Models[m.Name] = registry.Counts{Tasks: m.Tasks, Bad: bad}
	}
	seen := map[string]bool{}
	for _, g := range st.GPUs {
		if g.Online && !seen[g.Backend] {
			seen[g.Backend] = true
			rep.Backends = append(rep.Backends, g.Backend)
		}
	}
	slices.Sort(rep.Backends)
	return rep
}
