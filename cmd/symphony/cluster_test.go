package main

import (
	"context"
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/partition/registry/etcdtest"
)

// populateRegistry writes a small cluster through the registry's API: part
// 0 with an active scheduler and a standby, part 1 with an active one, two
// backends, a frontend, three models, an assignment (epoch 3) that moves
// model c to part 1, keeping it in part 0, while the routes (epoch 2)
// still send it to 0, part 0's report and the controller's epoch record.
func populateRegistry(t *testing.T, srv *etcdtest.Server, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := registry.Default()
	cfg.Prefix = prefix
	r, err := registry.New(srv.Client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var active0 *registry.Registration[registry.Scheduler]
	for _, s := range []registry.Scheduler{
		{Name: "s0a", Part: 0, Role: registry.RoleActive, Address: "10.0.0.1:7000", Revision: 17},
		{Name: "s0b", Part: 0, Role: registry.RoleStandby, Address: "10.0.0.2:7000"},
		{Name: "s1a", Part: 1, Role: registry.RoleActive, Address: "10.0.0.3:7000", Revision: 21},
	} {
		reg, err := r.RegisterScheduler(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Close(context.Background()) })
		if active0 == nil {
			active0 = reg
		}
	}
	for _, b := range []registry.Backend{
		{Name: "b0", GPUs: 4, Address: "10.0.1.1:7200", Models: []string{"a", "b", "c"}},
		{Name: "b1", GPUs: 2, Address: "10.0.1.2:7200", Models: []string{"c"}},
	} {
		reg, err := r.RegisterBackend(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Close(context.Background()) })
	}
	reg, err := r.RegisterFrontend(ctx, registry.Frontend{Name: "f0", DataAddress: "10.0.2.1:7300"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	for _, m := range []registry.Model{
		{Name: "a", SLO: 100 * time.Millisecond, StaticMemory: 1 << 30, DynamicMemory: 256 << 20},
		{Name: "b", SLO: 50 * time.Millisecond, StaticMemory: 512 << 20, DynamicMemory: 64 << 20},
		{Name: "c", SLO: 200 * time.Millisecond, StaticMemory: 2 << 30, DynamicMemory: 1 << 30},
	} {
		if _, err := r.PutModel(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.PutAssignment(ctx, registry.Assignment{Epoch: 3, Parts: 2, Models: map[string]int{"a": 0, "b": 1, "c": 1},
		Keep: map[string]int{"c": 0}, Backends: map[string]int{"b0": 0, "b1": 1, "gone": registry.FreePool}}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutRoutes(ctx, registry.Routes{
		Epoch:      2,
		Models:     map[string]int{"a": 0, "b": 1, "c": 0},
		Schedulers: map[int]string{0: "10.0.0.1:7000", 1: "10.0.0.3:7000"},
	}, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute)
	if err := r.PutReport(ctx, registry.Report{Part: 0, Scheduler: "s0a", Start: start.UnixNano(), At: start.Add(50 * time.Second).UnixNano(),
		Ready: []string{"c", "a"}, Models: map[string]registry.Counts{"a": {Tasks: 1200, Bad: 3}, "c": {Tasks: 40}},
		Busy: 20 * time.Second, Online: 80 * time.Second, Backends: []string{"b0"}}, active0.Lease()); err != nil {
		t.Fatal(err)
	}
	if err := r.PutEpoch(ctx, registry.Epoch{Epoch: 3, At: start.Add(55 * time.Second).UnixNano(), Window: 30 * time.Second,
		Engine: "heuristic", Deterministic: true, BadRate: 0.0025, IdleFraction: 0.25, GPUsBefore: 5, GPUs: 6, Need: 4.5,
		PartGPUs: []int{4, 2}, Moves: 1, Rates: map[string]float64{"a": 20, "b": 7.5, "c": 1}}); err != nil {
		t.Fatal(err)
	}
}

func TestClusterStatusJSON(t *testing.T) {
	srv := etcdtest.Start(t)
	populateRegistry(t, srv, registry.DefaultPrefix)
	// A bad value is reported with its key; the rest is still printed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := srv.Client(t).Put(ctx, registry.DefaultPrefix+"frontends/bad", `{"name":"bad"}`); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runCLI(t, "cluster", "status", "--etcd", srv.Endpoint, "--json")
	if code != 1 || !strings.Contains(stderr, "1 registry value(s) did not decode") {
		t.Errorf("exit %d, stderr %q; want 1 for the bad value", code, stderr)
	}
	var st clusterStatus
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("%v in:\n%s", err, stdout)
	}
	if st.Empty || st.Revision == 0 || st.Prefix != registry.DefaultPrefix || len(st.Endpoints) != 1 || st.Endpoints[0] != srv.Endpoint {
		t.Errorf("header: empty %v, revision %d, prefix %q, endpoints %v", st.Empty, st.Revision, st.Prefix, st.Endpoints)
	}
	if st.Assignment == nil || st.Assignment.Epoch != 3 || st.Assignment.Parts != 2 || st.Routes == nil || st.Routes.Epoch != 2 {
		t.Errorf("assignment %+v, routes %+v", st.Assignment, st.Routes)
	}
	if !st.Moving || len(st.Moves) != 1 || st.Moves[0].Model != "c" || *st.Moves[0].From != 0 || *st.Moves[0].To != 1 {
		t.Errorf("moving %v, moves %+v; want c from 0 to 1", st.Moving, st.Moves)
	}
	if st.GPUs != 6 || len(st.Backends) != 2 || st.Backends[0].Name != "b0" || len(st.Backends[1].Models) != 1 {
		t.Errorf("gpus %d, backends %+v", st.GPUs, st.Backends)
	}
	if len(st.Frontends) != 1 || st.Frontends[0].DataAddress != "10.0.2.1:7300" {
		t.Errorf("frontends %+v", st.Frontends)
	}
	if len(st.Parts) != 2 {
		t.Fatalf("parts %+v", st.Parts)
	}
	p0, p1 := st.Parts[0], st.Parts[1]
	if strings.Join(p0.Assigned, ",") != "a" || strings.Join(p0.Routed, ",") != "a,c" || p0.Route != "10.0.0.1:7000" ||
		len(p0.Schedulers) != 2 || p0.Schedulers[0] != (schedulerStatus{Name: "s0a", Role: "active", Term: 17, Address: "10.0.0.1:7000"}) ||
		p0.Schedulers[1] != (schedulerStatus{Name: "s0b", Role: "standby", Address: "10.0.0.2:7000"}) {
		t.Errorf("part 0: %+v", p0)
	}
	if p1.Part != 1 || strings.Join(p1.Assigned, ",") != "b,c" || strings.Join(p1.Routed, ",") != "b" ||
		len(p1.Schedulers) != 1 || p1.Schedulers[0].Term != 21 {
		t.Errorf("part 1: %+v", p1)
	}
	if len(st.Models) != 3 {
		t.Fatalf("models %+v", st.Models)
	}
	c := st.Models[2]
	if c.Name != "c" || !c.Registered || c.SLO != int64(200*time.Millisecond) || c.StaticMemory != 2<<30 ||
		*c.AssignedPart != 1 || *c.RoutedPart != 0 || strings.Join(c.Backends, ",") != "b0,b1" {
		t.Errorf("model c: %+v", c)
	}
	if a := st.Assignment; a == nil || len(a.Keep) != 1 || a.Keep["c"] != 0 || len(a.Backends) != 3 || a.Backends["b1"] != 1 || a.Backends["gone"] != registry.FreePool {
		t.Errorf("assignment's keep and backends: %+v", st.Assignment)
	}
	if len(st.Reports) != 1 {
		t.Fatalf("reports %+v", st.Reports)
	}
	r := st.Reports[0]
	if r.Part != 0 || r.Scheduler != "s0a" || strings.Join(r.Ready, ",") != "a,c" || r.Models["a"] != (registry.Counts{Tasks: 1200, Bad: 3}) ||
		r.Busy != 20*time.Second || r.Online != 80*time.Second || r.Utilization != 0.25 || strings.Join(r.Backends, ",") != "b0" {
		t.Errorf("report %+v", r)
	}
	if e := st.Epoch; e == nil || e.Epoch != 3 || e.Window != 30*time.Second || e.GPUs != 6 || len(e.PartGPUs) != 2 || e.Rates["b"] != 7.5 {
		t.Errorf("epoch %+v", st.Epoch)
	}
	if len(st.Errors) != 1 || st.Errors[0].Key != registry.DefaultPrefix+"frontends/bad" || !strings.Contains(st.Errors[0].Error, "data_address") {
		t.Errorf("errors %+v", st.Errors)
	}
}

func TestClusterStatusText(t *testing.T) {
	srv := etcdtest.Start(t)
	const prefix = "/other/"
	populateRegistry(t, srv, prefix)
	code, stdout, stderr := runCLI(t, "cluster", "status", "--etcd", srv.Endpoint, "--prefix", prefix)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := map[string]bool{}
	for _, line := range strings.Split(stdout, "\n") {
		lines[strings.Join(strings.Fields(line), " ")] = true
	}
	for _, want := range []string{
		"etcd " + srv.Endpoint + ", prefix /other/, revision 14",
		"assignment epoch 3, 2 parts (mod revision 11)",
		"routes epoch 2 (mod revision 12)",
		"state moving: the routes (epoch 2) do not yet carry out the assignment (epoch 3); 1 model(s) to move",
		"gpus 6 on 2 backend(s)",
		"MOVE FROM (ROUTED) TO (ASSIGNED)",
		"c 0 1",
		"PART ASSIGNED ROUTED ROUTE SCHEDULER ROLE TERM ADDRESS",
		"0 a a,c 10.0.0.1:7000 s0a active 17 10.0.0.1:7000",
		"s0b standby - 10.0.0.2:7000",
		"1 b,c b 10.0.0.3:7000 s1a active 21 10.0.0.3:7000",
		"b0 4 10.0.1.1:7200 a,b,c",
		"b1 2 10.0.1.2:7200 c",
		"f0 10.0.2.1:7300",
		"c 200ms 2.0 GiB 1.0 GiB 1 0 b0,b1",
		"KEPT MODEL IN PART UNTIL",
		"c 0 every frontend follows its route to part 1",
		"PLACED BACKEND PART",
		"b0 0",
		"gone free pool (not registered)",
		"REPORTED MODEL PART TASKS BAD",
		"a 0 1200 3",
		"epoch gpus 5 before, 6 after (need 4.50 before headroom); by part 4,2",
		"epoch signals bad rate 0.25%, idle 25.0%; 1 move(s)",
		"epoch rates a 20/s, b 7.5/s, c 1/s",
	} {
		if !lines[want] {
			t.Errorf("no line %q", want)
		}
	}
	// The report's and the epoch's lines hold their ages.
	for _, re := range []string{
		`^part 0 s0a \S+ 50s a,c 20s 1m20s 25\.0% b0$`,
		`^last epoch 3, decided \S+Z \(\S+ ago\), after a 30s window; engine heuristic$`,
	} {
		found := false
		for line := range lines {
			found = found || regexp.MustCompile(re).MatchString(line)
		}
		if !found {
			t.Errorf("no line matching %q in:\n%s", re, stdout)
		}
	}
	// The tables are aligned: the standby sits under SCHEDULER.
	col := map[string]int{}
	for _, line := range strings.Split(stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "PART "):
			col["header"] = strings.Index(line, "SCHEDULER")
		case strings.Contains(line, "s0b"):
			col["standby"] = strings.Index(line, "s0b")
		}
	}
	if col["header"] <= 0 || col["header"] != col["standby"] {
		t.Errorf("SCHEDULER at column %d, s0b at %d", col["header"], col["standby"])
	}
	if strings.Contains(stdout, "UNDECODABLE") {
		t.Error("an error table with no errors")
	}
}

func TestClusterStatusEmpty(t *testing.T) {
	srv := etcdtest.Start(t)
	code, stdout, stderr := runCLI(t, "cluster", "status", "--etcd", srv.Endpoint)
	if code != 0 || !strings.Contains(stdout, "the registry is empty") || strings.Contains(stdout, "PART") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "cluster", "status", "--etcd", srv.Endpoint, "--json")
	var st clusterStatus
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || !st.Empty || st.Parts == nil || st.Assignment != nil {
		t.Errorf("exit %d, %v: %s", code, err, stdout)
	}
}

func TestClusterStatusUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	start := time.Now()
	code, stdout, stderr := runCLI(t, "cluster", "status", "--etcd", addr, "--timeout", "300ms")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v with --timeout 300ms", d)
	}
	if code != 1 || stdout != "" || !strings.Contains(stderr, addr) || !strings.Contains(stderr, "300ms") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming %s", code, stdout, stderr, addr)
	}
}

func TestClusterStatusUsage(t *testing.T) {
	for _, args := range [][]string{
		{"cluster"}, {"cluster", "stats"}, {"cluster", "status"},
		{"cluster", "status", "--etcd", "x:1", "--prefix", "nope"},
		{"cluster", "status", "--etcd", "x:1", "--timeout", "0s"},
		{"cluster", "status", "--etcd", "x:1", "extra"},
	} {
		if code, _, stderr := runCLI(t, args...); code != 2 {
			t.Errorf("%q: exit %d, %q; want 2", args, code, stderr)
		}
	}
	code, _, stderr := runCLI(t, "cluster", "status", "-h")
	if code != 0 || !strings.HasPrefix(stderr, "Usage:\n  symphony cluster status --etcd ENDPOINTS") {
		t.Errorf("-h: exit %d:\n%s", code, stderr)
	}
}

// Once the routes carry a move out, the status is still moving while the
// assignment keeps the model in its old part, and says why.
func TestClusterStatusKeptMove(t *testing.T) {
	keys, err := registry.NewKeys(registry.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := registry.Encode(registry.Assignment{Epoch: 4, Parts: 2, Models: map[string]int{"a": 0, "c": 1}, Keep: map[string]int{"c": 0}})
	r, _ := registry.Encode(registry.Routes{Epoch: 4, Models: map[string]int{"a": 0, "c": 1}, Schedulers: map[int]string{0: "h:1", 1: "h:2"}})
	st := buildClusterStatus(keys, []rawKV{{Key: keys.Assignment(), Value: a, ModRevision: 5}, {Key: keys.Routes(), Value: r, ModRevision: 6}}, 6)
	if !st.Moving || len(st.Moves) != 0 || st.Reports == nil || st.Epoch != nil || st.Assignment.Backends == nil {
		t.Fatalf("moving %v, moves %+v, reports %v, epoch %v, assignment %+v", st.Moving, st.Moves, st.Reports, st.Epoch, st.Assignment)
	}
	var b strings.Builder
	if err := st.writeText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "moving: the routes carry out the assignment; the old parts keep 1 model(s) until every frontend follows them") ||
		strings.Contains(b.String(), "REPORT") || strings.Contains(b.String(), "last epoch") {
		t.Errorf("text:\n%s", b.String())
	}
}
