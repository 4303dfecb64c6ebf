// Package lines splits a byte stream into lines with their byte offsets, with a
// bound on line length so one runaway line cannot take unbounded memory.
//
// It is written by hand rather than with bufio.Scanner because the collector
// needs each line's offset in the file (its identity in ClickHouse), must survive
// over-long lines without losing the lines after them, and must tell a complete
// line from a partial one still being written.
package lines

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// TooLongError reports a line longer than the reader's limit. The line is
// skipped up to and including its newline; the next call returns the line after.
type TooLongError struct {
	Offset int64 // where the line starts
	Length int64 // its full length, newline included when it has one
	Limit  int
	// Head is the first bytes of the line, for reject samples.
	Head []byte
	// Partial is set when the input ended before the line did.
	Partial bool
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("line at offset %d is %d bytes, longer than the limit of %d", e.Offset, e.Length, e.Limit)
}

// Reader yields newline-terminated lines. The returned slice is valid until the
// next call to Next.
type Reader struct {
	r       *bufio.Reader
	limit   int
	offset  int64  // offset of the first byte not yet returned as a line
	long    []byte // accumulates a line longer than the buffer, or a partial one
	partial bool   // long holds a partial line returned with io.EOF
}

// DefaultLimit is the default longest line: far beyond any real request line
// (nginx's large_client_header_buffers defaults to 8 KB), small enough to bound memory.
const DefaultLimit = 1 << 20

// NewReader reads r, whose first byte is at offset start in its file. Lines
// longer than limit bytes (DefaultLimit when limit <= 0) are reported as
// *TooLongError and skipped.
func NewReader(r io.Reader, start int64, limit int) *Reader {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), limit: limit, offset: start}
}

// Reset makes the reader read r, whose first byte is at offset start, as if
// new: after a seek (resuming at a committed offset) or a reopen.
func (lr *Reader) Reset(r io.Reader, start int64) {
	lr.r.Reset(r)
	lr.offset = start
	lr.long = lr.long[:0]
	lr.partial = false
}

// Offset is the offset of the next byte Next will read: just after the last
// line returned or skipped.
func (lr *Reader) Offset() int64 { return lr.offset }

// Next returns the next complete line (newline included) and its offset. At
// the end of the input it returns io.EOF along with any partial last line
// (bytes after the last newline), which a whole-file reader treats as a final,
// truncated line. The partial bytes are not consumed from Offset's point of
// view: the next call continues the same line once more bytes arrive, so a
// tailer simply calls Next again after the file grows.
func (lr *Reader) Next() (line []byte, offset int64, err error) {
	start := lr.offset
	if !lr.partial {
		lr.long = lr.long[:0]
	}
	lr.partial = false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		switch {
		case err == nil:
			if len(lr.long) == 0 {
				if len(chunk) > lr.limit {
					lr.offset += int64(len(chunk))
					return nil, start, lr.tooLong(start, int64(len(chunk)), chunk)
				}
				lr.offset += int64(len(chunk))
				return chunk, start, nil
			}
			total := int64(len(lr.long)) + int64(len(chunk))
			if total > int64(lr.limit) {
				lr.offset = start + total
				return nil, start, lr.tooLong(start, total, lr.long)
			}
			lr.long = append(lr.long, chunk...)
			lr.offset = start + total
			return lr.long, start, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(lr.long)+len(chunk) > lr.limit {
				return nil, start, lr.skip(start, int64(len(lr.long))+int64(len(chunk)))
			}
			lr.long = append(lr.long, chunk...)
		case err == io.EOF:
			if n := int64(len(lr.long)) + int64(len(chunk)); n > int64(lr.limit) {
				head := append(lr.long[:min(len(lr.long), 256):min(len(lr.long), 256)], chunk[:min(len(chunk), 256)]...)
				return nil, start, &TooLongError{Offset: start, Length: n, Limit: lr.limit, Head: head[:min(len(head), 256)], Partial: true}
			}
			if len(lr.long)+len(chunk) > 0 {
				lr.long = append(lr.long, chunk...)
				lr.partial = true
				return lr.long, start, io.EOF
			}
			return nil, start, io.EOF
		default:
			return nil, start, fmt.Errorf("read at offset %d: %w", start, err)
		}
	}
}

// skip discards the rest of an over-long line whose first n bytes are read.
func (lr *Reader) skip(start, n int64) error {
	head := append([]byte(nil), lr.long[:min(len(lr.long), 256)]...)
	for {
		chunk, err := lr.r.ReadSlice('\n')
		n += int64(len(chunk))
		if len(head) < 256 {
			head = append(head, chunk[:min(len(chunk), 256-len(head))]...)
		}
		if err == nil {
			lr.offset = start + n
			return &TooLongError{Offset: start, Length: n, Limit: lr.limit, Head: head}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			// The line has no end yet: it stays unconsumed (Offset does not
			// move) so a tailer sees it again once it is complete, while a
			// whole-file reader can count it as rejected.
			if err == io.EOF {
				return &TooLongError{Offset: start, Length: n, Limit: lr.limit, Head: head, Partial: true}
			}
			return fmt.Errorf("read at offset %d: %w", start, err)
		}
	}
}

func (lr *Reader) tooLong(start, n int64, b []byte) error {
	return &TooLongError{Offset: start, Length: n, Limit: lr.limit, Head: append([]byte(nil), b[:min(len(b), 256)]...)}
}
