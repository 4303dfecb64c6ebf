package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a YAML duration: Go syntax ("90s", "1h30m") plus days ("1d", "7d").
// It keeps its text until validation, which parses it and reports a bad one at
// its line.
type Duration struct {
	time.Duration
	raw string
	set bool
}

// UnmarshalYAML keeps the raw text.
func (d *Duration) UnmarshalYAML(b []byte) error {
	d.raw = strings.Trim(strings.TrimSpace(string(b)), `"'`)
	d.set = true
	return nil
}

func (d *Duration) def(v time.Duration) {
	if !d.set {
		d.Duration = v
	}
}

// ParseDuration parses Go durations with an added "d" (24h) unit.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil {
			return 0, fmt.Errorf("bad duration %q (use 90s, 5m, 1h, 1d)", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q (use 90s, 5m, 1h, 1d)", s)
	}
	return days + d, nil
}

// Size is a byte count: 1048576, 512KiB, 1MiB, 1MB.
type Size struct {
	Bytes int
	raw   string
	set   bool
}

// UnmarshalYAML keeps the raw text.
func (s *Size) UnmarshalYAML(b []byte) error {
	s.raw = strings.Trim(strings.TrimSpace(string(b)), `"'`)
	s.set = true
	return nil
}

// ParseSize parses a byte count with an optional unit.
func ParseSize(v string) (int, error) {
	units := []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000_000}, {"GB", 1000_000_000}, {"B", 1}}
	v = strings.TrimSpace(v)
	mult := 1
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q (use bytes or KiB, MiB)", v)
	}
	return n * mult, nil
}
