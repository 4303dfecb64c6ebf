package parser

import (
	"fmt"
	"strings"
	"time"
)

// Time parsing by hand: time.Parse allocates (and a FixedZone per line would too),
// and a busy log repeats the same second on thousands of consecutive lines, which
// the per-Parser cache in format.go exploits.

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian date
// (Howard Hinnant's algorithm; exact for every representable year).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

func validDate(y, m, d int) bool {
	if m < 1 || m > 12 || d < 1 || d > daysIn[m] {
		return false
	}
	if m == 2 && d == 29 {
		return y%4 == 0 && (y%100 != 0 || y%400 == 0)
	}
	return true
}

// digits reads n ASCII digits at b[i:]; ok is false on anything else.
func digits(b []byte, i, n int) (v int, ok bool) {
	if i+n > len(b) {
		return 0, false
	}
	for _, c := range b[i : i+n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// month parses an English three-letter month abbreviation, case as logged.
func month(b []byte) int {
	if len(b) < 3 {
		return 0
	}
	switch string(b[:3]) { // no allocation: the compiler turns this into comparisons
	case "Jan":
		return 1
	case "Feb":
		return 2
	case "Mar":
		return 3
	case "Apr":
		return 4
	case "May":
		return 5
	case "Jun":
		return 6
	case "Jul":
		return 7
	case "Aug":
		return 8
	case "Sep":
		return 9
	case "Oct":
		return 10
	case "Nov":
		return 11
	case "Dec":
		return 12
	}
	return 0
}

// clock parses "15:04:05" at b[i:].
func clock(b []byte, i int) (secs int64, ok bool) {
	if i+8 > len(b) || b[i+2] != ':' || b[i+5] != ':' {
		return 0, false
	}
	hh, ok1 := digits(b, i, 2)
	mm, ok2 := digits(b, i+3, 2)
	ss, ok3 := digits(b, i+6, 2)
	// 60 is a leap second as some loggers write it; it folds into the next second.
	if !ok1 || !ok2 || !ok3 || hh > 23 || mm > 59 || ss > 60 {
		return 0, false
	}
	return int64(hh*3600 + mm*60 + ss), true
}

// zone parses "+0200", "-07:00" or "Z" at b[i:] and returns seconds east of UTC
// and the bytes consumed.
func zone(b []byte, i int, colon bool) (off int32, n int, ok bool) {
	if i < len(b) && b[i] == 'Z' {
		return 0, 1, true
	}
	if i >= len(b) || (b[i] != '+' && b[i] != '-') {
		return 0, 0, false
	}
	hh, ok1 := digits(b, i+1, 2)
	j := i + 3
	if colon {
		if j >= len(b) || b[j] != ':' {
			return 0, 0, false
		}
		j++
	}
	mm, ok2 := digits(b, j, 2)
	if !ok1 || !ok2 || hh > 23 || mm > 59 {
		return 0, 0, false
	}
	off = int32(hh*3600 + mm*60)
	if b[i] == '-' {
		off = -off
	}
	return off, j + 2 - i, true
}

// parseTimeLocal parses nginx $time_local / Apache %t: "10/Oct/2000:13:55:36 -0700".
func parseTimeLocal(b []byte, h *Hit) bool {
	if len(b) != 26 || b[2] != '/' || b[6] != '/' || b[11] != ':' || b[20] != ' ' {
		return false
	}
	d, ok1 := digits(b, 0, 2)
	m := month(b[3:6])
	y, ok2 := digits(b, 7, 4)
	secs, ok3 := clock(b, 12)
	off, n, ok4 := zone(b, 21, false)
	if !ok1 || !ok2 || !ok3 || !ok4 || n != 5 || !validDate(y, m, d) {
		return false
	}
	h.Unix = daysFromCivil(y, m, d)*86400 + secs - int64(off)
	h.ZoneOffset = off
	return true
}

// parseISO8601 parses nginx $time_iso8601 ("2000-10-10T13:55:36-07:00") and the
// common variants with a fraction or Z.
func parseISO8601(b []byte, h *Hit) bool {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != ' ') {
		return false
	}
	y, ok1 := digits(b, 0, 4)
	m, ok2 := digits(b, 5, 2)
	d, ok3 := digits(b, 8, 2)
	secs, ok4 := clock(b, 11)
	if !ok1 || !ok2 || !ok3 || !ok4 || !validDate(y, m, d) {
		return false
	}
	i := 19
	var nanos int32
	if b[i] == '.' || b[i] == ',' {
		i++
		scale := int32(100_000_000)
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			nanos += int32(b[i]-'0') * scale
			scale /= 10
			i++
		}
		if i == start {
			return false
		}
	}
	off, n, ok := zone(b, i, true)
	if !ok || i+n != len(b) {
		return false
	}
	h.Unix = daysFromCivil(y, m, d)*86400 + secs - int64(off)
	h.Nanos = nanos
	h.ZoneOffset = off
	return true
}

