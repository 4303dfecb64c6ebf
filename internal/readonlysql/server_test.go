package readonlysql_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/readonlysql"
	"github.com/hitcount/hitcount/internal/testenv"
)

// session is a real engine session whose statements can be held mid-run.
type session struct {
	*chdb.Engine
	hold    chan struct{} // a statement "SELECT 'slow'" waits here
	entered chan struct{} // after saying it has started
	closed  *int
	mu      *sync.Mutex
}

func (s session) Query(ctx context.Context, sql, format string) ([]byte, error) {
	if strings.HasPrefix(sql, "SELECT 'slow'") {
		s.entered <- struct{}{}
		<-s.hold
	}
	return s.Engine.Query(ctx, sql, format)
}

func (s session) Close() error {
	s.mu.Lock()
	*s.closed++
	s.mu.Unlock()
	return nil // the test's engine outlives the sessions
}

// A slow statement holds one slot, not the way in; a full house is refused
// at once; each statement has a session of its own, closed after it.
func TestServerSlotsAndSessions(t *testing.T) {
	e := testenv.Embedded(t)
	ctx := context.Background()
	hold, entered := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	opened, closed := 0, 0
	open := func(context.Context) (readonlysql.Session, error) {
		mu.Lock()
		opened++
		mu.Unlock()
		return session{Engine: e, hold: hold, entered: entered, closed: &closed, mu: &mu}, nil
	}
	srv, err := readonlysql.NewServer(ctx, open, 2)
	if err != nil {
		t.Fatal(err)
	}
	slow := make(chan error)
	go func() {
		_, err := srv.Run(ctx, "SELECT 'slow'", "TSV")
		slow <- err
	}()
	<-entered
	out, err := srv.Run(ctx, "SELECT 40 + 2", "TSV")
	if err != nil || string(out) != "42\n" {
		t.Fatalf("a query beside a slow one: %q, %v; want 42", out, err)
	}
	slow2 := make(chan error)
	go func() {
		_, err := srv.Run(ctx, "SELECT 'slow'", "TSV")
		slow2 <- err
	}()
	<-entered
	if _, err := srv.Run(ctx, "SELECT 1", "TSV"); !errors.Is(err, readonlysql.ErrBusy) {
		t.Errorf("a third query while two run: %v; want ErrBusy", err)
	}
	close(hold)
	if err := <-slow; err != nil {
		t.Errorf("slow query: %v", err)
	}
	if err := <-slow2; err != nil {
		t.Errorf("second slow query: %v", err)
	}
	if _, err := srv.Run(ctx, "SELECT 1", "TSV"); err != nil {
		t.Errorf("after the slow ones ended: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if opened < 5 || opened != closed {
		t.Errorf("sessions opened %d, closed %d: want one per statement (plus the gate's), each closed", opened, closed)
	}
}
