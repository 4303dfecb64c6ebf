package config

import (
	"fmt"
	"net"

	"github.com/bmatcuk/doublestar/v4"
)

// Warnings reports what the file may say but leaves exposed, in file order,
// each with its place like an error: -check-config prints them, and the
// commands log the ones that concern what they open at start. They are
// warnings, not errors, because each has a deployment where it is the
// operator's informed choice.
func (c *Config) Warnings() Errors {
	ws := c.ClickHouseWarnings()
	if c.Sweep.Claims == "keeper" && c.Keeper != nil && c.Keeper.Username == "" {
		ws = append(ws, c.problem("keeper", "no username: claim nodes are world-writable, so anyone who reaches the ensemble can delete or forge claims (duplicate or lost alerts); set keeper.username and keeper.password_env or password_file"))
	}
	if es, ok := ws.sorted().(Errors); ok {
		return es
	}
	return nil
}

// ClickHouseWarnings reports a ClickHouse password that would cross the
// network in clear text: TLS off, a password configured, and a host that is
// not loopback. Plain text stays allowed: the compose and Kubernetes
// deployments reach ClickHouse by service name on a private network, where
// TLS would add certificates and nothing else; elsewhere the operator should
// know.
func (c *Config) ClickHouseWarnings() Errors {
	ch := c.ClickHouse
	if ch == nil || ch.TLS.Enabled || (ch.PasswordEnv == "" && ch.PasswordFile == "") {
		return nil
	}
	source := "password_env"
	if ch.PasswordEnv == "" {
		source = "password_file"
	}
	for i, a := range ch.Addr {
		host, _, err := net.SplitHostPort(a)
		if err != nil || isLoopback(host) {
			continue
		}
		// One warning names the first such address: the fix is the same
		// for all.
		return Errors{c.problem(itemPath("clickhouse.addr", i), fmt.Sprintf(
			"%q is not a loopback address and clickhouse.tls is off: the password (%s) crosses the network in clear text; set clickhouse.tls.enabled: true unless the network is private", a, source))}
	}
	return nil
}

// SourceWarnings reports each source whose path matches no file now: a typo
// passes every other check and would ship nothing without a word. Allowed (a
// sidecar may start before the web server writes its log), and said where
// the collector's configuration is checked; the collector logs it too.
func (c *Config) SourceWarnings() Errors {
	var ws Errors
	for i, s := range c.Sources {
		if s.Path == "" {
			continue
		}
		matches, err := doublestar.FilepathGlob(c.Resolve(s.Path))
		if err == nil && len(matches) == 0 {
			ws = append(ws, c.problem(itemPath("sources", i)+".path", fmt.Sprintf(
				"%q matches no file now: a typo, or a log the web server has not written yet (the collector keeps looking and logs when it appears)", s.Path)))
		}
	}
	return ws
}
