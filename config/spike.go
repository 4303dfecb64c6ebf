package config

import (
	"time"
)

// The kinds of rule that compare a window with a baseline (issue 19).
const (
	KindSpike = "spike"
	KindDrop  = "drop"
)

// Spike fires when a complete window's count is at least Factor times its
// baseline and at least Min.
type Spike struct {
	// Factor is a whole number >= 2 (3: three times the baseline).
	Factor int64 `yaml:"factor"`
	// Min is the least count that fires, >= 1: against a baseline of 0 or
	// 1, one more hit is "infinitely" more.
	Min int64 `yaml:"min"`
}

// Drop fires when a complete window's count is at most its baseline divided
// by Factor, and the baseline is at least MinBaseline.
type Drop struct {
	// Factor is a whole number >= 2 (4: a quarter of the baseline or less).
	Factor int64 `yaml:"factor"`
	// MinBaseline is the least baseline that fires, >= 1: a page with a
	// handful of hits an hour drops to 0 by chance.
	MinBaseline int64 `yaml:"min_baseline"`
}

// Baseline is what a spike or drop rule compares a window with: the same
// window in each of the previous Periods periods of Every.
type Baseline struct {
	// Periods is K, 1 to 60 [7].
	Periods int64 `yaml:"periods"`
	// Every is the period: whole days (1d: the same window on each of the
	// last K days, by the wall clock of the rule's zone; 7d: the same
	// weekday), or the window itself (the previous K windows). Whole days
	// that are a multiple of the window, or the window [1d, or the window
	// when longer].
	Every Duration `yaml:"every"`
	// MinPeriods: at least this many of the K windows must lie after the
	// site's collection began, else the window is not judged [K/2+1].
	MinPeriods int64 `yaml:"min_periods"`
}

// Defaults and bounds of Baseline.
const (
	defaultPeriods = 7
	maxPeriods     = 60
)

// completenessKind reports whether rules of kind are evaluated on complete
// windows only (the site's collectors have committed past them).
func completenessKind(kind string) bool {
	switch kind {
	case KindBelow, KindNoTraffic, KindSpike, KindDrop:
		return true
	}
	return false
}

// validateChange checks and defaults spike, drop and baseline, and refuses
// them on rules of other kinds. The window is checked later
// (validateRule): its duration is read here from the text.
func (d *doc) validateChange(r *Rule, field string) {
	change := r.Kind == KindSpike || r.Kind == KindDrop
	if d.present[field+".baseline"] && !change && r.Kind != "" {
		d.addf(field+".baseline", "only spike and drop rules take a baseline (a %s rule compares with no earlier period)", r.Kind)
	}
	if !change {
		return
	}
	switch {
	case r.Spike != nil:
		if r.Spike.Factor < 2 {
			d.addf(field+".spike.factor", "must be a whole number, at least 2 (3: three times the baseline), got %d", r.Spike.Factor)
		}
		if r.Spike.Min < 1 {
			d.addf(field+".spike.min", "required: the least count that fires, at least 1 (against a baseline of 0 any hit is a spike), got %d", r.Spike.Min)
		}
	case r.Drop != nil:
		if r.Drop.Factor < 2 {
			d.addf(field+".drop.factor", "must be a whole number, at least 2 (4: a quarter of the baseline or less), got %d", r.Drop.Factor)
		}
		if r.Drop.MinBaseline < 1 {
			d.addf(field+".drop.min_baseline", "required: the least baseline that fires, at least 1 (a quiet page drops to 0 by chance), got %d", r.Drop.MinBaseline)
		}
	}
	b := &r.Baseline
	if !d.present[field+".baseline.periods"] {
		b.Periods = defaultPeriods
	} else if b.Periods < 1 || b.Periods > maxPeriods {
		d.addf(field+".baseline.periods", "must be 1 to %d, got %d", maxPeriods, b.Periods)
		return
	}
	if !d.present[field+".baseline.min_periods"] {
		b.MinPeriods = b.Periods/2 + 1
	} else if b.MinPeriods < 1 || b.MinPeriods > b.Periods {
		d.addf(field+".baseline.min_periods", "must be 1 to periods (%d), got %d", b.Periods, b.MinPeriods)
	}
	w, err := ParseDuration(r.Window)
	if err != nil || !validWindow(w) {
		return // said at window
	}
	const day = 24 * time.Hour
	every := b.Every.Duration
	switch {
	case !d.present[field+".baseline.every"]:
		b.Every.Duration = max(day, w)
	case every == w:
	case every%day != 0 || every < w || every%w != 0:
		d.addf(field+".baseline.every", "must be the window (%s: the previous windows) or whole days that are a multiple of it (1d: the same window on earlier days; 7d: on the same weekday), got %v", r.Window, every)
	}
}
