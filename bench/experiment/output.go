package experiment

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/symphony-serving/symphony/bench/report"
)

// CSV returns the table as CSV: a header of the column names, then one
// line per row, each number printed with its column's format. It is what
// NAME.csv holds and what Check compares.
func (t *Table) CSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	_ = w.Write(names) // a bytes.Buffer does not fail
	for _, row := range t.Rows {
		vals := make([]string, len(row))
		for i, v := range row {
			vals[i] = cellText(t.Columns[i], v)
		}
		_ = w.Write(vals)
	}
	w.Flush()
	return b.Bytes()
}

// jsonSafe is res with every NaN (a figure not measured, or one the paper
// does not give) as null, which JSON can hold.
func jsonSafe(res *Result) *Result {
	out := *res
	out.Table.Rows = make([][]any, len(res.Table.Rows))
	for i, row := range res.Table.Rows {
		r := make([]any, len(row))
		for j, v := range row {
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				v = nil
			}
			r[j] = v
		}
		out.Table.Rows[i] = r
	}
	return &out
}

// writeResult writes dir/NAME.csv and dir/NAME.json and returns their paths.
func writeResult(dir string, res *Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	csvPath := filepath.Join(dir, res.Experiment+".csv")
	if err := os.WriteFile(csvPath, res.Table.CSV(), 0o644); err != nil {
		return nil, err
	}
	jsonPath := filepath.Join(dir, res.Experiment+".json")
	var b bytes.Buffer
	if err := report.EncodeJSON(&b, jsonSafe(res)); err != nil {
		return []string{csvPath}, err
	}
	if err := os.WriteFile(jsonPath, b.Bytes(), 0o644); err != nil {
		return []string{csvPath}, err
	}
	return []string{csvPath, jsonPath}, nil
}

// RecordedPath is where the recorded CSV of experiment name lives under
// dir, the quick and full runs apart.
func RecordedPath(dir, name string, quick bool) string {
	kind := "full"
	if quick {
		kind = "quick"
	}
	return filepath.Join(dir, kind, name+".csv")
}

// Check compares res's CSV with the recorded one at path and returns an
// error naming every figure that differs (by its row's first values and
// its column), or that was added or removed. A figure is compared as
// printed, so the recorded file is the reference to the digit shown.
func Check(res *Result, path string) error {
	want, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: no recorded figures (record them with --record)", path)
		}
		return err
	}
	got := res.Table.CSV()
	if bytes.Equal(got, want) {
		return nil
	}
	wantRows, err := csv.NewReader(bytes.NewReader(want)).ReadAll()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	gotRows, err := csv.NewReader(bytes.NewReader(got)).ReadAll()
	if err != nil {
		return fmt.Errorf("%s: our own CSV: %w", res.Experiment, err)
	}
	var diffs []string
	if strings.Join(wantRows[0], ",") != strings.Join(gotRows[0], ",") {
		diffs = append(diffs, fmt.Sprintf("columns: recorded %q, now %q", wantRows[0], gotRows[0]))
	} else {
		header := gotRows[0]
		for i := 1; i < max(len(wantRows), len(gotRows)); i++ {
			switch {
			case i >= len(wantRows):
				diffs = append(diffs, fmt.Sprintf("row %d (%s): not recorded", i, rowKey(gotRows[i])))
			case i >= len(gotRows):
				diffs = append(diffs, fmt.Sprintf("row %d (%s): recorded, not produced now", i, rowKey(wantRows[i])))
			default:
				for j := range header {
					if j < len(wantRows[i]) && j < len(gotRows[i]) && wantRows[i][j] != gotRows[i][j] {
						diffs = append(diffs, fmt.Sprintf("row %d (%s), %s: recorded %s, now %s",
							i, rowKey(gotRows[i]), header[j], orEmpty(wantRows[i][j]), orEmpty(gotRows[i][j])))
					}
				}
			}
		}
	}
	const shown = 20
	more := ""
	if len(diffs) > shown {
		more = fmt.Sprintf("\n  … and %d more", len(diffs)-shown)
		diffs = diffs[:shown]
	}
	return fmt.Errorf("%s differs from %s:\n  %s%s", res.Experiment, path, strings.Join(diffs, "\n  "), more)
}

// rowKey names a row by its first three values (the cell's coordinates).
func rowKey(row []string) string {
	return strings.Join(row[:min(3, len(row))], " ")
}

func orEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
