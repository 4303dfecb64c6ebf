package readonlysql

import (
	"context"
	"errors"
	"fmt"
)

// Session is one engine session; each statement gets a new one, so nothing a
// caller does (a current database, a temporary table) is seen by the next.
type Session interface {
	Querier
	Close() error
}

// Server answers statements on fresh sessions, a few at a time: one slow
// query must not hold the only way in, and many must not take the job's
// memory and CPU from the collector.
type Server struct {
	open  func(ctx context.Context) (Session, error)
	gate  *Gate
	slots chan struct{}
}

// ErrBusy says every slot is taken.
var ErrBusy = errors.New("every query slot is busy: try again when a running query ends")

// NewServer checks the engine once (its table functions) and answers at most
// slots statements at once. open must return a session limited by the
// engine's own settings (readonly, time, memory, result size).
func NewServer(ctx context.Context, open func(ctx context.Context) (Session, error), slots int) (*Server, error) {
	s, err := open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	g, err := NewGate(ctx, s)
	if err != nil {
		return nil, err
	}
	return &Server{open: open, gate: g, slots: make(chan struct{}, max(1, slots))}, nil
}

// Run checks sql and runs its canonical form on a fresh session, returning
// the output in format. A full house is ErrBusy at once rather than a wait
// behind a query that may take its whole time limit.
func (s *Server) Run(ctx context.Context, sql, format string) ([]byte, error) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		return nil, ErrBusy
	}
	sess, err := s.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open a read-only session: %w", err)
	}
	defer sess.Close()
	canonical, err := s.gate.Check(ctx, sess, sql)
	if err != nil {
		return nil, err
	}
	return sess.Query(ctx, canonical, format)
}
