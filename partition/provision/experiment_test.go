package provision

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
)

func TestRunExperiment(t *testing.T) {
	c := DefaultExperiment()
	c.Instances, c.Seed, c.MILP = 12, 3, false
	var progress int
	c.Progress = func(tr Trial, done, total int) {
		progress++
		if done != progress || total != 12 {
			t.Errorf("progress %d/%d", done, total)
		}
	}
	rep, err := RunExperiment(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Trials) != 12 || progress != 12 || rep.BruteForced != 12 {
		t.Fatalf("%d trials, %d progress calls, %d brute-forced", len(rep.Trials), progress, rep.BruteForced)
	}
	rows := map[string]SystemRow{}
	for _, r := range rep.Systems {
		rows[r.System] = r
	}
	ours := rows[SystemOurs]
	if ours.Planned != 12 || ours.AvgExtra != 0 || ours.MaxExtra != 0 || ours.MedianSeconds <= 0 {
		t.Errorf("our row %+v", ours)
	}
	if rows[SystemBrute].OptimalShare != 1 || rows[SystemBrute].Below > 1 {
		t.Errorf("brute-force row %+v", rows[SystemBrute])
	}
	for _, b := range Baselines() {
		r := rows[b.String()]
		if r.Below != 0 || r.Planned+r.Infeasible != 12 || r.Planned > 0 && r.AvgExtra < 0 {
			t.Errorf("%v row %+v", b, r)
		}
	}
	if _, ok := rows[SystemMILP]; ok || !strings.Contains(strings.Join(rep.Notes, "\n"), "MILP not run") {
		t.Errorf("MILP row or note wrong: %v", rep.Notes)
	}

	var text, js, cs bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"12 random instances (seed 3)", "avg extra over ours", "symphony", "nexus", "clipper", "brute-force"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Systems) != len(rep.Systems) || len(back.Trials) != 12 {
		t.Fatalf("JSON round trip: %v", err)
	}
	if err := rep.WriteCSV(&cs); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&cs).ReadAll()
	if err != nil || len(recs) != 1+12*len(rep.systems()) || recs[0][4] != "cost_per_hour" {
		t.Fatalf("CSV: %d records, %v", len(recs), err)
	}

	// A cancelled context stops between instances, with a note.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err = RunExperiment(ctx, c)
	if err != nil || len(rep.Trials) != 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "stopped after 0") {
		t.Fatalf("cancelled: %v, %d trials, notes %v", err, len(rep.Trials), rep.Notes)
	}
	c.Instances = 0
	if _, err := RunExperiment(context.Background(), c); err == nil {
		t.Fatal("0 instances accepted")
	}
}
