package collector

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// newBackoff is the retry pace against an unavailable store: quick at first,
// then at most every 30 s, forever (the log file keeps the lines meanwhile).
func newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 30 * time.Second
	b.Reset()
	return b
}
