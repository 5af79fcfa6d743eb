package lpsolve

import (
	"math"
	"strings"
	"testing"
)

const cbcSample = `Stopped on time - objective value 1.15476063
      0 dR              0.11830203                       0
      1 dS                 2.71                 0.38387356
**    2 x_0_0                    1                       0
      5 x_1_1                    1                       0
      9 x_2_0          0.999999999                       0
`

const glpkSampleSol = `c Problem:
c Status:     INTEGER OPTIMAL
s mip 3 4 o 0.5
i 1 1
i 2 1
i 3 1
j 1 0.5
j 2 1
j 3 0
j 4 1
e o f
`

const glpkSampleModel = `c Problem:
p mip min 3 4 10
n z obj
n i 1 assign_0
n j 1 dR
n j 2 x_0_0
n j 3 x_0_1
n j 4 x_1_1
`

func TestParseCBC(t *testing.T) {
	s, err := ParseCBC([]byte(cbcSample))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != Feasible || s.Objective != 1.15476063 {
		t.Fatalf("status %v objective %v", s.Status, s.Objective)
	}
	// "**" marks a value outside its bounds; it is read all the same.
	for name, want := range map[string]float64{"dR": 0.11830203, "dS": 2.71, "x_0_0": 1, "x_1_1": 1, "x_2_0": 0.999999999, "x_0_1": 0} {
		if got := s.Value(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for head, want := range map[string]Status{
		"Optimal - objective value 0.5":                                               Optimal,
		"Infeasible - objective value 0":                                              Infeasible,
		"Integer infeasible - objective value 0.5":                                    Infeasible,
		"Stopped on time (no integer solution - continuous used) - objective value 0": NoSolution,
	} {
		s, err := ParseCBC([]byte(head + "\n"))
		if err != nil || s.Status != want {
			t.Errorf("%q: status %v, %v; want %v", head, s, err, want)
		}
	}
	for _, bad := range []string{
		"",
		"Optimal\n",
		"Feeling lucky - objective value 3\n",
		"Optimal - objective value NaN\n",
		"Optimal - objective value 1\n 0 x_0_0\n",
		"Optimal - objective value 1\n z x_0_0 1 0\n",
		"Optimal - objective value 1\n 0 x_0_0 one 0\n",
		"Optimal - objective value 1\n 0 x_0_0 1 0\n 1 x_0_0 1 0\n",
		"Optimal - objective value 1\n 0 x_0_0 Inf 0\n",
	} {
		if _, err := ParseCBC([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseGLPK(t *testing.T) {
	s, err := ParseGLPK([]byte(glpkSampleSol), []byte(glpkSampleModel))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != Optimal || s.Objective != 0.5 || s.Value("dR") != 0.5 || s.Value("x_0_0") != 1 || s.Value("x_0_1") != 0 || s.Value("x_1_1") != 1 {
		t.Fatalf("got %+v", s)
	}
	for _, bad := range [][2]string{
		{"", glpkSampleModel},
		{glpkSampleSol, ""},
		{strings.Replace(glpkSampleSol, "e o f", "", 1), glpkSampleModel},              // truncated
		{strings.Replace(glpkSampleSol, "s mip 3 4", "s mip 3 5", 1), glpkSampleModel}, // column count
		{strings.Replace(glpkSampleSol, " o 0.5", " x 0.5", 1), glpkSampleModel},       // status
		{strings.Replace(glpkSampleSol, "j 4 1", "j 5 1", 1), glpkSampleModel},         // column range
		{strings.Replace(glpkSampleSol, "j 4 1", "j 3 1", 1), glpkSampleModel},         // repeated
		{strings.Replace(glpkSampleSol, "j 4 1\n", "", 1), glpkSampleModel},            // missing
		{glpkSampleSol + "j 1 0\n", glpkSampleModel},                                   // after the end
		{glpkSampleSol, strings.Replace(glpkSampleModel, "n j 4 x_1_1\n", "", 1)},      // unnamed column
		{glpkSampleSol, strings.Replace(glpkSampleModel, "p mip", "q mip", 1)},         // no problem line
	} {
		if _, err := ParseGLPK([]byte(bad[0]), []byte(bad[1])); err == nil {
			t.Errorf("accepted solution %q with model %q", bad[0], bad[1])
		}
	}
	s, err = ParseGLPK([]byte("s mip 3 4 n 0\ne o f\n"), []byte(glpkSampleModel))
	if err != nil || s.Status != Infeasible {
		t.Fatalf("infeasible: %+v, %v", s, err)
	}
}

func FuzzParseCBC(f *testing.F) {
	f.Add([]byte(cbcSample))
	f.Add([]byte("Optimal - objective value 0\n 0 x_0_0 1 0\n"))
	f.Add([]byte("Infeasible - objective value 0.00000000\n"))
	f.Add([]byte("Optimal - objective value Inf\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseCBC(data)
		if err != nil {
			return
		}
		if s == nil || s.Values == nil {
			t.Fatal("nil solution without an error")
		}
		if s.Status.HasValues() && math.IsInf(s.Objective, 0) {
			t.Fatalf("an infinite objective accepted for a %v solution", s.Status)
		}
		for name, v := range s.Values {
			if v != v || v > 1e308 || v < -1e308 {
				t.Fatalf("%s = %v accepted", name, v)
			}
		}
	})
}

func FuzzParseGLPK(f *testing.F) {
	f.Add([]byte(glpkSampleSol), []byte(glpkSampleModel))
	f.Add([]byte("s mip 3 4 n 0\ne o f\n"), []byte(glpkSampleModel))
	f.Fuzz(func(t *testing.T, sol, model []byte) {
		s, err := ParseGLPK(sol, model)
		if err != nil {
			return
		}
		if s == nil || s.Values == nil {
			t.Fatal("nil solution without an error")
		}
		if s.Status.HasValues() {
			if math.IsInf(s.Objective, 0) {
				t.Fatalf("an infinite objective accepted for a %v solution", s.Status)
			}
			// Every column the model names has its value (a name's text
			// inside a comment is no column).
			if names, err := parseGLPKNames(model); err == nil && len(s.Values) < len(names) {
				t.Fatalf("a solution with %d values for %d named columns", len(s.Values), len(names))
			}
		}
	})
}
