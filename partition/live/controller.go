package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/partition/actuate"
	"github.com/symphony-serving/symphony/partition/epoch"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/scheduler"
)

// ControllerConfig configures the live epoch controller.
type ControllerConfig struct {
	Registry *registry.Registry
	// Epoch configures the controller core (partition/epoch), the one the
	// simulator drives.
	Epoch epoch.Config
	// Models is the model catalog, with the rates the first epoch plans
	// for (DeclaredRate); the measured fields are ignored.
	Models []epoch.Model
	// Period is the epoch's length: the controller measures for Period,
	// then decides and carries the decision out.
	Period time.Duration
	// SwitchTimeout bounds each wait of a decision's carrying out: for the
	// parts' schedulers to load what moves in, and for the frontends to
	// follow the new routes (DefaultSwitchTimeout if 0).
	SwitchTimeout time.Duration
	// Poll is how often a wait reads the reports and the frontends'
	// records (DefaultPoll if 0).
	Poll time.Duration
	// Autoscaler, if set, starts and stops backends after each epoch so
	// that the cluster has what the parts want (epoch.Record.Want), with
	// its warm pool and scale-in delay (partition/actuate); nil leaves
	// the cluster's size to the operator.
	Autoscaler *actuate.Autoscaler
	// OnEpoch, if set, sees each epoch once it is carried out, for reports
	// and tests.
	OnEpoch func(EpochResult)
	Log     zerolog.Logger
}

// DefaultSwitchTimeout is ControllerConfig.SwitchTimeout's default: a
// model's load on a real runtime takes seconds.
const DefaultSwitchTimeout = 30 * time.Second

// retryEpochAfter is how long a failed epoch waits before the next starts
// over, so that an unreachable etcd is not hammered.
const retryEpochAfter = time.Second

// DecideTimeout bounds one epoch's decision: the heuristic takes
// milliseconds (docs/scale.md), milp and random search use what they are
// given.
const DecideTimeout = 10 * time.Second

// DefaultPoll is ControllerConfig.Poll's default.
const DefaultPoll = 20 * time.Millisecond

// EpochResult is one epoch as the controller carried it out.
type EpochResult struct {
	// Epoch numbers it, from 1; Window is how long it measured (0 for
	// the first, which plans on the declared rates).
	Epoch  uint64
	Window time.Duration
	// Decision is the core's; Backends the backend each of its GPU IDs
	// stood for.
	Decision *epoch.Decision
	Backends []string
	// Moves are its model moves, switched or not.
	Moves []MoveResult
	// At is when it was decided; Took the time from then to the end of
	// its carrying out.
	At   time.Time
	Took time.Duration
}

// MoveResult is one model move: Switched once its requests went to its
// new part; Err says why not.
type MoveResult struct {
	Model    string
	From, To int
	Switched bool
	// Loaded is how long the new part took to take requests for it.
	Loaded time.Duration
	Err    error
}

// Controller is the live epoch controller (RunController): it measures
// the parts through their schedulers' reports, decides each epoch with the
// controller core, and carries the decision out through the registry:
// the assignment (what each part holds, where each backend goes), the
// routing table (where requests go), make before break.
type Controller struct {
	cfg  ControllerConfig
	log  zerolog.Logger
	core *epoch.Controller
	// index maps a model's name to its index in cfg.Models.
	index map[string]int
	// base is the reports the epoch under way measures from, by part,
	// read as its window began.
	base map[int]registry.Report
	n    uint64
	// assigned and serving are each model's parts after the last epoch
	// (epoch.Unassigned before the first).
	assigned, serving []int
	// mu makes Step and Move take turns.
	mu sync.Mutex
}

// NewController checks cfg and builds a controller.
func NewController(cfg ControllerConfig) (*Controller, error) {
	switch {
	case cfg.Registry == nil:
		return nil, errors.New("live: controller: no registry")
	case len(cfg.Models) == 0:
		return nil, errors.New("live: controller: no models")
	case cfg.Period <= 0:
		return nil, fmt.Errorf("live: controller: epoch period %v must be positive", cfg.Period)
	}
	if cfg.SwitchTimeout <= 0 {
		cfg.SwitchTimeout = DefaultSwitchTimeout
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	core, err := epoch.New(cfg.Epoch)
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, log: cfg.Log.With().Str("component", "controller").Logger(), core: core,
		index: map[string]int{}, base: map[int]registry.Report{}}
	for i, m := range cfg.Models {
		if _, dup := c.index[m.Name]; dup {
			return nil, fmt.Errorf("live: controller: model %q twice", m.Name)
		}
		c.index[m.Name] = i
		c.assigned = append(c.assigned, epoch.Unassigned)
		c.serving = append(c.serving, epoch.Unassigned)
	}
	return c, nil
}

