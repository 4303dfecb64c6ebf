package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Which collector ships each source: the source_owners table (issue 16,
// finding 6). Two collectors reading the same file (two containers sharing
// a log volume, each with a state directory of its own) each ship its
// lines, and the store takes both. ClickHouse has no compare-and-set, so
// this is detection, not a lock: each collector writes a record per source
// it ships or waits for, (source, collector, host, path, started, seen),
// refreshed every interval, and reads the others'. A record not refreshed
// within the window is stale; of the live records of a source the one
// started first (then the lowest collector id) ships it, and every
// collector reading the same records agrees which. The times are the
// store's (now()), never a collector's: two hosts' clocks differ.
//
// A claim is written before the records are read (ClaimSources does both),
// so of two collectors claiming a source at the same moment at least the
// later reader sees the other; the residue (inserts that overlap, a replica
// that lags) is caught by the next refresh.
//
// The same records carry the collector's word on completeness (issue 19): a
// window of a site with few hits looks the same as a collector that is down
// or behind, so the sweeper evaluates below and no_traffic rules only on
// windows the collectors say they have committed. caught_up is the store's
// time at which the collector last had every line of the source committed
// (its reader at the end of the file, no batch of it pending or in flight,
// when the round began); otherwise the last such time it knew. A claim that
// every line written before T is committed stays true, so the sweeper takes
// the largest value ever written for a source, by any collector. A source
// read to its end and given up for good (a rotated file finished, a file
// gone) is caught up for ever (CaughtUpForever). Each collector also writes
// one record per site it reads (SiteRecordID), refreshed with the others:
// it says the collector is there for that site even when none of its files
// has a line yet (a log emptied by rotation has no source id until its
// first line), so a live collector with nothing to read is not mistaken for
// one that is gone.

// Claim is one collector's records, written in one insert.
type Claim struct {
	Collector string // the collector's instance id
	Host      string // its host name, for operators
	// Window: a record seen within it is live.
	Window  time.Duration
	Sources []ClaimedSource
}

// ClaimedSource is a source the collector ships, waits for, or gives up.
type ClaimedSource struct {
	ID   uint64
	Site string
	Path string
	// Started is when the collector's claim began, as the store returned
	// it (ClaimSources' now); zero: a new claim, started now.
	Started time.Time
	// Release gives the source up (a collector stopping, a file gone):
	// the record no longer counts as live.
	Release bool
	// CaughtUp: every line of the source was committed when the round
	// began: caught_up is the round's time. Otherwise it is LastCaughtUp
	// (zero: never known), or CaughtUpForever when Finished.
	CaughtUp     bool
	LastCaughtUp time.Time
	// Finished: the source is read to its end and given up for good (a
	// rotated file finished, a file gone): caught up for ever.
	Finished bool
}

// CaughtUpForever is the caught_up of a source that will never have
// another line: a finished rotated file, a file gone.
var CaughtUpForever = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// caughtUpNever is the caught_up of a source never known to be caught up
// (the column's default too).
var caughtUpNever = time.Unix(0, 0).UTC()

// SiteRecordID is the source id of a collector's record of a site as a
// whole (see above): a hash no fingerprint of a file's first line is
// expected to meet (both are 64-bit hashes of different inputs).
func SiteRecordID(site string) uint64 {
	h := fnv.New64a()
	h.Write([]byte("hitcount site record\x00"))
	h.Write([]byte(site))
	return h.Sum64()
}

// SiteRecord is a collector's record of a site it reads (paths: the
// configured globs of that site, for operators), caught up as of the round.
func SiteRecord(site, paths string) ClaimedSource {
	return ClaimedSource{ID: SiteRecordID(site), Site: site, Path: paths, CaughtUp: true}
}

// Owner is a live record of a source: a collector that ships it or waits
// for it.
type Owner struct {
	Source    uint64
	Collector string
	Host      string
	Path      string
	Started   time.Time
	Seen      time.Time
}

// OwnersColumns are the columns an insert into source_owners writes, in
// ClaimRows order.
const OwnersColumns = ownersLegacyColumns + ", caught_up"

// ownersLegacyColumns are those of a table made before caught_up, which
// Migrate could not bring up to the schema (columns.go).
const ownersLegacyColumns = "source_id, site, collector, host, path, started, seen, released"

// ReleasesOnly reports whether c only gives sources up: nothing to read
// back (a collector stopping need not wait for its replica).
func (c Claim) ReleasesOnly() bool {
	for _, s := range c.Sources {
		if !s.Release {
			return false
		}
	}
	return true
}

// ClaimRows are c's rows for source_owners, stamped now (the store's
// clock).
func ClaimRows(c Claim, now time.Time) [][]any {
	rows := make([][]any, 0, len(c.Sources))
	for _, s := range c.Sources {
		started := s.Started
		if started.IsZero() {
			started = now
		}
		var released uint8
		if s.Release {
			released = 1
		}
		caught := s.LastCaughtUp
		switch {
		case s.Finished:
			caught = CaughtUpForever
		case s.CaughtUp:
			caught = now
		case caught.IsZero():
			caught = caughtUpNever
		}
		rows = append(rows, []any{s.ID, s.Site, c.Collector, c.Host, s.Path, started, now, released, caught})
	}
	return rows
}

// OwnersQuery reads the live records of a set of sources from table, with
// ? for the window in seconds and the set (clickhouse.GroupSet). A
// collector's latest record counts; a release at the same second as a
// refresh wins (the release is the later act of the two).
func OwnersQuery(table string) string {
	return `SELECT source_id, collector, argMaxIf(host, seen, released = 0) AS its_host, argMaxIf(path, seen, released = 0) AS its_path,
	argMaxIf(started, seen, released = 0) AS since, maxIf(seen, released = 0) AS live
FROM ` + table + `
WHERE source_id IN ?
GROUP BY source_id, collector
HAVING live > maxIf(seen, released = 1) AND live >= now() - ?`
}

// OwnersArgs are OwnersQuery's arguments for c.
func OwnersArgs(c Claim) []any {
	set := make([]any, 0, len(c.Sources))
	for _, s := range c.Sources {
		set = append(set, s.ID)
	}
	return []any{clickhouse.GroupSet{Value: set}, int64(c.Window / time.Second)}
}

// ClaimSources writes c's records in one insert, stamped with the store's
// clock, then reads every live record of c's sources (this collector's
// included) and returns them with the time the records were stamped. A
// claim that only releases sources reads nothing.
//
// In cluster mode the records go to this server's replica and are read
// after the replica check (replicaRead), so two collectors writing through
// different replicas see each other. A replica that lacks parts it cannot
// fetch now is read all the same: records are rewritten every interval, so
// a collector shipping a source has a newer record on a live replica.
func (s *Sink) ClaimSources(ctx context.Context, c Claim) (time.Time, []Owner, error) {
	var now time.Time
	if len(c.Sources) == 0 {
		return now, nil, nil
	}
	if err := s.conn.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return now, nil, fmt.Errorf("claim sources: the store's time: %w", err)
	}
	rows := ClaimRows(c, now)
	columns := OwnersColumns
	if s.ownersLegacy.Load() {
		columns = ownersLegacyColumns
		for i := range rows {
			rows[i] = rows[i][:len(rows[i])-1]
		}
	}
	insert := func() error {
		batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table("source_owners")+" ("+columns+")")
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := batch.Append(r...); err != nil {
				batch.Abort()
				return err
			}
		}
		return batch.Send()
	}
	// A replica rebuilt empty gets its tables (withSchema); with
	// insert_quorum, an insert refused for another collector's claim
	// whose quorum is pending is sent again (whileRefused, quorum.go).
	err := s.withSchema(ctx, func() error { return s.whileRefused(ctx, insert) })
	if err != nil {
		return now, nil, fmt.Errorf("claim %d source(s): %w", len(rows), err)
	}
	if c.ReleasesOnly() {
		return now, nil, nil
	}
	var owners []Owner
	read := func(q func(query string, args ...any) (rowIter, error)) error {
		rows, err := q(OwnersQuery(s.table("source_owners")), OwnersArgs(c)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o Owner
			if err := rows.Scan(&o.Source, &o.Collector, &o.Host, &o.Path, &o.Started, &o.Seen); err != nil {
				return err
			}
			owners = append(owners, o)
		}
		return rows.Err()
	}
	if s.cluster != "" {
		err = s.replicaRead(ctx, []string{"source_owners"}, true, func(conn *sql.Conn) error {
			return read(func(q string, args ...any) (rowIter, error) { return conn.QueryContext(ctx, q, args...) })
		})
		if errors.As(err, new(*IncompleteError)) {
			err = nil
		}
	} else {
		err = read(func(q string, args ...any) (rowIter, error) { return s.conn.Query(ctx, q, args...) })
	}
	if err != nil {
		return now, nil, fmt.Errorf("read the owners of %d source(s): %w", len(c.Sources), err)
	}
	return now, owners, nil
}

// OwnersUnusable reports whether err says this user cannot use
// source_owners at all: the table is missing (a schema from before it, on
// a server where the collector may not create tables) or the user may not
// read or write it. Trying again will not help until an operator runs
// `collector -migrate` or grants it (deploy/sql/users.sql).
func OwnersUnusable(err error) bool {
	code, _, ok := exception(err)
	if !ok {
		return false
	}
	switch code {
	case 60, // UNKNOWN_TABLE
		164, // READONLY
		291, // DATABASE_ACCESS_DENIED
		497: // ACCESS_DENIED
		return true
	}
	return false
}
