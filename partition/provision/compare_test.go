package provision

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition/lpsolve"
)

func trafficApp(t *testing.T) *App {
	t.Helper()
	af, err := ParseAppFile("../../testdata/apps/traffic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return af.App
}

// Every baseline, the brute force and the MILP each get one entry, in
// that order; a baseline never beats ours, the brute force (the optimum)
// never loses to it, and each cost's extra is measured against ours. A
// missing solver is an entry that says so.
func TestCompareRanksEveryPlanner(t *testing.T) {
	app := trafficApp(t)
	ours, err := Solve(app, Default())
	if err != nil {
		t.Fatal(err)
	}
	got := Compare(context.Background(), app, ours, "/nonexistent/cbc", time.Second)
	var want []string
	for _, b := range Baselines() {
		want = append(want, b.String())
	}
	want = append(want, SystemBrute, SystemMILP)
	if len(got) != len(want) {
		t.Fatalf("%d entries %+v, want %v", len(got), got, want)
	}
	for i, c := range got {
		if c.Planner != want[i] {
			t.Errorf("entry %d is %s, want %s", i, c.Planner, want[i])
		}
		if c.Planner == SystemMILP {
			if c.CostPerHour != nil || c.ExtraOverOurs != nil || c.Error == "" {
				t.Errorf("MILP without a solver: %+v", c)
			}
			continue
		}
		if c.CostPerHour == nil || c.ExtraOverOurs == nil || c.Error != "" || c.PlanSeconds <= 0 {
			t.Errorf("%s: %+v, want a cost and its time", c.Planner, c)
			continue
		}
		if x := *c.CostPerHour/ours.CostPerHour - 1; math.Abs(*c.ExtraOverOurs-x) > 1e-12 {
			t.Errorf("%s: extra %v, cost/ours−1 is %v", c.Planner, *c.ExtraOverOurs, x)
		}
		if c.Planner == SystemBrute && *c.ExtraOverOurs > 1e-9 {
			t.Errorf("the brute force costs %v, more than ours %v", *c.CostPerHour, ours.CostPerHour)
		}
		if c.Planner != SystemBrute && *c.ExtraOverOurs < -1e-9 {
			t.Errorf("%s costs %v, less than ours %v", c.Planner, *c.CostPerHour, ours.CostPerHour)
		}
	}
}

// With a solver, the MILP's provision is verified and compared like the rest;
// a canceled context stops it instead of letting it run to its limit.
func TestCompareRunsTheMILP(t *testing.T) {
	if _, err := lpsolve.Find(""); err != nil {
		t.Skip(err)
	}
	app := trafficApp(t)
	ours, err := Solve(app, Default())
	if err != nil {
		t.Fatal(err)
	}
	got := Compare(context.Background(), app, ours, "", 30*time.Second)
	milp := got[len(got)-1]
	if milp.Planner != SystemMILP || milp.CostPerHour == nil || milp.Error != "" {
		t.Fatalf("MILP: %+v", milp)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got = Compare(ctx, app, ours, "", 30*time.Second)
	if milp := got[len(got)-1]; milp.CostPerHour != nil || milp.Error == "" {
		t.Errorf("MILP under a canceled context: %+v", milp)
	}
}
