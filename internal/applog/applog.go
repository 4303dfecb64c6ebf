// Package applog makes the logger every hitcount command writes with: the
// level and format the operator chose, and log content made safe for the
// terminal it is read on.
package applog

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/hitcount/hitcount/internal/tableout"
)

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error") in format ("text" or "json").
//
// Attribute values carry request paths, hosts and file names from access
// logs. slog's text handler quotes them (strconv.Quote escapes every
// character that is not printable); its JSON handler escapes C0 controls but
// writes DEL, C1 controls (U+009B is a CSI to a terminal) and bidi characters
// raw. So its lines pass through tableout.EscapeJSON, which writes those as
// \uNNNN: the same JSON text, read back the same.
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(jsonSafe{w}, opts)), nil
	}
	return nil, fmt.Errorf("-log-format must be text or json, got %q", format)
}

// jsonSafe escapes each JSON log line; slog's handlers write a record in one
// Write.
type jsonSafe struct{ w io.Writer }

func (j jsonSafe) Write(p []byte) (int, error) {
	if _, err := j.w.Write(tableout.EscapeJSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