// parseMsec parses nginx $msec: seconds since the epoch with a millisecond fraction.
func parseMsec(b []byte, h *Hit) bool {
	var secs int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i >= 12 {
			return false
		}
		secs = secs*10 + int64(b[i]-'0')
	}
	if i == 0 {
		return false
	}
	var nanos int32
	if i < len(b) && b[i] == '.' {
		i++
		scale := int32(100_000_000)
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			nanos += int32(b[i]-'0') * scale
			scale /= 10
		}
	}
	if i != len(b) {
		return false
	}
	h.Unix, h.Nanos, h.ZoneOffset = secs, nanos, 0
	return true
}

// timeParts collects a time an Apache format writes in pieces
// (%{%d/%b/%Y %T}t.%{msec_frac}t %{%z}t, or one strftime layout without a
// zone) until the line's last token; finish turns them into the hit's time.
type timeParts struct {
	year, month, day  int
	hour, minute, sec int
	date, clock       bool
	hour12, pm        bool
	off               int32
	zone              bool
	epoch             int64
	epochNanos        int32
	hasEpoch          bool
	frac              int32
	hasFrac           bool
}

// finish sets h's time from the parts; a time without a zone is in loc.
func (tp *timeParts) finish(h *Hit, loc *time.Location) error {
	switch {
	case tp.hasEpoch:
		h.Unix, h.Nanos, h.ZoneOffset = tp.epoch, tp.epochNanos, 0
		if tp.zone {
			h.ZoneOffset = tp.off
		}
	case tp.date:
		if !validDate(tp.year, tp.month, tp.day) {
			return errAt("time", 0, "no such date")
		}
		hour := tp.hour
		if tp.hour12 {
			hour %= 12
			if tp.pm {
				hour += 12
			}
		}
		secs := int64(hour*3600 + tp.minute*60 + tp.sec)
		off := tp.off
		if !tp.zone {
			off = zoneOffset(loc, tp.year, tp.month, tp.day, hour, tp.minute, tp.sec)
		}
		h.Unix = daysFromCivil(tp.year, tp.month, tp.day)*86400 + secs - int64(off)
		h.Nanos, h.ZoneOffset = 0, off
	case h.Has&HasTime != 0: // %t with a fraction of a second beside it
	default:
		return errAt("time", 0, "the time fields hold no date")
	}
	if tp.hasFrac {
		h.Nanos = tp.frac
	}
	h.Has |= HasTime
	return nil
}

// zoneOffset is loc's offset east of UTC at a wall time in loc.
func zoneOffset(loc *time.Location, y, m, d, hh, mm, ss int) int32 {
	if loc == time.UTC {
		return 0
	}
	_, off := time.Date(y, time.Month(m), d, hh, mm, ss, 0, loc).Zone()
	return int32(off)
}

