// Package frontend is Symphony's client library, embedded in apps: it keeps
// each request's input in a local input store, sends only the task
// descriptor (id, model, deadline, where the input lives) to the scheduler,
// serves the backends' one-sided reads of the inputs, and receives results
// straight from the backends (Symphony paper §4.1, Figure 2).
//
// Every request ends exactly once, and no later than its deadline: with
// its output, or with one of the errors in errors.go. A request that has
// no answer by its deadline ends then, as an expired drop (DropExpired),
// and so does one whose result arrives after it: a caller with a deadline
// never gets a late answer, and never waits on a lost backend. A request
// sent on a scheduler connection that closes ends at its deadline with
// ErrSchedulerLost instead, unless its running batch answers first.
//
// A client talks to one scheduler (Config.SchedulerAddr), or, under a
// partitioned control plane, to each model's scheduler as a routing table
// says (SetRoutes, routes.go), with one input store and data listener for
// all of them.
package frontend

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/tensor"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/ratelog"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Preprocessor turns a request's raw input into the model's input while
// the request waits in the scheduler's queue (paper §4.6): the task is sent
// to the scheduler first, and a backend's read of the input waits until
// preprocessing is done.
type Preprocessor interface {
	// OutputSize is the size of the model input Run produces, known before
	// it runs, so that the input's place can be reserved and announced.
	OutputSize(model string, raw []byte) int
	// Run writes the model input for raw into dst (len(dst) is OutputSize).
	Run(ctx context.Context, model string, raw []byte, dst []byte) error
}

// Config configures a frontend client.
type Config struct {
	// SchedulerAddr is the scheduler's address: every model's requests go
	// there until a routing table (SetRoutes) sends some elsewhere. Empty,
	// the client starts with no scheduler session and waits for its first
	// table: a frontend of a partitioned control plane, where each part of
	// the models has its own scheduler, learns them all from the tables.
	SchedulerAddr string
	// Name identifies the frontend in logs.
	Name string
	// DataAddr is where backends read inputs from (default 127.0.0.1:0).
	DataAddr string
	// AdvertiseDataAddr, if set, is the address backends are told to dial
	// for DataAddr's listener: needed when DataAddr binds every interface
	// (0.0.0.0:7200) or sits behind NAT, as in a Kubernetes pod, where it
	// is the pod's IP and the port. Empty: the listener's own address.
	AdvertiseDataAddr string
	// Network carries every connection.
	Network transport.Network
	// Preprocess, if set, runs on each input while its request waits.
	Preprocess Preprocessor
	// RegionSize and MaxInputBytes size the input store.
	RegionSize    int
	MaxInputBytes int64
	// DataPath is how backends read inputs (--data-path): over RDMA, the
	// store's regions are mapped and registered with the device, and
	// backends READ them; TCP reads are served either way.
	DataPath rdma.Config
	// ReuseDelay is how long, on the RDMA data path, released input space
	// stays unused (0: rdma.DefaultReuseDelay).
	ReuseDelay time.Duration
	// Backoff paces reconnections to the scheduler.
	Backoff transport.Backoff
	Log     zerolog.Logger
}

// Default returns the defaults.
func Default() Config {
	return Config{
		Name: "frontend", DataAddr: "127.0.0.1:0",
		RegionSize: 8 << 20, MaxInputBytes: 2 << 30, DataPath: rdma.DefaultConfig(),
		Backoff: transport.DefaultBackoff(), Log: zerolog.Nop(),
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Network == nil:
		return errors.New("frontend: no network")
	case c.RegionSize <= rdma.SlotSize(0) || c.MaxInputBytes < int64(c.RegionSize):
		return fmt.Errorf("frontend: input store sizes must be over %d bytes, max >= region", rdma.SlotSize(0))
	case c.AdvertiseDataAddr != "" && !validHostPort(c.AdvertiseDataAddr):
		return fmt.Errorf("frontend: advertised data address %q: want HOST:PORT with a host and a non-zero port backends can dial", c.AdvertiseDataAddr)
	case c.ReuseDelay < 0 || c.ReuseDelay > wire.MaxReuseDelay:
		return fmt.Errorf("frontend: reuse delay %v not in [0, %v]", c.ReuseDelay, wire.MaxReuseDelay)
	}
	return c.Backoff.Validate()
}

