package testenv

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CHOption adds to the configuration of a ClickHouse server.
type CHOption func(*chConfig)

type chConfig struct {
	zookeeper []string
	session   time.Duration // ZooKeeper session timeout, 0: the server's default (30 s, capped by ZooKeeper at 20 s)
	macros    map[string]string
	extraXML  []string
}

// WithZooKeeper points the server at ZooKeeper (host:port each), which
// Replicated*MergeTree tables and ON CLUSTER DDL need.
func WithZooKeeper(addrs ...string) CHOption {
	return func(c *chConfig) { c.zookeeper = append(c.zookeeper, addrs...) }
}

// WithZooKeeperSession sets the server's ZooKeeper session timeout: how soon
// the others see a killed server's replicas as inactive (ephemeral nodes
// gone), 20 s otherwise (the test ZooKeeper's cap).
func WithZooKeeperSession(d time.Duration) CHOption {
	return func(c *chConfig) { c.session = d }
}

// WithMacros sets the server's macros, e.g. {"shard": "01", "replica": "r1"}
// for ReplicatedMergeTree('/clickhouse/tables/{shard}/t', '{replica}').
func WithMacros(m map[string]string) CHOption {
	return func(c *chConfig) {
		if c.macros == nil {
			c.macros = map[string]string{}
		}
		for k, v := range m {
			c.macros[k] = v
		}
	}
}

// WithConfigXML adds raw XML inside the config's root element, which is
// <yandex> on 18.16 (e.g. "<remote_servers>...</remote_servers>").
func WithConfigXML(raw string) CHOption {
	return func(c *chConfig) { c.extraXML = append(c.extraXML, raw) }
}

// writeClickHouseConfig writes config.xml and users.xml into dir and returns
// the path of config.xml. Every path the server writes to is under dir.
func writeClickHouseConfig(dir string, tcp, http, interserver int, c chConfig) (string, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("<?xml version=\"1.0\"?>\n<yandex>\n")
	p("  <logger>\n    <level>information</level>\n    <log>%s</log>\n    <errorlog>%s</errorlog>\n",
		esc(filepath.Join(dir, "log", "clickhouse-server.log")), esc(filepath.Join(dir, "log", "clickhouse-server.err.log")))
	p("    <size>100M</size>\n    <count>1</count>\n    <console>0</console>\n  </logger>\n")
	p("  <listen_host>127.0.0.1</listen_host>\n")
	p("  <tcp_port>%d</tcp_port>\n  <http_port>%d</http_port>\n  <interserver_http_port>%d</interserver_http_port>\n", tcp, http, interserver)
	// Replicas tell each other this host; the default is the machine's FQDN.
	p("  <interserver_http_host>127.0.0.1</interserver_http_host>\n")
	for _, d := range []struct{ tag, sub string }{
		{"path", "data"}, {"tmp_path", "tmp"}, {"user_files_path", "user_files"}, {"format_schema_path", "format_schemas"},
	} {
		// 18.16 joins file names onto these paths: the trailing slash matters.
		p("  <%s>%s/</%s>\n", d.tag, esc(filepath.Join(dir, d.sub)), d.tag)
	}
	p("  <users_config>%s</users_config>\n", esc(filepath.Join(dir, "users.xml")))
	p("  <default_profile>default</default_profile>\n  <default_database>default</default_database>\n")
	// Tests compare DateTime values; don't let them depend on the machine's zone.
	p("  <timezone>UTC</timezone>\n")
	p("  <mark_cache_size>268435456</mark_cache_size>\n  <mlock_executable>false</mlock_executable>\n")
	if len(c.zookeeper) > 0 {
		p("  <zookeeper>\n")
		for i, addr := range c.zookeeper {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return "", fmt.Errorf("zookeeper address %q: %w", addr, err)
			}
			p("    <node index=\"%d\"><host>%s</host><port>%s</port></node>\n", i+1, esc(host), esc(port))
		}
		if c.session > 0 {
			p("    <session_timeout_ms>%d</session_timeout_ms>\n", c.session.Milliseconds())
		}
		p("  </zookeeper>\n")
	}
	if len(c.macros) > 0 {
		p("  <macros>\n")
		for _, k := range slices.Sorted(maps.Keys(c.macros)) {
			p("    <%s>%s</%s>\n", k, esc(c.macros[k]), k)
		}
		p("  </macros>\n")
	}
	for _, raw := range c.extraXML {
		p("  %s\n", raw)
	}
	p("</yandex>\n")
	cfg := filepath.Join(dir, "config.xml")
	if err := os.WriteFile(cfg, b.Bytes(), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(usersXML), 0o644); err != nil {
		return "", err
	}
	return cfg, nil
}

// usersXML has the shape 18.16 expects: profiles, users (each naming a profile
// and a quota) and quotas. The quota must exist: without it every login fails
// with "Unknown quota default".
const usersXML = `<?xml version="1.0"?>
<yandex>
  <profiles>
    <default>
      <!-- An idle connection's handler checks for shutdown every poll_interval
           seconds, and SIGTERM waits for it: 10 s by default per restart. -->
      <poll_interval>1</poll_interval>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks>
        <ip>::1</ip>
        <ip>127.0.0.1</ip>
      </networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas>
    <default>
      <interval>
        <duration>3600</duration>
        <queries>0</queries>
        <errors>0</errors>
        <result_rows>0</result_rows>
        <read_rows>0</read_rows>
        <execution_time>0</execution_time>
      </interval>
    </default>
  </quotas>
</yandex>
`

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
