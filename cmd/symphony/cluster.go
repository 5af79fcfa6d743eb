package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/partition/registry"
)

// runCluster is `symphony cluster SUBCOMMAND`; status is the only one.
func runCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return cli.UsageErr("a subcommand is required: symphony cluster status --etcd ENDPOINTS")
	}
	switch args[0] {
	case "status":
		return runClusterStatus(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stderr, "Usage:\n"+cli.Synopsis("symphony", usage, "cluster status"))
		return flag.ErrHelp
	}
	return cli.UsageErr("unknown subcommand %q (want status)", args[0])
}

// runClusterStatus is `symphony cluster status --etcd ENDPOINTS`: the live
// cluster's state as the registry in etcd holds it (partition/registry).
//
// It reads every key under --prefix in one range read, so that everything
// printed is as of one etcd revision, and decodes each value with the
// registry's strict decoders, by its key's place in the layout
// (registry.Keys). A value that does not decode is reported with its key
// and the rest is printed; the command then exits with status 1. Keys
// outside the registry's layout (an election's, say) are skipped. etcd not
// answering within --timeout is an error naming the endpoints (exit 1); an
// empty registry is said as such (exit 0).
//
// The text form is aligned tables: parts (from the assignment, the routes
// and the schedulers' records) with their models and schedulers, moves
// under way, backends, frontends, models, the models kept in their old
// parts while they move, where the assignment places each backend, the
// parts' reports, the controller's last epoch, and undecodable values.
// --json prints the same as one object, whose fields are stable:
//
//	endpoints    []string  the etcd endpoints asked
//	prefix       string    the key prefix read
//	revision     int64     the etcd revision everything was read at
//	empty        bool      no key of the registry's layout under prefix
//	assignment   {epoch, parts, mod_revision, keep, backends} or null: none written yet
//	             keep: {model: part} the models kept in the part they move out of until every
//	             frontend follows their new route (make before break); backends: {backend: part},
//	             part -1 being the free pool; both {} when empty
//	routes       {epoch, mod_revision} or null: none written yet
//	moving       bool      assignment and routes differ (epoch or a model's part), or the assignment
//	             keeps a model in its old part: a move is under way
//	moves        [{model, from, to}]  models whose routed part (from) is not their assigned part (to); null: none there
//	gpus         int       the backends' GPUs, summed
//	parts        [{part, assigned, routed, route, schedulers}]
//	             assigned: models the assignment puts there; routed: models the routes send there;
//	             route: the address the routes give for its active scheduler ("" none);
//	             schedulers: [{name, role ("active"|"standby"), term, address}], term being the
//	             active's election revision (0 for a standby), active ones first
//	backends     [{name, gpus, address, models}]
//	frontends    [{name, data_address}]
//	models       [{name, registered, slo_ns, static_memory, dynamic_memory, assigned_part, routed_part, backends}]
//	             registered: a models/ record exists (else the model is only named by the assignment,
//	             the routes or a backend, and its SLO and memory are 0); assigned_part and
//	             routed_part are null where it has none; backends: those that have it loaded
//	reports      [{part, scheduler, start_ns, at_ns, ready, models, busy_ns, online_ns, backends, utilization}]
//	             each part's latest report (registry.Report), by its active scheduler: the models it
//	             takes requests for (ready), each model's {tasks, bad} and the GPU time busy and online
//	             since start_ns (the scheduler's start or takeover), the backends online with it;
//	             utilization is busy/online (0 with none online)
//	epoch        the controller's last epoch (registry.Epoch: epoch, at_ns, window_ns, engine,
//	             deterministic, bad_rate, idle_fraction, gpus_before, gpus, need, part_gpus, moves,
//	             skipped, rates {model: requests/s}) or null: none yet
//	errors       [{key, error}]  values that did not decode
//
// Lists are sorted (parts by number, everything else by name) and are []
// rather than null when empty, maps {} rather than null.
func runClusterStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoints := fs.String("etcd", "", "etcd endpoints, comma-separated host:port or URLs (required)")
	prefix := fs.String("prefix", registry.DefaultPrefix, "the registry's key prefix in etcd")
	asJSON := fs.Bool("json", false, "print the status as one JSON object on stdout")
	timeout := fs.Duration("timeout", 5*time.Second, "give up when etcd has not answered within this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	eps := splitList(*endpoints)
	if len(eps) == 0 {
		return cli.UsageErr("--etcd ENDPOINTS is required")
	}
	keys, err := registry.NewKeys(*prefix)
	if err != nil {
		return cli.UsageErr("--prefix: %v", err)
	}
	if *timeout <= 0 {
		return cli.UsageErr("--timeout must be positive, have %v", *timeout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: *timeout,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("etcd at %s: %w", strings.Join(eps, ","), err)
	}
	defer c.Close()
	resp, err := c.Get(ctx, keys.Prefix(), clientv3.WithPrefix())
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("etcd at %s did not answer within %v (--timeout): %w", strings.Join(eps, ","), *timeout, err)
		}
		return fmt.Errorf("etcd at %s: reading %q: %w", strings.Join(eps, ","), keys.Prefix(), err)
	}
	kvs := make([]rawKV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		kvs[i] = rawKV{Key: string(kv.Key), Value: kv.Value, ModRevision: kv.ModRevision}
	}
	st := buildClusterStatus(keys, kvs, resp.Header.Revision)
	st.Endpoints = eps

	if *asJSON {
		err = cli.WriteJSON(stdout, st)
	} else {
		err = st.writeText(stdout)
	}
	if err != nil {
		return err
	}
	if n := len(st.Errors); n > 0 {
		return fmt.Errorf("%d registry value(s) did not decode (listed with the status)", n)
	}
	return nil
}

