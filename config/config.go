// Package config reads the one YAML file that configures the collector, the
// sweeper and standalone mode. Every problem in a file is reported at once,
// each with file:line:column and the field's path, so an operator fixes a
// config in one pass.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Config is the whole file. Defaults are applied by Parse.
type Config struct {
	// ClickHouse selects server mode; nil means the embedded store.
	ClickHouse *ClickHouse `yaml:"clickhouse"`
	Embedded   Embedded    `yaml:"embedded"`
	Sources    []Source    `yaml:"sources"`
	Batch      Batch       `yaml:"batch"`
	HTTP       HTTP        `yaml:"http"`
	// StateDir holds local hints: the positions file, lock files [./state].
	StateDir string  `yaml:"state_dir"`
	Sweep    Sweep   `yaml:"sweep"`
	Keeper   *Keeper `yaml:"keeper"`
	// SMTP, when nil, sends nothing: messages are written to Outbox as .eml files.
	SMTP   *SMTP  `yaml:"smtp"`
	Outbox string `yaml:"outbox"` // [./outbox]
	Rules  []Rule `yaml:"rules"`

	// File is the path the config was read from; relative paths in it are
	// resolved against its directory.
	File string `yaml:"-"`
}

// ClickHouse is a server connection.
type ClickHouse struct {
	Addr         []string `yaml:"addr"`     // host:port, native protocol
	Database     string   `yaml:"database"` // [hitcount]
	Username     string   `yaml:"username"` // [default]
	PasswordEnv  string   `yaml:"password_env"`
	PasswordFile string   `yaml:"password_file"`
	// Password is refused: secrets belong in the environment or a file.
	Password      *string  `yaml:"password"`
	TLS           TLS      `yaml:"tls"`
	Compression   string   `yaml:"compression"`    // none | lz4 | zstd [none]
	DialTimeout   Duration `yaml:"dial_timeout"`   // [5s]
	InsertTimeout Duration `yaml:"insert_timeout"` // [30s]
	Cluster       string   `yaml:"cluster"`
}

// TLS configures TLS to ClickHouse.
type TLS struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"ca_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Embedded is the embedded engine's store.
type Embedded struct {
	Path string `yaml:"path"` // [./data]
}

// Source is a log to ship.
type Source struct {
	Path    string `yaml:"path"`     // glob, ** allowed
	Format  string `yaml:"format"`   // [combined]
	Site    string `yaml:"site"`     // required
	StartAt string `yaml:"start_at"` // beginning | end [end]
	MaxLine Size   `yaml:"max_line"` // [1MiB]
}

// Batch tunes inserts.
type Batch struct {
	Rows       int      `yaml:"rows"`        // [50000]
	Delay      Duration `yaml:"delay"`       // [1s]
	MaxPending int      `yaml:"max_pending"` // [2]
}

// HTTP is the operations endpoint.
type HTTP struct {
	// Listen is host:port for /metrics, /healthz, /readyz; "" disables it.
	Listen *string `yaml:"listen"` // [127.0.0.1:9464]
}

// Sweep tunes the sweeper.
type Sweep struct {
	Every        Duration `yaml:"every"`         // [5m]
	Claims       string   `yaml:"claims"`        // local | keeper | keepermap [local]
	Lateness     Duration `yaml:"lateness"`      // [10m]
	Lease        Duration `yaml:"lease"`         // [2m]
	MaxCrossings int      `yaml:"max_crossings"` // [1000]
	DigestAfter  int      `yaml:"digest_after"`  // [10]
}

// Keeper is a ClickHouse Keeper or ZooKeeper ensemble.
type Keeper struct {
	Addr           []string `yaml:"addr"`
	Root           string   `yaml:"root"`            // [/hitcount]
	SessionTimeout Duration `yaml:"session_timeout"` // [10s]
	Username       string   `yaml:"username"`
	PasswordEnv    string   `yaml:"password_env"`
	PasswordFile   string   `yaml:"password_file"`
}

// SMTP is the mail server.
type SMTP struct {
	Host         string   `yaml:"host"`
	Port         int      `yaml:"port"` // [587 starttls, 465 tls, 25 none]
	TLS          string   `yaml:"tls"`  // starttls | tls | none [starttls]
	Username     string   `yaml:"username"`
	PasswordEnv  string   `yaml:"password_env"`
	PasswordFile string   `yaml:"password_file"`
	Password     *string  `yaml:"password"`
	From         string   `yaml:"from"`
	Timeout      Duration `yaml:"timeout"` // [30s]
}

