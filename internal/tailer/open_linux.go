package tailer

import (
	"os"

	"golang.org/x/sys/unix"
)

// dirFlags opens the directories on the way with O_PATH: they only need to be
// searchable, not readable, as for any path lookup.
const dirFlags = unix.O_PATH

// openLink opens what the configured symlink name in dir points to. The link
// is pinned by an O_PATH descriptor, so its owner and its content are read
// from one and the same link, whatever is renamed over it meanwhile.
func openLink(dir int, name, full string) (*os.File, error) {
	lfd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	defer unix.Close(lfd)
	var st unix.Stat_t
	if err := unix.Fstat(lfd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: full, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
	case unix.S_IFREG:
		// Replaced by a regular file since it was looked at: read it as one.
		f, _, err := openRegular(dir, name, full)
		return f, err
	default:
		return nil, refused(full, ReasonNotRegular, "it is a %s, not a regular file", kind(st.Mode))
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(lfd, "", buf)
	if err != nil {
		return nil, &os.PathError{Op: "readlink", Path: full, Err: err}
	}
	if n == len(buf) {
		return nil, &os.PathError{Op: "readlink", Path: full, Err: unix.ENAMETOOLONG}
	}
	return linkTarget(dir, string(buf[:n]), st.Uid, full)
}