// RunController runs the live epoch controller until ctx ends: the first
// epoch places every model on the declared rates once every part has an
// active scheduler and a backend has registered; each later epoch
// measures for the period, then decides and carries the decision out.
func RunController(ctx context.Context, cfg ControllerConfig) error {
	c, err := NewController(cfg)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// Run is RunController's loop. An epoch that fails (etcd unreachable, say)
// is logged and the next one starts from what the registry then holds:
// the controller outlives etcd's hiccups as the parts do. A write of the
// assignment that lost to another writer ends it with the conflict: only a
// controller writes the assignment, so another one is running.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.WaitCluster(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for ctx.Err() == nil {
		err := c.Step(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, registry.ErrConflict):
			// Only a controller writes the assignment: another one
			// runs. Two would undo each other's decisions.
			return fmt.Errorf("%w: is another controller running?", err)
		default:
			c.log.Error().Err(err).Uint64("epoch", c.n).Msg("epoch failed: the next one starts over from the registry")
			sleepCtx(ctx, retryEpochAfter)
		}
	}
	return nil
}

// WaitCluster waits until every part has an active scheduler and at
// least one backend has registered: what the first epoch needs.
func (c *Controller) WaitCluster(ctx context.Context) error {
	logged := false
	for {
		routes, _, err := c.cfg.Registry.Routes(ctx)
		if err == nil {
			var bs []registry.Entry[registry.Backend]
			bs, _, err = c.cfg.Registry.Backends(ctx)
			if err == nil && len(routes.Schedulers) >= c.cfg.Epoch.Parts && len(bs) > 0 {
				return nil
			}
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn().Err(err).Msg("reading the registry")
		}
		if !logged {
			c.log.Info().Int("parts", c.cfg.Epoch.Parts).Msg("waiting for every part's active scheduler and a backend")
			logged = true
		}
		if !sleepCtx(ctx, c.cfg.Poll*5) {
			return ctx.Err()
		}
	}
}

// Step runs one epoch: the first at once, a later one after measuring for
// the period.
func (c *Controller) Step(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := &epoch.Input{Models: slices.Clone(c.cfg.Models)}
	var window time.Duration
	if c.n > 0 {
		// The window starts now, whatever the last epoch's carrying
		// out took: its halves must be equal, or the forecast's trend
		// (second half against first) is off by the difference, low
		// on a rising load.
		start := time.Now()
		base, err := c.readReports(ctx)
		if err != nil {
			return err
		}
		c.base = base
		if !sleepCtx(ctx, c.cfg.Period/2) {
			return ctx.Err()
		}
		mid, err := c.readReports(ctx)
		if err != nil {
			return err
		}
		if !sleepCtx(ctx, c.cfg.Period-c.cfg.Period/2) {
			return ctx.Err()
		}
		end, err := c.readReports(ctx)
		if err != nil {
			return err
		}
		window = time.Since(start)
		in.Window = window
		c.measure(in, mid, end)
	}
	v, err := c.gpus(ctx, in)
	if err != nil {
		return err
	}
	if c.n > 0 {
		if err := c.resync(ctx, v.assignment); err != nil {
			return err
		}
	}
	for m := range in.Models {
		in.Models[m].Assigned, in.Models[m].Serving = c.assigned[m], c.serving[m]
	}
	in.Now = scheduler.Time(time.Duration(c.n) * c.cfg.Period)
	dctx, cancel := context.WithTimeout(ctx, DecideTimeout)
	d, err := c.core.Decide(dctx, in)
	cancel()
	if err != nil {
		return fmt.Errorf("live: epoch %d: %w", c.n+1, err)
	}
	c.n++
	began := time.Now()
	moves, err := c.carryOut(ctx, d, v)
	if err != nil {
		return err
	}
	res := EpochResult{Epoch: c.n, Window: window, Decision: d, Backends: v.backends, Moves: moves, At: began, Took: time.Since(began)}
	if err := c.record(ctx, &res); err != nil {
		c.log.Warn().Err(err).Msg("epoch record not put")
	}
	if a := c.cfg.Autoscaler; a != nil {
		if target, err := a.Apply(ctx, time.Now(), d.Record.Want); err != nil {
			c.log.Warn().Err(err).Int("target", target).Msg("autoscaling")
		}
	}
	if c.cfg.OnEpoch != nil {
		c.cfg.OnEpoch(res)
	}
	return nil
}

