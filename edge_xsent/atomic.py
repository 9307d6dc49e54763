"""Atomic writes: a reader sees the old file or the new one, never half of one. Each writer applies the output
rule itself as it writes (edge_xsent.paths.guard_output), so no command or script writes without it."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Iterator

from edge_xsent.errors import UserError
from edge_xsent.inputs import as_path, is_devnull, open_regular
from edge_xsent.paths import guard_output, owning

SPACE_ERRORS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """`with atomic_write(path) as f:` writes a temporary beside `path` (named with the writer's pid, so a later
    writer removes what a killed one left), fsyncs, then renames it over `path`. /dev/null is written through.
    The mode is checked at the call: `atomic_write(path, text)` without `with` would otherwise write nothing."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode {str(mode)[:40]!r}: 'w' or 'wb'; it is a context manager: "
                         "`with atomic_write(path) as f: f.write(text)`")
    return _atomic_write(as_path(path, "output"), mode, None if "b" in mode else encoding)


@contextlib.contextmanager
def _atomic_write(path: Path, mode: str, encoding: str | None) -> Iterator[IO]:
    guard_output(path, folder=False)
    if is_devnull(path):
        with open(path, mode, encoding=encoding) as f:
            yield f
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and (e.filename in (None, tmp) or e.errno in SPACE_ERRORS):
            raise OSError(e.errno, e.strerror, str(path)) from None  # the file the user asked for, not ours
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a folder under a temporary name, then swap it in place of `path` in one step: if the block fails,
    `path` keeps its content; readers never find it missing (one exchange where the system offers it); of two
    writers at once, the last one's folder stays; temporaries of killed writers are removed."""
    path = as_path(path, "output")
    guard_output(path, folder=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        with owning(tmp):  # what the block writes inside its own temporary is its own
            yield tmp
        for p in tmp.rglob("*"):  # some writers (mkstemp, safetensors) create 0600 files
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~_umask())
        _swap_in(tmp, path)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise _named_output_error(e, path) from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_stale_temporaries(path: Path) -> None:
    """Temporaries `.NAME.PID.*.tmp` left beside `path` by killed writers (their process is gone), removed."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        parts = tmp.name[len(path.name) + 2:].split(".")  # PID, random part, [old,] tmp: no other file's
        if parts[2:] in (["tmp"], ["old", "tmp"]) and parts[0].isdigit() and not tmp.is_symlink() \
                and not _pid_alive(int(parts[0])):
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def _named_output_error(e: OSError, path: Path) -> OSError:
    """A write out of space failed on the output, whichever file shutil names; a copytree's bundle becomes its first."""
    if isinstance(e, shutil.Error) and e.args and isinstance(e.args[0], list) and e.args[0]:
        src, dst, why = e.args[0][0]
        number = next((n for n in SPACE_ERRORS if f"[Errno {n}]" in str(why)), None)
        return OSError(number, os.strerror(number), str(path)) if number else OSError(None, str(why), str(dst))
    return OSError(e.errno, e.strerror, str(path)) if e.errno in SPACE_ERRORS else e


def _swap_in(tmp: Path, path: Path) -> None:
    """Put the finished folder `tmp` at `path`; the previous content of `path` goes away."""
    for _ in range(10):  # another writer may create `path` between our checks: try again
        if not path.exists():
            with contextlib.suppress(OSError):
                os.rename(tmp, path)
                return
            continue
        if _exchange(tmp, path):
            shutil.rmtree(tmp, ignore_errors=True)  # the old content, now under the temporary name
            return
        old = tmp.with_name(tmp.name[:-4] + ".old.tmp")  # no exchange here: two renames, a short window
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
        return
    raise OSError(f"{path}: could not replace it (other writers kept changing it)")


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the system has no such call."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
        return True
    if (err := ctypes.get_errno()) in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # no exchange here
        return False
    raise OSError(err, os.strerror(err), str(b))


def copy_file(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """A copy under the output rule: `src` read as a regular file (a FIFO or device is refused, never waited on),
    `dst` written atomically, never through a link, never `src` itself."""
    with os.fdopen(open_regular(src, "copy source"), "rb") as source:
        if os.path.exists(dst) and os.path.samefile(src, dst):
            raise UserError(f"{dst} is the file copied ({src}): writing it would destroy it; choose another output")
        with atomic_write(dst, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)


def copy_tree(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """A folder copied file by file through copy_file: a link inside it (to a user's file) is refused, never followed."""
    src, dst = Path(src), Path(dst)
    for path in sorted(src.rglob("*")):
        if path.is_symlink():
            raise UserError(f"{path} is a link: a copied folder holds only its own files; replace it with the file")
        if path.is_dir():
            (dst / path.relative_to(src)).mkdir(parents=True, exist_ok=True)
        else:
            copy_file(path, dst / path.relative_to(src))


def save_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict | None = None) -> None:
    """safetensors' save_file, its I/O errors ("os error 28") raised as the OSErrors they are, for the one handler."""
    import re

    from safetensors.torch import save_file

    try:
        save_file(tensors, str(path), metadata=metadata)
    except Exception as e:  # SafetensorError is not an OSError  # noqa: BLE001
        if (code := re.search(r"os error (\d+)", str(e))) is None:
            raise
        raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(path)) from None
