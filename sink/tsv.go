package sink

import (
	"strconv"
)

// appendTSV appends v escaped as a TSV field: the bytes a log line holds
// (tabs, newlines, backslashes from nginx's \xHH escapes) cannot break a row.
func appendTSV(dst []byte, v []byte) []byte {
	for _, c := range v {
		switch c {
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\\':
			dst = append(dst, '\\', '\\')
		case 0:
			dst = append(dst, '\\', '0')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func (c *strCol) appendTSV(dst []byte, i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = c.ends[i-1]
	}
	return appendTSV(dst, c.buf[start:c.ends[i]])
}

// AppendTSV appends the batch's rows in TSV, columns in HitsColumns order: how
// the embedded engine, which takes its data inline with the query, is fed.
func (b *Batch) AppendTSV(dst []byte) []byte {
	site := appendTSV(nil, []byte(b.Site))
	for i := range b.ts {
		dst = appendUnix10(dst, b.ts[i])
		dst = append(dst, '\t')
		dst = append(dst, site...)
		for _, c := range []*strCol{&b.host, &b.method, &b.path, &b.query, &b.protocol} {
			dst = append(dst, '\t')
			dst = c.appendTSV(dst, i)
		}
		dst = append(dst, '\t')
		dst = strconv.AppendUint(dst, uint64(b.status[i]), 10)
		dst = append(dst, '\t')
		dst = strconv.AppendUint(dst, b.bytes[i], 10)
		for _, c := range []*strCol{&b.referer, &b.userAgent, &b.client, &b.remoteUser} {
			dst = append(dst, '\t')
			dst = c.appendTSV(dst, i)
		}
		dst = append(dst, '\t')
		dst = strconv.AppendUint(dst, uint64(b.requestTime[i]), 10)
		dst = append(dst, '\t')
		dst = strconv.AppendUint(dst, b.SourceID, 10)
		dst = append(dst, '\t')
		dst = strconv.AppendUint(dst, b.offset[i], 10)
		dst = append(dst, '\t')
		dst = strconv.AppendUint(dst, b.visitor[i], 10)
		dst = append(dst, '\n')
	}
	return dst
}

// AppendRejectsTSV appends the batch's reject samples in TSV, columns
// inserted, site, source_id, offset, reason, line; inserted is RejectsTime,
// so the same batch always gives the same bytes.
func (b *Batch) AppendRejectsTSV(dst []byte) []byte {
	at := b.RejectsTime().Unix()
	for _, r := range b.Rejects {
		dst = appendUnix10(dst, at)
		dst = append(dst, '\t')
		dst = appendTSV(dst, []byte(b.Site))
		dst = append(dst, '\t')
		dst = strconv.AppendUint(dst, b.SourceID, 10)
		dst = append(dst, '\t')
		dst = strconv.AppendInt(dst, r.Offset, 10)
		dst = append(dst, '\t')
		dst = appendTSV(dst, []byte(r.Reason))
		dst = append(dst, '\t')
		dst = appendTSV(dst, []byte(r.Line))
		dst = append(dst, '\n')
	}
	return dst
}

// appendUnix10 appends a DateTime as a Unix time of exactly 10 digits,
// zero-padded: the one numeric form the embedded engine reads as a Unix time
// whatever its date_time_input_format (best_effort, its default, refuses a
// batch holding "0" or "86400": fewer digits, so any time before
// 2001-09-09; an 11th digit is garbage), and text times would depend on the
// session's zone. Values outside the column's range are clamped to it; Add
// keeps rows' times inside MinUnix..MaxUnix.
func appendUnix10(dst []byte, sec int64) []byte {
	sec = min(max(sec, 0), 1<<32-1)
	var d [10]byte
	for i := 9; i >= 0; i-- {
		d[i] = byte('0' + sec%10)
		sec /= 10
	}
	return append(dst, d[:]...)
}