// ModelInfo describes a served model.
type ModelInfo struct {
	Name string
	SLO  time.Duration
	// MaxBatch is the largest batch its profile covers.
	MaxBatch int
	// Latency is the profile the scheduler plans the model's batches with:
	// Latency[b-1] is ℓ(b), for b up to MaxBatch (wire.ModelSpec.Latency).
	// A benchmark compares real batch times with it (bench/loadgen).
	Latency []time.Duration
	// Inputs and Outputs are the model's named tensors, one sample each,
	// when the scheduler announced them (a repository model): InferTensors
	// checks requests against them. Both are nil for a model of opaque
	// bytes, which only Infer serves.
	//
	// Latency, Inputs and Outputs are shared by every caller and never
	// changed by the client (a new scheduler session brings new ones,
	// copied from its welcome so that no transport's buffers or
	// scheduler's tables are shared), so that Model stays allocation-free
	// on the request path: read them, do not write them.
	Inputs, Outputs []tensor.Spec

	// State is whether the model takes requests now (READY) or not, as
	// the scheduler last said (repository.go); Reason says why not.
	State  ModelState
	Reason string
}

// Timing says how a request ran, for reports.
type Timing struct {
	// Submitted is when Infer was called; Ended when it returned.
	Submitted, Ended time.Time
	// Started and Finished are when its batch ran on the GPU (zero if it
	// never ran), and BatchSize that batch's size.
	Started, Finished time.Time
	BatchSize         int
}

// Call is one asynchronous request. Done closes when it has ended; then
// Output, Err and Timing are set and never change.
type Call struct {
	Model  string
	Output []byte
	Err    error
	Timing Timing
	done   chan struct{}

	id       uint64
	deadline time.Time
	sess     *session    // the scheduler connection its task went on; under Client.mu
	timer    *time.Timer // the safety timer; under Client.mu while pending
	stop     func() bool // context.AfterFunc's stop
}

// Done is closed when the call has ended.
func (c *Call) Done() <-chan struct{} { return c.done }

// Client is a frontend. It is safe for concurrent use.
type Client struct {
	cfg Config
	log zerolog.Logger
	// warn is log rate-limited, for lines that can repeat per message.
	warn  zerolog.Logger
	store *InputStore
	data  transport.Listener
	// rdma exports the store's regions on the RDMA data path; nil on TCP.
	rdma     *rdma.Exporter
	dataPath rdma.Choice

	nextID atomic.Uint64

	mu sync.Mutex
	// links are the scheduler addresses in use, each with its sessions,
	// by address (routes.go).
	links map[string]*link
	// def is where a model without a route goes: Config.SchedulerAddr's
	// link, nil without one or once no model goes there any more.
	def *link
	// routes are the models' routes that routing tables set, by name.
	routes map[string]*route
	// table is the latest routing table adopted.
	table Routes
	// applied is AppliedRevision; written under mu.
	applied atomic.Int64
	// notifying is set while a goroutine reports applied revisions to
	// onApplied, and notified is the last one it reported.
	notifying bool
	notified  int64
	onApplied atomic.Pointer[func(int64)]

	pending map[uint64]*Call
	closed  bool
	// drained, set by Drain, is closed once no request is pending.
	drained     chan struct{}
	drainedOnce sync.Once
	readyCh     chan struct{} // closed on the first Welcome
	readyOne    sync.Once

	// loopCtx is the context of every link's dialing loop, and stopLoop
	// ends it; loops counts the loops running.
	loopCtx  context.Context
	stopLoop context.CancelFunc
	loops    sync.WaitGroup
	stats    Stats
	ctl      control
	// onEnd, if set, sees every call as it ends (ObserveEnds).
	onEnd atomic.Pointer[func(*Call)]
}

type modelEntry struct {
	id   uint32
	info ModelInfo
}

// session is one live connection to a scheduler.
type session struct {
	link   *link // the scheduler address it is to
	conn   transport.Conn
	submit *transport.Coalescer[wire.Task]
}

