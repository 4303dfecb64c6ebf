package config

import (
	"errors"
	htmltemplate "html/template"
	"net"
	"net/mail"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/hitcount/hitcount/parser"
)

// validate checks every value present, after defaults. Problems are added to
// d.errs; nothing stops at the first one.
func (d *doc) validate(c *Config) {
	if c.ClickHouse != nil {
		d.validateClickHouse(c.ClickHouse)
	}
	d.nonEmpty(c.Embedded.Path, "embedded.path")
	d.validateSources(c.Sources)
	d.validateVisitors(c)

	if c.Batch.Rows < 1 || c.Batch.Rows > 1_000_000 {
		d.addf("batch.rows", "must be between 1 and 1000000, got %d", c.Batch.Rows)
	}
	d.duration(c.Batch.Delay, "batch.delay", time.Millisecond, time.Minute)
	if c.Batch.MaxPending < 1 || c.Batch.MaxPending > 64 {
		d.addf("batch.max_pending", "must be between 1 and 64, got %d", c.Batch.MaxPending)
	}
	if l := *c.HTTP.Listen; l != "" && !validHostPort(l, true) {
		d.addf("http.listen", "must be host:port (or \"\" to disable the endpoint), got %q", l)
	}
	d.nonEmpty(c.StateDir, "state_dir")

	d.duration(c.Sweep.Every, "sweep.every", time.Second, 0)
	switch c.Sweep.Claims {
	case "local", "keeper", "keepermap":
	default:
		d.addf("sweep.claims", "must be local, keeper or keepermap, got %q", c.Sweep.Claims)
	}
	// hits_touched.ingested is cut to the minute, so a round that starts
	// less than a minute before where the last one stopped misses the rows
	// of that minute ingested before it stopped. An explicit 0 (or any value
	// under a minute) is refused, not turned into the default: only a
	// lateness left out (or null) takes the default, 10m.
	if l := c.Sweep.Lateness.Duration; l < time.Minute {
		d.addf("sweep.lateness", "must be at least 1m, got %v: hits_touched.ingested is truncated to the minute, so a sweep looking back less than a minute skips pages touched in the minute the last sweep ended in (leave lateness out for the default, 10m)", l)
	}
	d.duration(c.Sweep.Lease, "sweep.lease", time.Second, 0)
	if c.Sweep.MaxCrossings < 1 {
		d.addf("sweep.max_crossings", "must be at least 1, got %d", c.Sweep.MaxCrossings)
	}
	if c.Sweep.DigestAfter < 1 {
		d.addf("sweep.digest_after", "must be at least 1, got %d", c.Sweep.DigestAfter)
	}
	if k := c.Keeper; k != nil {
		d.addrs(k.Addr, "keeper.addr")
		if !strings.HasPrefix(k.Root, "/") || (len(k.Root) > 1 && strings.HasSuffix(k.Root, "/")) {
			d.addf("keeper.root", "must be a znode path: start with / and not end with /, got %q", k.Root)
		}
		d.duration(k.SessionTimeout, "keeper.session_timeout", time.Second, 0)
		d.secretSource(k.PasswordEnv, k.PasswordFile, "keeper")
		// Digest auth is user:password: one without the other would
		// silently leave the claim nodes world-writable.
		hasPassword := k.PasswordEnv != "" || k.PasswordFile != ""
		switch {
		case k.Username != "" && !hasPassword:
			d.addf("keeper.username", "a username needs password_env or password_file")
		case k.Username == "" && k.PasswordEnv != "":
			d.addf("keeper.password_env", "a password needs keeper.username (digest auth is user:password); without both, claim nodes are world-writable")
		case k.Username == "" && k.PasswordFile != "":
			d.addf("keeper.password_file", "a password needs keeper.username (digest auth is user:password); without both, claim nodes are world-writable")
		}
	}
	if s := c.SMTP; s != nil {
		d.validateSMTP(s)
	}
	d.validateLease(c)
	d.nonEmpty(c.Outbox, "outbox")

	sites := map[string]bool{}
	for _, s := range c.Sources {
		sites[s.Site] = true
	}
	names := map[string]int{}
	for i := range c.Rules {
		r, field := &c.Rules[i], itemPath("rules", i)
		if j, dup := names[r.Name]; dup && r.Name != "" {
			d.addf(field+".name", "duplicate rule name %q (also rules[%d])", r.Name, j)
		} else {
			names[r.Name] = i
		}
		d.validateRule(r, field, sites)
	}
}

