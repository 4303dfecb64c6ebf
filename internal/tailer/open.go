package tailer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Why a file a source matches is not read. The values are also the reason
// label of the collector's skipped-files metric, so they are part of its
// contract with dashboards.
const (
	// ReasonSymlink: the file, or a directory between the glob's fixed
	// directory and the file, is a symlink the policy does not follow.
	ReasonSymlink = "symlink"
	// ReasonNotRegular: a directory, FIFO, device or socket.
	ReasonNotRegular = "not_regular"
	// ReasonLinkOwner: a configured symlink owned by neither root nor the
	// owner of the file it points to.
	ReasonLinkOwner = "symlink_owner"
)

// RefusedError reports a path that exists but is not read as a log.
type RefusedError struct {
	Path   string
	Reason string // one of the Reason constants
	Detail string
}

func (e *RefusedError) Error() string { return fmt.Sprintf("%s is not read: %s", e.Path, e.Detail) }

func refused(path, reason, format string, args ...any) error {
	return &RefusedError{Path: path, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// OpenLog opens the file rel below the directory base for reading, where base
// is the part of a source's glob before its first wildcard and rel is what the
// glob (or the rotated-sibling search) matched below it.
//
// A log directory is often writable by others than the operator (the web
// server's or the application's user), and the collector often runs with more
// rights than they have (root, or the adm group). Whatever such a user plants
// in the directory must not make the collector read what they cannot: the
// lines of a file that is not a log end up verbatim in the rejects table. So:
//
//   - base is opened as named: the operator wrote it.
//   - Below base, no component is followed if it is a symlink (O_NOFOLLOW on
//     every step, each opened relative to the previous one, so a directory
//     swapped for a symlink between a check and the open is refused too).
//   - The file itself may be a symlink only when the operator named it
//     literally (followLink: the glob has no wildcard), as in
//     current.log -> /srv/app/logs/x.log. It is followed one level, to a
//     regular file, and only when the link belongs to root or to the owner
//     of that file: a link someone planted in place of the configured one is
//     theirs, and they can only point it at files they own. This is Apache's
//     SymLinksIfOwnerMatch, with root's links trusted. A rule on the target's
//     owner alone ("owned by the directory's owner or root", as some shippers
//     have) is not used: the live log is routinely owned by the web server's
//     user inside a root-owned directory, so that rule would refuse the
//     normal layout or have to be switched off.
//   - What is opened must be a regular file, checked on the open descriptor
//     (fstat), never on a path that could change after the check. FIFOs and
//     devices are refused before they are opened, and the open itself is
//     non-blocking, so neither a FIFO nor a device can stall or act on open.
//
// A regular file's owner is not checked: its content can be another user's
// only through a hard link, which the kernel allows only to a file one owns
// or can read and write (fs.protected_hardlinks, on by default everywhere).
//
// The error is a *RefusedError when the policy refuses the path; it wraps
// os.ErrNotExist when the path is gone.
func OpenLog(base, rel string, followLink bool) (*os.File, os.FileInfo, error) {
	full := filepath.Join(base, rel)
	parts := strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, nil, fmt.Errorf("open %s: %q is not a path below %s", full, rel, base)
		}
	}
	dir, err := unix.Open(base, unix.O_DIRECTORY|dirFlags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: base, Err: err}
	}
	defer func() { unix.Close(dir) }()
	for i, name := range parts[:len(parts)-1] {
		at := filepath.Join(base, filepath.Join(parts[:i+1]...))
		next, err := unix.Openat(dir, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|dirFlags|unix.O_CLOEXEC, 0)
		if err != nil {
			var st unix.Stat_t
			if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return nil, nil, refused(full, ReasonSymlink, "the directory %s on its way is a symlink", at)
			}
			return nil, nil, &os.PathError{Op: "open", Path: at, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(next)
			return nil, nil, refused(full, ReasonSymlink, "the directory %s on its way is a symlink", at)
		}
		unix.Close(dir)
		dir = next
	}
	name := parts[len(parts)-1]
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, nil, &os.PathError{Op: "lstat", Path: full, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, _, err := openRegular(dir, name, full)
		return statFile(f, err)
	case unix.S_IFLNK:
		if !followLink {
			return nil, nil, refused(full, ReasonSymlink, "a symlink matched by a wildcard or named like a rotated file; only a path configured literally may be a symlink")
		}
		return statFile(openLink(dir, name, full))
	default:
		return nil, nil, refused(full, ReasonNotRegular, "it is a %s, not a regular file", kind(uint32(st.Mode)))
	}
}

// openRegular opens name in dir without following a symlink and checks, on
// the descriptor, that it is a regular file.
func openRegular(dir int, name, full string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if isLoop(err) {
			return nil, st, refused(full, ReasonSymlink, "it became a symlink while being opened")
		}
		return nil, st, &os.PathError{Op: "open", Path: full, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, &os.PathError{Op: "fstat", Path: full, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, st, refused(full, ReasonNotRegular, "it is a %s, not a regular file", kind(uint32(st.Mode)))
	}
	// Non-blocking only so that opening could not wait; reads of a regular
	// file never block anyway, and os.File expects a blocking descriptor
	// when the poller cannot take it.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, st, &os.PathError{Op: "fcntl", Path: full, Err: err}
	}
	return os.NewFile(uintptr(fd), full), st, nil
}

func statFile(f *os.File, err error) (*os.File, os.FileInfo, error) {
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	return f, fi, nil
}

// linkTarget opens the file a configured symlink (name in dir, whose owner is
// linkUID) points to, with the checks OpenLog describes. target is the link's
// content; a relative one is resolved from the link's directory, as the
// kernel would.
func linkTarget(dir int, target string, linkUID uint32, full string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, target, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "stat", Path: full + " -> " + target, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return nil, refused(full, ReasonSymlink, "the symlink points to another symlink (%s); point it at the log itself", target)
	default:
		return nil, refused(full, ReasonNotRegular, "the symlink points to a %s (%s), not a regular file", kind(uint32(st.Mode)), target)
	}
	f, st, err := openRegular(dir, target, full)
	if err != nil {
		return nil, err
	}
	if linkUID != 0 && linkUID != st.Uid {
		f.Close()
		return nil, refused(full, ReasonLinkOwner, "the symlink's owner (uid %d) is neither root nor the owner of %s (uid %d)", linkUID, target, st.Uid)
	}
	return f, nil
}

func isLoop(err error) bool {
	// Linux and macOS say ELOOP for O_NOFOLLOW on a symlink, FreeBSD EMLINK.
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK)
}

func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFLNK:
		return "symlink"
	}
	return fmt.Sprintf("file of type %#o", mode&unix.S_IFMT)
}