// Stats count how requests ended, for tests and reports. Every request
// made counts in Submitted, and once it has ended in exactly one of
// Answered, Dropped and Failed (those failed at once, such as an unknown
// model's, included), so Submitted minus their sum is the requests pending.
type Stats struct {
	Submitted, Answered, Dropped, Failed atomic.Uint64
	// Duplicates counts outcomes that arrived for requests already ended:
	// expected after failures and expiries (a late result of a request
	// already ended), never counted twice.
	Duplicates atomic.Uint64
	// Expired counts the requests (among Dropped) whose result came, but
	// after their deadline: work done in time that the network or a busy
	// host delivered late. Requests with no result at all by their
	// deadline are not counted here.
	Expired atomic.Uint64
	// SuppressedLogs counts warnings that can repeat per message or
	// connection held back by the log's rate limit (transport/ratelog).
	SuppressedLogs atomic.Uint64
}

// New starts a frontend: it serves input reads on DataAddr and keeps a
// connection to the scheduler, reconnecting with backoff.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg, log: cfg.Log.With().Str("frontend", cfg.Name).Logger(),
		links:   make(map[string]*link),
		pending: make(map[uint64]*Call),
		readyCh: make(chan struct{}),
	}
	c.warn = ratelog.New(c.log, &c.stats.SuppressedLogs)
	fab, choice, err := rdma.Select(cfg.DataPath)
	if err != nil {
		return nil, fmt.Errorf("frontend: %w", err)
	}
	c.dataPath = choice
	c.log.Info().Stringer("data_path", choice).Msg("data path")
	var opts []ServeOption
	if fab != nil {
		c.rdma, err = rdma.NewExporter(rdma.ExporterConfig{Fabric: fab, ReuseDelay: cfg.ReuseDelay, Log: c.log})
		if err == nil {
			c.store, err = NewInputStoreWith(StoreConfig{RegionSize: cfg.RegionSize, MaxBytes: cfg.MaxInputBytes,
				Regions: c.rdma, Seal: c.rdma.Seal(), ReuseDelay: c.rdma.ReuseDelay()})
		}
		if err != nil {
			if c.rdma != nil {
				c.rdma.Close()
			} else {
				_ = fab.Close()
			}
			return nil, fmt.Errorf("frontend: %w", err)
		}
		opts = append(opts, WithRDMA(c.rdma))
	} else {
		c.store = NewInputStore(cfg.RegionSize, cfg.MaxInputBytes)
		opts = append(opts, RefuseRDMA("frontend data path is "+choice.String()))
	}
	ln, err := ServeInputs(cfg.Network, cfg.DataAddr, c.store, c.onResults, c.log, opts...)
	if err != nil {
		c.closeStore()
		return nil, fmt.Errorf("frontend: serve inputs on %s: %w", cfg.DataAddr, err)
	}
	c.data = ln
	// Request IDs start at a random point, so that a restarted frontend
	// (or one that took over a departed frontend's ID) never has a result
	// meant for its predecessor's request of the same number.
	c.nextID.Store(rand.Uint64() >> 1)
	c.loopCtx, c.stopLoop = context.WithCancel(context.Background())
	if cfg.SchedulerAddr != "" {
		c.mu.Lock()
		c.def = c.startLink(cfg.SchedulerAddr)
		c.mu.Unlock()
	}
	return c, nil
}

// DataAddr is where backends read this frontend's inputs: the advertised
// address if one is configured, else the listener's.
func (c *Client) DataAddr() string {
	if c.cfg.AdvertiseDataAddr != "" {
		return c.cfg.AdvertiseDataAddr
	}
	return c.data.Addr()
}

// validHostPort reports whether addr is a dialable HOST:PORT: a host that
// is not a wildcard and a port in 1..65535.
func validHostPort(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p > 0 && p < 65536
}

// DataPath says how backends read this frontend's inputs, and why.
func (c *Client) DataPath() rdma.Choice { return c.dataPath }

// closeStore closes the RDMA exporter's queue pairs and the store, whose
// regions (and then the device) are released once no input lives in them.
func (c *Client) closeStore() {
	if c.rdma != nil {
		c.rdma.Close()
	}
	c.store.Close()
}

// Stats returns the client's outcome counters.
func (c *Client) Stats() *Stats { return &c.stats }