// minLeaseSMTPPhases and minLeaseMark size a keepermap lease: one delivery
// is up to three phases each bounded by smtp.timeout (connect and greeting,
// DATA, the reply to the message), then the mark (the sweeper's 30 s).
const (
	minLeaseSMTPPhases = 3
	minLeaseMark       = 30 * time.Second
)

// validateLease checks that a keepermap lease outlasts one delivery: the
// lease is time in the claim row, and when it ends another replica may claim
// the crossing and send it again while the first delivery still runs. With
// claims: keeper the lease is the keeper session (a warning, Warnings); with
// local, one sweeper runs; without smtp, a delivery is a file write.
func (d *doc) validateLease(c *Config) {
	if c.Sweep.Claims != "keepermap" || c.SMTP == nil || !d.ok("smtp.timeout") {
		return
	}
	t := c.SMTP.Timeout.Duration
	if need := minLeaseSMTPPhases*t + minLeaseMark; c.Sweep.Lease.Duration < need {
		d.addf("sweep.lease", "with claims: keepermap must be at least 3 x smtp.timeout + 30s (%v with smtp.timeout %v), got %v: a lease shorter than one delivery (connect, DATA and the reply, each up to smtp.timeout, then the mark) lets another replica claim the crossing and send it again while the first still sends",
			need, t, c.Sweep.Lease.Duration)
	}
}

func (d *doc) nonEmpty(v, field string) {
	if v == "" {
		d.addf(field, "must not be empty")
	}
}

// duration checks a range; maxV 0 means no upper bound.
func (d *doc) duration(v Duration, field string, minV, maxV time.Duration) {
	switch {
	case maxV > 0 && (v.Duration < minV || v.Duration > maxV):
		d.addf(field, "must be between %v and %v, got %v", minV, maxV, v.Duration)
	case v.Duration < minV:
		d.addf(field, "must be at least %v, got %v", minV, v.Duration)
	}
}

