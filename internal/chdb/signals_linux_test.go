//go:build linux && (amd64 || arm64)

package chdb_test

import (
	"syscall"
	"testing"
	"unsafe"
)

type sigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

func currentSigaction(t *testing.T, sig syscall.Signal) sigaction {
	t.Helper()
	var sa sigaction
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&sa)), 8, 0, 0)
	if errno != 0 {
		t.Fatalf("rt_sigaction(%v): %v", sig, errno)
	}
	return sa
}

// With chDB's own handlers a nil dereference in Go code would no longer panic
// but hang in ClickHouse's crash handler; see signals_linux.go.
func TestGoKeepsItsSignalHandlers(t *testing.T) {
	e := open(t, t.TempDir())
	exec1(t, e, "SELECT 1")
	// The Go runtime installs one handler for every signal it handles, SIGURG
	// (goroutine preemption) among them, which chDB never touches.
	goHandler := currentSigaction(t, syscall.SIGURG).handler
	const saOnStack = 0x08000000
	for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL,
		syscall.SIGABRT, syscall.SIGTRAP, syscall.SIGSYS} {
		sa := currentSigaction(t, sig)
		if sa.handler != goHandler || sa.flags&saOnStack == 0 {
			t.Fatalf("%v: handler %#x flags %#x, want Go's %#x with SA_ONSTACK", sig, sa.handler, sa.flags, goHandler)
		}
	}

	recovered := func() (r any) {
		defer func() { r = recover() }()
		var p *int
		return *p
	}()
	if recovered == nil {
		t.Fatal("nil dereference did not panic")
	}
}