// WaitReady waits until the client has connected to a scheduler once:
// with Config.SchedulerAddr, to that one; without, to one of the first
// routing table's.
func (c *Client) WaitReady(ctx context.Context) error {
	select {
	case <-c.readyCh:
		return nil
	case <-ctx.Done():
		if c.cfg.SchedulerAddr == "" {
			return fmt.Errorf("frontend: waiting for a scheduler of the routing table: %w", ctx.Err())
		}
		return fmt.Errorf("frontend: waiting for the scheduler at %s: %w", c.cfg.SchedulerAddr, ctx.Err())
	}
}

// Connected reports whether the client is connected to a scheduler now
// (to the scheduler, with one).
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.anyConnected()
}

// anyConnected reports whether a session is live. Called with c.mu held.
func (c *Client) anyConnected() bool {
	for _, l := range c.links {
		if l.sess != nil {
			return true
		}
	}
	return false
}

// Models lists the models the schedulers serve: each as the scheduler its
// requests go to describes it (a model whose scheduler never connected
// is not listed).
func (c *Client) Models() []ModelInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []ModelInfo{}
	for _, l := range c.links {
		for name, m := range l.models {
			if c.resolve(name) == l {
				out = append(out, m.info)
			}
		}
	}
	return out
}

// Model returns one model's description, from the scheduler its requests
// go to.
func (c *Client) Model(name string) (ModelInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.resolve(name)
	if l == nil {
		return ModelInfo{}, false
	}
	m, ok := l.models[name]
	return m.info, ok
}

// dialScheduler runs one session to l's scheduler: dial, handshake, then
// wait until the connection closes.
func (c *Client) dialScheduler(ctx context.Context, l *link) error {
	closed := make(chan struct{})
	var sess *session
	var sessMu sync.Mutex // held from before Dial until sess is published
	sessMu.Lock()
	h := transport.HandlerFuncs{
		Message: func(conn transport.Conn, m wire.Message) {
			// After the Welcome's models are in place, so that a
			// later model state is not undone by the Welcome's.
			sessMu.Lock()
			s := sess
			sessMu.Unlock()
			c.onSchedulerMessage(s, m)
		},
		Closed: func(conn transport.Conn, err error) {
			sessMu.Lock()
			s := sess
			sessMu.Unlock()
			c.endSession(s)
			close(closed)
		},
	}
	hello := &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: c.cfg.Name, DataAddr: c.DataAddr()}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, welcome, err := c.cfg.Network.Dial(dctx, l.addr, hello, h)
	cancel()
	if err != nil {
		sessMu.Unlock()
		return err
	}
	sess = &session{link: l, conn: conn}
	sess.submit = transport.NewCoalescer(func(tasks []wire.Task) {
		if err := conn.Send(&wire.Submit{Tasks: tasks}); err != nil {
			c.log.Debug().Err(err).Int("tasks", len(tasks)).Msg("submit failed")
		}
	})
	models := make(map[string]modelEntry, len(welcome.Models))
	for _, m := range welcome.Models {
		models[m.Name] = modelEntry{id: m.ID, info: ModelInfo{Name: m.Name, SLO: m.SLO, MaxBatch: len(m.Latency), State: StateReady,
			Latency: slices.Clone(m.Latency), Inputs: tensor.Clone(m.Inputs), Outputs: tensor.Clone(m.Outputs)}}
	}
	c.mu.Lock()
	l.models = models
	setStates(l.models, welcome.States)
	l.sess, l.welcomed = sess, true
	// Models waiting for this scheduler switch to it now.
	stops, notify := c.settle()
	c.mu.Unlock()
	sessMu.Unlock() // a Closed callback now ends this very session
	c.readyOne.Do(func() { close(c.readyCh) })
	c.log.Info().Str("scheduler", l.addr).Uint32("id", welcome.ID).Int("models", len(welcome.Models)).Msg("connected")
	c.afterSettle(stops, notify)
	select {
	case <-closed:
		return errors.New("scheduler connection closed")
	case <-ctx.Done():
		conn.Close(errors.New("frontend closing"))
		<-closed
		return ctx.Err()
	}
}