// validHostPort accepts host:port with a numeric port; listen addresses may
// leave the host empty (all interfaces) and use port 0.
func validHostPort(a string, listen bool) bool {
	host, port, err := net.SplitHostPort(a)
	if err != nil || (host == "" && !listen) {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p >= 0 && p <= 65535 && (p > 0 || listen)
}

func (d *doc) addrs(addrs []string, field string) {
	if len(addrs) == 0 {
		d.addf(field, "required: at least one host:port")
	}
	for i, a := range addrs {
		if !validHostPort(a, false) {
			d.addf(itemPath(field, i), "must be host:port, got %q", a)
		}
	}
}

// secretSource checks where a password comes from. The value of
// password_env is not echoed: a password pasted there must not be printed.
func (d *doc) secretSource(env, file, section string) {
	if env != "" && !isIdent(env) {
		d.addf(section+".password_env", "must be the name of an environment variable (letters, digits, _), not the password itself")
	}
	if env != "" && file != "" {
		d.addf(section+".password_file", "give password_env or password_file, not both")
	}
}

// isIdent matches [A-Za-z_][A-Za-z0-9_]*.
func isIdent(s string) bool {
	for i, c := range []byte(s) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

func (d *doc) validateClickHouse(ch *ClickHouse) {
	d.addrs(ch.Addr, "clickhouse.addr")
	if ch.Cluster != "" && !isIdent(ch.Cluster) {
		d.addf("clickhouse.cluster", "must be an identifier ([A-Za-z_][A-Za-z0-9_]*), a cluster of the servers' remote_servers, got %q", ch.Cluster)
	}
	if !isIdent(ch.Database) {
		d.addf("clickhouse.database", "must be an identifier ([A-Za-z_][A-Za-z0-9_]*), got %q", ch.Database)
	}
	d.nonEmpty(ch.Username, "clickhouse.username")
	d.secretSource(ch.PasswordEnv, ch.PasswordFile, "clickhouse")
	if !ch.TLS.Enabled && (ch.TLS.CAFile != "" || ch.TLS.ServerName != "" || ch.TLS.InsecureSkipVerify) {
		d.addf("clickhouse.tls.enabled", "TLS settings are given but enabled is false: the connection would be plain text; set enabled: true or remove them")
	}
	switch ch.Compression {
	case "none", "lz4", "zstd":
	default:
		d.addf("clickhouse.compression", "must be none, lz4 or zstd, got %q", ch.Compression)
	}
	d.duration(ch.DialTimeout, "clickhouse.dial_timeout", 100*time.Millisecond, 0)
	d.duration(ch.InsertTimeout, "clickhouse.insert_timeout", time.Second, 0)
	d.duration(ch.InsertQuorumTimeout, "clickhouse.insert_quorum_timeout", time.Second, 0)
	d.validateQuorum(ch)
}

// validateQuorum checks insert_quorum and its timeout. A quorum counts
// replicas, so it needs a cluster; 1 is what every insert has. The server
// must wait for the quorum longer than the client waits for the insert:
// on 18.16 an insert the server gives up on has written hits but not the
// materialized views, and its identical re-send, dropped as a duplicate,
// never writes them (measured, sink/quorum_integration_test.go), while an
// insert the client gives up on keeps waiting on the server and completes.
func (d *doc) validateQuorum(ch *ClickHouse) {
	switch q := ch.InsertQuorum; {
	case q < 0 || q == 1:
		d.addf("clickhouse.insert_quorum", "must be 0 (off) or at least 2 (replicas that hold an insert before it is acknowledged), got %d", q)
	case q >= 2 && ch.Cluster == "":
		d.addf("clickhouse.insert_quorum", "needs clickhouse.cluster: a quorum counts the replicas of a cluster's shard")
	}
	if !d.ok("clickhouse.insert_quorum") || ch.InsertQuorum < 0 || ch.InsertQuorum == 1 {
		return // said above, or at the value that did not decode
	}
	given := d.present["clickhouse.insert_quorum_timeout"]
	if given && ch.InsertQuorum == 0 {
		d.addf("clickhouse.insert_quorum_timeout", "is given but insert_quorum is off: no insert waits for a quorum; set insert_quorum or remove it")
		return
	}
	if ch.InsertQuorum == 0 || !d.ok("clickhouse.insert_quorum_timeout", "clickhouse.insert_timeout") {
		return
	}
	const why = "an insert the server stops waiting for has written hits but not the rollups, and its re-send never writes them; one the collector stops waiting for completes on the server once the quorum is reached"
	qt, it := ch.InsertQuorumTimeout.Duration, ch.InsertTimeout.Duration
	switch {
	case qt <= it && given:
		d.addf("clickhouse.insert_quorum_timeout", "must be longer than insert_timeout (%v), got %v: %s", it, qt, why)
	case qt <= it:
		d.addf("clickhouse.insert_timeout", "must be shorter than insert_quorum_timeout (%v, the default), got %v: %s; raise insert_quorum_timeout", qt, it, why)
	}
}

const maxMaxLine = 64 << 20

func (d *doc) validateSources(sources []Source) {
	paths := map[string]int{}
	for i := range sources {
		s, field := &sources[i], itemPath("sources", i)
		switch {
		case s.Path == "":
			d.addf(field+".path", "required: the log file or glob to read")
		case !doublestar.ValidatePathPattern(filepath.FromSlash(s.Path)):
			d.addf(field+".path", "bad glob %q", s.Path)
		default:
			if j, dup := paths[s.Path]; dup {
				d.addf(field+".path", "%q is also sources[%d].path: a file read twice is shipped twice", s.Path, j)
			} else {
				paths[s.Path] = i
			}
		}
		if s.Site == "" {
			d.addf(field+".site", "required: the site name hits are counted under")
		}
		if s.Format == parser.Auto {
			// Detected per file by the collector.
		} else if _, err := parser.New(s.Format); err != nil {
			var unknown *parser.UnknownFormatError
			if errors.As(err, &unknown) {
				d.addf(field+".format", "%v", unknown) // with its "did you mean"
			} else {
				d.addf(field+".format", "bad format string: %v", err)
			}
		}
		switch loc, err := time.LoadLocation(s.Timezone); {
		case strings.EqualFold(s.Timezone, "Local"):
			// Go loads "Local" fine: it is refused for what it means.
			d.addf(field+".timezone", "%q is refused: it is whatever zone the machine running the collector has (TZ, /etc/localtime), which need not be the one the web server writes its times in (a container runs in UTC; the collector may read the log on another host), and the same line would be stored at another time; name the zone (an IANA name such as Europe/Berlin, or UTC)", s.Timezone)
		case err != nil || s.Timezone == "":
			d.addf(field+".timezone", "unknown time zone %q (use an IANA name such as Europe/Berlin, or UTC)", s.Timezone)
		default:
			s.Location = loc
		}
		switch s.StartAt {
		case "beginning", "end":
		default:
			d.addf(field+".start_at", "must be beginning or end, got %q", s.StartAt)
		}
		if s.MaxLine.Bytes < 1<<10 || s.MaxLine.Bytes > maxMaxLine {
			d.addf(field+".max_line", "must be between 1KiB and 64MiB, got %d bytes", s.MaxLine.Bytes)
		}
	}
}

func isLoopback(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.EqualFold(host, "localhost.") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (d *doc) validateSMTP(s *SMTP) {
	if s.Host == "" {
		d.addf("smtp.host", "required (or remove the smtp section to write .eml files to outbox)")
	}
	switch s.TLS {
	case "starttls", "tls":
	case "none":
		if s.Host != "" && !isLoopback(s.Host) {
			d.addf("smtp.tls", "none sends mail and passwords in clear text: allowed only to a loopback host (localhost, 127.0.0.1, ::1), not %q", s.Host)
		}
	default:
		d.addf("smtp.tls", "must be starttls, tls or none, got %q", s.TLS)
	}
	if s.Port < 1 || s.Port > 65535 {
		d.addf("smtp.port", "must be a port number (1 to 65535), got %d", s.Port)
	}
	d.secretSource(s.PasswordEnv, s.PasswordFile, "smtp")
	if s.Username != "" && s.PasswordEnv == "" && s.PasswordFile == "" {
		d.addf("smtp.username", "a username needs password_env or password_file")
	}
	if s.From == "" {
		d.addf("smtp.from", "required: the sender, such as hitcount <alerts@example.com>")
	} else if _, err := mail.ParseAddress(s.From); err != nil {
		d.addf("smtp.from", "not an email address (%v): %q", err, s.From)
	}
	d.duration(s.Timeout, "smtp.timeout", time.Second, 0)
	if s.CAFile != "" && s.TLS == "none" {
		d.addf("smtp.ca_file", "goes with tls: starttls or tls (tls is none)")
	}
}

// validWindow accepts whole minutes that divide a day, and whole days:
// windows are built from per-minute rollups and aligned to midnight.
func validWindow(w time.Duration) bool {
	const day = 24 * time.Hour
	if w < time.Minute || w%time.Minute != 0 {
		return false
	}
	if w < day {
		return day%w == 0
	}
	return w%day == 0
}

func isRuleName(s string) bool {
	for i, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')) {
			return false
		}
	}
	return s != ""
}

func isMethod(s string) bool {
	for _, c := range []byte(s) {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return s != ""
}

// isStatus matches a class (2xx) or a status (404), 1xx to 5xx.
func isStatus(s string) bool {
	if len(s) != 3 || s[0] < '1' || s[0] > '5' {
		return false
	}
	if s[1:] == "xx" {
		return true
	}
	return s[1] >= '0' && s[1] <= '9' && s[2] >= '0' && s[2] <= '9'
}

func (d *doc) validateRule(r *Rule, field string, sites map[string]bool) {
	switch {
	case r.Name == "":
		d.addf(field+".name", "required: a unique name such as pricing-hot")
	case !isRuleName(r.Name):
		d.addf(field+".name", "must be lower-case letters and digits, then also . _ - (such as pricing-hot), got %q", r.Name)
	}
	r.Kind = d.ruleKind(r, field)
	completeness := completenessKind(r.Kind)
	m, mf := r.Match, field+".match"
	if m.Site != "" && len(sites) > 0 && !sites[m.Site] {
		d.addf(mf+".site", "no source has site %q", m.Site)
	}
	if m.Site == "" && (completeness || r.Kind == KindReport) {
		// Completeness is the site's collectors' word: a rule over every
		// site would wait for all of them.
		d.addf(mf+".site", "required by a %s rule: the site whose collectors say when a window is complete", r.Kind)
	}
	switch p := m.Path; {
	case p == "" && (completeness || r.Kind == KindReport):
		// The site's total.
	case p == "":
		d.addf(mf+".path", "required: an exact path (/pricing), a glob (/blog/*) or ~regex")
	case strings.HasPrefix(p, "~"):
		if _, err := regexp.Compile(p[1:]); err != nil {
			d.addf(mf+".path", "bad regex: %v", err)
		}
	case !strings.HasPrefix(p, "/"):
		d.addf(mf+".path", "must start with / (or ~ for a regex), got %q", p)
	case strings.ContainsAny(p, "*?[{") && !doublestar.ValidatePattern(p):
		d.addf(mf+".path", "bad glob %q", p)
	}
	if m.Method != "" && !isMethod(m.Method) {
		d.addf(mf+".method", "must be an HTTP method in capitals such as GET, got %q", m.Method)
	}
	if m.Status != "" && !isStatus(m.Status) {
		d.addf(mf+".status", "must be a class such as 2xx or a status such as 404, got %q", m.Status)
	}
	if m.ExcludeBots.Pattern() != "" && r.Window == "lifetime" {
		// A lifetime count reads the daily rollup, which keeps the built-in
		// bot mark only; from hits it would read the page's whole history
		// at every sweep.
		d.addf(mf+".exclude_bots", "a pattern of its own needs a window (5m, 1h, 1d, ...): a lifetime rule counts from the daily rollup, which knows only the built-in bot pattern (exclude_bots: true)")
	}
	if m.ExcludeBots.Pattern() != "" && completeness {
		// They read a day of windows (or of minutes) at every sweep: from
		// hits, that is every line of the page or site for a day.
		d.addf(mf+".exclude_bots", "a %s rule counts from the rollups, which know only the built-in bot pattern: use exclude_bots: true, not a pattern of its own", r.Kind)
	}

	if r.Threshold < 0 || r.Kind == KindThreshold && r.Threshold == 0 {
		d.addf(field+".threshold", "must be positive, got %d", r.Threshold)
	}
	if r.Below < 0 || r.Kind == KindBelow && r.Below == 0 {
		d.addf(field+".below", "must be positive, got %d", r.Below)
	}
	for i, ms := range r.Milestones {
		if ms <= 0 || (i > 0 && ms <= r.Milestones[i-1]) {
			d.addf(itemPath(field+".milestones", i), "milestones must be positive and strictly increasing, got %d", ms)
			break
		}
	}
	d.validateCompleteness(r, field)
	d.validateChange(r, field)
	d.validateReport(r, field)
	d.validateCount(r, field)

	switch {
	case r.Kind == KindReport:
		if r.Window != "" {
			d.addf(field+".window", "a report rule has no window: report (weekly or monthly) is its period (leave window out)")
		}
	case r.Window == "" && r.Kind == KindNoTraffic:
	case r.Window == "":
		d.addf(field+".window", "required: lifetime, or a window such as 5m, 1h, 1d")
	case r.Window == "lifetime" && r.Kind == KindBelow:
		d.addf(field+".window", "a below rule needs a tumbling window such as 1h or 1d (a lifetime count only grows)")
	case r.Window == "lifetime" && (r.Kind == KindSpike || r.Kind == KindDrop):
		d.addf(field+".window", "a %s rule needs a tumbling window such as 1h or 1d (it compares a window with the same window of earlier periods)", r.Kind)
	case r.Window == "lifetime" && r.Kind == KindNoTraffic:
		d.addf(field+".window", "a no_traffic rule has no window: no_traffic is the silence that fires it, counted from the last hit (leave window out)")
	case r.Window == "lifetime":
	default:
		w, err := ParseDuration(r.Window)
		switch {
		case err != nil:
			d.addf(field+".window", "%v", err)
		case !validWindow(w):
			d.addf(field+".window", "must be lifetime, whole minutes dividing a day evenly (5m, 15m, 1h, 6h), or whole days (1d, 7d); got %s", r.Window)
		case r.Kind == KindNoTraffic:
			d.addf(field+".window", "a no_traffic rule has no window: no_traffic is the silence that fires it, counted from the last hit (leave window out)")
		default:
			r.WindowDur = w
		}
	}
	loc, err := time.LoadLocation(r.Timezone)
	switch {
	case strings.EqualFold(r.Timezone, "Local"):
		// Go loads "Local" fine: it is refused for what it means.
		d.addf(field+".timezone", "%q is refused: it is whatever zone the machine running the sweeper has (TZ, /etc/localtime), so two sweepers, or one moved to another host, would align the windows differently and record the same crossing under another window start; name the zone (an IANA name such as Europe/Berlin, or UTC)", r.Timezone)
	case err != nil || r.Timezone == "":
		d.addf(field+".timezone", "unknown time zone %q (use an IANA name such as Europe/Berlin, or UTC)", r.Timezone)
	default:
		r.Location = loc
	}

	if len(r.To) == 0 {
		d.addf(field+".to", "required: at least one recipient")
	}
	for i, to := range r.To {
		if _, err := mail.ParseAddress(to); err != nil {
			d.addf(itemPath(field+".to", i), "not an email address (%v): %q", err, to)
		}
	}
	for _, t := range []struct{ name, text string }{{"subject", r.Subject}, {"text", r.Text}} {
		if _, err := texttemplate.New(t.name).Parse(t.text); err != nil {
			d.addf(field+"."+t.name, "bad template: %v", err)
		}
	}
	if _, err := htmltemplate.New("html").Parse(r.HTML); err != nil {
		d.addf(field+".html", "bad template: %v", err)
	}
}

// The kinds of rule (Rule.Kind).
const (
	KindThreshold  = "threshold"
	KindMilestones = "milestones"
	KindBelow      = "below"
	KindNoTraffic  = "no_traffic"
	KindReport     = "report"
)

// Defaults of the completeness rules' options.
const (
	defaultActiveWithin = 7 * 24 * time.Hour
	defaultNoDataAfter  = time.Hour
)

// ruleKind is what r fires on: the one of threshold, milestones, below and
// no_traffic it gives ("" with a problem when it gives none or several).
func (d *doc) ruleKind(r *Rule, field string) string {
	var given []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{KindThreshold, d.present[field+".threshold"] || r.Threshold != 0},
		{KindMilestones, len(r.Milestones) > 0},
		{KindBelow, d.present[field+".below"] || r.Below != 0},
		{KindNoTraffic, d.present[field+".no_traffic"] || r.NoTraffic.Duration != 0},
		{KindSpike, d.present[field+".spike"]},
		{KindDrop, d.present[field+".drop"]},
		{KindReport, d.present[field+".report"] || r.Report != ""},
	} {
		if k.set {
			given = append(given, k.name)
		}
	}
	if !d.ok(field+".threshold", field+".milestones", field+".below", field+".no_traffic", field+".spike", field+".drop", field+".report") {
		if len(given) == 1 {
			return given[0]
		}
		return ""
	}
	switch len(given) {
	case 0:
		d.addf(field+".threshold", "required: a threshold, a list of milestones, below (fires under a count), no_traffic (fires after a silence), spike or drop (against a baseline), or report (weekly or monthly)")
		return ""
	case 1:
		return given[0]
	}
	if len(given) == 2 && given[0] == KindThreshold && given[1] == KindMilestones {
		d.addf(field+".milestones", "give threshold or milestones, not both")
		return ""
	}
	d.addf(field+"."+given[1], "give one of threshold, milestones, below, no_traffic, spike, drop and report, not %s", strings.Join(given, " and "))
	return ""
}

// validateCompleteness checks and defaults the options of rules evaluated
// on complete data only (below, no_traffic), and refuses them elsewhere.
func (d *doc) validateCompleteness(r *Rule, field string) {
	completeness := completenessKind(r.Kind)
	for _, o := range []string{"active_within", "no_data_after"} {
		if d.present[field+"."+o] && !completeness && r.Kind != "" {
			d.addf(field+"."+o, "only below and no_traffic rules take %s (a %s rule fires on what it has seen)", o, r.Kind)
		}
	}
	if !completeness {
		return
	}
	if r.Kind == KindNoTraffic {
		if nt := r.NoTraffic.Duration; nt < time.Minute || nt%time.Minute != 0 {
			d.addf(field+".no_traffic", "must be whole minutes, at least 1m (hits are counted per minute), got %v", nt)
		}
	}
	if !d.present[field+".active_within"] {
		r.ActiveWithin.Duration = defaultActiveWithin
	} else if aw := r.ActiveWithin.Duration; aw < 24*time.Hour || aw%(24*time.Hour) != 0 {
		d.addf(field+".active_within", "must be whole days, at least 1d (pages' activity is read from the daily rollup), got %v", aw)
	} else if p := r.Match.Path; p == "" || !(strings.HasPrefix(p, "~") || strings.ContainsAny(p, "*?[{")) {
		d.addf(field+".active_within", "only a rule whose path is a glob or a regex takes active_within (it says which of the pages it matches are watched)")
	}
	if !d.present[field+".no_data_after"] {
		r.NoDataAfter.Duration = defaultNoDataAfter
	} else if na := r.NoDataAfter.Duration; na != 0 && na < time.Minute {
		d.addf(field+".no_data_after", "must be 0 (no notice) or at least 1m, got %v", na)
	}
}

// CheckCollector reports, as Errors, what the collector needs and the file
// lacks: at least one source, and a store (a clickhouse section or the
// embedded path).
func (c *Config) CheckCollector() error {
	var es Errors
	if len(c.Sources) == 0 {
		es = append(es, c.problem("sources", "at least one source is required to collect"))
	}
	if c.ClickHouse == nil && c.Embedded.Path == "" {
		es = append(es, c.problem("clickhouse", "a clickhouse section or embedded.path is required to store hits"))
	}
	return es.sorted()
}

// CheckSweeper reports, as Errors, what the sweeper needs and the file
// lacks: at least one rule, and a keeper section when sweep.claims is keeper.
func (c *Config) CheckSweeper() error {
	var es Errors
	if len(c.Rules) == 0 {
		es = append(es, c.problem("rules", "at least one rule is required to sweep"))
	}
	if c.Sweep.Claims == "keeper" && c.Keeper == nil {
		es = append(es, c.problem("sweep.claims", "keeper claims need a keeper section (keeper: {addr: [host:port]})"))
	}
	return es.sorted()
}

func (c *Config) problem(field, msg string) *FieldError {
	line, col := c.loc.at(field)
	return &FieldError{File: c.File, Line: line, Column: col, Field: field, Msg: msg}
}
