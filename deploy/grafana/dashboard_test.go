package grafana

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The dashboard and the document whose tables list every series Symphony
// exports: a metric renamed in the code and the document, but not here,
// fails TestMetricsDocumented.
const (
	dashboardFile = "symphony.json"
	metricsDoc    = "../../docs/metrics.md"
	gridWidth     = 24
)

type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	SchemaVersion int     `json:"schemaVersion"`
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	GridPos     gridPos     `json:"gridPos"`
	Datasource  *datasource `json:"datasource"`
	Targets     []target    `json:"targets"`
	Panels      []panel     `json:"panels"` // a collapsed row's
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

type gridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *datasource `json:"datasource"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *datasource     `json:"datasource"`
}

// query is a variable's query, which Grafana stores as a string or, for
// Prometheus query variables since Grafana 10, as an object.
func (v variable) query() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &o) == nil {
		return o.Query
	}
	return ""
}

func load(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// all returns the panels, rows included, and a collapsed row's panels.
func (d dashboard) all() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

func (d dashboard) variable(name string) (variable, bool) {
	for _, v := range d.Templating.List {
		if v.Name == name {
			return v, true
		}
	}
	return variable{}, false
}

func TestDashboard(t *testing.T) {
	d := load(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want 36 or later (datasources as objects)", d.SchemaVersion)
	}
	input := false
	for _, in := range d.Inputs {
		input = input || in.Name == "DS_PROMETHEUS" && in.Type == "datasource" && in.PluginID == "prometheus"
	}
	if !input {
		t.Error("no DS_PROMETHEUS datasource input: Grafana's import would not ask for the Prometheus data source")
	}
	if v, ok := d.variable("datasource"); !ok || v.Type != "datasource" || v.query() != "prometheus" {
		t.Errorf("variable datasource: type %q, query %q: want a datasource variable over prometheus", v.Type, v.query())
	}
	v, ok := d.variable("model")
	if !ok || v.Type != "query" || !strings.Contains(v.query(), "label_values(symphony_frontend_model_requests_total, model)") {
		t.Errorf("variable model: type %q, query %q: want label_values(symphony_frontend_model_requests_total, model)", v.Type, v.query())
	}
	if v.Datasource == nil || v.Datasource.UID == "" {
		t.Error("variable model has no datasource")
	}
}

func TestLayout(t *testing.T) {
	ps := load(t).all()
	if len(ps) == 0 {
		t.Fatal("no panels")
	}
	ids := map[int]string{}
	for i, p := range ps {
		if p.ID == 0 {
			t.Errorf("panel %q has no id", p.Title)
		} else if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > gridWidth {
			t.Errorf("panel %q: gridPos %+v is outside the %d-column grid", p.Title, g, gridWidth)
		}
		if p.Type == "row" && (g.X != 0 || g.W != gridWidth || g.H != 1) {
			t.Errorf("row %q: gridPos %+v, want the full width and height 1", p.Title, g)
		}
		for _, q := range ps[:i] {
			h := q.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q %+v and %q %+v overlap", q.Title, h, p.Title, g)
			}
		}
	}
}

func TestPanels(t *testing.T) {
	for _, p := range load(t).all() {
		if p.Type == "row" {
			if p.Title == "" {
				t.Error("a row has no title")
			}
			continue
		}
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID == "" {
			t.Errorf("panel %q: datasource %+v, want a prometheus one", p.Title, p.Datasource)
		}
		if p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q has no unit", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: target %q has no expr", p.Title, tg.RefID)
			}
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target refId %q is empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource != nil && p.Datasource != nil && *tg.Datasource != *p.Datasource {
				t.Errorf("panel %q: target %q queries %+v, the panel %+v", p.Title, tg.RefID, *tg.Datasource, *p.Datasource)
			}
		}
	}
}

// documented returns the series in docs/metrics.md's tables, by name,
// with their type (counter, gauge, histogram).
func documented(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\|\\s*`(symphony_[a-z0-9_]+)`\\s*\\|\\s*([a-z]+)\\s*\\|")
	types := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			types[m[1]] = m[2]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 20 || types["symphony_frontend_model_requests_total"] != "counter" ||
		types["symphony_frontend_request_duration_seconds"] != "histogram" {
		t.Fatalf("%s: read %d series from its tables; has their format changed?", metricsDoc, len(types))
	}
	return types
}

var metricName = regexp.MustCompile(`symphony_[a-zA-Z0-9_:]*`)

// undocumented returns the symphony_* names in expr that are neither
// series of types nor a histogram's _bucket, _sum or _count.
func undocumented(expr string, types map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range metricName.FindAllString(expr, -1) {
		if _, ok := types[name]; ok || seen[name] {
			continue
		}
		seen[name] = true
		ok := false
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, cut := strings.CutSuffix(name, suffix); cut && types[base] == "histogram" {
				ok = true
			}
		}
		if !ok {
			out = append(out, name)
		}
	}
	return out
}

func TestMetricsDocumented(t *testing.T) {
	types := documented(t)
	d := load(t)
	type query struct{ where, expr string }
	var queries []query
	for _, p := range d.all() {
		for _, tg := range p.Targets {
			queries = append(queries, query{fmt.Sprintf("panel %q, target %s", p.Title, tg.RefID), tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		queries = append(queries, query{"variable " + v.Name, v.query() + "\n" + v.Definition})
	}
	used := 0
	for _, q := range queries {
		used += len(metricName.FindAllString(q.expr, -1))
		for _, name := range undocumented(q.expr, types) {
			t.Errorf("%s: %s is not in %s's tables (renamed?)", q.where, name, metricsDoc)
		}
	}
	if used == 0 {
		t.Error("no expr uses a symphony_* series")
	}
}

// TestUndocumented checks the check: what it lets through and what not.
func TestUndocumented(t *testing.T) {
	types := map[string]string{
		"symphony_scheduler_batch_size":           "histogram",
		"symphony_scheduler_model_plans_total":    "counter",
		"symphony_scheduler_gpu_busy_seconds_sum": "counter",
	}
	for expr, want := range map[string]string{
		`rate(symphony_scheduler_batch_size_bucket{model=~"$model"}[5m])`:                             "",
		`rate(symphony_scheduler_batch_size_sum[5m]) / rate(symphony_scheduler_batch_size_count[5m])`: "",
		`rate(symphony_scheduler_model_plans_total[5m])`:                                              "",
		`symphony_scheduler_gpu_busy_seconds_sum`:                                                     "",
		`rate(symphony_scheduler_plans_total[5m])`:                                                    "symphony_scheduler_plans_total",
		`rate(symphony_scheduler_model_plans_total_count[5m])`:                                        "symphony_scheduler_model_plans_total_count",
		`symphony_scheduler_batch_size_max`:                                                           "symphony_scheduler_batch_size_max",
	} {
		if got := strings.Join(undocumented(expr, types), " "); got != want {
			t.Errorf("undocumented(%q) = %q, want %q", expr, got, want)
		}
	}
}
