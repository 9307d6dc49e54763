"""How a failure reaches the user: one `error:` line naming the file, the cause and the fix, and exit 1, never a
traceback (unless asked for with --debug). The CLI's commands and the lab's scripts share it (`user_errors`)."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
import traceback

import click

from edge_xsent.errors import UserError
from edge_xsent.paths import SCOPE_KEY, command_scope

# A lean install (`pip install edge-xsent`) encodes and evaluates; these come with an extra.
EXTRA_OF = {"torch": "train", "safetensors": "train", "onnx": "export", "onnxscript": "export"}
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


def user_errors(fn):
    """UserError, an OS error, a missing extra or undecodable text -> one line and exit 1 (a traceback only with
    --debug or EDGE_XSENT_DEBUG=1); stdout is flushed inside (a full disk behind `>`); the command runs in its scope
    (edge_xsent.paths; under click, its parse's), so its writes never replace what it reads."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context(silent=True)
        try:
            with command_scope(ctx.meta.get(SCOPE_KEY) if ctx else None):
                result = fn(*args, **kwargs)
            try:
                sys.stdout.flush()
            except OSError as e:
                raise e if isinstance(e, BrokenPipeError) else OSError(e.errno, e.strerror, "standard output")
            return result
        except BrokenPipeError:  # `edge-xsent ... | head`: the reader left; nothing more to say
            _silence_stdout()
            sys.exit(1)
        except (UserError, ModuleNotFoundError, OSError, UnicodeDecodeError) as e:
            if os.environ.get("EDGE_XSENT_DEBUG") == "1" or (ctx and ctx.find_root().params.get("debug")):
                raise
            _error_line(f"error: {_line(e)}")
            sys.exit(1)
        except KeyboardInterrupt:
            _error_line("interrupted")
            sys.exit(130)

    return wrapper


def _line(e: Exception) -> str:
    """The cause and the fix, in words."""
    if isinstance(e, ModuleNotFoundError):
        top = (e.name or "").split(".")[0]
        if top not in EXTRA_OF:
            raise e
        return (f"this needs {top}, which `pip install edge-xsent` leaves out: pip install \"edge-xsent"
                f"[{EXTRA_OF[top]}]\" (on a CPU machine: pip install torch==2.13.0 first)")
    if isinstance(e, UnicodeDecodeError):
        return f"a file is not valid UTF-8 ({e.reason} at byte {e.start}); re-encode it as UTF-8"
    if not isinstance(e, OSError):
        return str(e)
    printing = e.filename is None and any(f.name == "echo" and "click" in f.filename
                                          for f in traceback.extract_tb(e.__traceback__))
    _silence_stdout()
    name = errno.errorcode.get(e.errno or 0, "")
    where = "standard output: " if printing else f"{e.filename}: " if e.filename else ""  # a full disk behind `>`
    return f"{where}{e.strerror or e} ({name or 'OS error'}); {OS_FIXES.get(name, 'check the file and the disk, then rerun')}"


def _error_line(text: str) -> None:
    """The error on its own line; a closed or failing stderr loses it, never raises instead."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(text, err=True)


def _silence_stdout() -> None:
    """Point stdout at /dev/null: what it still buffers would fail again at exit, as Python's own traceback."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def open_closed_streams() -> None:
    """A stream closed at start (`2>&-`) is None in Python: /dev/null stands in, so nothing tracebacks."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode))