// layout is a compiled strftime format (Apache's %{format}t): each item a
// literal byte to match or a conversion to parse.
type layout struct {
	items []layoutItem
	date  bool // it gives a date, so the time is complete with it alone
	epoch bool // %s: seconds since the epoch
}

type layoutItem struct {
	conv byte // a strftime conversion character, or 0 for lit
	lit  byte
}

// compileLayout compiles a strftime format. The C locale's composite
// conversions are expanded; what a log would not hold (week numbers, ISO
// week years, locale alternatives) is refused.
func compileLayout(f string) (*layout, error) {
	l := &layout{}
	if err := l.add(f); err != nil {
		return nil, err
	}
	has := func(cs string) bool {
		for _, it := range l.items {
			if it.conv != 0 && strings.IndexByte(cs, it.conv) >= 0 {
				return true
			}
		}
		return false
	}
	l.epoch = has("s")
	l.date = has("Yy") && has("mbhB") && has("de")
	if !l.epoch && !l.date && has("YymbhBde") {
		return nil, fmt.Errorf("%q: a date needs a year (%%Y or %%y), a month (%%m or %%b) and a day (%%d or %%e)", f)
	}
	return l, nil
}

func (l *layout) add(f string) error {
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			l.items = append(l.items, layoutItem{lit: f[i]})
			continue
		}
		i++
		if i == len(f) {
			return fmt.Errorf("%q ends with a lone %%", f)
		}
		c := f[i]
		// %E and %O are locale modifiers; the C locale ignores them.
		if (c == 'E' || c == 'O') && i+1 < len(f) {
			i++
			c = f[i]
		}
		var err error
		switch c {
		case 'Y', 'y', 'm', 'd', 'e', 'H', 'k', 'I', 'l', 'M', 'S', 'p', 'b', 'h', 'B', 'a', 'A', 'z', 'Z', 's', 'u', 'w':
			l.items = append(l.items, layoutItem{conv: c})
		case '%':
			l.items = append(l.items, layoutItem{lit: '%'})
		case 'n', 't':
			l.items = append(l.items, layoutItem{conv: 'n'})
		case 'T', 'X':
			err = l.add("%H:%M:%S")
		case 'R':
			err = l.add("%H:%M")
		case 'D', 'x':
			err = l.add("%m/%d/%y")
		case 'F':
			err = l.add("%Y-%m-%d")
		case 'r':
			err = l.add("%I:%M:%S %p")
		case 'c':
			err = l.add("%a %b %e %H:%M:%S %Y")
		default:
			return fmt.Errorf("%q: strftime %%%c is not supported in a log time", f, c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var monthNames = [...]string{"january", "february", "march", "april", "may", "june", "july",
	"august", "september", "october", "november", "december"}

// parse reads the layout at the start of b into tp and returns the bytes it
// took; an error is a *valueError at an offset in b.
func (l *layout) parse(b []byte, tp *timeParts) (int, error) {
	i := 0
	num := func(width int, pad bool, lo, hi int) (int, error) {
		if pad && i < len(b) && b[i] == ' ' { // %e, %k, %l pad with a space
			v, ok := digits(b, i+1, width-1)
			if !ok || v < lo || v > hi {
				return 0, bad(i, "not a time in the expected form")
			}
			i += width
			return v, nil
		}
		v, ok := digits(b, i, width)
		if !ok || v < lo || v > hi {
			return 0, bad(i, "not a time in the expected form")
		}
		i += width
		return v, nil
	}
	var err error
	for _, it := range l.items {
		if it.conv == 0 {
			if i >= len(b) || b[i] != it.lit {
				return 0, bad(i, fmt.Sprintf("expected %q in the time", it.lit))
			}
			i++
			continue
		}
		switch it.conv {
		case 'Y':
			tp.year, err = num(4, false, 0, 9999)
			tp.date = true
		case 'y':
			var y int
			y, err = num(2, false, 0, 99)
			if y < 69 { // POSIX: 69-99 are 1969-1999, 00-68 are 2000-2068
				y += 2000
			} else {
				y += 1900
			}
			tp.year, tp.date = y, true
		case 'm':
			tp.month, err = num(2, false, 1, 12)
		case 'd':
			tp.day, err = num(2, false, 1, 31)
		case 'e':
			tp.day, err = num(2, true, 1, 31)
		case 'H':
			tp.hour, err = num(2, false, 0, 23)
			tp.clock = true
		case 'k':
			tp.hour, err = num(2, true, 0, 23)
			tp.clock = true
		case 'I':
			tp.hour, err = num(2, false, 1, 12)
			tp.clock, tp.hour12 = true, true
		case 'l':
			tp.hour, err = num(2, true, 1, 12)
			tp.clock, tp.hour12 = true, true
		case 'M':
			tp.minute, err = num(2, false, 0, 59)
		case 'S':
			tp.sec, err = num(2, false, 0, 60)
		case 'p':
			if i+2 > len(b) || (b[i+1] != 'M' && b[i+1] != 'm') {
				return 0, bad(i, "expected AM or PM")
			}
			switch b[i] {
			case 'A', 'a':
				tp.pm = false
			case 'P', 'p':
				tp.pm = true
			default:
				return 0, bad(i, "expected AM or PM")
			}
			i += 2
		case 'b', 'h':
			m := month(b[i:])
			if m == 0 {
				return 0, bad(i, "expected a month such as Jan")
			}
			tp.month = m
			i += 3
		case 'B':
			m := 0
			for k, name := range monthNames {
				if len(b)-i >= len(name) && strings.EqualFold(string(b[i:i+len(name)]), name) {
					m = k + 1
					i += len(name)
					break
				}
			}
			if m == 0 {
				return 0, bad(i, "expected a month such as January")
			}
			tp.month = m
		case 'a', 'A':
			// The weekday follows from the date; take the letters.
			j := i
			for j < len(b) && (b[j] >= 'a' && b[j] <= 'z' || b[j] >= 'A' && b[j] <= 'Z') {
				j++
			}
			if j == i || it.conv == 'a' && j-i != 3 {
				return 0, bad(i, "expected a weekday")
			}
			i = j
		case 'u', 'w':
			if _, err = num(1, false, 0, 7); err != nil {
				return 0, err
			}
		case 'z':
			off, n, ok := zone(b, i, false)
			if !ok {
				off, n, ok = zone(b, i, true) // +01:00, as some strftimes write %z
			}
			if !ok {
				return 0, bad(i, "expected a zone such as +0100")
			}
			tp.off, tp.zone = off, true
			i += n
		case 'Z':
			j := i
			for j < len(b) && (b[j] >= 'A' && b[j] <= 'Z' || b[j] >= 'a' && b[j] <= 'z') {
				j++
			}
			if j == i {
				return 0, bad(i, "expected a zone name")
			}
			switch string(b[i:j]) {
			case "UTC", "GMT", "Z", "UT":
				tp.off, tp.zone = 0, true
			}
			// Other abbreviations are ambiguous (CST, IST); the parser's
			// Location says where the server is.
			i = j
		case 's':
			j := i
			var s int64
			for j < len(b) && b[j] >= '0' && b[j] <= '9' && j-i < 18 {
				s = s*10 + int64(b[j]-'0')
				j++
			}
			if j == i {
				return 0, bad(i, "expected seconds since 1970")
			}
			tp.epoch, tp.epochNanos, tp.hasEpoch = s, 0, true
			i = j
		case 'n':
			if i >= len(b) || (b[i] != ' ' && b[i] != '\t') {
				return 0, bad(i, "expected a space in the time")
			}
			i++
		}
		if err != nil {
			return 0, err
		}
	}
	if l.date && !validDate(tp.year, tp.month, tp.day) {
		return 0, bad(0, "no such date")
	}
	return i, nil
}
