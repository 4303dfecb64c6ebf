package config

import (
	"fmt"
	htmltemplate "html/template"
	"net"
	"net/mail"
	"regexp"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/hitcount/hitcount/parser"
)

var (
	identRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	ruleNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	statusRE   = regexp.MustCompile(`^([1-5]xx|[1-5][0-9][0-9])$`)
)

func (d *doc) validate(c *Config) {
	d.duration(&c.Batch.Delay, "batch.delay", time.Millisecond, time.Minute)
	if c.ClickHouse != nil {
		d.validateClickHouse(c.ClickHouse)
	}
	for i := range c.Sources {
		d.validateSource(&c.Sources[i], fmt.Sprintf("sources[%d]", i))
	}
	if c.Batch.Rows < 1 || c.Batch.Rows > 1_000_000 {
		d.addf("batch.rows", "must be between 1 and 1000000, got %d", c.Batch.Rows)
	}
	if c.Batch.MaxPending < 1 || c.Batch.MaxPending > 64 {
		d.addf("batch.max_pending", "must be between 1 and 64, got %d", c.Batch.MaxPending)
	}
	if l := *c.HTTP.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			d.addf("http.listen", "must be host:port (or \"\" to disable), got %q", l)
		}
	}
	d.duration(&c.Sweep.Every, "sweep.every", time.Second, 0)
	d.duration(&c.Sweep.Lateness, "sweep.lateness", 0, 0)
	d.duration(&c.Sweep.Lease, "sweep.lease", time.Second, 0)
	switch c.Sweep.Claims {
	case "local", "keeper", "keepermap":
	default:
		d.addf("sweep.claims", "must be local, keeper or keepermap, got %q", c.Sweep.Claims)
	}
	if c.Sweep.MaxCrossings < 1 {
		d.addf("sweep.max_crossings", "must be at least 1")
	}
	if c.Sweep.DigestAfter < 1 {
		d.addf("sweep.digest_after", "must be at least 1")
	}
	if k := c.Keeper; k != nil {
		if len(k.Addr) == 0 {
			d.addf("keeper.addr", "at least one host:port is required")
		}
		d.hostPorts(k.Addr, "keeper.addr")
		if !strings.HasPrefix(k.Root, "/") {
			d.addf("keeper.root", "must start with /, got %q", k.Root)
		}
		d.duration(&k.SessionTimeout, "keeper.session_timeout", time.Second, 0)
		d.secretSource(k.PasswordEnv, k.PasswordFile, "keeper")
	}
	if s := c.SMTP; s != nil {
		d.validateSMTP(s)
	}
	sites := map[string]bool{}
	for _, s := range c.Sources {
		sites[s.Site] = true
	}
	names := map[string]bool{}
	for i := range c.Rules {
		r := &c.Rules[i]
		field := fmt.Sprintf("rules[%d]", i)
		if names[r.Name] {
			d.addf(field+".name", "duplicate rule name %q", r.Name)
		}
		names[r.Name] = true
		d.validateRule(r, field, sites)
	}
}

func (d *doc) duration(v *Duration, field string, minV, maxV time.Duration) {
	if v.set {
		dur, err := ParseDuration(v.raw)
		if err != nil {
			d.addf(field, "%v", err)
			return
		}
		v.Duration = dur
	}
	if v.Duration < minV || (maxV > 0 && v.Duration > maxV) {
		if maxV > 0 {
			d.addf(field, "must be between %v and %v, got %v", minV, maxV, v.Duration)
		} else {
			d.addf(field, "must be at least %v, got %v", minV, v.Duration)
		}
	}
}

func (d *doc) hostPorts(addrs []string, field string) {
	for i, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if _, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil {
			d.addf(fmt.Sprintf("%s[%d]", field, i), "must be host:port, got %q", a)
		}
	}
}

func (d *doc) secretSource(env, file, field string) {
	if env != "" && file != "" {
		d.addf(field+".password_file", "give password_env or password_file, not both")
	}
}

func (d *doc) validateClickHouse(ch *ClickHouse) {
	if len(ch.Addr) == 0 {
		d.addf("clickhouse.addr", "at least one host:port is required")
	}
	d.hostPorts(ch.Addr, "clickhouse.addr")
	if !identRE.MatchString(ch.Database) {
		d.addf("clickhouse.database", "must be an identifier ([A-Za-z_][A-Za-z0-9_]*), got %q", ch.Database)
	}
	if ch.Password != nil {
		d.addf("clickhouse.password", "a password is not kept in the config file: use password_env or password_file")
	}
	d.secretSource(ch.PasswordEnv, ch.PasswordFile, "clickhouse")
	switch ch.Compression {
	case "none", "lz4", "zstd":
	default:
		d.addf("clickhouse.compression", "must be none, lz4 or zstd, got %q", ch.Compression)
	}
	d.duration(&ch.DialTimeout, "clickhouse.dial_timeout", 100*time.Millisecond, 0)
	d.duration(&ch.InsertTimeout, "clickhouse.insert_timeout", time.Second, 0)
}

