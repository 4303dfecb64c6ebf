package parser

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
