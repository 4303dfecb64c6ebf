package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/hitcount/hitcount/internal/chdb"
)

// Embedded opens the embedded engine (libchdb.so, see ChdbLibPath) on a fresh
// t.TempDir() and closes it when the test ends.
//
// The engine serves one data directory per process, so tests using Embedded
// must not run in parallel with each other (nor with other open Engines).
func Embedded(t testing.TB) *chdb.Engine {
	t.Helper()
	lib := RequireChdb(t)
	HoldEngine(t)
	e, err := chdb.Open(context.Background(), chdb.Options{LibPath: lib, DataPath: t.TempDir()})
	if errors.Is(err, chdb.ErrOtherDataDirOpen) {
		t.Fatalf("open embedded engine: %v (opened outside testenv's gate?)", err)
	}
	if err != nil {
		t.Fatalf("open embedded engine: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close embedded engine: %v", err)
		}
	})
	return e
}
