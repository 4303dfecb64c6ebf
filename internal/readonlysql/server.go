package readonlysql

import (
	"bytes"
	"context"
	"fmt"

	"github.com/hitcount/hitcount/internal/backend"
)

// Session is one engine session; each statement gets a new one, so nothing a
// caller does (a current database, a temporary table) is seen by the next.
type Session interface {
	Querier
	// QueryMax refuses a result of more than max bytes before copying it.
	QueryMax(ctx context.Context, sql, format string, max int) ([]byte, error)
	Close() error
}

// What one served statement may cost the job beyond the engine's own limits
// (time, memory, rows, block bytes): its text, and the Go strings it is
// parsed into (an empty field is one byte of text and 16 of string header).
const (
	MaxOutput = 32 << 20
	MaxFields = 2_000_000
)

// Server answers statements, each checked by the gate and run on a fresh
// session.
type Server struct {
	open func(ctx context.Context) (Session, error)
	gate *Gate
}

// NewServer checks the engine once (its table functions). open must return a
// session limited by the engine's own settings (readonly, time, memory,
// result size).
func NewServer(ctx context.Context, open func(ctx context.Context) (Session, error)) (*Server, error) {
	s, err := open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	g, err := NewGate(ctx, s)
	if err != nil {
		return nil, err
	}
	return &Server{open: open, gate: g}, nil
}

// Run checks sql and runs its canonical form on a fresh session, returning
// its result as text.
func (s *Server) Run(ctx context.Context, sql string) (columns, types []string, rows [][]string, err error) {
	sess, err := s.open(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open a read-only session: %w", err)
	}
	defer sess.Close()
	canonical, err := s.gate.Check(ctx, sess, sql)
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := sess.QueryMax(ctx, canonical, "TSVWithNamesAndTypes", MaxOutput)
	if err != nil {
		return nil, nil, nil, err
	}
	if n := bytes.Count(out, []byte{'\t'}) + bytes.Count(out, []byte{'\n'}); n > MaxFields {
		return nil, nil, nil, fmt.Errorf("result of about %d values, more than the %d served while the job runs: add a LIMIT or select fewer columns", n, MaxFields)
	}
	res, err := backend.ParseTSVWithNamesAndTypes(out)
	if err != nil {
		return nil, nil, nil, err
	}
	return res.Columns, res.Types, res.Rows, nil
}
