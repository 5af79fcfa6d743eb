package workload

import (
	"strings"
	"testing"
	"time"
)

func TestParseRateTraceMinutes(t *testing.T) {
	good := []struct {
		name, in string
		step     time.Duration
		want     []float64
	}{
		{"minute from 0", "# a day\nminute,rate\n0,100.5\n1,200\n2,0\n", time.Minute, []float64{100.5, 200, 0}},
		{"minute from 1, spaced", " Minute , rate \r\n1, 3\r\n\r\n2, 4\r\n", time.Minute, []float64{3, 4}},
		{"second header stays per second", "second,rate\n0,1\n1,2\n", time.Second, []float64{1, 2}},
		{"rate header stays per second", "rate\n1\n2\n", time.Second, []float64{1, 2}},
		{"no header stays per second", "0,1\n1,2\n", time.Second, []float64{1, 2}},
	}
	for _, tc := range good {
		got, err := ParseRateTrace(strings.NewReader(tc.in), "t.csv")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want rates %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != (RatePhase{tc.step, tc.want[i]}) {
				t.Errorf("%s: row %d = %v, want %v at rate %g", tc.name, i, got[i], tc.step, tc.want[i])
			}
		}
	}
	bad := []struct{ in, want string }{
		{"minute,rate\n0,5\n2,6\n", "t.csv:3: minute 2 follows minute 0; minutes must be consecutive"},
		{"minute,rate\n0,5\n0,6\n", "t.csv:3: minute 0 follows minute 0"},
		{"minute,rate\n2,5\n", "t.csv:2: first minute is 2; minutes must start at 0 or 1"},
		{"minute,rate\n0.5,5\n", "t.csv:2: minute \"0.5\" is not an integer"},
		{"minute,rate\n5\n", "t.csv:2: 1 column under a minute header; want minute,rate"},
		{"minute\n5\n", "t.csv:2: 1 column under a minute header"},
		{"minute,rate\n0,5,6\n", "t.csv:2: 3 columns"},
		{"minute,rate\n,5\n", "t.csv:2: empty minute column"},
		{"minute,rate\n0,-1\n", "t.csv:2: rate -1 is negative"},
		{"minute,rate\n", "t.csv: no rates"},
		{"5\nminute,rate\n", "t.csv:2: 2 columns, but earlier rows have 1"}, // a header only on the first line
	}
	for _, tc := range bad {
		_, err := ParseRateTrace(strings.NewReader(tc.in), "t.csv")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}
