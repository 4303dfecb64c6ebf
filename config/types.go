package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Duration is a duration from the file: Go syntax ("90s", "1h30m") plus days
// ("1d", "7d", "1d12h"). It is a time.Duration; the struct only keeps the
// field's name stable for callers (c.Batch.Delay.Duration).
type Duration struct {
	time.Duration
}

// ParseDuration parses a Go duration with an added leading "d" (24h) unit:
// "90s", "5m", "1h", "1d", "7d", "1d12h".
func ParseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, errors.New("empty duration (use 90s, 5m, 1h, 1d)")
	}
	bad := fmt.Errorf("bad duration %q (use 90s, 5m, 1h, 1d)", in)
	rest, neg := in, false
	if r, ok := strings.CutPrefix(rest, "-"); ok {
		rest, neg = r, true
	}
	var days time.Duration
	if i := strings.IndexByte(rest, 'd'); i >= 0 {
		n, err := strconv.ParseUint(rest[:i], 10, 16)
		if err != nil {
			return 0, bad
		}
		days, rest = time.Duration(n)*24*time.Hour, rest[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return 0, bad
		}
	}
	d += days
	if neg {
		d = -d
	}
	return d, nil
}

// Size is a byte count from the file: 1048576, 512KiB, 1MiB, 1MB.
type Size struct {
	Bytes int
}

// ParseSize parses a byte count with an optional unit (B, KiB, MiB, GiB,
// KB, MB, GB).
func ParseSize(s string) (int, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	v := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("bad size %q (use bytes, or a number with KiB, MiB, GiB)", strings.TrimSpace(s))
	}
	return int(n * mult), nil
}

// BotFilter is a rule's match.exclude_bots as written: "" or "false" counts
// every user agent; "true" leaves out those the schema's built-in pattern
// marks as bots (the bot column of the rollups, sink.BotPattern); "~REGEX"
// leaves out those REGEX matches instead (RE2, as ClickHouse's match()
// reads it), counted from hits, since the rollups keep only the built-in
// mark.
type BotFilter string

// Exclude reports whether some user agents are left out.
func (f BotFilter) Exclude() bool { return f != "" && f != "false" }

// Pattern is REGEX of "~REGEX"; "" for the built-in pattern or none.
func (f BotFilter) Pattern() string {
	re, _ := strings.CutPrefix(string(f), "~")
	if re == string(f) {
		return ""
	}
	return re
}

// parseBotFilter reads the scalar text of a string exclude_bots.
func parseBotFilter(s string) (BotFilter, error) {
	re, ok := strings.CutPrefix(s, "~")
	if !ok {
		return "", fmt.Errorf("must be true, false, or ~ and a regular expression of user agents to leave out (~(?i)bot|spider), got %q", s)
	}
	if re == "" {
		return "", errors.New("~ needs a regular expression after it (~(?i)bot|spider); true leaves out the built-in pattern")
	}
	if _, err := regexp.Compile(re); err != nil {
		return "", fmt.Errorf("bad regex: %v", err)
	}
	return BotFilter(s), nil
}
