"""Errors a user can act on. Each message names the problem and the fix; the CLI prints it without a traceback.

`user_os_error(err)` turns an OSError whose cause is the user's machine (disk full, read-only, no permission, a file
where a folder belongs, a path too long, another filesystem) into that message: the CLI exits 2 with it, not 1."""

import errno
import os


class CircuitdevError(Exception):
    """Base class: anything the `circuitdev` command reports as a one-line message and a non-zero exit."""


class ConfigError(CircuitdevError, ValueError):
    """A parameter, panel file or configuration value is invalid."""


class DataError(CircuitdevError, ValueError):
    """An input file (published JSON, result record) is missing, malformed or partial."""


class ModelUnavailableError(CircuitdevError, OSError):
    """A model or revision cannot be loaded here (offline hub, missing folder)."""


class ArchitectureError(CircuitdevError, ValueError):
    """A model whose layout the adapter table does not know."""


class NumericalError(CircuitdevError, ArithmeticError):
    """NaN / Inf in probed values (e.g. fp16 underflow)."""


# errno -> (what happened, the fix); {path} is the path involved
_OS_ERRORS = {
    errno.ENOSPC: ("the disk is full", "free space on the disk holding {path} (or point the command at another "
                   "disk), then run again"),
    errno.EDQUOT: ("the disk quota is exhausted", "free space in your quota, or write to another disk"),
    errno.EROFS: ("the filesystem is read-only", "choose a writable folder (or remount {path} read-write)"),
    errno.EACCES: ("permission denied", "make {path} writable for you (chmod / chown) or choose another folder"),
    errno.EPERM: ("the operation is not permitted (an immutable file or folder?)",
                  "lift the restriction on {path} (e.g. `chattr -i`) or choose another folder"),
    errno.ENOTDIR: ("a file stands where a folder belongs", "move that file away or choose another folder"),
    errno.EISDIR: ("a folder stands where a file belongs", "move that folder away or choose another path"),
    errno.EEXIST: ("a file already exists where a folder is needed", "move it away or choose another folder"),
    errno.ENAMETOOLONG: ("the path is too long for the filesystem", "use a shorter folder path"),
    errno.EXDEV: ("the source and destination lie on different filesystems",
                  "put both on one disk (or run again: a copy is made where a rename cannot be)"),
    errno.ELOOP: ("too many symbolic links (a loop?)", "fix the symbolic links in {path}"),
    errno.EMLINK: ("too many links in a folder", "choose another folder"),
}


def os_error_fix(err: OSError, path=None) -> str:
    """The fix for an OSError the user's machine caused ("" for an unknown errno)."""
    known = _OS_ERRORS.get(getattr(err, "errno", None))
    if not known:
        return ""
    where = path if path is not None else (err.filename or "the folder")
    text = known[1].format(path=where)
    return text[0].upper() + text[1:] + "."


def user_os_error(err: BaseException) -> str | None:
    """A one-line message (cause and fix) when `err` is an OSError / undecodable name the user's machine caused;
    None for anything else (a bug: the CLI then says "please report it")."""
    if isinstance(err, UnicodeError):
        return (f"a file or folder name cannot be encoded or decoded ({err}); rename it to UTF-8 characters, or "
                "set a UTF-8 locale (e.g. LANG=C.UTF-8)")
    if not isinstance(err, OSError) or getattr(err, "errno", None) not in _OS_ERRORS:
        return None
    what = _OS_ERRORS[err.errno][0]
    names = " -> ".join((os.fsdecode(n) if isinstance(n, (str, bytes)) else str(n)) for n in (err.filename, err.filename2) if n is not None)
    return f"{what}{f' ({names})' if names else ''}: {err.strerror or err}. {os_error_fix(err)}"
