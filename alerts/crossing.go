package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
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

// PageSubject is the Subject of a crossing on a page: the site and the path
// as one string. Written plainly (site + path) when that is unambiguous: the
// site has no '/' and the path starts with one, so the first '/' is where
// the path begins (every key recorded before this function existed was of
// this form, and keeps its value). Otherwise, a request line such as
// "GET m/x" on site "example.co" would make the key of "/x" on site
// "example.com": a crossing recorded there first would hide the real one.
// Such pages are written with the site's length first, after a NUL no plain
// form starts with.
func PageSubject(site, path string) string {
	if !strings.Contains(site, "/") && strings.HasPrefix(path, "/") && !strings.HasPrefix(site, "\x00") {
		return site + path
	}
	return "\x00" + strconv.Itoa(len(site)) + ":" + site + path
}

// KindNoData is the kind of a no-data notice: a site's collectors have not
// caught up for a rule's no_data_after (below.go).
const KindNoData = "no_data"

// SiteSubject is the Subject of a no-data notice on a site: apart from
// every PageSubject (none starts with NUL and a letter), so a notice never
// shares a key with a crossing of the same rule.
func SiteSubject(site string) string { return "\x00no_data:" + site }

// subjectOf is the Subject of a crossing of kind on the page (site, path).
func subjectOf(kind, site, path string) string {
	if kind == KindNoData {
		return SiteSubject(site)
	}
	if kind == KindReport {
		return ReportSubject(site)
	}
	return PageSubject(site, path)
}

// MessageID is the crossing's deterministic Message-ID: a message retried
// after a crash carries the same one, so receiving systems can drop the
// duplicate. domain is the sender's domain.
func (c Crossing) MessageID(domain string) string {
	return "<hitcount." + c.Key() + "@" + domain + ">"
}
