package chdb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// library holds the C entry points of one loaded libchdb.so (chdb.h, chDB >= 26.3).
// C pointers the Go side never dereferences are uintptr; those it does are
// unsafe.Pointer.
type library struct {
	setSignalHandlersEnabled func(enabled int32)
	connect                  func(argc int32, argv **byte) unsafe.Pointer // chdb_connection*
	closeConn                func(conn unsafe.Pointer)
	queryN                   func(conn uintptr, query string, queryLen uintptr, format string, formatLen uintptr) uintptr
	resultBuffer             func(result uintptr) unsafe.Pointer
	resultLength             func(result uintptr) uintptr
	resultError              func(result uintptr) unsafe.Pointer
	destroyResult            func(result uintptr)
}

func loadLibrary(path string) (*library, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: no library path given; %s", ErrLibraryMissing, libraryHint)
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s: %s", ErrLibraryMissing, path, libraryHint)
		}
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	// Loading the same path again returns the handle already loaded, so every
	// Engine can load for itself without a package-level handle. RTLD_LOCAL keeps
	// the engine's bundled allocator and libc++ from interposing on the host's.
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	lib := &library{}
	for _, s := range []struct {
		fptr any
		name string
	}{
		{&lib.setSignalHandlersEnabled, "chdb_set_signal_handlers_enabled"},
		{&lib.connect, "chdb_connect"},
		{&lib.closeConn, "chdb_close_conn"},
		{&lib.queryN, "chdb_query_n"},
		{&lib.resultBuffer, "chdb_result_buffer"},
		{&lib.resultLength, "chdb_result_length"},
		{&lib.resultError, "chdb_result_error"},
		{&lib.destroyResult, "chdb_destroy_query_result"},
	} {
		// Dlsym first: RegisterLibFunc panics on a missing symbol, and an old
		// library deserves an error that says which.
		addr, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("load %s: symbol %s missing (need chDB >= 26.3): %w", path, s.name, err)
		}
		purego.RegisterFunc(s.fptr, addr)
	}
	return lib, nil
}

// connectArgs calls chdb_connect with argv built from args.
func (l *library) connectArgs(args []string) unsafe.Pointer {
	bufs := make([][]byte, len(args))
	argv := make([]*byte, len(args)+1) // NULL-terminated like main's argv
	// argv is Go memory holding Go pointers handed to C: pin what it points to.
	var pin runtime.Pinner
	defer pin.Unpin()
	for i, a := range args {
		bufs[i] = append([]byte(a), 0)
		argv[i] = &bufs[i][0]
		pin.Pin(argv[i])
	}
	return l.connect(int32(len(args)), &argv[0])
}

// goString copies a NUL-terminated C string.
func goString(p unsafe.Pointer) string {
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}
