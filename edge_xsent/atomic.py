"""Atomic writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Iterable, Iterator

from .errors import UserError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write to a temporary file beside `path`, fsync, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the system has no such call."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this file system or kernel cannot exchange
        return False
    raise OSError(err, os.strerror(err), str(b))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Temporary folders `.NAME.PID.*.tmp` left beside `path` by writers that were killed (their
    process is gone): removed, so that killed exports do not pile up."""
    removed = []
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        parts = tmp.name[len(path.name) + 2:].split(".")
        if tmp.is_dir() and parts[0].isdigit() and not _pid_alive(int(parts[0])):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a folder under a temporary name, then swap it in place of `path` in one step.

    If anything fails inside the block, `path` keeps its previous content; readers never find
    `path` missing (the swap is one exchange where the system offers it); two writers at once
    each succeed, the last one's folder staying; temporaries of killed writers are removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        for p in tmp.rglob("*"):  # some writers (mkstemp, safetensors) create 0600 files
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~_umask())
        _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(tmp: Path, path: Path) -> None:
    """Put the finished folder `tmp` at `path`; the previous content of `path` goes away."""
    for _ in range(10):  # another writer may create `path` between our checks: try again
        if not path.exists():
            try:
                os.rename(tmp, path)
                return
            except OSError:
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


def check_output(out: str | os.PathLike | None, inputs: Iterable[str | os.PathLike | None] = (),
                 folder: bool = False) -> None:
    """Refuse, before any work, an output that would destroy what a command reads or a user keeps:
    the path of an input, a file inside an input folder (a model's config.json), and for a folder
    output, a folder holding an input or an existing folder that is not a model folder (a training
    run with its checkpoints, a folder of the user's files). The error names the fix."""
    if out is None or str(out) == "-":
        return
    o = Path(out).expanduser().resolve()
    for given in inputs:
        if given is None or str(given) == "-" or not Path(given).expanduser().exists():
            continue
        i = Path(given).expanduser().resolve()
        if o == i or o.is_relative_to(i) or (folder and i.is_relative_to(o)):
            what = "is" if o == i else "is inside" if o.is_relative_to(i) else "holds"
            raise UserError(f"{out} {what} an input of this command ({given}): writing it would destroy the input; "
                            "choose another output")
    if not folder and o.is_dir():
        raise UserError(f"{out} is a folder; give a file name")
    if folder and o.exists() and (not o.is_dir() or (any(o.iterdir()) and not (o / "manifest.json").is_file())):
        raise UserError(f"{out} exists and is not a model folder: it would be replaced whole; choose a new folder "
                        "(or remove it yourself)")
