package parser

import (
	"bytes"
	"strconv"
	"strings"
)

// Formats whose header lines name the columns of the lines after them:
//
//   - w3c: the W3C extended log file format (https://www.w3.org/TR/WD-logfile.html)
//     as IIS writes it: "#Software:", "#Version:", "#Date:" and "#Fields:" lines,
//     then space-separated fields, "-" for an empty one, '+' for a space in the
//     user agent, date and time in UTC (or Options.Location for a writer that
//     logs local time), time-taken in milliseconds (IIS; a value with a decimal
//     point is read as the W3C draft's seconds). The draft separates fields
//     with whitespace and writes "-" for an empty one, so a run of spaces or
//     tabs is one separator (Oracle Web Cache pads its columns). A
//     "#GMT-Offset: -0800" header (Oracle Web Cache) says the times below it
//     are local at that offset.
//   - cloudfront: Amazon CloudFront's standard logs: W3C with tabs between the
//     fields, URL-encoded values, time-taken in seconds.
//   - gcs: Google Cloud Storage usage logs: CSV with every value quoted and a
//     header line naming the columns.
//
// Until a header line is seen the columns are the writer's documented
// defaults; a header line replaces them, for the lines after it. Parse
// returns ErrDirective for a header line; Prime applies one without a Hit.

type colMode uint8

const (
	modeW3C colMode = iota
	modeCloudFront
	modeGCS
)

type column uint8

const (
	cIgnore column = iota
	cDate
	cTime
	cEpochMicros // GCS time_micros
	cClientIP
	cUser
	cMethod
	cURIStem
	cURIQuery
	cURI // path and query
	cStatus
	cBytes
	cTimeTaken   // milliseconds (IIS) or seconds (W3C draft, CloudFront)
	cMicrosTaken // GCS time_taken_micros
	cUserAgent
	cReferer
	cHost       // cs-host, cs(Host), cs_host
	cViewerHost // CloudFront's x-host-header: the Host the viewer sent, which cs(Host) is not
	cProtocol
	cForwardedFor
)

// columnNames maps the field names of a header, lowercased, to columns; any
// other name is a column that is read and ignored.
var columnNames = map[string]column{
	// W3C and CloudFront
	"date": cDate, "time": cTime,
	// IIS Advanced Logging's local date and time, read in sources[].timezone
	// like any time logged without a zone.
	"date-local": cDate, "time-local": cTime,
	"c-ip": cClientIP, "cs-username": cUser, "cs-method": cMethod,
	"cs-uri-stem": cURIStem, "cs-uri-query": cURIQuery, "cs-uri": cURI,
	"sc-status": cStatus, "sc-bytes": cBytes, "time-taken": cTimeTaken,
	"cs(user-agent)": cUserAgent, "cs(referer)": cReferer, "cs(referrer)": cReferer,
	"cs-host": cHost, "cs(host)": cHost, "x-host-header": cViewerHost,
	"cs-version": cProtocol, "cs-protocol-version": cProtocol,
	"x-forwarded-for": cForwardedFor, "cs(x-forwarded-for)": cForwardedFor,
	// Cloud Storage
	"time_micros": cEpochMicros, "c_ip": cClientIP, "cs_method": cMethod,
	"cs_uri": cURI, "sc_status": cStatus, "sc_bytes": cBytes,
	"time_taken_micros": cMicrosTaken, "cs_host": cHost,
	"cs_referer": cReferer, "cs_user_agent": cUserAgent,
}

// The columns a file has before any header line.
const (
	// IIS 7 and later's default field selection.
	iisFields = "date time s-ip cs-method cs-uri-stem cs-uri-query s-port cs-username c-ip cs(User-Agent) cs(Referer) sc-status sc-substatus sc-win32-status time-taken"
	// CloudFront's 33 standard log fields, in their documented order.
	cloudFrontFields = "date time x-edge-location sc-bytes c-ip cs-method cs(Host) cs-uri-stem sc-status cs(Referer) cs(User-Agent) cs-uri-query cs(Cookie) x-edge-result-type x-edge-request-id x-host-header cs-protocol cs-bytes time-taken x-forwarded-for ssl-protocol ssl-cipher x-edge-response-result-type cs-protocol-version fle-status fle-encrypted-fields c-port time-to-first-byte x-edge-detailed-result-type sc-content-type sc-content-len sc-range-start sc-range-end"
	// Cloud Storage usage logs' columns.
	gcsFields = "time_micros c_ip c_ip_type c_ip_region cs_method cs_uri sc_status cs_bytes sc_bytes time_taken_micros cs_host cs_referer cs_user_agent s_request_id cs_operation cs_bucket cs_object"
)

