package sink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// An insert error is either transient (the same block may be taken later:
// retry it) or the store refusing the block's data for good (the same rows
// fail every time: retrying stalls the file forever). Only errors that depend
// on the rows sent are permanent, so that cutting the batch into smaller
// pieces isolates what is refused; when in doubt an error is transient, as a
// wrong "permanent" turns good lines into rejects.
//
// permanentCodes are the ClickHouse exception codes that are permanent
// wherever they are raised, each with why.
var permanentCodes = map[int]string{
	// TOO_MANY_PARTS is permanent only as "Too many partitions for single
	// INSERT block" (max_partitions_per_insert_block, 100 by default; not in
	// 18.16): it counts the partitions (months of hits) the block's rows
	// span, and a piece spanning fewer is taken. The same code for "Too many
	// parts ... Merges are processing significantly slower than inserts" is
	// the server being behind: transient (see isPermanent).
	252: "the block's rows span more partitions than one insert may",
	// throwIf in a view or in a MATERIALIZED/DEFAULT column of hits: a guard
	// an operator wrote on values; the same rows trip it every time.
	395: "a throwIf guard refuses these values",
	// A CHECK constraint on values, on hits or on a table a view writes to.
	469: "a CHECK constraint refuses these values",
}

// dataCodes are the parse and conversion errors: permanent when raised on
// the batch's own rows (the embedded engine reading back the text it was
// sent, a MATERIALIZED or DEFAULT expression of hits converting a value),
// because only some values fail. Raised while pushing to a view they are
// transient: there they are what a view's target table of another shape
// gives (TYPE_MISMATCH on 18.16, CANNOT_PARSE_TEXT on 26.7, measured by
// TestFailingViewExactlyOnce), which fails every block alike until an
// operator fixes the table; split, it would turn every line into a reject.
var dataCodes = map[int]string{
	6:   "CANNOT_PARSE_TEXT",
	26:  "CANNOT_PARSE_QUOTED_STRING",
	27:  "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
	38:  "CANNOT_PARSE_DATE",
	41:  "CANNOT_PARSE_DATETIME",
	53:  "TYPE_MISMATCH",
	70:  "CANNOT_CONVERT_TYPE",
	72:  "CANNOT_PARSE_NUMBER",
	117: "INCORRECT_DATA",
	131: "TOO_LARGE_STRING_SIZE",
	321: "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
}

// Everything else is transient, notably: network errors, timeouts and a
// server down or restarting (no exception at all, or SOCKET_TIMEOUT 209,
// NETWORK_ERROR 210, TIMEOUT_EXCEEDED 159), QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING
// (216: a re-send while the first attempt runs), TOO_MANY_PARTS as merges
// falling behind (252), MEMORY_LIMIT_EXCEEDED (241), TOO_MANY_SIMULTANEOUS_QUERIES
// (202), QUERY_WAS_CANCELLED (394), a table missing, read-only or being
// altered (60, 242, 164), access denied (497), Keeper errors (999), and any
// error the client raises before the server answers. So are the refusals of
// a quorum insert (quorum.go): too few live replicas (285), the previous
// quorum insert into the table not satisfied yet (286), and the server's
// wait for the quorum timing out (319): each depends on the replicas, not
// on the rows.

// tooManyPartitions is the one TOO_MANY_PARTS message that is about the
// block's rows.
const tooManyPartitions = "Too many partitions for single INSERT block"

// inView marks an error raised by a materialized view after the table it
// reads from took the rows (18.16 and 26.x alike).
const inView = "while pushing to view"

// codeRE finds the code in an embedded engine's message ("Code: 252.
// DB::Exception: ..."); the first is the outermost.
var codeRE = regexp.MustCompile(`Code: (\d+)\.`)