// endSession retires a closed scheduler connection. Nothing but a batch
// already running can answer the requests sent on it any more (the
// scheduler forgets a departed frontend's queue, and backends stop
// delivering to it), so each of them now ends at its deadline with
// ErrSchedulerLost, unless its result comes first, instead of waiting
// out the grace for an answer that cannot come.
func (c *Client) endSession(s *session) {
	if s == nil {
		return
	}
	c.mu.Lock()
	if s.link.sess == s {
		s.link.sess = nil
	}
	lost := 0
	for id, call := range c.pending {
		if call.sess != s || !call.timer.Stop() {
			continue // another session's, or its safety timer is firing
		}
		lost++
		call.timer = time.AfterFunc(time.Until(call.deadline), func() {
			c.finish(id, nil, ErrSchedulerLost, Timing{})
		})
	}
	c.mu.Unlock()
	s.submit.Close()
	c.controlsLost(s)
	if lost > 0 {
		c.warn.Warn().Str("scheduler", s.link.addr).Int("requests", lost).Msg("scheduler connection lost with requests waiting: each ends at its deadline unless its running batch answers")
	}
}

// onSchedulerMessage handles a message of session s.
func (c *Client) onSchedulerMessage(s *session, m wire.Message) {
	switch m := m.(type) {
	case *wire.ModelStates:
		c.mu.Lock()
		if s.link.sess == s {
			setStates(s.link.models, m.States)
		}
		c.mu.Unlock()
		return
	case *wire.ControlDone:
		c.controlDone(m)
		return
	}
	ended, ok := m.(*wire.Ended)
	if !ok {
		c.warn.Warn().Stringer("kind", m.Kind()).Msg("unexpected message from the scheduler")
		return
	}
	for _, e := range ended.Ends {
		c.finish(e.ID, nil, c.endError(e.ID, e.Code, e.Detail, ""), Timing{})
	}
}

// endError turns a wire end code into the client's typed error.
func (c *Client) endError(id uint64, code wire.EndCode, detail, backend string) error {
	model := c.modelOf(id)
	switch code {
	case wire.EndDropDeadline:
		return &DropError{Model: model, Reason: DropDeadline}
	case wire.EndDropOverload:
		return &DropError{Model: model, Reason: DropOverload}
	case wire.EndDropShutdown:
		return &DropError{Model: model, Reason: DropShutdown}
	case wire.EndUnknownModel:
		return fmt.Errorf("%w %q", ErrUnknownModel, model)
	case wire.EndBadRequest:
		return fmt.Errorf("%w for %q: %s", ErrRefused, model, detail)
	case wire.EndModelNotLoaded:
		return fmt.Errorf("%w: %s", ErrModelNotLoaded, detail)
	}
	cause := code.String()
	if detail != "" {
		cause += ": " + detail
	}
	return &BackendError{Model: model, Backend: backend, Cause: cause}
}

func (c *Client) modelOf(id uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call := c.pending[id]; call != nil {
		return call.Model
	}
	return ""
}

// CallOption adjusts one request.
type CallOption func(*callOptions)

type callOptions struct {
	deadline time.Time
	timeout  time.Duration
	priority uint8
}

// WithDeadline shortens the request's deadline to d. A request may never
// get a later deadline than its model's SLO allows; a later d is ignored.
func WithDeadline(d time.Time) CallOption { return func(o *callOptions) { o.deadline = d } }

// WithTimeout shortens the request's deadline to d after the call, as
// Triton's timeout parameter does; like WithDeadline, it never lengthens
// the model's SLO. A timeout of 0 or less is ignored.
func WithTimeout(d time.Duration) CallOption { return func(o *callOptions) { o.timeout = d } }

// WithPriority sends the request at priority level p: within its model's
// queue a higher level is planned first and dropped last, and a GPU that
// several models' prioritized requests wait for goes to the nearest
// deadline among them (scheduler.Request.Priority). 0, the default, is the
// lowest level.
func WithPriority(p uint8) CallOption { return func(o *callOptions) { o.priority = p } }

// Infer runs one request and waits for its output. Its deadline is the
// model's SLO from now, shortened by ctx's deadline and WithDeadline.
// Canceling ctx ends a queued request at once with DropCanceled.
func (c *Client) Infer(ctx context.Context, model string, input []byte, opts ...CallOption) ([]byte, error) {
	call := c.Go(ctx, model, input, opts...)
	<-call.done
	return call.Output, call.Err
}

