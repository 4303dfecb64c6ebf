package sink

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"unsafe"

	"github.com/dchest/siphash"
)

// Visitors (issue 19: rules with count: visitors) are distinct (client
// address, user agent) pairs. The collector computes, for each row, a
// 64-bit hash of the pair from the address as logged, before anything
// truncates it, and ships it in hits.visitor; the hits_visitors_1m rollup
// keeps uniqExactState(visitor) per page and minute, so a window of any
// size is counted exactly (uniqExactMerge) from the rollup, never from hits.
//
// The hash is SipHash-2-4, a keyed pseudo-random function. Where client
// addresses are stored whole the key is fixed (zero): the hash tells
// nothing the row does not. Where they are anonymised (Clients.Anonymize),
// the key is a secret the store does not hold: an unkeyed hash of an IPv4
// address and a known user agent is reversed by trying the 2^32 addresses,
// a keyed one is not without the key. Every collector of a site must use
// the same key, or a visitor seen by two of them counts twice.

// Clients is how a source's client addresses are stored and hashed.
type Clients struct {
	// Key is the SipHash key of the visitor hash (VisitorKey).
	Key [2]uint64
	// Anonymize stores each client address truncated: IPv4 to its /24,
	// IPv6 to its /48; a client that is not an IP address (a host name
	// logged by Apache's HostnameLookups) is stored empty.
	Anonymize bool
}

// VisitorKey derives the visitor hash's key from a secret: the first 16
// bytes of its SHA-256. An empty secret is the zero key.
func VisitorKey(secret string) [2]uint64 {
	if secret == "" {
		return [2]uint64{}
	}
	sum := sha256.Sum256([]byte(secret))
	return [2]uint64{binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])}
}

// visitorHash hashes (client, user agent) with key; scratch is reused to
// join them without allocating (a NUL between: neither holds one as
// logged, so two pairs never join to the same bytes).
func visitorHash(key [2]uint64, client, ua []byte, scratch *[]byte) uint64 {
	buf := append((*scratch)[:0], client...)
	buf = append(buf, 0)
	buf = append(buf, ua...)
	*scratch = buf
	return siphash.Hash(key[0], key[1], buf)
}

// VisitorHash is the visitor hash of one (client, user agent) pair, as
// the collector computes it.
func VisitorHash(key [2]uint64, client, ua string) uint64 {
	var scratch []byte
	return visitorHash(key, []byte(client), []byte(ua), &scratch)
}

// AnonymizeClient appends to dst the client address as an anonymising
// source stores it: an IPv4 address (or an IPv4-mapped IPv6 one) with its
// last byte zero, an IPv6 address with all but its first 48 bits zero;
// anything else (a host name, "-") as nothing.
func AnonymizeClient(dst, client []byte) []byte {
	if len(client) == 0 {
		return dst
	}
	// A view of the bytes: ParseAddr keeps no reference to an address
	// without a zone, and one with a zone is stored without it.
	a, err := netip.ParseAddr(unsafe.String(&client[0], len(client)))
	if err != nil {
		return dst
	}
	a = a.WithZone("").Unmap()
	bits := 48
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return dst
	}
	return p.Addr().AppendTo(dst)
}