// Move moves model to part to now, make before break, as an epoch's
// decision would, and keeps every part's GPUs: an operator's move (and a
// test's). It waits for an epoch under way, and needs the first epoch to
// have placed the models.
func (c *Controller) Move(ctx context.Context, model string, to int) (MoveResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[model]
	switch {
	case !ok:
		return MoveResult{}, fmt.Errorf("live: move: no model %q", model)
	case c.n == 0:
		return MoveResult{}, errors.New("live: move: no epoch has placed the models yet")
	case to < 0 || to >= c.cfg.Epoch.Parts:
		return MoveResult{}, fmt.Errorf("live: move: part %d is not in 0..%d", to, c.cfg.Epoch.Parts-1)
	case c.assigned[i] == to:
		return MoveResult{}, fmt.Errorf("live: move: %s is in part %d already", model, to)
	}
	v, err := c.gpus(ctx, &epoch.Input{})
	if err != nil {
		return MoveResult{}, err
	}
	d := &epoch.Decision{Assignment: slices.Clone(c.assigned), Serving: slices.Clone(c.serving),
		Leaving: make([]int, c.cfg.Epoch.Parts), Moves: []epoch.Move{{Model: i, From: c.assigned[i], To: to}}}
	d.Assignment[i] = to
	c.n++
	moves, err := c.carryOut(ctx, d, v)
	if err != nil {
		return MoveResult{}, err
	}
	return moves[0], moves[0].Err
}

// readReports reads every part's report, by part.
func (c *Controller) readReports(ctx context.Context) (map[int]registry.Report, error) {
	es, _, err := c.cfg.Registry.Reports(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int]registry.Report, len(es))
	for _, e := range es {
		out[e.Value.Part] = e.Value
	}
	return out, nil
}

// since is what report r counted since base: their difference if r
// continues base's series, all of r if it began a new one (a restart or
// a takeover).
func since(r registry.Report, base registry.Report, ok bool) (map[string]registry.Counts, time.Duration, time.Duration) {
	if !ok || !sameSeries(base, r) {
		return r.Models, r.Busy, r.Online
	}
	out := make(map[string]registry.Counts, len(r.Models))
	for name, n := range r.Models {
		b := base.Models[name]
		out[name] = registry.Counts{Tasks: n.Tasks - min(n.Tasks, b.Tasks), Bad: n.Bad - min(n.Bad, b.Bad)}
	}
	return out, max(0, r.Busy-base.Busy), max(0, r.Online-base.Online)
}

// measure fills the input's measurements from the reports at the epoch's
// start (c.base), half and end. Each part's arrivals in a half are scaled
// to half of the input's window by the span its reports cover (they are
// put every ReportEvery, so each is up to that old when read): the
// forecast weighs the halves' difference by 2.5, and a half counted over a
// longer span than the other would read as a trend.
func (c *Controller) measure(in *epoch.Input, mid, end map[int]registry.Report) {
	in.Parts = make([]epoch.Part, c.cfg.Epoch.Parts)
	half := float64(in.Window) / 2
	for p := range in.Parts {
		r, ok := end[p]
		if !ok {
			continue
		}
		b, bok := c.base[p]
		whole, busy, online := since(r, b, bok)
		in.Parts[p] = epoch.Part{Busy: busy, Online: online}
		first := map[string]registry.Counts{}
		m, mok := mid[p]
		if mok {
			first, _, _ = since(m, b, bok)
		}
		// The spans of the halves, when all three reports are one
		// series and each half has a report of its own.
		scale0, scale1 := 1.0, 1.0
		if bok && mok && sameSeries(b, m) && sameSeries(m, r) && m.At > b.At && r.At > m.At && half > 0 {
			scale0, scale1 = half/float64(m.At-b.At), half/float64(r.At-m.At)
		}
		for name, n := range whole {
			i, ok := c.index[name]
			if !ok {
				continue
			}
			md := &in.Models[i]
			h := min(first[name].Tasks, n.Tasks)
			md.Arrivals[0] += uint64(math.Round(float64(h) * scale0))
			md.Arrivals[1] += uint64(math.Round(float64(n.Tasks-h) * scale1))
			bad := min(n.Bad, n.Tasks)
			md.Bad += bad
			md.Good += n.Tasks - bad
		}
	}
}

