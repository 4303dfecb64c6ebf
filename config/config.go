// Package config reads the one YAML file that configures the collector, the
// sweeper and standalone mode. Every problem in a file is reported at once,
// each with file:line:column and the field's path, so an operator fixes a
// config in one pass.
//
// Defaults are given in brackets on each field and applied after parsing:
// a key that is absent (or null) takes its default, a key that is present
// keeps its value and is validated, so "rows: 0" is an error, not 50000.
package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Config is the whole file.
type Config struct {
	// ClickHouse selects server mode; nil means the embedded store.
	ClickHouse *ClickHouse `yaml:"clickhouse"`
	Embedded   Embedded    `yaml:"embedded"`
	Sources    []Source    `yaml:"sources"`
	Batch      Batch       `yaml:"batch"`
	HTTP       HTTP        `yaml:"http"`
	// StateDir holds local hints: the positions file, lock files [./state].
	StateDir string `yaml:"state_dir"`
	Sweep    Sweep  `yaml:"sweep"`
	// Keeper is required when Sweep.Claims is keeper.
	Keeper *Keeper `yaml:"keeper"`
	// SMTP, when nil, sends nothing: messages are written to Outbox as .eml files.
	SMTP *SMTP `yaml:"smtp"`
	// Outbox is where .eml files go without an SMTP section [./outbox].
	Outbox string `yaml:"outbox"`
	Rules  []Rule `yaml:"rules"`
	// Visitors keys the visitor hash (rules with count: visitors);
	// required when a source anonymizes its clients.
	Visitors Visitors `yaml:"visitors"`

	// File is the path the config was read from; relative paths in it are
	// resolved against its directory (see Resolve).
	File string `yaml:"-"`

	loc *locator // where each field is in File, for CheckCollector/CheckSweeper
}

// ClickHouse is a server connection (native protocol).
type ClickHouse struct {
	// Addr is one or more host:port; required and non-empty.
	Addr []string `yaml:"addr"`
	// Database holds every table; an identifier [hitcount].
	Database string `yaml:"database"`
	// Username [default].
	Username string `yaml:"username"`
	// PasswordEnv names the environment variable holding the password.
	// A literal "password:" key is refused. See Password.
	PasswordEnv string `yaml:"password_env"`
	// PasswordFile is a file holding the password (one trailing newline is
	// dropped); not together with PasswordEnv.
	PasswordFile string `yaml:"password_file"`
	TLS          TLS    `yaml:"tls"`
	// Compression is none, lz4 or zstd [none: measured fastest on loopback].
	Compression string `yaml:"compression"`
	// DialTimeout bounds connecting [5s].
	DialTimeout Duration `yaml:"dial_timeout"`
	// InsertTimeout is how long one insert may take before its outcome
	// counts as unknown [30s].
	InsertTimeout Duration `yaml:"insert_timeout"`
	// Cluster selects cluster mode: the name of a cluster in the servers'
	// remote_servers; the schema is replicated local tables plus Distributed
	// tables, created on each server of Addr by itself (see
	// sink/cluster_schema.go).
	Cluster string `yaml:"cluster"`
	// InsertQuorum is how many replicas must hold an insert before it is
	// acknowledged: 0 (off) or at least 2, and only with Cluster [0]. See
	// sink/quorum.go.
	InsertQuorum int `yaml:"insert_quorum"`
	// InsertQuorumTimeout is how long the server waits for the quorum; it
	// must exceed InsertTimeout, so that the client gives up first and the
	// server finishes the insert, materialized views included, once the
	// quorum is reached [10m].
	InsertQuorumTimeout Duration `yaml:"insert_quorum_timeout"`

	dir string // the config file's directory, for a relative PasswordFile
}