// columns is the state of a Parser of a header-driven format.
type columns struct {
	mode  colMode
	cols  []column
	names []string // as the header wrote them, for errors

	// W3C's "#Date:" directive, for writers whose lines have a time but no
	// date field (the W3C draft's own example).
	hasDate   bool
	y, mo, d  int
	sawFields bool

	// "#GMT-Offset:", in seconds east of UTC: the zone of the times below
	// it, whatever sources[].timezone says.
	hasOffset bool
	offset    int32

	// lastKnown is the index of the last column a Hit keeps: CloudFront's
	// columns after it are only counted, not split.
	lastKnown int
}

func newColumns(mode colMode) *columns {
	c := &columns{mode: mode}
	switch mode {
	case modeW3C:
		c.setFields(iisFields)
	case modeCloudFront:
		c.setFields(cloudFrontFields)
	case modeGCS:
		c.setFields(gcsFields)
	}
	return c
}

func (c *columns) setFields(list string) {
	c.cols, c.names = c.cols[:0], c.names[:0]
	// IIS Advanced Logging may log both the UTC date and time and the
	// local ones: the UTC ones win, whatever their order.
	utc := false
	for _, name := range strings.Fields(list) {
		switch strings.ToLower(name) {
		case "date", "time":
			utc = true
		}
	}
	for _, name := range strings.Fields(list) {
		c.names = append(c.names, name)
		col := columnNames[strings.ToLower(name)]
		if utc && strings.HasSuffix(strings.ToLower(name), "-local") {
			col = cIgnore
		}
		c.cols = append(c.cols, col)
		if c.cols[len(c.cols)-1] != cIgnore {
			c.lastKnown = len(c.cols) - 1
		}
	}
}

// isDirective reports whether line is a header line of the format.
func (c *columns) isDirective(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	if c.mode != modeGCS {
		return line[0] == '#'
	}
	// A data line starts with the quoted time in microseconds; the header
	// with the name of the first column.
	i := 0
	if line[0] == '"' {
		i = 1
	}
	return i < len(line) && (line[i] >= 'a' && line[i] <= 'z' || line[i] >= 'A' && line[i] <= 'Z' || line[i] == '_')
}

// HeaderDirective names the header line's directive when it is one whose
// value a Parser reads, lower-cased: "fields", "date", "start-date" or
// "gmt-offset"; any other line is "". A caller that keeps a file's header
// block (to parse a resumed file as it was first parsed) must keep the last of
// each of these however long the block grows; the rest carry nothing a hit
// needs.
func HeaderDirective(line []byte) string {
	if len(line) == 0 || line[0] != '#' {
		return ""
	}
	name, _, ok := bytes.Cut(line[1:], []byte{':'})
	if !ok {
		return ""
	}
	switch n := strings.ToLower(string(bytes.TrimSpace(name))); n {
	case "fields", "date", "start-date", "gmt-offset":
		return n
	}
	return ""
}

// directive applies a header line: "#Fields:" and "#Date:" for W3C and
// CloudFront (the other directives carry nothing a hit needs), the CSV header
// for Cloud Storage.
func (c *columns) directive(line []byte) {
	if c.mode == modeGCS {
		var b strings.Builder
		for _, f := range bytes.Split(line, []byte{','}) {
			b.Write(bytes.Trim(bytes.TrimSpace(f), `"`))
			b.WriteByte(' ')
		}
		c.setFields(b.String())
		return
	}
	_, value, _ := bytes.Cut(line, []byte{':'})
	switch HeaderDirective(line) {
	case "fields":
		c.setFields(string(value))
		c.sawFields = true
	case "gmt-offset":
		if off, ok := gmtOffset(bytes.TrimSpace(value)); ok {
			c.offset, c.hasOffset = off, true
		}
	case "date", "start-date":
		// "2002-05-02 17:42:15" as IIS writes it, "12-Jan-1996 00:00:00" in
		// the W3C draft.
		v := bytes.TrimSpace(value)
		if sp := bytes.IndexByte(v, ' '); sp > 0 {
			v = v[:sp]
		}
		if y, mo, d, ok := w3cDate(v); ok {
			c.y, c.mo, c.d, c.hasDate = y, mo, d, true
		} else if len(v) == 11 && v[2] == '-' && v[6] == '-' {
			d, ok1 := digits(v, 0, 2)
			y, ok2 := digits(v, 7, 4)
			mo := month(v[3:6])
			if ok1 && ok2 && validDate(y, mo, d) {
				c.y, c.mo, c.d, c.hasDate = y, mo, d, true
			}
		}
	}
}

