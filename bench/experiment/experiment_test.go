package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNamesAreThePapersEvaluations: `symphony experiment list` offers every
// evaluation issue 19 names, in the paper's order, then issue 20's cloud
// comparison and re-planning runs, and each has a title and a citation of
// its paper.
func TestNamesAreThePapersEvaluations(t *testing.T) {
	want := []string{"table4", "fig4", "fig6", "fig7", "fig8", "fig9", "fig10", "fig11", "fig13", "fig14", "fig15", "cloud", "replan", "replan-pipeline"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, e := range All() {
		if e.Title == "" || !strings.Contains(e.Paper, "Symphony paper") && !strings.Contains(e.Paper, "MArk (seed 004)") && !strings.Contains(e.Paper, "Scrooge (seed 000)") {
			t.Errorf("%s: title %q, paper %q: want both, the paper cited", e.Name, e.Title, e.Paper)
		}
	}
	if _, err := Lookup("fig5"); err == nil || !strings.Contains(err.Error(), "table4, fig4") {
		t.Errorf("Lookup(fig5) = %v, want an error listing the experiments", err)
	}
}

func runQuick(t *testing.T, name string, dir string, workers int) *Result {
	t.Helper()
	e, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), Options{Quick: true, OutDir: dir, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestCheckFailsOnAnEditedFigure records table4's quick figures, checks a
// rerun against them, then edits one recorded figure and expects the check
// to fail naming that figure, as `make check-experiments` would.
func TestCheckFailsOnAnEditedFigure(t *testing.T) {
	dir := t.TempDir()
	res := runQuick(t, "table4", "", 0)
	path := RecordedPath(dir, "table4", true)
	if err := Check(res, path); err == nil || !strings.Contains(err.Error(), "--record") {
		t.Fatalf("check without a recording: %v, want an error that says how to record", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, res.Table.CSV(), 0o644); err != nil {
		t.Fatal(err)
	}
	again := runQuick(t, "table4", "", 1)
	if err := Check(again, path); err != nil {
		t.Fatalf("a rerun against its own recording: %v", err)
	}

	// Edit ResNet50's symphony goodput in the recording.
	recorded, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(recorded), "\n")
	edited := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "ResNet50,symphony,") {
			f := strings.Split(l, ",")
			f[2] = "9999.9"
			lines[i], edited = strings.Join(f, ","), i
		}
	}
	if edited < 0 {
		t.Fatalf("no ResNet50 symphony row in\n%s", recorded)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Check(again, path)
	if err == nil {
		t.Fatal("the check passed against an edited figure")
	}
	for _, want := range []string{"ResNet50 symphony", "goodput_rps", "recorded 9999.9"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("check error %q does not name %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "recorded "); n != 1 {
		t.Errorf("check error names %d figures, want the one edited:\n%v", n, err)
	}
}

// TestWorkersDoNotChangeFigures: the cells run concurrently, each seeded on
// its own, so the table is the same at any worker count.
func TestWorkersDoNotChangeFigures(t *testing.T) {
	one := runQuick(t, "fig10", "", 1)
	four := runQuick(t, "fig10", "", 4)
	if !bytes.Equal(one.Table.CSV(), four.Table.CSV()) {
		t.Errorf("fig10 with 1 worker:\n%s\nwith 4:\n%s", one.Table.CSV(), four.Table.CSV())
	}
}

// TestFilesWritten: an experiment writes its CSV, its JSON (the same rows,
// NaN as null) and its charts in both formats.
func TestFilesWritten(t *testing.T) {
	dir := t.TempDir()
	res := runQuick(t, "table4", dir, 0)
	for _, f := range []string{"table4.csv", "table4.json", "table4.svg", "table4.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (size %v)", f, err, st)
		}
	}
	csv, err := os.ReadFile(filepath.Join(dir, "table4.csv"))
	if err != nil || !bytes.Equal(csv, res.Table.CSV()) {
		t.Errorf("table4.csv is not the table's CSV (%v)", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "table4.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Experiment string `json:"experiment"`
		Quick      bool   `json:"quick"`
		Table      struct {
			Rows   [][]any `json:"rows"`
			Claims []Claim `json:"claims"`
		} `json:"table"`
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("table4.json: %v", err)
	}
	if back.Experiment != "table4" || !back.Quick || len(back.Table.Rows) != len(res.Table.Rows) || len(back.Table.Claims) == 0 {
		t.Errorf("table4.json holds %q quick=%v, %d rows, %d claims; want table4, quick, %d rows and the claims",
			back.Experiment, back.Quick, len(back.Table.Rows), len(back.Table.Claims), len(res.Table.Rows))
	}
	// The analytic rows have no paper batch for runs: null, not NaN.
	if !bytes.Contains(raw, []byte("null")) {
		t.Errorf("table4.json has no null for the figures the paper does not give")
	}
}

func TestCSVPrintsMissingFiguresEmpty(t *testing.T) {
	tab := Table{Columns: []Column{col("name"), num("x", "%.2f"), num("n", "%.0f")}}
	tab.Rows = [][]any{{"a", math.NaN(), 3.0}, {"b,c", 1.005, 12.4}}
	want := "name,x,n\na,,3\n\"b,c\",1.00,12\n"
	if got := string(tab.CSV()); got != want {
		t.Errorf("CSV() = %q, want %q", got, want)
	}
}

func TestInRange(t *testing.T) {
	for _, c := range []struct {
		lo, hi, plo, phi, tol float64
		want                  bool
	}{
		{1.4, 1.8, 1.34, 1.89, 0.05, true},
		{1.2, 1.8, 1.34, 1.89, 0.05, false},
		{1.4, 2.0, 1.34, 1.89, 0.05, false},
		{math.Inf(1), math.Inf(-1), 1, 2, 0, false}, // no cells
	} {
		if got := inRange(c.lo, c.hi, c.plo, c.phi, c.tol); got != c.want {
			t.Errorf("inRange(%v, %v, %v, %v, %v) = %v, want %v", c.lo, c.hi, c.plo, c.phi, c.tol, got, c.want)
		}
	}
}

// updateDocs rewrites the quoted blocks of docs/benchmarks.md from the
// recordings: go test ./bench/experiment -run TestDocsQuoteTheRecordings -update-docs
var updateDocs = flag.Bool("update-docs", false, "rewrite docs/benchmarks.md's experiment blocks from testdata/experiments")

// TestDocsQuoteTheRecordings holds every experiment block of
// docs/benchmarks.md to the recorded CSV it quotes, which `make
// check-experiments` holds to the code.
func TestDocsQuoteTheRecordings(t *testing.T) {
	const docPath = "../../docs/benchmarks.md"
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := QuotedBlocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s quotes no recorded experiment", docPath)
	}
	var out bytes.Buffer
	last := 0
	for _, b := range blocks {
		recorded, err := os.ReadFile(RecordedPath("../../testdata/experiments", b.Experiment, b.Quick))
		if err != nil {
			t.Fatal(err)
		}
		body, err := RenderBlock(recorded, b)
		if err != nil {
			t.Fatalf("the block of %s: %v", b.Experiment, err)
		}
		if got := string(doc[b.Start:b.End]); got != body && !*updateDocs {
			t.Errorf("%s's block of %s differs from its recording; rerun with -update-docs.\nhave:\n%s\nwant:\n%s", docPath, b.Experiment, got, body)
		}
		out.Write(doc[last:b.Start])
		out.WriteString(body)
		last = b.End
	}
	out.Write(doc[last:])
	if *updateDocs {
		if err := os.WriteFile(docPath, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRenderBlock(t *testing.T) {
	got, err := RenderBlock([]byte("name,x,note\na,1.50,\nb|c,-2,slow\n"), QuotedBlock{Columns: []string{"name", "x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "| name | x |\n| --- | ---: |\n| a | 1.50 |\n| b\\|c | -2 |\n"
	if got != want {
		t.Errorf("RenderBlock = %q, want %q", got, want)
	}
	if got, err := RenderBlock([]byte("name,x\na,1\nb,2\n"), QuotedBlock{WhereColumn: "name", WhereValue: "b"}); err != nil || got != "| name | x |\n| --- | ---: |\n| b | 2 |\n" {
		t.Errorf("RenderBlock where name=b = %q, %v", got, err)
	}
	if _, err := RenderBlock([]byte("a,b\n1,2\n"), QuotedBlock{Columns: []string{"c"}}); err == nil || !strings.Contains(err.Error(), `no column "c"`) {
		t.Errorf("an unknown column: %v", err)
	}
	doc := []byte("x\n<!-- experiment fig7 full: a,b where c=d -->\nold\n<!-- end experiment -->\n<!-- experiment fig4 quick -->\nnope\n")
	if _, err := QuotedBlocks(doc); err == nil {
		t.Error("a block without its end marker was accepted")
	}
	if _, err := QuotedBlocks([]byte("<!-- experiment Fig7 full -->\nold\n<!-- end experiment -->\n")); err == nil {
		t.Error("an unreadable block start was skipped")
	}
	if b, err := QuotedBlocks([]byte("<!-- experiment replan-pipeline full -->\nold\n<!-- end experiment -->\n")); err != nil || len(b) != 1 || b[0].Experiment != "replan-pipeline" {
		t.Errorf("a hyphenated name: %+v, %v", b, err)
	}
	blocks, err := QuotedBlocks(doc[:strings.Index(string(doc), "<!-- experiment fig4")])
	if err != nil || len(blocks) != 1 || blocks[0].Experiment != "fig7" || blocks[0].Quick || !slices.Equal(blocks[0].Columns, []string{"a", "b"}) ||
		blocks[0].WhereColumn != "c" || blocks[0].WhereValue != "d" ||
		string(doc[blocks[0].Start:blocks[0].End]) != "old\n" {
		t.Errorf("QuotedBlocks = %+v, %v", blocks, err)
	}
}