// Go starts one request and returns at once; the Call's Done channel
// closes when it ends.
func (c *Client) Go(ctx context.Context, model string, input []byte, opts ...CallOption) *Call {
	now := time.Now()
	call := &Call{Model: model, done: make(chan struct{}), Timing: Timing{Submitted: now}}
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	c.mu.Lock()
	sess, m, err := c.lookup(model)
	closed := c.refusing()
	c.mu.Unlock()
	switch {
	case closed:
		return c.failEarly(call, ErrClosed)
	case err != nil:
		return c.failEarly(call, err)
	}
	call.deadline = now.Add(m.info.SLO)
	if d, ok := ctx.Deadline(); ok && d.Before(call.deadline) {
		call.deadline = d
	}
	if !o.deadline.IsZero() && o.deadline.Before(call.deadline) {
		call.deadline = o.deadline
	}
	if o.timeout > 0 && now.Add(o.timeout).Before(call.deadline) {
		call.deadline = now.Add(o.timeout)
	}
	if !call.deadline.After(now) {
		return c.failEarly(call, fmt.Errorf("%w: already passed", ErrBadDeadline))
	}
	if err := ctx.Err(); err != nil {
		return c.failEarly(call, &DropError{Model: model, Reason: DropCanceled})
	}

	call.id = c.nextID.Add(1)
	pre := c.cfg.Preprocess
	size := len(input)
	if pre != nil {
		if size = pre.OutputSize(model, input); size < 0 {
			return c.failEarly(call, fmt.Errorf("%w: the preprocessor gave a negative input size %d for %q", ErrBadInput, size, model))
		}
	}
	var ref wire.InputRef
	var buf []byte
	var ready func(error)
	if pre != nil {
		ref, buf, ready, err = c.store.Reserve(call.id, size)
	} else {
		ref, err = c.store.Put(call.id, input)
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrStoreFull):
			return c.failEarly(call, &DropError{Model: model, Reason: DropOverload})
		case errors.Is(err, ErrStoreClosed): // Close ran since the check above
			return c.failEarly(call, ErrClosed)
		}
		return c.failEarly(call, err)
	}
	c.mu.Lock()
	err = nil
	if c.refusing() {
		err = ErrClosed
	} else if l := c.resolve(model); l != sess.link || l.sess != sess {
		// The model's route or its session changed since the check
		// above: the request goes where the model's requests go now
		// (the session retired may close as soon as its calls end),
		// within that scheduler's SLO for it.
		sess, m, err = c.lookup(model)
		if err == nil && now.Add(m.info.SLO).Before(call.deadline) {
			call.deadline = now.Add(m.info.SLO)
		}
	}
	if err != nil {
		c.mu.Unlock()
		if ready != nil {
			ready(err)
		}
		c.store.Release(call.id)
		return c.failEarly(call, err)
	}
	call.sess = sess
	sess.link.pending++
	c.pending[call.id] = call
	c.stats.Submitted.Add(1)
	// Whatever happens elsewhere, the call ends by its deadline.
	id := call.id
	call.timer = time.AfterFunc(time.Until(call.deadline), func() {
		c.finish(id, nil, &DropError{Model: model, Reason: DropExpired}, Timing{})
	})
	call.stop = context.AfterFunc(ctx, func() {
		c.finish(id, nil, &DropError{Model: model, Reason: DropCanceled}, Timing{})
	})
	c.mu.Unlock()
	if pre != nil {
		go func() {
			ready(pre.Run(ctx, model, input, buf))
		}()
	}
	task := wire.Task{ID: call.id, Model: m.id, Deadline: call.deadline.UnixNano(), Input: ref, Priority: o.priority}
	if !sess.submit.Add(task) {
		// The session ended since the call joined it, and endSession has
		// set the call to end at its deadline; it was never sent, so end it
		// now.
		c.finish(call.id, nil, ErrNotConnected, Timing{})
	}
	return call
}

func (c *Client) failEarly(call *Call, err error) *Call {
	call.Err = err
	call.Timing.Ended = time.Now()
	c.stats.Submitted.Add(1)
	c.stats.Failed.Add(1)
	c.observe(call)
	close(call.done)
	return call
}