// gmtOffset parses "-0800" or "+05:30" into seconds east of UTC.
func gmtOffset(v []byte) (int32, bool) {
	if len(v) == 6 && v[3] == ':' {
		v = []byte{v[0], v[1], v[2], v[4], v[5]}
	}
	if len(v) != 5 || v[0] != '+' && v[0] != '-' {
		return 0, false
	}
	hh, ok1 := digits(v, 1, 2)
	mm, ok2 := digits(v, 3, 2)
	if !ok1 || !ok2 || hh > 14 || mm > 59 {
		return 0, false
	}
	off := int32(hh*3600 + mm*60)
	if v[0] == '-' {
		off = -off
	}
	return off, true
}

// w3cDate parses "2002-05-02" (and "2007-4-11", which some IIS-compatible
// writers produce).
func w3cDate(v []byte) (y, mo, d int, ok bool) {
	if len(v) < 8 || len(v) > 10 || v[4] != '-' {
		return 0, 0, 0, false
	}
	y, ok = digits(v, 0, 4)
	if !ok {
		return 0, 0, 0, false
	}
	rest := v[5:]
	i := bytes.IndexByte(rest, '-')
	if i < 1 || i > 2 || len(rest)-i-1 < 1 || len(rest)-i-1 > 2 {
		return 0, 0, 0, false
	}
	mo, ok1 := digits(rest, 0, i)
	d, ok2 := digits(rest, i+1, len(rest)-i-1)
	if !ok1 || !ok2 || !validDate(y, mo, d) {
		return 0, 0, 0, false
	}
	return y, mo, d, true
}

// w3cClock parses "17:42:15" with an optional fraction.
func w3cClock(v []byte) (secs int64, nanos int32, ok bool) {
	if len(v) < 8 {
		return 0, 0, false
	}
	secs, ok = clock(v, 0)
	if !ok {
		return 0, 0, false
	}
	if len(v) == 8 {
		return secs, 0, true
	}
	if v[8] != '.' {
		return 0, 0, false
	}
	nanos, end := fraction(v, 9)
	if end == 9 || end != len(v) {
		return 0, 0, false
	}
	return secs, nanos, true
}

// parseColumns is the line function of w3c, cloudfront and gcs.
func parseColumns(p *Parser, line []byte, h *Hit) error {
	c := p.srv
	// A file saved by a Windows tool as "UTF-8" starts with a byte order
	// mark, before its first header line.
	if len(line) >= 3 && string(line[:3]) == "\ufeff" {
		line = line[3:]
	}
	if c.isDirective(line) {
		p.directive(line)
		return ErrDirective
	}
	var dateV, timeV []byte
	var datePos, timePos int
	viewerHost := false
	tabs := c.mode == modeW3C && bytes.IndexByte(line, '\t') >= 0
	k, pos := 0, 0
	for {
		start := pos
		var v []byte
		var err error
		switch {
		case c.mode == modeGCS:
			v, pos, err = p.csvField(line, pos)
		case c.mode == modeW3C && pos < len(line) && line[pos] == '"':
			v, pos, err = p.w3cString(line, pos)
		case c.mode == modeCloudFront:
			end := len(line)
			if i := bytes.IndexByte(line[pos:], '\t'); i >= 0 {
				end = pos + i
			}
			v, pos = line[start:end], end
		case tabs: // W3C from a writer that separates with tabs, or mixes them
			end := pos
			for end < len(line) && line[end] != ' ' && line[end] != '\t' {
				end++
			}
			v, pos = line[start:end], end
		default: // W3C as IIS writes it: one space between fields
			end := len(line)
			if i := bytes.IndexByte(line[pos:], ' '); i >= 0 {
				end = pos + i
			}
			v, pos = line[start:end], end
		}
		if err != nil {
			return err
		}
		if k >= len(c.cols) {
			// CloudFront ends some lines with a tab: an empty last field
			// (as is a trailing space or comma in the other formats).
			if len(v) == 0 && pos >= len(line) {
				break
			}
			return errAt("line", start, c.countReason(k+1))
		}
		name := c.names[k]
		switch col := c.cols[k]; col {
		case cDate:
			dateV, datePos = v, start
		case cTime:
			timeV, timePos = v, start
		case cViewerHost:
			if len(v) > 0 && !dash(v) {
				h.Host = v
				h.Has |= HasHost
				viewerHost = true
			}
		case cHost:
			if !viewerHost && len(v) > 0 && !dash(v) {
				h.Host = v
				h.Has |= HasHost
			}
		default:
			if err := p.setColumn(col, v, h); err != nil {
				return withColumn(err, name, start)
			}
		}
		k++
		if pos >= len(line) {
			break
		}
		if k > c.lastKnown && c.mode == modeCloudFront {
			// Nothing after here is kept: count the fields in one pass.
			n := k + bytes.Count(line[pos:], []byte{'\t'})
			if n == len(c.cols)+1 && line[len(line)-1] == '\t' {
				n-- // the trailing tab
			}
			if n != len(c.cols) {
				return errAt("line", len(line), c.countReason(n))
			}
			k = n
			break
		}
		pos++ // the separator
		if c.mode == modeW3C {
			// The rest of a run of them; at the end of the line, trailing
			// blanks rather than an empty field.
			for pos < len(line) && (line[pos] == ' ' || line[pos] == '\t') {
				pos++
			}
			if pos >= len(line) {
				break
			}
		}
	}
	if k < len(c.cols) {
		return errAt("line", len(line), c.countReason(k))
	}
	if h.Has&HasTime == 0 {
		if err := p.w3cTime(line, dateV, timeV, datePos, timePos, h); err != nil {
			return err
		}
	}
	return needRequest(h)
}

