package alerts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hitcount/hitcount/internal/lockfile"
)

// Claim is a sweeper's hold on one crossing: Token is the fencing token that
// must still be current when the crossing is marked sent. Expires is on the
// claimant's own clock, for its estimate of the lease it has left; whether
// the claim holds is the backend's to say (Valid): keepermap leases run on
// the ClickHouse server's clock, keeper ones as long as the session.
type Claim struct {
	Token uint64
	// Expires is when a lease-bound claim lapses, by the claimant's clock
	// (conservatively: no later than the store's record of it); zero for a
	// claim held by a session (keeper).
	Expires time.Time
}

// Claimer is where claims live: local (a lock file), keeper or keepermap.
type Claimer interface {
	// Claim takes the crossing for lease; ok is false when another holds it.
	Claim(ctx context.Context, key string, lease time.Duration) (c Claim, ok bool, err error)
	// Valid reports whether c is still the current, unexpired claim on key.
	Valid(ctx context.Context, key string, c Claim) (bool, error)
	// Release drops the claim (after sending, or giving up for this sweep).
	Release(ctx context.Context, key string, c Claim) error
}

// ErrAnotherSweeper is returned when a second local sweeper starts on the same
// state.
var ErrAnotherSweeper = errors.New("another sweeper is active on this state directory")

// LocalClaims is the local backend: one sweeper at a time, guaranteed by an
// exclusive lock on a file in the state directory, so claims can live in
// memory. A second sweeper is refused at start, loudly.
type LocalClaims struct {
	lock *lockfile.Lock
	now  func() time.Time

	mu     sync.Mutex
	next   uint64
	claims map[string]Claim
}

// OpenLocalClaims takes the lock file in dir.
func OpenLocalClaims(dir string, now func() time.Time) (*LocalClaims, error) {
	// The state directory also holds the collector's positions hint (names
	// of access logs): created private; one that exists keeps the mode its
	// operator gave it.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local claims: %w", err)
	}
	lock, err := lockfile.Take(filepath.Join(dir, "sweeper.lock"))
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, fmt.Errorf("%w: %v; claims: local allows one sweeper: stop the other, or use claims: keeper or keepermap for replicas", ErrAnotherSweeper, err)
	}
	if err != nil {
		return nil, fmt.Errorf("local claims: %w", err)
	}
	return &LocalClaims{lock: lock, now: now, next: uint64(now().UnixNano()), claims: map[string]Claim{}}, nil
}

// Close releases the lock.
func (l *LocalClaims) Close() error { return l.lock.Release() }

// Claim implements Claimer.
func (l *LocalClaims) Claim(_ context.Context, key string, lease time.Duration) (Claim, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if c, ok := l.claims[key]; ok && now.Before(c.Expires) {
		return Claim{}, false, nil
	}
	l.next++
	c := Claim{Token: l.next, Expires: now.Add(lease)}
	l.claims[key] = c
	return c, true, nil
}

// Valid implements Claimer.
func (l *LocalClaims) Valid(_ context.Context, key string, c Claim) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.claims[key]
	return ok && cur.Token == c.Token && l.now().Before(cur.Expires), nil
}

// Release implements Claimer.
func (l *LocalClaims) Release(_ context.Context, key string, c Claim) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.claims[key]; ok && cur.Token == c.Token {
		delete(l.claims, key)
	}
	return nil
}