// TLS configures TLS to ClickHouse [all off].
type TLS struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"ca_file"` // PEM; relative to the config file
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Embedded is the embedded engine's store (standalone mode).
type Embedded struct {
	// Path is the chDB data directory [./data].
	Path string `yaml:"path"`
	// Library is libchdb.so; relative to the config file. Empty: the
	// environment variable HITCOUNT_CHDB_LIB, then the places the backend
	// package lists (the repository's .cache, /usr/local/lib, /usr/lib).
	Library string `yaml:"library"`
}

// Source is a log to ship.
type Source struct {
	// Path is a file or a glob (doublestar: ** allowed); required. Relative
	// paths are resolved against the config file's directory.
	Path string `yaml:"path"`
	// Format is auto (detected per file from its first lines, and again
	// when a file rejects nearly all of its lines), a named format
	// (parser.Formats: combined, common, vhost_combined, json, ...) or an
	// nginx log_format string [auto].
	Format string `yaml:"format"`
	// Timezone is the IANA zone of times the log writes without one
	// (HAProxy, W3C extended in local time) [UTC]; Local is refused. See
	// Location.
	Timezone string `yaml:"timezone"`
	// Site is the site hits are counted under; required.
	Site string `yaml:"site"`
	// StartAt is where a never-seen file starts: beginning or end [end].
	StartAt string `yaml:"start_at"`
	// MaxLine: longer lines are rejected [1MiB].
	MaxLine Size `yaml:"max_line"`
	// AnonymizeClients stores client addresses truncated (IPv4 /24, IPv6
	// /48; anything else empty) while visitors are still counted from the
	// whole address; needs visitors.key_env or key_file [false].
	AnonymizeClients bool `yaml:"anonymize_clients"`

	// Location is Timezone loaded.
	Location *time.Location `yaml:"-"`
	// WeekDay is WeekStart parsed.
	WeekDay time.Weekday `yaml:"-"`
}

// Batch tunes inserts.
type Batch struct {
	// Rows per insert, 1 to 1,000,000 [50000].
	Rows int `yaml:"rows"`
	// Delay is the longest a line waits for its batch to fill, > 0 and
	// <= 1m [1s].
	Delay Duration `yaml:"delay"`
	// MaxPending is how many batches may be filled or in flight before
	// reading stops; it bounds memory, 1 to 64 [2].
	MaxPending int `yaml:"max_pending"`
}

// HTTP is the operations endpoint.
type HTTP struct {
	// Listen is host:port for /metrics, /healthz, /readyz; "" disables it
	// [127.0.0.1:9464]. Never nil after Parse.
	Listen *string `yaml:"listen"`
}

// Sweep tunes the sweeper.
type Sweep struct {
	// Every is the time between sweeps, >= 1s [5m].
	Every Duration `yaml:"every"`
	// Claims is where claim locks live: local, keeper or keepermap [local].
	Claims string `yaml:"claims"`
	// Lateness is how far back a sweep looks for late hits, >= 1m [10m].
	Lateness Duration `yaml:"lateness"`
	// Lease is how long a claim holds before another sweeper may take it,
	// >= 1s, and with claims: keepermap and an smtp section >= 3 x
	// smtp.timeout + 30s [2m].
	Lease Duration `yaml:"lease"`
	// MaxCrossings per run before the run reschedules itself [1000].
	MaxCrossings int `yaml:"max_crossings"`
	// DigestAfter: more crossings than this for one recipient in one sweep
	// are sent as one digest message [10].
	DigestAfter int `yaml:"digest_after"`
}

// Keeper is a ClickHouse Keeper or ZooKeeper ensemble.
type Keeper struct {
	// Addr is one or more host:port; required and non-empty.
	Addr []string `yaml:"addr"`
	// Root is the znode under which claims live; starts with / [/hitcount].
	Root string `yaml:"root"`
	// SessionTimeout, >= 1s [10s].
	SessionTimeout Duration `yaml:"session_timeout"`
	// Username for digest auth; optional.
	Username     string `yaml:"username"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`

	dir string
}

// SMTP is the mail server.
type SMTP struct {
	// Host is required in the section.
	Host string `yaml:"host"`
	// Port [587 for starttls, 465 for tls, 25 for none].
	Port int `yaml:"port"`
	// TLS is starttls, tls or none; none only to a loopback host [starttls].
	TLS string `yaml:"tls"`
	// Username is optional; when set, PasswordEnv or PasswordFile is required.
	Username     string `yaml:"username"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
	// From is the sender, an RFC 5322 address; required.
	From string `yaml:"from"`
	// Timeout bounds one delivery, >= 1s [30s].
	Timeout Duration `yaml:"timeout"`
	// CAFile is a PEM file of the certificates that sign the server's, for
	// a relay whose certificate is not signed by a CA the system trusts;
	// relative to the config file [the system's roots].
	CAFile string `yaml:"ca_file"`

	dir string
}

