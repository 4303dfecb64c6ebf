package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
)

// Crossing is one threshold passed: a rule's subject (the page) reached
// Threshold hits in the window starting at WindowStart. Its key is its
// identity in the state table and in the claim lock.
type Crossing struct {
	Rule        string
	Subject     string
	WindowStart time.Time
	Threshold   int64
}

// Key is the crossing's stable identity, the same in every sweeper replica.
func (c Crossing) Key() string {
	h := sha256.New()
	for _, part := range []string{c.Rule, c.Subject, strconv.FormatInt(c.WindowStart.Unix(), 10), strconv.FormatInt(c.Threshold, 10)} {
		// Length-prefixed, so ("a", "bc") and ("ab", "c") differ.
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// MessageID is the crossing's deterministic Message-ID: a message retried
// after a crash carries the same one, so receiving systems can drop the
// duplicate. domain is the sender's domain.
func (c Crossing) MessageID(domain string) string {
	return "<hitcount." + c.Key() + "@" + domain + ">"
}