// ObserveEnds has f called with every call that ends from now on, once
// each, after its Output, Err and Timing are set and before its Done
// closes, so that a caller that saw Done also sees what f recorded
// (metrics). f runs on the goroutine that ends the call and must not block
// or keep the call.
func (c *Client) ObserveEnds(f func(*Call)) { c.onEnd.Store(&f) }

func (c *Client) observe(call *Call) {
	if f := c.onEnd.Load(); f != nil {
		(*f)(call)
	}
}

// finish ends request id exactly once; later outcomes are counted as
// duplicates and ignored. An answer that comes after the request's
// deadline ends it as expired: the caller asked for it by then.
func (c *Client) finish(id uint64, out []byte, err error, t Timing) {
	now := time.Now()
	c.mu.Lock()
	call := c.pending[id]
	if call == nil {
		c.mu.Unlock()
		c.stats.Duplicates.Add(1)
		return
	}
	delete(c.pending, id)
	var stop context.CancelFunc
	if s := call.sess; s != nil {
		l := s.link
		if l.pending--; l.pending == 0 && l.retiring {
			stop = c.retire(l) // no model goes there, and now nothing waits on it
		}
	}
	c.noteDrained()
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	if err == nil && now.After(call.deadline) {
		out, err = nil, &DropError{Model: call.Model, Reason: DropExpired}
		c.stats.Expired.Add(1)
	}
	c.store.Release(id)
	if call.timer != nil {
		call.timer.Stop()
	}
	if call.stop != nil {
		call.stop()
	}
	call.Output, call.Err = out, err
	call.Timing.Started, call.Timing.Finished, call.Timing.BatchSize = t.Started, t.Finished, t.BatchSize
	call.Timing.Ended = now
	switch {
	case err == nil:
		c.stats.Answered.Add(1)
	case isDrop(err):
		c.stats.Dropped.Add(1)
	default:
		c.stats.Failed.Add(1)
	}
	c.observe(call)
	close(call.done)
}

func isDrop(err error) bool { _, ok := IsDrop(err); return ok }

// Drain stops the client gracefully, as a frontend process does on
// SIGTERM: new requests fail at once with ErrClosed, the requests pending
// run to their end (an answer, a drop, or their deadline, which bounds
// the wait), and then the client closes. If ctx ends first, Close ends
// what is still pending with ErrClosed, and Drain returns ctx's error.
func (c *Client) Drain(ctx context.Context) error {
	c.mu.Lock()
	if c.drained == nil {
		c.drained = make(chan struct{})
		c.noteDrained()
	}
	drained := c.drained
	c.mu.Unlock()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = fmt.Errorf("frontend: draining: %w", ctx.Err())
	}
	return errors.Join(err, c.Close())
}

// refusing reports whether new requests fail with ErrClosed: the client
// is closed or draining. Called with c.mu held.
func (c *Client) refusing() bool { return c.closed || c.drained != nil }

// noteDrained closes drained once a Drain has begun and nothing is
// pending. Called with c.mu held.
func (c *Client) noteDrained() {
	if c.drained != nil && len(c.pending) == 0 {
		c.drainedOnce.Do(func() { close(c.drained) })
	}
}

// Close ends every pending request with ErrClosed and stops the client.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	ids := make([]uint64, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.finish(id, nil, ErrClosed, Timing{})
	}
	c.stopLoop()
	c.loops.Wait()
	err := c.data.Close()
	c.closeStore()
	return err
}

func (c *Client) onResults(conn transport.Conn, m *wire.Results) {
	for i := range m.Results {
		r := &m.Results[i]
		t := Timing{BatchSize: int(r.BatchSize)}
		if r.StartedAt != 0 { // 0: the batch never ran
			t.Started, t.Finished = time.Unix(0, r.StartedAt), time.Unix(0, r.FinishedAt)
		}
		if r.Code != 0 {
			c.finish(r.ID, nil, c.endError(r.ID, r.Code, r.Detail, conn.RemoteAddr()), t)
			continue
		}
		c.finish(r.ID, r.Output, nil, t)
	}
}
