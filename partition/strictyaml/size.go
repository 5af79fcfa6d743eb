package strictyaml

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the IEC units sizes accept. SI units (MB, GB) are refused
// rather than guessed, because GPU memory is quoted both ways and a 7%
// error in placement is worse than an error message.
var sizeUnits = []struct {
	name  string
	shift uint
}{{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"PiB", 50}}

var errNotSize = errors.New("is not a size (want a number with an IEC unit such as 170MiB or 40GiB)")

// ParseSize parses a byte count: a plain non-negative integer, or a decimal
// number with an IEC unit (B, KiB, MiB, GiB, TiB, PiB; case-insensitive),
// rounded to whole bytes. It is the size syntax of every input file,
// exported so that flags can share it. Its errors complete a sentence that
// starts with the quoted input ("12GB" has unknown unit "GB" ...).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		return 0, errors.New("is negative; a size must be at least 0")
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	if num == "" {
		return 0, errNotSize
	}
	shift := uint(0)
	if unit != "" {
		found := false
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				shift, found = u.shift, true
				break
			}
		}
		if !found {
			return 0, errors.New("has unknown unit " + strconv.Quote(unit) + " (want B, KiB, MiB, GiB, TiB or PiB)")
		}
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v > math.MaxInt64>>shift {
			return 0, errors.New("is too large")
		}
		return v << shift, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, errNotSize
	}
	f = math.Round(math.Ldexp(f, int(shift)))
	if !(f < math.MaxInt64) {
		return 0, errors.New("is too large")
	}
	return int64(f), nil
}

// FormatSize renders bytes in the largest IEC unit that keeps at least one
// whole unit, with up to two decimals (170MiB, 10.5GiB), the way input
// files write them, so that reports read like their input.
func FormatSize(b int64) string {
	if b < 0 {
		if b == math.MinInt64 {
			b++ // -MinInt64 overflows; one byte is below the precision shown.
		}
		return "-" + FormatSize(-b)
	}
	for i := len(sizeUnits) - 1; i > 0; i-- {
		u := sizeUnits[i]
		if b >= 1<<u.shift {
			s := strconv.FormatFloat(math.Ldexp(float64(b), -int(u.shift)), 'f', 2, 64)
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
			return s + u.name
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}