// rawKV is one key as read from etcd.
type rawKV struct {
	Key         string
	Value       []byte
	ModRevision int64
}

// clusterStatus is what `symphony cluster status` prints; its JSON names
// are documented on runClusterStatus.
type clusterStatus struct {
	Endpoints  []string            `json:"endpoints"`
	Prefix     string              `json:"prefix"`
	Revision   int64               `json:"revision"`
	Empty      bool                `json:"empty"`
	Assignment *assignmentStatus   `json:"assignment"`
	Routes     *routesStatus       `json:"routes"`
	Moving     bool                `json:"moving"`
	Moves      []moveStatus        `json:"moves"`
	GPUs       int                 `json:"gpus"`
	Parts      []partStatus        `json:"parts"`
	Backends   []registry.Backend  `json:"backends"`
	Frontends  []registry.Frontend `json:"frontends"`
	Models     []modelStatus       `json:"models"`
	Reports    []reportStatus      `json:"reports"`
	Epoch      *registry.Epoch     `json:"epoch"`
	Errors     []keyError          `json:"errors"`

	// now is when the status was read, for the text's ages.
	now time.Time
}

type assignmentStatus struct {
	Epoch       uint64         `json:"epoch"`
	Parts       int            `json:"parts"`
	ModRevision int64          `json:"mod_revision"`
	Keep        map[string]int `json:"keep"`
	Backends    map[string]int `json:"backends"`
}

// reportStatus is a part's report, with its GPUs' utilization.
type reportStatus struct {
	registry.Report
	Utilization float64 `json:"utilization"`
}

type routesStatus struct {
	Epoch       uint64 `json:"epoch"`
	ModRevision int64  `json:"mod_revision"`
}

type moveStatus struct {
	Model string `json:"model"`
	From  *int   `json:"from"`
	To    *int   `json:"to"`
}

type partStatus struct {
	Part       int               `json:"part"`
	Assigned   []string          `json:"assigned"`
	Routed     []string          `json:"routed"`
	Route      string            `json:"route"`
	Schedulers []schedulerStatus `json:"schedulers"`
}

type schedulerStatus struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Term    int64  `json:"term"`
	Address string `json:"address"`
}

type modelStatus struct {
	Name          string   `json:"name"`
	Registered    bool     `json:"registered"`
	SLO           int64    `json:"slo_ns"`
	StaticMemory  int64    `json:"static_memory"`
	DynamicMemory int64    `json:"dynamic_memory"`
	AssignedPart  *int     `json:"assigned_part"`
	RoutedPart    *int     `json:"routed_part"`
	Backends      []string `json:"backends"`
}

