package tailer

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// dirFlags opens the directories on the way with O_PATH: they only need to be
// searchable, not readable, as for any path lookup.
const dirFlags = unix.O_PATH

// openLeaf opens name in dir, the last component of OpenLog's path, with the
// checks OpenLog describes. Whatever name is at that moment is pinned with
// O_PATH, which opens nothing, and judged by fstat of that descriptor; only a
// regular file is then opened for reading (reopen), and a symlink is read
// from the pinned link itself, so its owner and its content are those of one
// and the same link, whatever is renamed over it meanwhile.
func openLeaf(dir int, name, full string, followLink bool) (*os.File, error) {
	fd, st, err := pin(dir, name)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	defer unix.Close(fd)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return reopen(fd, &st, full)
	case unix.S_IFLNK:
		if !followLink {
			return nil, notLiteral(full)
		}
		return openLink(dir, fd, st.Uid, full)
	default:
		return nil, refused(full, ReasonNotRegular, "it is a %s, not a regular file", kind(st.Mode))
	}
}

// pin opens path (relative to dir) with O_PATH|O_NOFOLLOW and fstats it. An
// O_PATH open only resolves the path to an inode: the permission to search
// the directories on the way is all it needs, and no file system's, device's
// or FIFO's open runs. The last component is not followed; directories on
// the way are.
func pin(dir int, path string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dir, path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// reopen opens for reading the regular file that the O_PATH descriptor fd
// pins (pinned is its fstat). Opening /proc/self/fd/N follows no path: the
// kernel opens the inode the descriptor holds, so what is opened is what was
// checked, whatever has been renamed since.
func reopen(fd int, pinned *unix.Stat_t, full string) (*os.File, error) {
	// Errors about /proc must not wrap ErrNotExist: that would read as the
	// log being gone, and every log would be skipped without a word.
	proc, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: reopening it needs /proc/self/fd: %v", full, err)
	}
	defer unix.Close(proc)
	var fs unix.Statfs_t
	if err := unix.Fstatfs(proc, &fs); err != nil {
		return nil, fmt.Errorf("open %s: statfs /proc/self/fd: %v", full, err)
	}
	if fs.Type != unix.PROC_SUPER_MAGIC {
		return nil, fmt.Errorf("open %s: /proc/self/fd is not on a proc file system (type %#x)", full, fs.Type)
	}
	// Non-blocking only so that opening could not wait (on a lease another
	// process holds); reads of a regular file never block anyway, and
	// os.File expects a blocking descriptor when the poller cannot take it.
	rfd, err := unix.Openat(proc, strconv.Itoa(fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(rfd, &st); err != nil {
		unix.Close(rfd)
		return nil, &os.PathError{Op: "fstat", Path: full, Err: err}
	}
	if st.Dev != pinned.Dev || st.Ino != pinned.Ino || st.Mode&unix.S_IFMT != unix.S_IFREG {
		// Cannot happen with a real /proc; checked all the same.
		unix.Close(rfd)
		return nil, fmt.Errorf("open %s: reopened through /proc/self/fd, got another file", full)
	}
	if err := unix.SetNonblock(rfd, false); err != nil {
		unix.Close(rfd)
		return nil, &os.PathError{Op: "fcntl", Path: full, Err: err}
	}
	return os.NewFile(uintptr(rfd), full), nil
}

// openLink opens the file a configured symlink points to, with the checks
// OpenLog describes. lfd is the link's O_PATH descriptor and linkUID its
// owner; a relative target is resolved from the link's directory dir, as the
// kernel would.
func openLink(dir, lfd int, linkUID uint32, full string) (*os.File, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(lfd, "", buf)
	if err != nil {
		return nil, &os.PathError{Op: "readlink", Path: full, Err: err}
	}
	if n == len(buf) {
		return nil, &os.PathError{Op: "readlink", Path: full, Err: unix.ENAMETOOLONG}
	}
	target := string(buf[:n])
	fd, st, err := pin(dir, target)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full + " -> " + target, Err: err}
	}
	defer unix.Close(fd)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return nil, refused(full, ReasonSymlink, "the symlink points to another symlink (%s); point it at the log itself", target)
	default:
		return nil, refused(full, ReasonNotRegular, "the symlink points to a %s (%s), not a regular file", kind(st.Mode), target)
	}
	if linkUID != 0 && linkUID != st.Uid {
		return nil, refused(full, ReasonLinkOwner, "the symlink's owner (uid %d) is neither root nor the owner of %s (uid %d)", linkUID, target, st.Uid)
	}
	return reopen(fd, &st, full)
}
