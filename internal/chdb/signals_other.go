//go:build !(linux && (amd64 || arm64))

package chdb

import "syscall"

// Elsewhere the kernel's sigaction layout differs; the opt-out alone has to do.
type signalSnapshot struct{}

func snapshotSignals() *signalSnapshot { return &signalSnapshot{} }

func (*signalSnapshot) restoreHost() []syscall.Signal { return nil }
