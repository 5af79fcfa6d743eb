package experiment

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// A document quotes an experiment's recorded figures in a block:
//
//	<!-- experiment fig7 full: popularity,arrival,slo_ms,system,goodput_rps where system=nexus -->
//	| popularity | arrival | … |
//	…
//	<!-- end experiment -->
//
// The block holds the recorded CSV (quick or full) as a Markdown table:
// the named columns (all of them when none are named) of every row, or of
// the rows whose column has the value given after "where".
// QuotedBlocks finds the blocks and RenderBlock makes their bodies, so a
// test can hold docs/benchmarks.md to the recordings that
// `make check-experiments` holds to the code: the numbers in the docs are
// the numbers the code gives today.
var blockStart = regexp.MustCompile(`(?m)^<!-- experiment ([a-z0-9-]+) (quick|full)(?:: ([a-z0-9_,]+))?(?: where ([a-z0-9_]+)=([^ ]+))? -->\n`)

const blockEnd = "<!-- end experiment -->"

// QuotedBlock is one block of a document: the experiment, which recording,
// the columns, and where its body lies in the document.
type QuotedBlock struct {
	Experiment string
	Quick      bool
	Columns    []string
	// WhereColumn and WhereValue, when set, keep only the rows whose
	// column has that value.
	WhereColumn, WhereValue string
	// Start and End delimit the body: doc[Start:End].
	Start, End int
}

// anyBlockStart is what every block start begins with: a line that does
// but that blockStart does not match is a block the test would skip.
var anyBlockStart = regexp.MustCompile(`(?m)^<!-- experiment .*$`)

// QuotedBlocks returns the document's blocks in order, or an error for a
// block without its end marker or a block start it cannot read.
func QuotedBlocks(doc []byte) ([]QuotedBlock, error) {
	var out []QuotedBlock
	starts := blockStart.FindAllSubmatchIndex(doc, -1)
	if all := anyBlockStart.FindAllIndex(doc, -1); len(all) != len(starts) {
		for _, a := range all {
			if !slices.ContainsFunc(starts, func(m []int) bool { return m[0] == a[0] }) {
				return nil, fmt.Errorf("unreadable block start at byte %d: %q", a[0], doc[a[0]:a[1]])
			}
		}
	}
	for _, m := range starts {
		b := QuotedBlock{Experiment: string(doc[m[2]:m[3]]), Quick: string(doc[m[4]:m[5]]) == "quick", Start: m[1]}
		if m[6] >= 0 {
			b.Columns = strings.Split(string(doc[m[6]:m[7]]), ",")
		}
		if m[8] >= 0 {
			b.WhereColumn, b.WhereValue = string(doc[m[8]:m[9]]), string(doc[m[10]:m[11]])
		}
		end := bytes.Index(doc[b.Start:], []byte(blockEnd))
		if end < 0 {
			return nil, fmt.Errorf("the block of %s at byte %d has no %q", b.Experiment, m[0], blockEnd)
		}
		b.End = b.Start + end
		out = append(out, b)
	}
	return out, nil
}

// RenderBlock renders a recorded CSV as the Markdown table block b holds:
// its columns (all when none) of its rows, numbers right-aligned.
func RenderBlock(recorded []byte, b QuotedBlock) (string, error) {
	all, err := csv.NewReader(bytes.NewReader(recorded)).ReadAll()
	if err != nil {
		return "", err
	}
	if len(all) == 0 {
		return "", fmt.Errorf("an empty recording")
	}
	header, columns := all[0], b.Columns
	rows := all[:1]
	if b.WhereColumn == "" {
		rows = all
	} else {
		w := slices.Index(header, b.WhereColumn)
		if w < 0 {
			return "", fmt.Errorf("no column %q (have %s)", b.WhereColumn, strings.Join(header, ", "))
		}
		for _, r := range all[1:] {
			if r[w] == b.WhereValue {
				rows = append(rows, r)
			}
		}
	}
	idx := make([]int, 0, len(header))
	if len(columns) == 0 {
		columns = header
	}
	for _, c := range columns {
		i := slices.Index(header, c)
		if i < 0 {
			return "", fmt.Errorf("no column %q (have %s)", c, strings.Join(header, ", "))
		}
		idx = append(idx, i)
	}
	numeric := make([]bool, len(idx))
	for k, i := range idx {
		numeric[k] = true
		for _, r := range rows[1:] {
			if r[i] != "" && !isNumber(r[i]) {
				numeric[k] = false
			}
		}
	}
	var sb strings.Builder
	line := func(cells []string) {
		sb.WriteString("|")
		for _, c := range cells {
			sb.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		sb.WriteString("\n")
	}
	line(columns)
	align := make([]string, len(idx))
	for k := range idx {
		align[k] = "---"
		if numeric[k] {
			align[k] = "---:"
		}
	}
	line(align)
	for _, r := range rows[1:] {
		cells := make([]string, len(idx))
		for k, i := range idx {
			cells[k] = r[i]
		}
		line(cells)
	}
	return sb.String(), nil
}

var numberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

func isNumber(s string) bool { return numberRE.MatchString(s) }