type keyError struct {
	Key   string `json:"key"`
	Error string `json:"error"`
}

// buildClusterStatus decodes the keys read at revision under keys'
// prefix; a value that does not decode goes to Errors.
func buildClusterStatus(keys registry.Keys, kvs []rawKV, revision int64) *clusterStatus {
	st := &clusterStatus{
		Prefix: keys.Prefix(), Revision: revision, Empty: true,
		Parts: []partStatus{}, Backends: []registry.Backend{}, Frontends: []registry.Frontend{},
		Models: []modelStatus{}, Reports: []reportStatus{}, Errors: []keyError{}, now: time.Now(),
	}
	var (
		schedulers []registry.Scheduler
		models     = map[string]*modelStatus{}
		assignment *registry.Assignment
		routes     *registry.Routes
	)
	fail := func(key string, err error) { st.Errors = append(st.Errors, keyError{Key: key, Error: err.Error()}) }
	model := func(name string) *modelStatus {
		m := models[name]
		if m == nil {
			m = &modelStatus{Name: name, Backends: []string{}}
			models[name] = m
		}
		return m
	}
	for _, kv := range kvs {
		switch k := kv.Key; {
		case strings.HasPrefix(k, keys.Schedulers()):
			st.Empty = false
			s, err := registry.DecodeScheduler(kv.Value)
			if err == nil && keys.Scheduler(s.Part, s.Name) != k {
				err = fmt.Errorf("registry: scheduler record of part %d named %q under another key", s.Part, s.Name)
			}
			if err != nil {
				fail(k, err)
				continue
			}
			schedulers = append(schedulers, s)
		case strings.HasPrefix(k, keys.Backends()):
			st.Empty = false
			b, err := registry.DecodeBackend(kv.Value)
			if err == nil && keys.Backend(b.Name) != k {
				err = fmt.Errorf("registry: backend record named %q under another key", b.Name)
			}
			if err != nil {
				fail(k, err)
				continue
			}
			if b.Models == nil {
				b.Models = []string{}
			}
			st.Backends = append(st.Backends, b)
			st.GPUs += b.GPUs
		case strings.HasPrefix(k, keys.Frontends()):
			st.Empty = false
			f, err := registry.DecodeFrontend(kv.Value)
			if err == nil && keys.Frontend(f.Name) != k {
				err = fmt.Errorf("registry: frontend record named %q under another key", f.Name)
			}
			if err != nil {
				fail(k, err)
				continue
			}
			st.Frontends = append(st.Frontends, f)
		case strings.HasPrefix(k, keys.Models()):
			st.Empty = false
			m, err := registry.DecodeModel(kv.Value)
			if err == nil && keys.Model(m.Name) != k {
				err = fmt.Errorf("registry: model record named %q under another key", m.Name)
			}
			if err != nil {
				fail(k, err)
				continue
			}
			ms := model(m.Name)
			ms.Registered = true
			ms.SLO, ms.StaticMemory, ms.DynamicMemory = int64(m.SLO), m.StaticMemory, m.DynamicMemory
		case k == keys.Assignment():
			st.Empty = false
			a, err := registry.DecodeAssignment(kv.Value)
			if err != nil {
				fail(k, err)
				continue
			}
			assignment = &a
			st.Assignment = &assignmentStatus{Epoch: a.Epoch, Parts: a.Parts, ModRevision: kv.ModRevision,
				Keep: orEmpty(a.Keep), Backends: orEmpty(a.Backends)}
		case k == keys.Routes():
			st.Empty = false
			r, err := registry.DecodeRoutes(kv.Value)
			if err != nil {
				fail(k, err)
				continue
			}
			routes = &r
			st.Routes = &routesStatus{Epoch: r.Epoch, ModRevision: kv.ModRevision}
		case strings.HasPrefix(k, keys.Reports()):
			st.Empty = false
			r, err := registry.DecodeReport(kv.Value)
			if err == nil && keys.Report(r.Part) != k {
				err = fmt.Errorf("registry: report of part %d under another key", r.Part)
			}
			if err != nil {
				fail(k, err)
				continue
			}
			rs := reportStatus{Report: r}
			if r.Online > 0 {
				rs.Utilization = float64(r.Busy) / float64(r.Online)
			}
			if rs.Ready == nil {
				rs.Ready = []string{}
			}
			if rs.Backends == nil {
				rs.Backends = []string{}
			}
			if rs.Models == nil {
				rs.Models = map[string]registry.Counts{}
			}
			st.Reports = append(st.Reports, rs)
		case k == keys.Epoch():
			st.Empty = false
			e, err := registry.DecodeEpoch(kv.Value)
			if err != nil {
				fail(k, err)
				continue
			}
			if e.PartGPUs == nil {
				e.PartGPUs = []int{}
			}
			if e.Rates == nil {
				e.Rates = map[string]float64{}
			}
			st.Epoch = &e
		}
	}

	// Parts: those the assignment has, those the routes name, and those
	// with a scheduler registered.
	parts := map[int]*partStatus{}
	part := func(p int) *partStatus {
		ps := parts[p]
		if ps == nil {
			ps = &partStatus{Part: p, Assigned: []string{}, Routed: []string{}, Schedulers: []schedulerStatus{}}
			parts[p] = ps
		}
		return ps
	}
	if assignment != nil {
		for p := range assignment.Parts {
			part(p)
		}
		for name, p := range assignment.Models {
			ps := part(p)
			ps.Assigned = append(ps.Assigned, name)
			model(name).AssignedPart = &p
		}
	}
	if routes != nil {
		for name, p := range routes.Models {
			ps := part(p)
			ps.Routed = append(ps.Routed, name)
			model(name).RoutedPart = &p
		}
		for p, addr := range routes.Schedulers {
			part(p).Route = addr
		}
	}
	for _, s := range schedulers {
		ps := part(s.Part)
		ps.Schedulers = append(ps.Schedulers, schedulerStatus{Name: s.Name, Role: s.Role.String(), Term: s.Revision, Address: s.Address})
	}
	for _, b := range st.Backends {
		for _, name := range b.Models {
			m := model(name)
			m.Backends = append(m.Backends, b.Name)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		ps := parts[p]
		slices.Sort(ps.Assigned)
		slices.Sort(ps.Routed)
		slices.SortStableFunc(ps.Schedulers, func(a, b schedulerStatus) int {
			if a.Role != b.Role {
				if a.Role == registry.RoleActive.String() {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Name, b.Name)
		})
		st.Parts = append(st.Parts, *ps)
	}
	for _, name := range slices.Sorted(maps.Keys(models)) {
		m := models[name]
		slices.Sort(m.Backends)
		st.Models = append(st.Models, *m)
	}
	slices.SortFunc(st.Backends, func(a, b registry.Backend) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(st.Frontends, func(a, b registry.Frontend) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(st.Reports, func(a, b reportStatus) int { return a.Part - b.Part })
	for _, r := range st.Reports {
		slices.Sort(r.Ready)
		slices.Sort(r.Backends)
	}

	// Moves: where the routes do not yet carry out the assignment.
	if assignment != nil && routes != nil {
		for _, m := range st.Models {
			if !samePart(m.AssignedPart, m.RoutedPart) {
				st.Moves = append(st.Moves, moveStatus{Model: m.Name, From: m.RoutedPart, To: m.AssignedPart})
			}
		}
		st.Moving = assignment.Epoch != routes.Epoch || len(st.Moves) > 0 || len(assignment.Keep) > 0
	}
	if st.Moves == nil {
		st.Moves = []moveStatus{}
	}
	return st
}

// orEmpty is m, or an empty map for nil.
func orEmpty(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

func samePart(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// writeText prints st as aligned tables.
func (st *clusterStatus) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	where := fmt.Sprintf("etcd %s, prefix %s, revision %d", strings.Join(st.Endpoints, ","), st.Prefix, st.Revision)
	if st.Empty {
		p("%s: the registry is empty (no scheduler, backend, frontend, model, assignment, routes, report or epoch); nothing has registered yet, or --prefix is not the cluster's\n", where)
		return tw.Flush()
	}
	p("%s\n\n", where)

	switch {
	case st.Assignment == nil:
		p("assignment\tnone written yet\n")
	default:
		p("assignment\tepoch %d, %d parts (mod revision %d)\n", st.Assignment.Epoch, st.Assignment.Parts, st.Assignment.ModRevision)
	}
	switch {
	case st.Routes == nil:
		p("routes\tnone written yet\n")
	default:
		p("routes\tepoch %d (mod revision %d)\n", st.Routes.Epoch, st.Routes.ModRevision)
	}
	switch {
	case st.Moving && st.Routes.Epoch == st.Assignment.Epoch && len(st.Moves) == 0:
		p("state\tmoving: the routes carry out the assignment; the old parts keep %d model(s) until every frontend follows them\n",
			len(st.Assignment.Keep))
	case st.Moving:
		p("state\tmoving: the routes (epoch %d) do not yet carry out the assignment (epoch %d); %d model(s) to move\n",
			st.Routes.Epoch, st.Assignment.Epoch, len(st.Moves))
	case st.Assignment != nil && st.Routes != nil:
		p("state\tsettled: the routes carry out the assignment\n")
	}
	p("gpus\t%d on %d backend(s)\n", st.GPUs, len(st.Backends))
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(st.Moves) > 0 {
		p("\nMOVE\tFROM (ROUTED)\tTO (ASSIGNED)\n")
		for _, m := range st.Moves {
			p("%s\t%s\t%s\n", m.Model, partOrDash(m.From), partOrDash(m.To))
		}
	}

	p("\nPART\tASSIGNED\tROUTED\tROUTE\tSCHEDULER\tROLE\tTERM\tADDRESS\n")
	for _, ps := range st.Parts {
		route := ps.Route
		if route == "" {
			route = "(none)"
		}
		first := fmt.Sprintf("%d\t%s\t%s\t%s", ps.Part, list(ps.Assigned), list(ps.Routed), route)
		if len(ps.Schedulers) == 0 {
			p("%s\t(none)\t-\t-\t-\n", first)
			continue
		}
		for i, s := range ps.Schedulers {
			if i > 0 {
				first = "\t\t\t"
			}
			term := "-"
			if s.Term != 0 {
				term = strconv.FormatInt(s.Term, 10)
			}
			p("%s\t%s\t%s\t%s\t%s\n", first, s.Name, s.Role, term, s.Address)
		}
	}

	p("\nBACKEND\tGPUS\tADDRESS\tMODELS LOADED\n")
	if len(st.Backends) == 0 {
		p("(none)\n")
	}
	for _, b := range st.Backends {
		p("%s\t%d\t%s\t%s\n", b.Name, b.GPUs, b.Address, list(b.Models))
	}

	p("\nFRONTEND\tDATA ADDRESS\n")
	if len(st.Frontends) == 0 {
		p("(none)\n")
	}
	for _, f := range st.Frontends {
		p("%s\t%s\n", f.Name, f.DataAddress)
	}

	p("\nMODEL\tSLO\tSTATIC\tDYNAMIC\tASSIGNED\tROUTED\tLOADED ON\n")
	if len(st.Models) == 0 {
		p("(none)\n")
	}
	for _, m := range st.Models {
		if m.Registered {
			p("%s\t%v\t%s\t%s", m.Name, time.Duration(m.SLO), bytesText(m.StaticMemory), bytesText(m.DynamicMemory))
		} else {
			p("%s\t(no record)\t-\t-", m.Name)
		}
		p("\t%s\t%s\t%s\n", partOrDash(m.AssignedPart), partOrDash(m.RoutedPart), list(m.Backends))
	}

	if st.Assignment != nil {
		st.writeAssignment(p)
	}
	st.writeReports(p)
	if e := st.Epoch; e != nil {
		st.writeEpoch(p, e)
	}

	if len(st.Errors) > 0 {
		p("\nUNDECODABLE KEY\tERROR\n")
		for _, e := range st.Errors {
			p("%s\t%s\n", e.Key, e.Error)
		}
	}
	return tw.Flush()
}

// writeAssignment prints the assignment's Keep and Backends maps: the
// models kept in the parts they move out of, and each backend's part.
func (st *clusterStatus) writeAssignment(p func(string, ...any)) {
	a := st.Assignment
	if len(a.Keep) > 0 {
		p("\nKEPT MODEL\tIN PART\tUNTIL\n")
		for _, name := range slices.Sorted(maps.Keys(a.Keep)) {
			p("%s\t%d\tevery frontend follows its route to part %s\n", name, a.Keep[name], st.assignedPart(name))
		}
	}
	registered := map[string]bool{}
	names := slices.Collect(maps.Keys(a.Backends))
	for _, b := range st.Backends {
		registered[b.Name] = true
		if _, ok := a.Backends[b.Name]; !ok {
			names = append(names, b.Name)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	p("\nPLACED BACKEND\tPART\n")
	for _, name := range names {
		part, ok := a.Backends[name]
		where := strconv.Itoa(part)
		switch {
		case !ok:
			where = "(not placed yet)"
		case part == registry.FreePool:
			where = "free pool"
		}
		if !registered[name] {
			where += " (not registered)"
		}
		p("%s\t%s\n", name, where)
	}
}

// assignedPart is model's assigned part, or "-".
func (st *clusterStatus) assignedPart(model string) string {
	for _, m := range st.Models {
		if m.Name == model {
			return partOrDash(m.AssignedPart)
		}
	}
	return "-"
}

// writeReports prints the parts' reports and their per-model counts.
func (st *clusterStatus) writeReports(p func(string, ...any)) {
	if len(st.Reports) == 0 {
		return
	}
	p("\nREPORT\tSCHEDULER\tAGE\tCOUNTING FOR\tREADY\tGPU BUSY\tGPU ONLINE\tUTIL\tBACKENDS ONLINE\n")
	for _, r := range st.Reports {
		p("part %d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\n", r.Part, r.Scheduler, st.age(r.At), roundDur(time.Duration(r.At-r.Start)),
			list(r.Ready), roundDur(r.Busy), roundDur(r.Online), 100*r.Utilization, list(r.Backends))
	}
	p("\nREPORTED MODEL\tPART\tTASKS\tBAD\n")
	n := 0
	for _, r := range st.Reports {
		for _, name := range slices.Sorted(maps.Keys(r.Models)) {
			c := r.Models[name]
			p("%s\t%d\t%d\t%d\n", name, r.Part, c.Tasks, c.Bad)
			n++
		}
	}
	if n == 0 {
		p("(none yet)\n")
	}
}

// writeEpoch prints the controller's last epoch record.
func (st *clusterStatus) writeEpoch(p func(string, ...any), e *registry.Epoch) {
	window := "the first, on the declared rates"
	if e.Window > 0 {
		window = "after a " + roundDur(e.Window) + " window"
	}
	engine := ""
	if e.Engine != "" { // none when the epoch kept the assignment
		engine = "; engine " + e.Engine
	}
	p("\nlast epoch\t%d, decided %s (%s ago), %s%s\n", e.Epoch,
		time.Unix(0, e.At).UTC().Format(time.RFC3339), st.age(e.At), window, engine)
	p("epoch gpus\t%d before, %d after (need %.2f before headroom); by part %s\n", e.GPUsBefore, e.GPUs, e.Need, ints(e.PartGPUs))
	p("epoch signals\tbad rate %.2f%%, idle %.1f%%; %d move(s)\n", 100*e.BadRate, 100*e.IdleFraction, e.Moves)
	if e.Skipped != "" {
		p("epoch skipped\t%s\n", e.Skipped)
	}
	rates := make([]string, 0, len(e.Rates))
	for _, name := range slices.Sorted(maps.Keys(e.Rates)) {
		rates = append(rates, fmt.Sprintf("%s %s/s", name, strconv.FormatFloat(e.Rates[name], 'f', -1, 64)))
	}
	if len(rates) == 0 {
		rates = []string{"-"}
	}
	p("epoch rates\t%s\n", strings.Join(rates, ", "))
}

// age is how long before the status was read the Unix nanosecond at was.
func (st *clusterStatus) age(at int64) string {
	return roundDur(max(0, st.now.Sub(time.Unix(0, at))))
}

// roundDur writes d to a precision that suits its size.
func roundDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func ints(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func partOrDash(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// bytesText writes n bytes in binary units, one decimal.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}
