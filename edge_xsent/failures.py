"""How a failure reaches the user: one `error:` line naming the file, the cause and the fix, and
exit 1, never a traceback (unless asked for with --debug). The CLI's commands and the lab's
scripts under train/ and benchmarks/ share it (`user_errors`, `script_errors`)."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
import traceback

import click

from edge_xsent.atomic import command_scope
from edge_xsent.errors import UserError


# A lean install (`pip install edge-xsent`) encodes and evaluates; these come with an extra.
EXTRA_OF = {"torch": "train", "safetensors": "train", "onnx": "export", "onnxscript": "export"}


def missing_extra(e: ModuleNotFoundError) -> Exception:
    """The error of a command that needs a package the install lacks: which extra brings it."""
    top = (e.name or "").split(".")[0]
    if top not in EXTRA_OF:
        raise e
    return UserError(f"this needs {top}, which `pip install edge-xsent` leaves out: "
                     f"pip install \"edge-xsent[{EXTRA_OF[top]}]\" (on a CPU machine: pip install torch==2.13.0 first)")


# What to do about an operating-system error, by errno name: the error line says it after the cause.
OS_FIXES = {
    "ENOSPC": "free some space there, or write somewhere else",
    "EDQUOT": "free some space there (your disk quota is used up), or write somewhere else",
    "EFBIG": "the file is over a size limit (ulimit -f): write somewhere else or lift the limit",
    "EACCES": "you may not write or read there: choose a folder you own, or change its permissions",
    "EPERM": "the system refuses it (an immutable or protected file?): choose another place",
    "EROFS": "that file system is read-only: write somewhere else",
    "EISDIR": "that is a folder: give a file name",
    "ENOTDIR": "a part of that path is a file, not a folder",
    "ENOENT": "no such file or folder: check the path",
    "EMFILE": "too many open files: raise the limit (ulimit -n)",
}


def os_error_line(e: OSError) -> str:
    """One readable line for an OSError: the file, the cause and the fix."""
    name = errno.errorcode.get(e.errno or 0, "")
    where = f"{e.filename}: " if e.filename else ""
    fix = OS_FIXES.get(name, "check the file and the disk, then rerun")
    return f"{where}{e.strerror or e} ({name or 'OS error'}); {fix}"


def user_errors(fn):
    """UserError, an OS error (disk full, read-only folder) or undecodable text -> one readable
    line and exit 1; a traceback only with --debug. Standard output is flushed inside, so a full
    disk or /dev/full behind `>` is reported too. The command runs in its own scope: the inputs it
    names are never replaced by its writes (edge_xsent.atomic)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with command_scope():
                result = fn(*args, **kwargs)
            try:
                sys.stdout.flush()
            except OSError as e:
                if isinstance(e, BrokenPipeError):
                    raise
                raise OSError(e.errno, e.strerror, "standard output") from None
            return result
        except BrokenPipeError:  # `edge-xsent ... | head`: the reader left; nothing more to say
            _silence_stdout()
            sys.exit(1)
        except (UserError, ModuleNotFoundError, OSError, UnicodeDecodeError) as e:
            if _debug():
                raise
            if isinstance(e, ModuleNotFoundError):
                e = missing_extra(e)
            elif isinstance(e, OSError):
                if e.filename is None and _from_echo(e):  # printing to a full disk or /dev/full
                    e = OSError(e.errno, e.strerror, "standard output")
                _silence_stdout()
                e = os_error_line(e)
            elif isinstance(e, UnicodeDecodeError):
                e = f"a file is not valid UTF-8 ({e.reason} at byte {e.start}); re-encode it as UTF-8"
            _error_line(f"error: {e}")
            sys.exit(1)
        except KeyboardInterrupt:
            _error_line("interrupted")
            sys.exit(130)

    return wrapper


def _error_line(text: str) -> None:
    """The error on its own line; a closed or failing stderr loses it, never raises instead."""
    try:
        click.echo(text, err=True)
    except (OSError, ValueError):
        pass


def _from_echo(e: BaseException) -> bool:
    """Raised while click.echo printed (stderr failing cannot be reported at all, so: stdout)."""
    return any(f.name == "echo" and "click" in f.filename for f in traceback.extract_tb(e.__traceback__))


def _silence_stdout() -> None:
    """Point stdout at /dev/null: what it still buffers for a full disk or a closed pipe would
    otherwise fail again at exit, as Python's own traceback."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def open_closed_streams() -> None:
    """A process started with stdin, stdout or stderr closed (`2>&-`) gets None there from Python;
    /dev/null stands in, so reading finds no input and writing says nothing, without a traceback."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode))


def _debug() -> bool:
    """--debug on the edge-xsent command line (click's context), or EDGE_XSENT_DEBUG=1 for a script."""
    if os.environ.get("EDGE_XSENT_DEBUG") == "1":
        return True
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().params.get("debug"))


def script_errors(main):
    """`user_errors` for a lab script's main(): the same one line and exit 1 for what a user can
    fix (EDGE_XSENT_DEBUG=1 shows the traceback)."""
    return user_errors(main)
