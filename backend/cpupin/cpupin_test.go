package cpupin

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  string
	}{
		{in: "1", want: []int{1}},
		{in: "3,1", want: []int{3, 1}},
		{in: "0,2-4", want: []int{0, 2, 3, 4}},
		{in: " 5 , 6", want: []int{5, 6}},
		{in: "", err: "not a CPU number"},
		{in: "1,", err: "not a CPU number"},
		{in: "-1", err: "not a CPU number"},
		{in: "x", err: "not a CPU number"},
		{in: "4-2", err: "runs backwards"},
		{in: "1,0-2", err: "CPU 1 given twice"},
		{in: "1024", err: "not a CPU number"},
	} {
		got, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// FuzzParse: any string is a list of distinct CPUs in range, or an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "0,2-4", "4-2", "1,1", "0-1023", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := Parse(s)
		if err != nil {
			return
		}
		if len(cpus) == 0 {
			t.Fatalf("Parse(%q): no CPUs and no error", s)
		}
		seen := map[int]bool{}
		for _, c := range cpus {
			if c < 0 || c > MaxCPU || seen[c] {
				t.Fatalf("Parse(%q) = %v: CPU %d out of range or repeated", s, cpus, c)
			}
			seen[c] = true
		}
	})
}