// sameSeries reports whether two reports count from the same start of the
// same scheduler.
func sameSeries(a, b registry.Report) bool { return a.Scheduler == b.Scheduler && a.Start == b.Start }

// view is the cluster as one epoch decides on it: the assignment as read
// (with its revision, which the epoch's first write expects), and the
// backend each of the core's GPU IDs stands for.
type view struct {
	assignment registry.Assignment
	rev        int64
	backends   []string
}

// gpus reads the assignment and lists the registered backends' GPUs as the
// core sees them.
func (c *Controller) gpus(ctx context.Context, in *epoch.Input) (*view, error) {
	bs, _, err := c.cfg.Registry.Backends(ctx)
	if err != nil {
		return nil, err
	}
	v := &view{}
	if v.assignment, v.rev, err = c.cfg.Registry.Assignment(ctx); err != nil {
		return nil, err
	}
	for _, b := range bs {
		part, ok := v.assignment.Backends[b.Value.Name]
		if !ok || part >= c.cfg.Epoch.Parts {
			part = registry.FreePool
		}
		for range b.Value.GPUs {
			in.GPUs = append(in.GPUs, epoch.GPU{Part: part})
			v.backends = append(v.backends, b.Value.Name)
		}
	}
	return v, nil
}

// resync takes each model's parts from the registry, where an epoch whose
// carrying out failed part-way left them: the assignment says where each
// model is to be, the routes where its requests go.
func (c *Controller) resync(ctx context.Context, a registry.Assignment) error {
	routes, _, err := c.cfg.Registry.Routes(ctx)
	if err != nil {
		return err
	}
	for name, i := range c.index {
		if p, ok := a.Models[name]; ok && p < c.cfg.Epoch.Parts {
			c.assigned[i] = p
		}
		if q, ok := routes.Models[name]; ok && q < c.cfg.Epoch.Parts {
			c.serving[i] = q
		}
	}
	return nil
}

