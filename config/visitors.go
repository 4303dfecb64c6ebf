package config

import "fmt"

// What a rule counts (Rule.Count).
const (
	CountHits     = "hits"
	CountVisitors = "visitors"
)

// validateCount checks what a rule counts against its kind and window.
func (d *doc) validateCount(r *Rule, field string) {
	switch r.Count {
	case CountHits:
		return
	case CountVisitors:
	default:
		d.addf(field+".count", "must be hits or visitors (distinct client address and user agent pairs), got %q", r.Count)
		return
	}
	switch {
	case r.Kind == KindNoTraffic:
		d.addf(field+".count", "a no_traffic rule fires on a silence, which has no visitors to count (leave count out)")
	case r.Kind == KindReport:
		d.addf(field+".count", "a report counts hits: its totals, top pages and changes add pages and days up, which distinct visitors do not (leave count out)")
	case r.Window == "lifetime":
		// Distinct visitors do not add up across days: a lifetime count
		// would merge the page's whole history at every sweep.
		d.addf(field+".count", "visitors are counted in a window (5m, 1h, 1d, 7d ...), not over a lifetime: distinct visitors do not add up across days, so a lifetime count would read a page's whole history at every sweep")
	}
}

// validateVisitors checks the visitor hash's key, and that a source that
// anonymizes its clients has one.
func (d *doc) validateVisitors(c *Config) {
	v := c.Visitors
	if v.KeyEnv != "" && !isIdent(v.KeyEnv) {
		d.addf("visitors.key_env", "must be the name of an environment variable (letters, digits, _), not the key itself")
	}
	if v.KeyEnv != "" && v.KeyFile != "" {
		d.addf("visitors.key_file", "give key_env or key_file, not both")
	}
	for i, s := range c.Sources {
		if s.AnonymizeClients && v.KeyEnv == "" && v.KeyFile == "" {
			d.addf(fmt.Sprintf("%s.anonymize_clients", itemPath("sources", i)),
				"needs visitors.key_env or visitors.key_file: visitors are counted from a hash of the whole address, and a hash without a secret key is reversed by trying every IPv4 address")
		}
	}
}
