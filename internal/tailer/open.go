package tailer

import (
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
//     normal layout or have to be switched off. Directories in the link's
//     target may be symlinks (current.log -> /var/log/app/x.log with
//     /var/log/app -> /data/logs/app): the link's owner chose that path and
//     could have written the resolved one instead, and what is checked is
//     the file it ends at, which itself must not be a symlink.
//   - Nothing but a regular file is ever opened for reading, not even for
//     an instant: opening a device can act (opening /dev/watchdog arms a
//     reboot), and whoever controls a directory on the way can swap a FIFO
//     or a device in for a file between any check by path and an open. On
//     Linux the file (and a link's target) is first opened with O_PATH,
//     which gives a reference to the inode and runs no device's or FIFO's
//     open; its type, and a link's owner, are checked with fstat of that
//     descriptor, and only a regular file is then opened for reading,
//     through /proc/self/fd, which reopens that very inode without looking
//     up any path again (/proc must be mounted). Other systems have no
//     O_PATH: the file is checked with lstat, then opened with O_NOFOLLOW
//     and O_NONBLOCK and checked again on the descriptor, so a FIFO or
//     device swapped in between is refused unread but was opened.
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
	return statFile(openLeaf(dir, parts[len(parts)-1], full, followLink))
}

// notLiteral refuses a symlink that the operator did not name.
func notLiteral(full string) error {
	return refused(full, ReasonSymlink, "a symlink matched by a wildcard or named like a rotated file; only a path configured literally may be a symlink")
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