// carryOut carries decision d out, make before break:
//  1. the assignment: each model's new part, the parts it moves out of
//     kept (Assignment.Keep), the backends released to the free pool and
//     those joining parts. The parts' schedulers load what moves in,
//     backends move;
//  2. once the new part of a move reports the model ready (or
//     SwitchTimeout passes: the move is given up), the routing table
//     sends its requests there;
//  3. once every frontend follows that table (or SwitchTimeout passes:
//     a frontend that does not answer is taken for dead), the assignment
//     drops Keep, so the old parts unload the models (their queued
//     requests run first), and gives the GPUs the old parts were sized
//     for their departing models back to the free pool.
func (c *Controller) carryOut(ctx context.Context, d *epoch.Decision, v *view) ([]MoveResult, error) {
	reg := c.cfg.Registry
	parts := c.cfg.Epoch.Parts
	cur, rev, backends := v.assignment, v.rev, v.backends
	next := registry.Assignment{Epoch: c.n, Parts: parts, Models: map[string]int{}, Keep: map[string]int{},
		Backends: maps.Clone(cur.Backends)}
	if next.Backends == nil {
		next.Backends = map[string]int{}
	}
	for m, p := range d.Assignment {
		next.Models[c.cfg.Models[m].Name] = p
	}
	var moves []MoveResult
	for _, mv := range d.Moves {
		name := c.cfg.Models[mv.Model].Name
		moves = append(moves, MoveResult{Model: name, From: mv.From, To: mv.To})
		next.Keep[name] = mv.From
	}
	gpuPart := make([]int, len(backends))
	for g, name := range backends {
		if p, ok := next.Backends[name]; ok && p < parts {
			gpuPart[g] = p
		} else {
			gpuPart[g] = registry.FreePool
		}
	}
	for _, g := range d.Release {
		next.Backends[backends[g]] = registry.FreePool
		gpuPart[g] = registry.FreePool
	}
	for _, j := range d.Join {
		next.Backends[backends[j.GPU]] = j.Part
		gpuPart[j.GPU] = j.Part
	}
	rev, err := reg.PutAssignment(ctx, next, rev)
	if err != nil {
		return nil, fmt.Errorf("live: epoch %d: assignment: %w", c.n, err)
	}
	c.log.Info().Uint64("epoch", c.n).Int("moves", len(moves)).Int("release", len(d.Release)).Int("join", len(d.Join)).
		Ints("part_gpus", d.PartGPUs).Str("skipped", d.Record.Skipped).Msg("epoch decided")

	// 2. Wait for the loads; switch the routes of what loaded.
	want := map[string]int{} // model -> part, to be ready there
	if d.Preloaded {
		for m, p := range d.Assignment {
			want[c.cfg.Models[m].Name] = p
		}
	}
	for _, mv := range moves {
		want[mv.Model] = mv.To
	}
	began := time.Now()
	// The GPUs joining a part come online first: a model's requests
	// switch to a part with the GPUs it was sized for them.
	joining := map[string]int{}
	for _, j := range d.Join {
		joining[backends[j.GPU]] = j.Part
	}
	c.waitJoined(ctx, joining)
	ready := c.waitReady(ctx, want)
	switched := map[string]int{}
	for name, p := range want {
		// The first epoch has no old route to keep.
		if _, ok := ready[name]; ok || d.Preloaded {
			switched[name] = p
		}
	}
	for i := range moves {
		mv := &moves[i]
		if t, ok := ready[mv.Model]; ok {
			mv.Switched, mv.Loaded = true, t
		} else {
			mv.Err = fmt.Errorf("part %d did not load %s in %v", mv.To, mv.Model, c.cfg.SwitchTimeout)
			delete(switched, mv.Model)
		}
	}
	if d.Preloaded {
		for name := range want {
			if _, ok := ready[name]; !ok {
				c.log.Warn().Str("model", name).Int("part", want[name]).Msg("not ready in its part yet: routed there anyway (the first epoch has nowhere else)")
			}
		}
	}
	routesRev, err := c.switchRoutes(ctx, switched)
	if err != nil {
		return moves, err
	}
	c.waitFrontends(ctx, routesRev)

	// 3. Break: drop Keep, revert the moves that did not load, give back
	// the GPUs sized for models that left.
	final := next
	final.Keep = map[string]int{}
	final.Backends = maps.Clone(next.Backends)
	final.Models = maps.Clone(next.Models)
	leaving := make([]int, parts)
	for _, mv := range moves {
		if !mv.Switched {
			final.Models[mv.Model] = mv.From
			continue
		}
		leaving[mv.From] = max(leaving[mv.From], d.Leaving[mv.From])
	}
	for p, k := range leaving {
		in := make([]epoch.GPU, len(gpuPart))
		count := 0
		for g, gp := range gpuPart {
			in[g] = epoch.GPU{Part: gp}
			if gp == p {
				count++
			}
		}
		for _, g := range epoch.LeastBusy(in, p, min(k, count-1)) {
			final.Backends[backends[g]] = registry.FreePool
		}
	}
	if _, err := reg.PutAssignment(ctx, final, rev); err != nil {
		return moves, fmt.Errorf("live: epoch %d: final assignment: %w", c.n, err)
	}
	for name, p := range final.Models {
		i := c.index[name]
		c.assigned[i] = p
		if q, ok := switched[name]; ok {
			c.serving[i] = q
		} else if c.serving[i] == epoch.Unassigned {
			c.serving[i] = p
		}
	}
	for i := range moves {
		mv := &moves[i]
		ev := c.log.Info()
		if mv.Err != nil {
			ev = c.log.Warn().Err(mv.Err)
		}
		ev.Str("model", mv.Model).Int("from", mv.From).Int("to", mv.To).Bool("switched", mv.Switched).
			Dur("loaded", mv.Loaded).Msg("model move")
	}
	c.log.Debug().Dur("took", time.Since(began)).Msg("epoch carried out")
	return moves, nil
}

