package replay

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// ParseDateTime reads --to-datetime as Apache Kafka's tool does
// (Utils.getDateTime: java.text.SimpleDateFormat, strict, with the pattern
// yyyy-MM-dd'T'HH:mm:ss.SSSXXX and then yyyy-MM-dd'T'HH:mm:ss.SSSX; "Z"
// appended when the part after the first 'T' has no '+', '-' or 'Z').
// Every string Apache's parser accepts means the same instant here, with
// its surprises:
//
//   - the fraction is a count of milliseconds, not a decimal fraction:
//     ".5" is 5 ms and ".50" is 50 ms;
//   - fields need not be padded ("2026-1-2T3:4:5.6");
//   - "+0530" is read as "+05" with "30" ignored, as is anything after the
//     zone;
//   - dates before 1582-10-15 are in the Julian calendar.
//
// The note, when not empty, says which of these surprises applied, so a
// caller can warn.
//
// As a documented extension, a string Apache's parser refuses is accepted
// when it is RFC 3339 (e.g. 2026-11-29T12:00:00Z, without milliseconds).
func ParseDateTime(s string) (t time.Time, note string, err error) {
	if ms, note, ok := apacheDateTime(s); ok {
		return time.UnixMilli(ms).UTC(), note, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, "", nil
	}
	if _, _, ok := strings.Cut(s, "T"); !ok {
		return time.Time{}, "", fmt.Errorf("--to-datetime %q: it does not contain a 'T' according to ISO8601 format (want yyyy-MM-ddTHH:mm:ss.SSS[zone])", s)
	}
	return time.Time{}, "", fmt.Errorf("--to-datetime %q: want yyyy-MM-ddTHH:mm:ss.SSS with an optional zone (Z, ±HH, ±HH:mm), e.g. 2026-11-29T12:00:00.000+01:00, or RFC 3339", s)
}

// apacheDateTime is Utils.getDateTime: the epoch milliseconds, or !ok
// where it throws.
func apacheDateTime(s string) (ms int64, note string, ok bool) {
	// String.split("T") drops trailing empty strings.
	parts := strings.Split(s, "T")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) < 2 {
		return 0, "", false
	}
	if !strings.ContainsAny(parts[1], "+-Z") {
		s += "Z"
	}
	if f, ok := parseSimpleDateFormat(s, true); ok {
		if ms, ok := f.epochMilli(); ok {
			return ms, f.note(), true
		}
	}
	if f, ok := parseSimpleDateFormat(s, false); ok {
		if ms, ok := f.epochMilli(); ok {
			return ms, f.note(), true
		}
	}
	return 0, "", false
}

// dateFields are the fields SimpleDateFormat collected, before the
// calendar checks them.
type dateFields struct {
	year, month, day, hour, minute, second, milli int32
	offsetMinutes                                 int32
	fracDigits                                    int    // digits in the millisecond field
	zone                                          string // the zone text consumed
	rest                                          string // the text after the zone, ignored
}

func (f dateFields) note() string {
	var notes []string
	if f.fracDigits > 0 && f.fracDigits < 3 {
		notes = append(notes, fmt.Sprintf("the fraction of a second is a count of milliseconds: %d ms", f.milli))
	}
	if f.rest != "" {
		notes = append(notes, fmt.Sprintf("%q after the zone %s is ignored", f.rest, f.zone))
	}
	if f.year < 1582 || f.year == 1582 && (f.month < 10 || f.month == 10 && f.day < 15) {
		notes = append(notes, "the date is in the Julian calendar")
	}
	if len(notes) == 0 {
		return ""
	}
	return "read as Apache's tool reads it: " + strings.Join(notes, "; ")
}

// parseSimpleDateFormat follows SimpleDateFormat.parse for
// yyyy-MM-dd'T'HH:mm:ss.SSS and the zone letters XXX (isoColon) or X: a
// numeric field skips leading spaces and tabs and takes what
// DecimalFormat.parse takes (an optional '-', digits, an optional exponent
// "E[-]digits"); literals match exactly; text after the zone is left
// unread.
func parseSimpleDateFormat(s string, isoColon bool) (dateFields, bool) {
	var f dateFields
	pos := 0
	num := func(dst *int32) bool {
		for pos < len(s) && (s[pos] == ' ' || s[pos] == '\t') {
			pos++
		}
		if pos >= len(s) {
			return false
		}
		v, n, ok := javaParseInt(s[pos:])
		if !ok {
			return false
		}
		*dst = v
		pos += n
		return true
	}
	lit := func(c byte) bool {
		if pos < len(s) && s[pos] == c {
			pos++
			return true
		}
		return false
	}
	if !(num(&f.year) && lit('-') && num(&f.month) && lit('-') && num(&f.day) && lit('T') &&
		num(&f.hour) && lit(':') && num(&f.minute) && lit(':') && num(&f.second) && lit('.')) {
		return f, false
	}
	start := pos
	if !num(&f.milli) {
		return f, false
	}
	f.fracDigits = len(strings.TrimLeft(s[start:pos], " \t"))
	for pos < len(s) && (s[pos] == ' ' || s[pos] == '\t') {
		pos++
	}
	if pos >= len(s) {
		return f, false
	}
	zoneStart := pos
	switch s[pos] {
	case 'Z':
		pos++
	case '+', '-':
		sign := int32(1)
		if s[pos] == '-' {
			sign = -1
		}
		pos++
		digit := func() (int32, bool) {
			if pos < len(s) && s[pos] >= '0' && s[pos] <= '9' {
				pos++
				return int32(s[pos-1] - '0'), true
			}
			return 0, false
		}
		h1, ok1 := digit()
		h2, ok2 := digit()
		if !ok1 || !ok2 || h1*10+h2 > 23 {
			return f, false
		}
		minutes := int32(0)
		if isoColon {
			if !lit(':') {
				return f, false
			}
			m1, ok1 := digit()
			m2, ok2 := digit()
			if !ok1 || !ok2 || m1*10+m2 > 59 {
				return f, false
			}
			minutes = m1*10 + m2
		}
		f.offsetMinutes = sign * ((h1*10+h2)*60 + minutes)
	default:
		return f, false
	}
	f.zone, f.rest = s[zoneStart:pos], s[pos:]
	return f, true
}