// Rule is a threshold trigger.
type Rule struct {
	Name       string   `yaml:"name"`
	Match      Match    `yaml:"match"`
	Threshold  int64    `yaml:"threshold"`
	Milestones []int64  `yaml:"milestones"`
	Window     string   `yaml:"window"`   // lifetime | 5m, 1h, 1d ...
	Timezone   string   `yaml:"timezone"` // [UTC]
	To         []string `yaml:"to"`
	Subject    string   `yaml:"subject"`
	Text       string   `yaml:"text"`
	HTML       string   `yaml:"html"`

	// Resolved by validation.
	WindowDur time.Duration  `yaml:"-"` // 0 for lifetime
	Location  *time.Location `yaml:"-"`
}

// Match selects the hits a rule counts.
type Match struct {
	Site        string `yaml:"site"`
	Host        string `yaml:"host"`
	Path        string `yaml:"path"` // exact, glob (*, **) or ~regex
	Method      string `yaml:"method"`
	Status      string `yaml:"status"` // 2xx or 404
	ExcludeBots bool   `yaml:"exclude_bots"`
}

// Load reads and checks the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse checks data read from path. The error, if any, is an Errors listing
// every problem found.
func Parse(path string, data []byte) (*Config, error) {
	cfg := &Config{File: path}
	d, err := newDoc(path, data)
	if err != nil {
		return nil, err
	}
	d.decode(cfg)
	cfg.defaults()
	d.validate(cfg)
	if err := d.errs.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Resolve makes a path from the config absolute against the config's directory.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

func (c *Config) defaults() {
	if c.ClickHouse != nil {
		ch := c.ClickHouse
		if ch.Database == "" {
			ch.Database = "hitcount"
		}
		if ch.Username == "" {
			ch.Username = "default"
		}
		if ch.Compression == "" {
			ch.Compression = "none"
		}
		ch.DialTimeout.def(5 * time.Second)
		ch.InsertTimeout.def(30 * time.Second)
	}
	if c.Embedded.Path == "" {
		c.Embedded.Path = "./data"
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		if s.Format == "" {
			s.Format = "combined"
		}
		if s.StartAt == "" {
			s.StartAt = "end"
		}
		if s.MaxLine.Bytes == 0 && !s.MaxLine.set {
			s.MaxLine.Bytes = 1 << 20
		}
	}
	if c.Batch.Rows == 0 {
		c.Batch.Rows = 50000
	}
	c.Batch.Delay.def(time.Second)
	if c.Batch.MaxPending == 0 {
		c.Batch.MaxPending = 2
	}
	if c.HTTP.Listen == nil {
		l := "127.0.0.1:9464"
		c.HTTP.Listen = &l
	}
	if c.StateDir == "" {
		c.StateDir = "./state"
	}
	c.Sweep.Every.def(5 * time.Minute)
	if c.Sweep.Claims == "" {
		c.Sweep.Claims = "local"
	}
	c.Sweep.Lateness.def(10 * time.Minute)
	c.Sweep.Lease.def(2 * time.Minute)
	if c.Sweep.MaxCrossings == 0 {
		c.Sweep.MaxCrossings = 1000
	}
	if c.Sweep.DigestAfter == 0 {
		c.Sweep.DigestAfter = 10
	}
	if c.Keeper != nil {
		if c.Keeper.Root == "" {
			c.Keeper.Root = "/hitcount"
		}
		c.Keeper.SessionTimeout.def(10 * time.Second)
	}
	if c.SMTP != nil {
		if c.SMTP.TLS == "" {
			c.SMTP.TLS = "starttls"
		}
		if c.SMTP.Port == 0 {
			c.SMTP.Port = map[string]int{"starttls": 587, "tls": 465, "none": 25}[c.SMTP.TLS]
		}
		c.SMTP.Timeout.def(30 * time.Second)
	}
	if c.Outbox == "" {
		c.Outbox = "./outbox"
	}
	for i := range c.Rules {
		if c.Rules[i].Timezone == "" {
			c.Rules[i].Timezone = "UTC"
		}
	}
}
