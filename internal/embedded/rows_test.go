package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
)

// What the alerts store writes through InsertRows comes back unchanged
// through Select, whatever bytes a path or an error message holds, and
// parameters bound into a query cannot change it.
func TestRowsRoundTrip(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(ctx, embedded.Options{LibPath: testenv.RequireChdb(t), DataPath: t.TempDir(), Database: "hitcount"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Date(2026, 11, 23, 10, 11, 12, 0, time.UTC)
	odd := []string{"plain", "tab\there", "new\nline", `back\slash`, "quote'd", "nul\x00byte", "cr\rlf", "ünï\u2028", `x' OR '1'='1`, ""}
	var rows [][]any
	for i, s := range odd {
		rows = append(rows, []any{at.Add(time.Duration(i) * time.Second), at, s, uint32(i), uint32(7)})
	}
	// The zero time is stored as the epoch, as the server driver does.
	if err := st.InsertRows(ctx, "hitcount.sweeps", "finished, watermark, owner, crossings, sent", [][]any{{time.Time{}, time.Unix(5, 0), "zero", uint32(0), uint32(0)}}); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertRows(ctx, "hitcount.sweeps", "finished, watermark, owner, crossings, sent", rows); err != nil {
		t.Fatal(err)
	}
	for i, s := range odd {
		var got []string
		err := st.Select(ctx, "SELECT finished, watermark, owner, crossings, sent FROM hitcount.sweeps WHERE owner = ? AND watermark = toDateTime(?)",
			[]any{s, at.Unix()}, func(scan func(...any) error) error {
				var fin, wm time.Time
				var owner string
				var n, sent uint32
				if err := scan(&fin, &wm, &owner, &n, &sent); err != nil {
					return err
				}
				if !fin.Equal(at.Add(time.Duration(i)*time.Second)) || !wm.Equal(at) || n != uint32(i) || sent != 7 {
					t.Errorf("row %q: got %v %v %d %d", s, fin, wm, n, sent)
				}
				got = append(got, owner)
				return nil
			})
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if len(got) != 1 || got[0] != s {
			t.Errorf("selecting owner %q found %q", s, got)
		}
	}
	n, err := testenv.Count(ctx, st, "SELECT count() FROM hitcount.sweeps WHERE owner = 'zero' AND finished = toDateTime(0) AND watermark = toDateTime(5)")
	if err != nil || n != 1 {
		t.Errorf("zero time and 5 s after the epoch: %d rows match (%v), want 1", n, err)
	}
}
