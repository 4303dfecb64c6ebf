//go:build !linux

package tailer

import (
	"os"

	"golang.org/x/sys/unix"
)

const dirFlags = unix.O_RDONLY

// openLink refuses a configured symlink: without O_PATH, the owner and the
// content of one and the same link cannot be read race-free.
func openLink(dir int, name, full string) (*os.File, error) {
	return nil, refused(full, ReasonSymlink, "following a configured symlink is supported on Linux only; configure the file it points to")
}