// Permanent reports whether err is the store refusing the rows it was sent
// for good: a batch that failed so is split, never sent again as it is.
func Permanent(err error) bool {
	code, msg, ok := exception(err)
	if !ok {
		return false
	}
	switch {
	case code == 252:
		return strings.Contains(msg, tooManyPartitions)
	case permanentCodes[code] != "":
		return true
	case dataCodes[code] != "":
		return !strings.Contains(msg, inView)
	}
	return false
}

// exception finds the ClickHouse exception in err: the server's, or the
// embedded engine's, whose errors carry it as text.
func exception(err error) (code int, msg string, ok bool) {
	if err == nil {
		return 0, "", false
	}
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return int(ex.Code), ex.Message, true
	}
	text := err.Error()
	loc := codeRE.FindStringSubmatchIndex(text)
	if loc == nil {
		return 0, "", false
	}
	code, convErr := strconv.Atoi(text[loc[2]:loc[3]])
	if convErr != nil {
		return 0, "", false
	}
	return code, strings.TrimSpace(text[loc[1]:]), true
}

// maxReason bounds a refusal's reason: the engine's messages run to a
// paragraph, and the rejects table is for diagnosis.
const maxReason = 1024

// RefusedReason is the reject reason of a line the store refused for good
// (Permanent) when sent alone.
func RefusedReason(err error) string {
	var r string
	if code, msg, ok := exception(err); ok {
		r = fmt.Sprintf("store refused: Code: %d. %s", code, msg)
	} else {
		r = "store refused: " + err.Error()
	}
	if len(r) > maxReason {
		r = r[:maxReason]
	}
	return r
}

// unavailableCodes are exceptions that say the server (or the replica, or its
// Keeper) cannot serve right now, whatever was asked: a statement failing so
// is tried again, unlike one refused for what it is (access, syntax).
var unavailableCodes = map[int]bool{
	159: true, // TIMEOUT_EXCEEDED
	209: true, // SOCKET_TIMEOUT
	210: true, // NETWORK_ERROR
	225: true, // NO_ZOOKEEPER
	242: true, // TABLE_IS_READ_ONLY: a replica that lost its Keeper session
	999: true, // KEEPER_EXCEPTION
}

// Unavailable reports whether err says the store could not answer (it is
// down, restarting, unreachable, or its Keeper is), rather than that it
// refused the statement: what start-up waits out instead of exiting.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	code, _, ok := exception(err)
	if !ok {
		return true // no answer from the server at all: EOF, refused, timeout
	}
	return unavailableCodes[code]
}

// loginCodes are the exceptions of a server refusing the login itself.
// 18.16 names the reason (measured by TestLoginRefused: WRONG_PASSWORD for
// a wrong password, and for one given to a user that has none;
// REQUIRED_PASSWORD for none given to a user that has one; UNKNOWN_USER);
// newer servers say AUTHENTICATION_FAILED for all of them, so as not to tell
// which users exist (not measured here: no such server on this machine).
var loginCodes = map[int]string{
	192: "UNKNOWN_USER",
	193: "WRONG_PASSWORD",
	194: "REQUIRED_PASSWORD",
	195: "IP_ADDRESS_NOT_ALLOWED",
	516: "AUTHENTICATION_FAILED",
}

// LoginRefused reports whether err is the server refusing to log the user
// in: a wrong or missing password, an unknown user, an address the user may
// not connect from. Trying again the same way cannot succeed until an
// operator changes the password or the server's users.
func LoginRefused(err error) bool {
	code, _, ok := exception(err)
	return ok && loginCodes[code] != ""
}

// LoginError is a login the server refused (LoginRefused) at start-up.
type LoginError struct {
	User string
	Addr []string
	Err  error
}

func (e *LoginError) Error() string {
	user := e.User
	if user == "" {
		user = "default"
	}
	code, msg, _ := exception(e.Err)
	return fmt.Sprintf("clickhouse at %v refused the login of user %q (%s, code %d: %s)", e.Addr, user, loginCodes[code], code, strings.TrimSpace(strings.TrimPrefix(msg, "DB::Exception:")))
}

func (e *LoginError) Unwrap() error { return e.Err }
