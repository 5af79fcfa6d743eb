package scheduler

import (
	"math"
	"testing"
	"time"
)

func TestTimeArithmeticSaturates(t *testing.T) {
	cases := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"Never-now", Never.Sub(Time(time.Second)), time.Duration(math.MaxInt64) - time.Second},
		{"Never-Past", Never.Sub(Past), time.Duration(math.MaxInt64)},
		{"Past-now", Past.Sub(Time(time.Second)), time.Duration(math.MinInt64)},
		{"now-Past", Time(time.Second).Sub(Past), time.Duration(math.MaxInt64)},
		{"now-Never", Time(time.Second).Sub(Never), time.Second - time.Duration(math.MaxInt64)},
		{"plain", Time(3 * time.Second).Sub(Time(time.Second)), 2 * time.Second},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if got := Never.Add(time.Hour); got != Never {
		t.Errorf("Never+1h = %v", got)
	}
	if got := Time(math.MaxInt64 - 5).Add(time.Hour); got != Never {
		t.Errorf("near-max + 1h = %v, want Never", got)
	}
	if got := Time(math.MinInt64 + 5).Add(-time.Hour); got != Past {
		t.Errorf("near-min - 1h = %v, want Past", got)
	}
}