// waitReady waits until each model in want is ready in its part, as the
// part's report says, or SwitchTimeout passes; it returns how long each
// took (0: not ready).
func (c *Controller) waitReady(ctx context.Context, want map[string]int) map[string]time.Duration {
	out := make(map[string]time.Duration, len(want))
	start := time.Now()
	deadline := start.Add(c.cfg.SwitchTimeout)
	for len(out) < len(want) && time.Now().Before(deadline) {
		if reps, err := c.readReports(ctx); err == nil {
			for name, p := range want {
				if _, done := out[name]; !done && slices.Contains(reps[p].Ready, name) {
					out[name] = time.Since(start)
				}
			}
		}
		if len(out) < len(want) && !sleepCtx(ctx, c.cfg.Poll) {
			break
		}
	}
	return out
}

// waitJoined waits until each backend in joining is online with its
// part's scheduler, as the part's report says, or SwitchTimeout passes.
func (c *Controller) waitJoined(ctx context.Context, joining map[string]int) {
	if len(joining) == 0 {
		return
	}
	deadline := time.Now().Add(c.cfg.SwitchTimeout)
	var missing []string
	for time.Now().Before(deadline) {
		reps, err := c.readReports(ctx)
		if err == nil {
			missing = missing[:0]
			for name, p := range joining {
				if !slices.Contains(reps[p].Backends, name) {
					missing = append(missing, name)
				}
			}
			if len(missing) == 0 {
				return
			}
		}
		if !sleepCtx(ctx, c.cfg.Poll) {
			return
		}
	}
	slices.Sort(missing)
	c.log.Warn().Strs("backends", missing).Dur("waited", c.cfg.SwitchTimeout).Msg("backends not online in their new parts: switching routes anyway")
}

// switchRoutes sets the routes of the models in to, keeping the
// schedulers' entries (the elected schedulers write those), and returns
// the table's new revision.
func (c *Controller) switchRoutes(ctx context.Context, to map[string]int) (int64, error) {
	reg := c.cfg.Registry
	for {
		t, rev, err := reg.Routes(ctx)
		if err != nil {
			return 0, err
		}
		if t.Models == nil {
			t.Models = map[string]int{}
		}
		maps.Copy(t.Models, to)
		t.Epoch = c.n
		nrev, err := reg.PutRoutes(ctx, t, rev)
		if errors.Is(err, registry.ErrConflict) {
			continue // a scheduler took over meanwhile: read again
		}
		if err != nil {
			return 0, fmt.Errorf("live: epoch %d: routes: %w", c.n, err)
		}
		return nrev, nil
	}
}

// waitFrontends waits until every registered frontend follows routes of
// revision rev or later, or SwitchTimeout passes.
func (c *Controller) waitFrontends(ctx context.Context, rev int64) {
	deadline := time.Now().Add(c.cfg.SwitchTimeout)
	var behind []string
	for time.Now().Before(deadline) {
		fs, _, err := c.cfg.Registry.Frontends(ctx)
		if err == nil {
			behind = behind[:0]
			for _, f := range fs {
				if f.Value.Routes < rev {
					behind = append(behind, f.Value.Name)
				}
			}
			if len(behind) == 0 {
				return
			}
		}
		if !sleepCtx(ctx, c.cfg.Poll) {
			return
		}
	}
	c.log.Warn().Strs("frontends", behind).Int64("routes", rev).Dur("waited", c.cfg.SwitchTimeout).
		Msg("frontends do not follow the new routes: the old parts unload the moved models anyway")
}

// record puts the epoch's record for `symphony cluster status`.
func (c *Controller) record(ctx context.Context, res *EpochResult) error {
	r := &res.Decision.Record
	e := registry.Epoch{Epoch: res.Epoch, At: time.Now().UnixNano(), Window: res.Window, Engine: r.Engine,
		Deterministic: r.Deterministic, BadRate: r.BadRate, IdleFraction: r.IdleFraction, GPUsBefore: r.GPUsBefore,
		GPUs: r.GPUs, Need: r.Need, PartGPUs: r.PartGPUs, Moves: len(res.Moves), Skipped: r.Skipped,
		Rates: make(map[string]float64, len(c.cfg.Models))}
	for m, rate := range res.Decision.Rates {
		e.Rates[c.cfg.Models[m].Name] = rate
	}
	return c.cfg.Registry.PutEpoch(ctx, e)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
