package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// The racing-replica tests of issue 19's rule kinds (below, spike/drop,
// visitors, reports) share one shape: K `sweeper -once` per tick on one
// store, with keeper claims or local claims, then every crossing checked
// sent and arrived once.

// kindReplicas is raceK replicas claiming through ZooKeeper (claims
// "keeper", each with its own state directory) or through one local state
// directory (the runs after the first are refused); config writes a
// replica's config file.
func (h *raceHarness) kindReplicas(claims string, config func(name, claims, stateDir, extra string) string) []replica {
	var reps []replica
	switch claims {
	case "keeper":
		zk := testenv.ZooKeeper(h.t)
		for i := range raceK {
			cfg := config(fmt.Sprintf("replica%d", i), "keeper", fmt.Sprintf("state%d", i),
				fmt.Sprintf("keeper: {addr: [%q], root: %s, session_timeout: 6s}", zk.Addr(), raceRoot))
			reps = append(reps, replica{name: fmt.Sprintf("keeper%d", i), cfg: cfg})
		}
	default:
		cfg := config("local", "local", "state", "")
		for i := range raceK {
			reps = append(reps, replica{name: fmt.Sprintf("local%d", i), cfg: cfg})
		}
	}
	return reps
}

// onceTicks starts every replica's `sweeper -once` together, ticks times;
// with local claims a run refused as another sweeper is expected.
func (h *raceHarness) onceTicks(reps []replica, claims string, ticks int) {
	refused := func(e exit) bool {
		return claims == "local" && e.code == 1 && strings.Contains(e.stderr, alerts.ErrAnotherSweeper.Error())
	}
	for tick := range ticks {
		stop := h.watch()
		exits := h.tick(reps)
		stop()
		n := h.checkExits(fmt.Sprintf("tick %d", tick), exits, refused)
		h.t.Logf("tick %d: %d replicas, %d refused", tick, len(reps), n)
	}
}

// exactlyOnce reads the mailbox and the table: every crossing recorded is
// sent and arrived once, and no email is for no crossing; bad says each
// one that is not. perKey counts the emails, by crossing key.
func (h *raceHarness) exactlyOnce() (states map[string]string, perKey map[string]int, bad []string) {
	perKey = map[string]int{}
	for _, m := range h.smtp.Messages(h.t) {
		perKey[m.Header.Get("X-Hitcount-Crossing")]++
	}
	states = h.states()
	for k, st := range states {
		if st != alerts.StateSent || perKey[k] != 1 {
			bad = append(bad, fmt.Sprintf("%s: %s, %d emails", k, st, perKey[k]))
		}
	}
	for k, n := range perKey {
		if _, ok := states[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: %d emails for no crossing", k, n))
		}
	}
	return states, perKey, bad
}

// crossingsBy counts the crossings by the latest value of a column of
// crossings (kind, rule).
func (h *raceHarness) crossingsBy(column string) map[string]int {
	out := map[string]int{}
	err := h.store.Select(context.Background(), "SELECT argMax("+column+", version) FROM "+h.db+".crossings GROUP BY key", nil,
		func(scan func(...any) error) error {
			var v string
			if err := scan(&v); err != nil {
				return err
			}
			out[v]++
			return nil
		})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}