// countReason says why a line's field count does not fit the columns.
func (c *columns) countReason(n int) string {
	header := "#Fields: header"
	switch {
	case c.mode == modeGCS:
		header = "CSV header"
	case !c.sawFields && c.mode == modeW3C:
		header = "default IIS field list (no #Fields: line seen)"
	case !c.sawFields:
		header = "documented field list (no #Fields: line seen)"
	}
	if n > len(c.cols) {
		return "more fields than the " + header + " names (" + strconv.Itoa(len(c.cols)) + ")"
	}
	fields := " fields"
	if n == 1 {
		fields = " field"
	}
	return "the line has " + strconv.Itoa(n) + fields + "; the " + header + " names " + strconv.Itoa(len(c.cols))
}

// w3cTime sets h's time from the date and time columns.
func (p *Parser) w3cTime(line, dateV, timeV []byte, datePos, timePos int, h *Hit) error {
	c := p.srv
	if timeV == nil || dash(timeV) {
		return errAt("time", 0, "the line has no time (no time column, or it is empty)")
	}
	// Consecutive lines mostly share their second: with the date column just
	// before the time column (one separator, or a padded run of them), both
	// are one key of the time cache.
	var key []byte
	if dateV != nil && blanks(line, datePos+len(dateV), timePos) {
		key = line[datePos : timePos+len(timeV)]
		if p.cachedTime(tkW3C, key, h) {
			return nil
		}
	}
	y, mo, d := c.y, c.mo, c.d
	if dateV != nil {
		var ok bool
		if y, mo, d, ok = w3cDate(dateV); !ok {
			return errAt(c.nameOf(cDate), datePos, "expected a date such as 2002-05-02")
		}
	} else if !c.hasDate {
		return errAt("time", timePos, "a time without a date: no date column and no #Date: line")
	}
	secs, nanos, ok := w3cClock(timeV)
	if !ok {
		return errAt(c.nameOf(cTime), timePos, "expected a time such as 17:42:15")
	}
	if c.hasOffset {
		h.Unix = daysFromCivil(y, mo, d)*86400 + secs - int64(c.offset)
		h.Nanos, h.ZoneOffset = nanos, c.offset
	} else {
		p.setLocalTime(y, mo, d, secs, nanos, h)
	}
	if err := p.storeTime(tkW3C, key, h); err != nil {
		return withColumn(err, "date", datePos)
	}
	return nil
}

// blanks reports whether line[i:j] is a non-empty run of spaces and tabs.
func blanks(line []byte, i, j int) bool {
	if i >= j || j > len(line) {
		return false
	}
	for _, b := range line[i:j] {
		if b != ' ' && b != '\t' {
			return false
		}
	}
	return true
}

func (c *columns) nameOf(col column) string {
	for i, cc := range c.cols {
		if cc == col {
			return c.names[i]
		}
	}
	return "field"
}

