// Package liveview prints, every few seconds, what the store holds: hits
// stored and their rate, rejected lines, the busiest pages, and the
// crossings by state. It is the terminal view of standalone mode, where the
// embedded engine belongs to one process and no other can query it.
package liveview

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/tableout"
)

// Options configure the view.
type Options struct {
	DB       alerts.DB
	Database string
	Every    time.Duration
	Top      int
	Out      io.Writer
	// Rejected is how many lines did not parse since the job started
	// (collector.RejectedLines). The store cannot say: its rejects table
	// keeps a sample, at most 100 lines per batch. Nil: the view shows the
	// sample's size, as such.
	Rejected func() uint64
}

// Run prints a view every o.Every until ctx ends. A failed query is printed
// in the view, not returned: the view never stops the job it watches.
func Run(ctx context.Context, o Options) error {
	if o.Top <= 0 {
		o.Top = 5
	}
	t := time.NewTicker(o.Every)
	defer t.Stop()
	var last uint64
	var lastAt time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			var b strings.Builder
			if err := render(ctx, &b, o, now, &last, &lastAt); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// An error can quote what it failed on: shown escaped too.
				fmt.Fprintf(&b, "live view: %s\n", tableout.Escape(err.Error()))
			}
			io.WriteString(o.Out, b.String())
		}
	}
}

func one(ctx context.Context, db alerts.DB, q string) (uint64, error) {
	var n uint64
	err := db.Select(ctx, q, nil, func(scan func(...any) error) error { return scan(&n) })
	return n, err
}

func render(ctx context.Context, b *strings.Builder, o Options, now time.Time, last *uint64, lastAt *time.Time) error {
	db := o.Database
	hits, err := one(ctx, o.DB, "SELECT count() FROM "+db+".hits")
	if err != nil {
		return err
	}
	sampled, err := one(ctx, o.DB, "SELECT count() FROM "+db+".rejects")
	if err != nil {
		return err
	}
	rejected := fmt.Sprintf("rejected lines: %d sampled in %s.rejects", sampled, db)
	if o.Rejected != nil {
		rejected = fmt.Sprintf("rejected lines %d since start (%d sampled in %s.rejects)", o.Rejected(), sampled, db)
	}
	rate := ""
	if !lastAt.IsZero() {
		if s := now.Sub(*lastAt).Seconds(); s > 0 && hits >= *last {
			rate = fmt.Sprintf(" (%.0f/s)", float64(hits-*last)/s)
		}
	}
	*last, *lastAt = hits, now
	states := map[string]uint64{}
	err = o.DB.Select(ctx, "SELECT st, count() FROM (SELECT argMax(state, version) AS st FROM "+db+".crossings GROUP BY key) GROUP BY st", nil,
		func(scan func(...any) error) error {
			var st string
			var n uint64
			if err := scan(&st, &n); err != nil {
				return err
			}
			states[st] = n
			return nil
		})
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "\n[%s] hits %d%s, %s, crossings sent %d, waiting %d, failed %d\n", now.Format(time.TimeOnly),
		hits, rate, rejected, states[alerts.StateSent], states[alerts.StateDetected]+states[alerts.StateClaimed], states[alerts.StateFailed])
	var rows [][]string
	err = o.DB.Select(ctx, "SELECT site, path, sum(hits) AS h FROM "+db+".hits_1d GROUP BY site, path ORDER BY h DESC, path LIMIT ?", []any{o.Top},
		func(scan func(...any) error) error {
			var site, path string
			var n uint64
			if err := scan(&site, &path, &n); err != nil {
				return err
			}
			rows = append(rows, []string{site, path, fmt.Sprint(n)})
			return nil
		})
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	// The table format escapes every value (tableout.Escape): paths and
	// sites are what clients sent.
	return tableout.Write(b, "table", []string{"site", "path", "hits"}, []string{"String", "String", "UInt64"}, rows)
}
