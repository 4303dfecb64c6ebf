//go:build !linux

package tailer

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

const dirFlags = unix.O_RDONLY

// openLeaf opens name in dir, the last component of OpenLog's path. Without
// O_PATH nothing can be judged before it is opened: the name is checked with
// lstat, opened without following a symlink and without blocking, and
// checked again on the descriptor, so a FIFO or device swapped in between is
// refused unread, but only after it was opened.
//
// A configured symlink is refused: without O_PATH, the owner and the content
// of one and the same link cannot be read race-free.
func openLeaf(dir int, name, full string, followLink bool) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: full, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return openRegular(dir, name, full)
	case unix.S_IFLNK:
		if !followLink {
			return nil, notLiteral(full)
		}
		return nil, refused(full, ReasonSymlink, "following a configured symlink is supported on Linux only; configure the file it points to")
	default:
		return nil, refused(full, ReasonNotRegular, "it is a %s, not a regular file", kind(uint32(st.Mode)))
	}
}

// openRegular opens name in dir without following a symlink and checks, on
// the descriptor, that it is a regular file.
func openRegular(dir int, name, full string) (*os.File, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if isLoop(err) {
			return nil, refused(full, ReasonSymlink, "it became a symlink while being opened")
		}
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: full, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, refused(full, ReasonNotRegular, "it is a %s, not a regular file", kind(uint32(st.Mode)))
	}
	// Non-blocking only so that opening could not wait; reads of a regular
	// file never block anyway, and os.File expects a blocking descriptor
	// when the poller cannot take it.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: full, Err: err}
	}
	return os.NewFile(uintptr(fd), full), nil
}

func isLoop(err error) bool {
	// macOS says ELOOP for O_NOFOLLOW on a symlink, FreeBSD EMLINK.
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK)
}