// setColumn stores one column's value in h; "-" (and "" in CSV) is absent.
func (p *Parser) setColumn(col column, v []byte, h *Hit) error {
	if len(v) == 0 || dash(v) {
		return nil
	}
	switch col {
	case cEpochMicros:
		if p.cachedTime(tkMicros, v, h) {
			return nil
		}
		if !epoch(v, 6, h) {
			return bad(0, "expected microseconds since 1970")
		}
		return p.storeTime(tkMicros, v, h)
	case cClientIP:
		h.RemoteAddr = v
	case cUser:
		h.RemoteUser = v
	case cMethod:
		h.Method = v
	case cURIStem:
		h.Path = v
		h.Has |= HasRequest
	case cURIQuery:
		h.Query = v
	case cURI:
		setTarget(v, h)
	case cStatus:
		return setStatus(v, h)
	case cBytes:
		return setBytes(v, h)
	case cTimeTaken:
		d, ok := seconds(v)
		if p.srv.mode == modeW3C && bytes.IndexByte(v, '.') < 0 {
			d, ok = millis(v)
		}
		if !ok {
			return bad(0, "expected a duration")
		}
		h.RequestTime = d
		h.Has |= HasRequestTime
	case cMicrosTaken:
		n, ok := uint63(v)
		if !ok {
			return bad(0, "expected microseconds")
		}
		h.RequestTime = durationMicros(n)
		h.Has |= HasRequestTime
	case cUserAgent:
		switch p.srv.mode {
		case modeW3C:
			if bytes.IndexByte(v, '+') >= 0 {
				n := len(p.scratch)
				p.scratch = unescapeW3C(p.scratch, v, false, true)
				v = p.scratch[n:]
			}
		case modeCloudFront:
			if bytes.IndexByte(v, '%') >= 0 {
				n := len(p.scratch)
				p.scratch = unescapeW3C(p.scratch, v, true, false)
				v = p.scratch[n:]
			}
		}
		h.UserAgent = v
		h.Has |= HasUserAgent
	case cReferer:
		h.Referer = v
		h.Has |= HasReferer
	case cProtocol:
		h.Protocol = v
	case cForwardedFor:
		if p.srv.mode == modeW3C && bytes.IndexByte(v, '+') >= 0 {
			n := len(p.scratch)
			p.scratch = unescapeW3C(p.scratch, v, false, true)
			v = p.scratch[n:]
		}
		h.ForwardedFor = v
	}
	return nil
}

// w3cString reads a W3C draft <string> field, '"'-quoted with "" for a quote,
// starting at line[i] == '"'.
func (p *Parser) w3cString(line []byte, i int) ([]byte, int, error) {
	v, end, escaped, err := quotedDoubled(line, i)
	if err != nil {
		return nil, 0, err
	}
	if end < len(line) && line[end] != ' ' && line[end] != '\t' {
		return nil, 0, errAt("line", end, "expected a separator after the quoted field")
	}
	if escaped {
		v = p.undouble(v)
	}
	return v, end, nil
}

// csvField reads one CSV field at line[i:] and returns it and the index of the
// ',' after it (or the end of the line).
func (p *Parser) csvField(line []byte, i int) ([]byte, int, error) {
	if i < len(line) && line[i] == '"' {
		v, end, escaped, err := quotedDoubled(line, i)
		if err != nil {
			return nil, 0, err
		}
		if end < len(line) && line[end] != ',' {
			return nil, 0, errAt("line", end, "expected ',' after the quoted field")
		}
		if escaped {
			v = p.undouble(v)
		}
		return v, end, nil
	}
	end := bytes.IndexByte(line[i:], ',')
	if end < 0 {
		return line[i:], len(line), nil
	}
	return line[i : i+end], i + end, nil
}

// quotedDoubled finds the end of a field quoted with '"' at line[i], where ""
// stands for one quote (CSV, the W3C draft). It returns the content, the index
// after the closing quote, and whether the content holds a doubled quote.
func quotedDoubled(line []byte, i int) ([]byte, int, bool, error) {
	escaped := false
	j := i + 1
	for {
		q := bytes.IndexByte(line[j:], '"')
		if q < 0 {
			return nil, 0, false, errAt("line", i, "no closing quote")
		}
		j += q
		if j+1 < len(line) && line[j+1] == '"' {
			escaped = true
			j += 2
			continue
		}
		return line[i+1 : j], j + 1, escaped, nil
	}
}

// undouble decodes "" to " into scratch.
func (p *Parser) undouble(v []byte) []byte {
	n := len(p.scratch)
	for k := 0; k < len(v); k++ {
		p.scratch = append(p.scratch, v[k])
		if v[k] == '"' && k+1 < len(v) && v[k+1] == '"' {
			k++
		}
	}
	return p.scratch[n:]
}