// Rule is a trigger: a threshold or milestones reached, a count below a
// floor in a complete window, or no traffic for a while.
type Rule struct {
	// Name is required and unique: [a-z0-9][a-z0-9_.-]*.
	Name  string `yaml:"name"`
	Match Match  `yaml:"match"`
	// Exactly one of Threshold (> 0), Milestones (> 0, strictly
	// increasing), Below (> 0) or NoTraffic. See Kind.
	Threshold  int64   `yaml:"threshold"`
	Milestones []int64 `yaml:"milestones"`
	// Below fires when a complete window's count is under it: the window
	// has ended, sweep.lateness has passed, and the collectors of the site
	// have committed their files past its end.
	Below int64 `yaml:"below"`
	// NoTraffic fires once per silence when the page (or the site) has had
	// no hit for this long (whole minutes), on complete data as Below;
	// such a rule has no window.
	NoTraffic Duration `yaml:"no_traffic"`
	// Spike and Drop fire when a complete window's count is far above or
	// below its Baseline: the same window in earlier periods (spike.go).
	Spike    *Spike   `yaml:"spike"`
	Drop     *Drop    `yaml:"drop"`
	Baseline Baseline `yaml:"baseline"`
	// ActiveWithin: a below or no_traffic rule whose path is a glob or a
	// regex watches the pages it matches that had a hit this recently
	// (whole days); pages quiet for longer are forgotten [7d].
	ActiveWithin Duration `yaml:"active_within"`
	// NoDataAfter: a below or no_traffic rule sends one notice when its
	// site's collectors have not caught up for this long; 0: none [1h].
	NoDataAfter Duration `yaml:"no_data_after"`
	// Window is lifetime or a tumbling window: whole minutes dividing a day
	// (5m, 15m, 1h) or whole days (1d, 7d); required but for no_traffic
	// (below needs a tumbling one). See WindowDur.
	Window string `yaml:"window"`
	// Timezone is the IANA zone windows are aligned in [UTC]. See Location.
	Timezone string `yaml:"timezone"`
	// Report is weekly or monthly: the rule sends one report per period
	// (its totals, top pages, largest changes and the crossings recorded),
	// once the period has ended in Timezone and its site's logs are
	// complete past its end. Such a rule has no window.
	Report string `yaml:"report"`
	// Top is how many pages a report lists, in its top pages and in each
	// direction of its largest changes [10].
	Top int `yaml:"top"`
	// WeekStart is the first day of a weekly report's week [monday]: the
	// ISO week.
	WeekStart string `yaml:"week_start"`
	// To is one or more recipients; required.
	To []string `yaml:"to"`
	// Count is what the rule counts: hits, or visitors (distinct client
	// address and user agent pairs in the window) [hits].
	Count string `yaml:"count"`
	// Subject and Text are text/template, HTML is html/template; optional
	// (empty means the built-in template).
	Subject string `yaml:"subject"`
	Text    string `yaml:"text"`
	HTML    string `yaml:"html"`

	// Kind is what the rule fires on: threshold, milestones, below or
	// no_traffic (set by validation).
	Kind string `yaml:"-"`
	// WindowDur is Window parsed; 0 for lifetime.
	WindowDur time.Duration `yaml:"-"`
	// Location is Timezone loaded.
	Location *time.Location `yaml:"-"`
	// WeekDay is WeekStart parsed.
	WeekDay time.Weekday `yaml:"-"`
}

// Visitors is the secret key of the visitor hash: SipHash of each hit's
// (client address, user agent), computed by the collector from the
// address as logged. Every collector of a site must have the same key.
type Visitors struct {
	// KeyEnv names the environment variable holding the key.
	KeyEnv string `yaml:"key_env"`
	// KeyFile is a file holding the key (one trailing newline dropped);
	// relative to the config file; not together with KeyEnv.
	KeyFile string `yaml:"key_file"`
}

// Match selects the hits a rule counts; all given conditions must hold.
type Match struct {
	// Site must be some sources[].site (unless there are no sources);
	// required by below and no_traffic rules.
	Site string `yaml:"site"`
	// Host is an exact Host header.
	Host string `yaml:"host"`
	// Path is exact (/pricing), a glob with * and ** (/blog/*), or ~regex
	// (~^/docs/.+$); required but for below and no_traffic rules, where
	// leaving it out counts the whole site.
	Path   string `yaml:"path"`
	Method string `yaml:"method"`
	// Status is a class (2xx) or an exact status (404).
	Status string `yaml:"status"`
	// ExcludeBots: false, true (the built-in bot pattern) or "~REGEX".
	ExcludeBots BotFilter `yaml:"exclude_bots"`
}

// Load reads, parses, defaults and validates the file at path. The error,
// if any, is an Errors.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, Errors{{File: path, Msg: msg, err: err}}
	}
	return Parse(path, data)
}

