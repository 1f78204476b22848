"""
One lock, on every operating system: a run folder (run.py's out_dir/run.lock), a comparison's
folder (sweep.py's out_dir/compare.lock) and a sweep's CSV (<csv>.lock) each belong to one process
at a time.

    with FileLock(path) as lock:    # or lock = FileLock(path), held until the process ends
        ...                         # a second process gets Busy(its PID) at once, never waits

A command takes its folder with `lock_folder(out_dir, "run.lock", "training run")`: the folder made
and locked, or one line (a ConfigError) saying who holds it or why it cannot be used.

The operating system holds the lock for the process (flock on Linux and macOS, msvcrt.locking on
Windows) and drops it when the process ends, however it ends - kill -9 included - so a lock never
goes stale and there is nothing to clean up. The lock file holds its holder's PID, for the line a
refused process prints. A lock taken with removed_at_close=True (a comparison's, in a folder of
results that may be committed) also deletes its file when it is let go, while still held; a
process that opened that file meanwhile finds it gone once it has the lock, and locks the file
now at the path instead (a file killed -9 leaves behind is harmless, and taken over).

A lock file is opened without following a symbolic link and must be a plain file with one name:
a link planted at out_dir/run.lock (to a file of the user's) is refused in one line, never written
through, and nothing but the lock file itself is ever truncated.
"""

import errno
import os
import stat
from pathlib import Path

from shapelab.configurator import ConfigError

try:  # Linux, macOS
    import fcntl
    msvcrt = None
except ImportError:  # Windows
    import msvcrt
    fcntl = None

# Windows locks bytes, and a locked byte cannot be read by another process: lock one far past the
# PID, so that a refused process can still read who holds the lock
WINDOWS_LOCK_OFFSET = 1 << 30


class Busy(Exception):
    """Another process holds the lock; `pid` is the PID it wrote ('unknown' if none yet)."""

    def __init__(self, pid):
        super().__init__(pid)
        self.pid = pid


class NotALockFile(OSError):
    """The lock's path is a symbolic link, a second name of another file, or not a plain file;
    `strerror` says so in a sentence."""


class FileLock:
    """An exclusive lock on `path` (created if missing), taken at once or `Busy`; held until
    `close` (or the end of a `with`, or of the process). shared=True takes a lock that only an
    exclusive holder refuses: a probe of whether someone holds it (`held_by`)."""

    def __init__(self, path, shared=False, create=True, removed_at_close=False):
        self.path, self.held, self.removed_at_close = Path(path), False, removed_at_close
        while True:
            # a file object: a lock nobody keeps closes, and so frees, with it
            self.file = open(_open_own_file(self.path, create), "r+b", buffering=0)
            try:
                _lock(self.file.fileno(), shared)
                self.held = True
            except BlockingIOError:
                holder = self.read_pid()
                self.close()
                raise Busy(holder) from None
            except BaseException:
                self.close()
                raise
            if not removed_at_close or _still_at(self.file.fileno(), self.path):
                break
            self.held = False  # (a file its last holder deleted: locking it locks nothing)
            self.file.close()
        if not shared:  # ours now: our PID over the previous holder's
            self.file.truncate(0)
            self.file.seek(0)
            self.file.write(str(os.getpid()).encode())

    def read_pid(self):
        self.file.seek(0)
        return self.file.read(32).decode(errors="replace").strip() or "unknown"

    def close(self):
        # (Windows cannot delete a file that is open: there it stays, and is taken over)
        if self.held and self.removed_at_close and msvcrt is None and _still_at(
                self.file.fileno(), self.path):
            self.path.unlink(missing_ok=True)  # while held: whoever opened it finds it gone
        if self.held and msvcrt is not None:  # (Windows drops it at close too, but not at once)
            self.file.seek(WINDOWS_LOCK_OFFSET)
            msvcrt.locking(self.file.fileno(), msvcrt.LK_UNLCK, 1)
        self.held = False
        self.file.close()  # (flock goes with the file)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def lock_folder(folder, name, what, subject=None, option="out_dir", removed_at_close=False):
    """The lock on folder/name (the folder made if missing), held until it is closed or the
    process ends: the one way a command takes its folder (run.py's run.lock, sweep.py's
    compare.lock, the image-MLP sweep's <csv>.lock). A folder held by another process (a `what`:
    'training run', 'compare.py', ...), a planted link, a folder that is a file or cannot be
    written: a ConfigError of one line naming `subject` (default: the folder) and the command
    line's `option` that names the folder."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return FileLock(folder / name, removed_at_close=removed_at_close)
    except Busy as busy:
        raise ConfigError(f"{subject or folder} is in use by another {what} (PID {busy.pid}): "
                          f"wait for it to finish, or use another --{option}") from None
    except NotALockFile as e:
        raise ConfigError(e.strerror) from None
    except (FileExistsError, NotADirectoryError):
        file = next((p for p in (folder, *folder.parents) if p.is_file()), folder)
        raise ConfigError(f"{option}={folder} cannot be a folder: {file} is a file. Name a folder "
                          f"with --{option}") from None
    except OSError as e:
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise ConfigError(f"{option}={folder} is not writable ({e.strerror}): name a folder "
                              f"you can write to with --{option}") from None
        raise ConfigError(f"{option}={folder} cannot be used: {e.strerror or e}") from None


def held_by(path):
    """The PID of the process holding the lock on `path`, or None (no lock file, or free)."""
    try:
        FileLock(path, shared=True, create=False).close()
    except Busy as busy:
        return busy.pid
    except OSError:  # no lock file (nothing ever ran there), or none this process can open
        pass
    return None


def _open_own_file(path, create):
    """A descriptor of path, which must be a plain file of its own: never a symbolic link
    (O_NOFOLLOW; Windows has no such flag and is asked first), nor a hard link to another file,
    nor a fifo or device (O_NONBLOCK keeps the open itself from waiting on one)."""
    refusal = NotALockFile(errno.ELOOP, f"{path} is a symbolic link or not a plain file of its "
                           f"own: a lock is never written through one. Delete it, or use another "
                           f"folder")
    if msvcrt is not None and path.is_symlink():
        raise refusal
    flags = (os.O_RDWR | (os.O_CREAT if create else 0) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK):  # (EMLINK: FreeBSD's O_NOFOLLOW answer)
            raise refusal from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise refusal
    return fd


def _still_at(fd, path):
    """Whether the file open as fd is still the one at path (not deleted, nor replaced)."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    opened = os.fstat(fd)
    return (opened.st_dev, opened.st_ino) == (at_path.st_dev, at_path.st_ino)


def _lock(fd, shared):
    """Lock fd without waiting; BlockingIOError when another process holds it."""
    if fcntl is not None:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return
    os.lseek(fd, WINDOWS_LOCK_OFFSET, os.SEEK_SET)  # (Windows has no shared lock: a probe locks)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        raise BlockingIOError(errno.EAGAIN, "locked by another process") from None