// epochMilli applies GregorianCalendar's strict checks (every field in its
// range, the day in its month, no day of the 1582 cutover gap, the zone
// offset within -13h..+14h) and returns the instant.
func (f dateFields) epochMilli() (int64, bool) {
	if f.year < 1 || f.month < 1 || f.month > 12 || f.day < 1 || f.hour < 0 || f.hour > 23 ||
		f.minute < 0 || f.minute > 59 || f.second < 0 || f.second > 59 || f.milli < 0 || f.milli > 999 ||
		f.offsetMinutes < -13*60 || f.offsetMinutes > 14*60 {
		return 0, false
	}
	y, m, d := int64(f.year), int64(f.month), int64(f.day)
	julian := y < 1582 || y == 1582 && (m < 10 || m == 10 && d < 15)
	if julian && y == 1582 && m == 10 && d > 4 {
		return 0, false // the days the Gregorian reform skipped
	}
	if d > int64(daysIn(f.year, f.month, julian)) {
		return 0, false
	}
	a := (14 - m) / 12
	yy := y + 4800 - a
	mm := m + 12*a - 3
	jdn := d + (153*mm+2)/5 + 365*yy + yy/4 - 32083
	if !julian {
		jdn = d + (153*mm+2)/5 + 365*yy + yy/4 - yy/100 + yy/400 - 32045
	}
	const unixEpochJDN = 2440588
	ms := new(big.Int).SetInt64(jdn - unixEpochJDN)
	ms.Mul(ms, big.NewInt(86_400_000))
	ms.Add(ms, big.NewInt(int64(f.hour)*3_600_000+int64(f.minute)*60_000+int64(f.second)*1000+int64(f.milli)-int64(f.offsetMinutes)*60_000))
	if !ms.IsInt64() {
		return 0, false
	}
	return ms.Int64(), true
}

func daysIn(year, month int32, julian bool) int32 {
	switch month {
	case 2:
		leap := year%4 == 0
		if !julian {
			leap = leap && (year%100 != 0 || year%400 == 0)
		}
		if leap {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// javaParseInt reads a number at the start of s as DecimalFormat.parse does
// for SimpleDateFormat (integer only, no grouping, exponent allowed) and
// converts it with Number.intValue: a long wraps to 32 bits, anything else
// (a fraction, a value beyond a long, minus zero) is a double and
// saturates. It returns the value and the bytes consumed.
func javaParseInt(s string) (int32, int, bool) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	startDigits := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == startDigits {
		return 0, 0, false
	}
	mantissa, _ := new(big.Int).SetString(s[startDigits:i], 10)
	exp := int64(0)
	if i < len(s) && s[i] == 'E' {
		j := i + 1
		eneg := false
		if j < len(s) && s[j] == '-' {
			eneg = true
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			e, ok := new(big.Int).SetString(s[j:k], 10)
			if ok && e.IsInt64() && e.Int64() < 1<<20 {
				exp = e.Int64()
			} else {
				exp = 1 << 20
			}
			if eneg {
				exp = -exp
			}
			i = k
		}
	}
	v := new(big.Rat).SetInt(mantissa)
	if exp != 0 {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(absInt64(exp)), nil)
		if exp > 0 {
			v.Mul(v, new(big.Rat).SetInt(p))
		} else {
			v.Quo(v, new(big.Rat).SetInt(p))
		}
	}
	if neg {
		v.Neg(v)
	}
	if v.IsInt() && v.Num().IsInt64() && !(neg && v.Sign() == 0) {
		return int32(v.Num().Int64()), i, true // Long.intValue
	}
	fl, _ := v.Float64()
	return javaDoubleToInt(fl), i, true
}

func javaDoubleToInt(f float64) int32 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	case f <= math.MinInt32:
		return math.MinInt32
	}
	return int32(f)
}

func absInt64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