// Parse parses, defaults and validates data read from path (path names the
// file in errors and anchors relative paths). The error, if any, is an
// Errors listing every problem found, in file order.
func Parse(path string, data []byte) (*Config, error) {
	d, err := newDoc(path, data)
	if err != nil {
		return nil, err
	}
	cfg := &Config{File: path, loc: &d.locator}
	d.decodeRoot(cfg)
	d.defaults(cfg)
	d.validate(cfg)
	if err := d.errs.sorted(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Resolve makes a path from the config absolute against the config file's
// directory; absolute paths and "" are returned as they are.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

// Default values, one place.
const (
	defaultDatabase      = "hitcount"
	defaultUsername      = "default"
	defaultCompression   = "none"
	defaultDialTimeout   = 5 * time.Second
	defaultInsertTimeout = 30 * time.Second
	defaultQuorumTimeout = 10 * time.Minute
	defaultEmbeddedPath  = "./data"
	defaultFormat        = "auto"
	defaultStartAt       = "end"
	defaultMaxLine       = 1 << 20
	defaultBatchRows     = 50000
	defaultBatchDelay    = time.Second
	defaultMaxPending    = 2
	defaultListen        = "127.0.0.1:9464"
	defaultStateDir      = "./state"
	defaultEvery         = 5 * time.Minute
	defaultClaims        = "local"
	defaultLateness      = 10 * time.Minute
	defaultLease         = 2 * time.Minute
	defaultMaxCrossings  = 1000
	defaultDigestAfter   = 10
	defaultKeeperRoot    = "/hitcount"
	defaultKeeperSession = 10 * time.Second
	defaultSMTPTLS       = "starttls"
	defaultSMTPTimeout   = 30 * time.Second
	defaultOutbox        = "./outbox"
	defaultTimezone      = "UTC"
)

// defaults fills every field that the file does not give.
func (d *doc) defaults(c *Config) {
	str := func(p *string, field, v string) {
		if !d.present[field] {
			*p = v
		}
	}
	num := func(p *int, field string, v int) {
		if !d.present[field] {
			*p = v
		}
	}
	dur := func(p *Duration, field string, v time.Duration) {
		if !d.present[field] {
			p.Duration = v
		}
	}
	dir := filepath.Dir(c.File)
	if ch := c.ClickHouse; ch != nil {
		str(&ch.Database, "clickhouse.database", defaultDatabase)
		str(&ch.Username, "clickhouse.username", defaultUsername)
		str(&ch.Compression, "clickhouse.compression", defaultCompression)
		dur(&ch.DialTimeout, "clickhouse.dial_timeout", defaultDialTimeout)
		dur(&ch.InsertTimeout, "clickhouse.insert_timeout", defaultInsertTimeout)
		dur(&ch.InsertQuorumTimeout, "clickhouse.insert_quorum_timeout", defaultQuorumTimeout)
		ch.dir = dir
	}
	str(&c.Embedded.Path, "embedded.path", defaultEmbeddedPath)
	for i := range c.Sources {
		s, f := &c.Sources[i], itemPath("sources", i)
		str(&s.Format, f+".format", defaultFormat)
		str(&s.Timezone, f+".timezone", defaultTimezone)
		str(&s.StartAt, f+".start_at", defaultStartAt)
		num(&s.MaxLine.Bytes, f+".max_line", defaultMaxLine)
	}
	num(&c.Batch.Rows, "batch.rows", defaultBatchRows)
	dur(&c.Batch.Delay, "batch.delay", defaultBatchDelay)
	num(&c.Batch.MaxPending, "batch.max_pending", defaultMaxPending)
	if c.HTTP.Listen == nil {
		l := defaultListen
		c.HTTP.Listen = &l
	}
	str(&c.StateDir, "state_dir", defaultStateDir)
	dur(&c.Sweep.Every, "sweep.every", defaultEvery)
	str(&c.Sweep.Claims, "sweep.claims", defaultClaims)
	dur(&c.Sweep.Lateness, "sweep.lateness", defaultLateness)
	dur(&c.Sweep.Lease, "sweep.lease", defaultLease)
	num(&c.Sweep.MaxCrossings, "sweep.max_crossings", defaultMaxCrossings)
	num(&c.Sweep.DigestAfter, "sweep.digest_after", defaultDigestAfter)
	if k := c.Keeper; k != nil {
		str(&k.Root, "keeper.root", defaultKeeperRoot)
		dur(&k.SessionTimeout, "keeper.session_timeout", defaultKeeperSession)
		k.dir = dir
	}
	if s := c.SMTP; s != nil {
		str(&s.TLS, "smtp.tls", defaultSMTPTLS)
		if !d.present["smtp.port"] {
			s.Port = 587 // also for an unknown tls, which is reported on its own
			switch s.TLS {
			case "tls":
				s.Port = 465
			case "none":
				s.Port = 25
			}
		}
		dur(&s.Timeout, "smtp.timeout", defaultSMTPTimeout)
		s.dir = dir
	}
	str(&c.Outbox, "outbox", defaultOutbox)
	for i := range c.Rules {
		str(&c.Rules[i].Timezone, itemPath("rules", i)+".timezone", defaultTimezone)
		str(&c.Rules[i].Count, itemPath("rules", i)+".count", CountHits)
	}
}