func (d *doc) validateSource(s *Source, field string) {
	if s.Path == "" {
		d.addf(field+".path", "required: the log file or glob to read")
	}
	if s.Site == "" {
		d.addf(field+".site", "required: the site name hits are counted under")
	}
	if _, err := parser.New(s.Format); err != nil {
		d.addf(field+".format", "%v", err)
	}
	switch s.StartAt {
	case "beginning", "end":
	default:
		d.addf(field+".start_at", "must be beginning or end, got %q", s.StartAt)
	}
	if s.MaxLine.set {
		n, err := ParseSize(s.MaxLine.raw)
		if err != nil || n < 1024 {
			d.addf(field+".max_line", "must be a size of at least 1KiB (e.g. 1MiB), got %q", s.MaxLine.raw)
		}
		s.MaxLine.Bytes = n
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
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
			d.addf("smtp.tls", "none sends mail and passwords in clear text: allowed only to a loopback host, not %q", s.Host)
		}
	default:
		d.addf("smtp.tls", "must be starttls, tls or none, got %q", s.TLS)
	}
	if s.Port < 1 || s.Port > 65535 {
		d.addf("smtp.port", "must be a port number, got %d", s.Port)
	}
	if s.Password != nil {
		d.addf("smtp.password", "a password is not kept in the config file: use password_env or password_file")
	}
	d.secretSource(s.PasswordEnv, s.PasswordFile, "smtp")
	if s.Username != "" && s.PasswordEnv == "" && s.PasswordFile == "" {
		d.addf("smtp.username", "a username needs password_env or password_file")
	}
	if _, err := mail.ParseAddress(s.From); err != nil {
		d.addf("smtp.from", "not an email address (%v): %q", err, s.From)
	}
	d.duration(&s.Timeout, "smtp.timeout", time.Second, 0)
}

// validWindow accepts lifetime, windows that divide a day, and whole days.
func validWindow(w time.Duration) bool {
	day := 24 * time.Hour
	if w < time.Minute || w%time.Minute != 0 {
		return false
	}
	if w < day {
		return day%w == 0
	}
	return w%day == 0
}

func (d *doc) validateRule(r *Rule, field string, sites map[string]bool) {
	if !ruleNameRE.MatchString(r.Name) {
		d.addf(field+".name", "required: lower-case letters, digits and . _ - (got %q)", r.Name)
	}
	m := r.Match
	if m.Site != "" && len(sites) > 0 && !sites[m.Site] {
		d.addf(field+".match.site", "no source has site %q", m.Site)
	}
	switch {
	case m.Path == "":
		d.addf(field+".match.path", "required: an exact path (/pricing), a glob (/blog/*) or ~regex")
	case strings.HasPrefix(m.Path, "~"):
		if _, err := regexp.Compile(m.Path[1:]); err != nil {
			d.addf(field+".match.path", "bad regex: %v", err)
		}
	case !strings.HasPrefix(m.Path, "/"):
		d.addf(field+".match.path", "must start with / (or ~ for a regex), got %q", m.Path)
	}
	if m.Status != "" && !statusRE.MatchString(m.Status) {
		d.addf(field+".match.status", "must be a class such as 2xx or a status such as 404, got %q", m.Status)
	}
	switch {
	case r.Threshold != 0 && len(r.Milestones) > 0:
		d.addf(field+".milestones", "give threshold or milestones, not both")
	case r.Threshold == 0 && len(r.Milestones) == 0:
		d.addf(field+".threshold", "required: a threshold or a list of milestones")
	case r.Threshold < 0:
		d.addf(field+".threshold", "must be positive, got %d", r.Threshold)
	}
	for i, ms := range r.Milestones {
		if ms <= 0 || (i > 0 && ms <= r.Milestones[i-1]) {
			d.addf(fmt.Sprintf("%s.milestones[%d]", field, i), "milestones must be positive and strictly increasing")
			break
		}
	}
	switch r.Window {
	case "":
		d.addf(field+".window", "required: lifetime, or a window such as 5m, 1h, 1d")
	case "lifetime":
	default:
		w, err := ParseDuration(r.Window)
		switch {
		case err != nil:
			d.addf(field+".window", "%v", err)
		case !validWindow(w):
			d.addf(field+".window", "must divide a day evenly (5m, 15m, 1h, 6h) or be whole days (1d, 7d), got %s", r.Window)
		default:
			r.WindowDur = w
		}
	}
	loc, err := time.LoadLocation(r.Timezone)
	if err != nil {
		d.addf(field+".timezone", "unknown time zone %q", r.Timezone)
	}
	r.Location = loc
	if len(r.To) == 0 {
		d.addf(field+".to", "required: at least one recipient")
	}
	for i, to := range r.To {
		if _, err := mail.ParseAddress(to); err != nil {
			d.addf(fmt.Sprintf("%s.to[%d]", field, i), "not an email address: %q", to)
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

// CheckCollector reports what the collector needs and the file lacks.
func (c *Config) CheckCollector() error {
	var es Errors
	if len(c.Sources) == 0 {
		es = append(es, &FieldError{File: c.File, Field: "sources", Msg: "at least one source is required to collect"})
	}
	return es.err()
}

// CheckSweeper reports what the sweeper needs and the file lacks.
func (c *Config) CheckSweeper() error {
	var es Errors
	if len(c.Rules) == 0 {
		es = append(es, &FieldError{File: c.File, Field: "rules", Msg: "at least one rule is required to sweep"})
	}
	if c.Sweep.Claims == "keeper" && c.Keeper == nil {
		es = append(es, &FieldError{File: c.File, Field: "keeper", Msg: "sweep.claims is keeper: a keeper section is required"})
	}
	return es.err()
}
