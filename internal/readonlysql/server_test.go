package readonlysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/readonlysql"
	"github.com/hitcount/hitcount/internal/testenv"
)

// session is a real engine session that counts its closes.
type session struct {
	*chdb.Engine
	closed *int
}

func (s session) Close() error {
	*s.closed++
	return nil // the test's engine outlives the sessions
}

// Each statement has a session of its own, closed after it; a result whose
// text or number of values would cost the job more than the caps is refused
// before it is parsed.
func TestServerSessionsAndCaps(t *testing.T) {
	e := testenv.Embedded(t)
	ctx := context.Background()
	opened, closed := 0, 0
	open := func(context.Context) (readonlysql.Session, error) {
		opened++
		return session{Engine: e, closed: &closed}, nil
	}
	srv, err := readonlysql.NewServer(ctx, open)
	if err != nil {
		t.Fatal(err)
	}
	cols, _, rows, err := srv.Run(ctx, "SELECT 40 + 2 AS n")
	if err != nil || len(cols) != 1 || cols[0] != "n" || len(rows) != 1 || rows[0][0] != "42" {
		t.Fatalf("SELECT 40 + 2: %v %v %v", cols, rows, err)
	}
	// Text: an Enum's long name is one byte in a block.
	enum := "CAST(1, 'Enum8(''" + strings.Repeat("a", 500) + "'' = 1)')"
	if _, _, _, err := srv.Run(ctx, "SELECT "+enum+" FROM numbers(100000)"); !errors.Is(err, chdb.ErrResultTooLarge) {
		t.Errorf("50 MB of enum names: %v; want ErrResultTooLarge", err)
	}
	// Values: 200 empty columns of 20,000 rows are 4 MB of text and 4 M strings.
	var cs []string
	for range 200 {
		cs = append(cs, "''")
	}
	if _, _, _, err := srv.Run(ctx, "SELECT "+strings.Join(cs, ", ")+" FROM numbers(20000)"); err == nil || !strings.Contains(err.Error(), "values") {
		t.Errorf("4 M empty values: %v; want refused", err)
	}
	if opened != 4 || closed != 4 {
		t.Errorf("sessions opened %d, closed %d: want one per statement plus the gate's, each closed", opened, closed)
	}
}
