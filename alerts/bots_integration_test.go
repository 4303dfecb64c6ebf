package alerts_test

import (
	"context"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// match.exclude_bots on both stores: false counts every user agent; true
// leaves out what the built-in pattern marks (curl, wget and
// python-requests included, so test traffic from them counts for nothing);
// ~REGEX leaves out only what it matches, in the counts and in the
// message's series alike.
func TestExcludeBots(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testExcludeBots)
}

func testExcludeBots(t *testing.T, d *testenv.Database) {
	e := newEnv(t, d)
	hour := time.Now().UTC().Truncate(time.Hour)
	agents := map[string]int{
		"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0": 10,
		"curl/8.5.0":             20,
		"Wget/1.21.4":            30,
		"python-requests/2.31.0": 40,
		"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)": 50,
		"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)":  60,
	}
	for ua, n := range agents {
		e.hits("www", "/p", n, hour.Add(time.Minute), ua)
	}
	rules := e.rules(`
rules:
  - {name: all, match: {path: /p, exclude_bots: false}, threshold: 1, window: 1h, to: [a@b.c]}
  - {name: builtin, match: {path: /p, exclude_bots: true}, threshold: 1, window: 1h, to: [a@b.c]}
  - {name: crawlers, match: {path: /p, exclude_bots: "~(?i)(bot|crawl|spider)"}, threshold: 1, window: 1h, to: [a@b.c]}
  - {name: builtin-lifetime, match: {path: /p, exclude_bots: true}, threshold: 1, window: lifetime, to: [a@b.c]}
`)
	st := alerts.NewStore(e.store, e.db)
	want := map[string]int64{"all": 210, "builtin": 10, "crawlers": 100, "builtin-lifetime": 10}
	for _, r := range rules {
		got, err := st.Counts(context.Background(), r, "www", []string{"/p"}, hour, hour.Add(time.Hour))
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if got["/p"] != want[r.Name] {
			t.Errorf("rule %s counts %d, want %d", r.Name, got["/p"], want[r.Name])
		}
		if r.Window.Size == 0 {
			continue
		}
		series, err := st.Series(context.Background(), r, "www", "/p", hour, hour.Add(time.Hour), 10*time.Minute)
		if err != nil {
			t.Fatalf("%s series: %v", r.Name, err)
		}
		if len(series) != 1 || !series[0].Time.Equal(hour) || series[0].Hits != want[r.Name] {
			t.Errorf("rule %s series %+v, want one step at %s with %d", r.Name, series, hour, want[r.Name])
		}
	}
}
