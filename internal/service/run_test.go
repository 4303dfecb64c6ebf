package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	waits := Part{Name: "waits", Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	cases := []struct {
		name  string
		parts []Part
		want  string // "" for nil
	}{
		{"a failure stops the others and names its part", []Part{waits, {Name: "collector", Run: func(context.Context) error { return errors.New("disk full") }}}, "collector: disk full"},
		{"a part that ends on its own is a failure", []Part{waits, {Name: "sweeper", Run: func(context.Context) error { return nil }}}, "sweeper stopped unexpectedly"},
		{"the end of ctx is a clean stop", []Part{waits, waits}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := RunWith(ctx, log, nil, nil, c.parts...)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}
