// Package chdb is a minimal binding to libchdb.so, the embedded ClickHouse
// engine, loaded at run time with purego so that hitcount still builds with
// CGO_ENABLED=0.
//
// What the engine (chDB 26.7, measured on this machine) imposes on callers:
//
//   - One engine per process, serving one data directory at a time. A second
//     Open on the same directory in the same process works and shares the
//     engine; an Open on another directory fails with ErrOtherDataDirOpen until
//     every Engine on the first one is closed. Another process is refused the
//     directory (ErrDataDirLocked), because the engine flocks <dir>/status.
//   - The C entry points are documented as thread-safe, but a connection runs
//     one statement at a time, so an Engine serializes its own calls. Separate
//     Engines on the same directory may run statements concurrently.
//   - A statement cannot be interrupted once handed to the engine: the context
//     is honored while waiting for the Engine, not during the call.
//   - The library is never unloaded. Its threads outlive every connection, and
//     unmapping their code under them would crash the process.
//   - chDB's crash-signal handlers are switched off before connecting; see
//     signals_linux.go for why a Go process cannot live with them.
package chdb
