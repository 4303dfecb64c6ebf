//go:build linux && (amd64 || arm64)

package chdb

import (
	"syscall"
	"unsafe"
)

// Why chDB's signal handlers are switched off before connecting.
//
// By default chdb_connect installs ClickHouse's crash handlers for SIGSEGV,
// SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP and SIGSYS (plus SIGTSTP), replacing
// the Go runtime's, and without SA_ONSTACK. The Go runtime turns SIGSEGV into
// nil-dereference panics, so with those handlers in place a nil dereference
// anywhere in the process no longer panics: ClickHouse's handler logs a crash
// report and sleeps for minutes before the process dies (measured here: a
// recovered nil dereference became a hang of about 5 minutes). Handlers Go needs
// for scheduling (SIGURG for preemption, SIGPROF, SIGCHLD) are left alone either
// way, and chDB's threads are not Go threads, so Go never preempts them.
//
// chdb_set_signal_handlers_enabled(0) stops the installation. chDB 26.7 then
// leaves every handler the host owns untouched and adds only its own on a real-time
// signal nobody else uses; some earlier releases instead reset the crash signals
// to SIG_DFL when opting out, which is as fatal to Go as the handlers themselves.
// So Open also snapshots the process's handlers around the opt-out and the
// connect and puts back any handler the host had that the library replaced.
// Other goroutines that fault inside that window (microseconds, once per Open)
// are not protected; a nil dereference there is a bug already.

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const (
	nsig       = 65 // signals 1..64
	sigDefault = 0  // SIG_DFL
	sigIgnore  = 1  // SIG_IGN
)

type signalSnapshot struct {
	act [nsig]kernelSigaction
	ok  [nsig]bool
}

func rtSigaction(sig int, act, old *kernelSigaction) syscall.Errno {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), 8, 0, 0)
	return errno
}

func snapshotSignals() *signalSnapshot {
	s := &signalSnapshot{}
	for sig := 1; sig < nsig; sig++ {
		s.ok[sig] = rtSigaction(sig, nil, &s.act[sig]) == 0
	}
	return s
}

// restoreHost puts back every handler the host had installed (neither SIG_DFL
// nor SIG_IGN) that has since been changed, and returns those signals. Signals
// the host left at their default stay as the library set them: the engine may
// rely on its own handlers there (it uses a real-time signal for stack traces).
func (s *signalSnapshot) restoreHost() []syscall.Signal {
	var restored []syscall.Signal
	for sig := 1; sig < nsig; sig++ {
		old := s.act[sig]
		if !s.ok[sig] || old.handler == sigDefault || old.handler == sigIgnore {
			continue
		}
		var now kernelSigaction
		if rtSigaction(sig, nil, &now) != 0 || now.handler == old.handler {
			continue
		}
		if rtSigaction(sig, &old, nil) == 0 {
			restored = append(restored, syscall.Signal(sig))
		}
	}
	return restored
}
