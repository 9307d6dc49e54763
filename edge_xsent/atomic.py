"""Atomic writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterable, Iterator

from edge_xsent.errors import UserError
from edge_xsent.inputs import CAPS, as_path, kind_of, os_error, parse_json, read_bytes


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


WRITE_MODES = ("w", "wb")


def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temporary file beside `path`, fsync, then rename over it: `with atomic_write(path) as f:`.
    The temporary's name carries the writer's pid, so a later writer removes what a killed one left. /dev/null is
    written through (a user's way to discard); a link or another special file is refused, never replaced.
    The mode is checked at the call: `atomic_write(path, text)`, without `with`, would otherwise write nothing."""
    if mode not in WRITE_MODES:
        raise ValueError(f"atomic_write mode {str(mode)[:40]!r}: 'w' or 'wb'; it is a context manager: "
                         "`with atomic_write(path) as f: f.write(text)`")
    return _atomic_write(path, mode, encoding)


@contextlib.contextmanager
def _atomic_write(path: str | os.PathLike, mode: str, encoding: str | None) -> Iterator[IO]:
    path = as_path(path, "output")
    guard_output(path, folder=False)
    if is_devnull(path):
        with open(path, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # name the file the user asked for, not our temporary
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if e.filename in (None, tmp) or e.errno in SPACE_ERRORS:
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise
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
    """Temporaries `.NAME.PID.*.tmp` (files or folders) left beside `path` by writers that were
    killed (their process is gone): removed, so that killed encodes and exports do not pile up."""
    removed = []
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        parts = tmp.name[len(path.name) + 2:].split(".")  # PID, random part, [old,] tmp: no other file's
        if parts[2:] not in (["tmp"], ["old", "tmp"]) or not parts[0].isdigit() or _pid_alive(int(parts[0])) \
                or tmp.is_symlink():
            continue
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        removed.append(tmp)
    return removed


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a folder under a temporary name, then swap it in place of `path` in one step.

    If anything fails inside the block, `path` keeps its previous content; readers never find
    `path` missing (the swap is one exchange where the system offers it); two writers at once
    each succeed, the last one's folder staying; temporaries of killed writers are removed.
    """
    path = as_path(path, "output")
    guard_output(path, folder=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        with owning(tmp):  # what the block writes inside its own temporary is its own
            yield tmp
        for p in tmp.rglob("*"):  # some writers (mkstemp, safetensors) create 0600 files
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~_umask())
        _swap_in(tmp, path)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _named_output_error(e, path) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


SPACE_ERRORS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def _named_output_error(e: OSError, path: Path) -> OSError:
    """A write that ran out of space failed on the output, whichever file the copy names (shutil
    names its source); a copytree's bundle of errors becomes its first one."""
    if isinstance(e, shutil.Error) and e.args and isinstance(e.args[0], list) and e.args[0]:
        src, dst, why = e.args[0][0]
        number = next((n for n in SPACE_ERRORS if f"[Errno {n}]" in str(why)), None)
        return OSError(number, os.strerror(number), str(path)) if number else OSError(None, str(why), str(dst))
    if e.errno in SPACE_ERRORS:
        return OSError(e.errno, e.strerror, str(path))
    return e


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


# ----------------------------------------------------------------------------- the rule at the bottom
# Every write goes through atomic_write, atomic_dir or copy_file, and each applies the output rule itself
# (guard_output), so no command or script writes without it. Two memories make it whole:
# - a command's scope (opened by failures.user_errors around each command and script): the inputs it
#   named (its path arguments, check_output's inputs, a copy's source), which no write of it may replace;
# - the folders this process owns while it writes them (a training run's folder, atomic_dir's temporary):
#   inside one, the owner writes its own entries; everyone else is refused a model's or a run's files.
_SCOPE: dict[str, set[Path]] = {}
_SCOPE_DEPTH = [0]
_OWNED: dict[Path, int] = {}


@contextlib.contextmanager
def command_scope() -> Iterator[None]:
    """One command's memory of its inputs and outputs; nested scopes (a group and its command) share it."""
    if _SCOPE_DEPTH[0] == 0:
        _SCOPE.clear()
        _SCOPE.update(inputs=set(), outputs=set())
    _SCOPE_DEPTH[0] += 1
    try:
        yield
    finally:
        _SCOPE_DEPTH[0] -= 1
        if _SCOPE_DEPTH[0] == 0:
            _SCOPE.clear()


def note_input(path: str | os.PathLike) -> None:
    """`path` is an input of the running command: no write of the command may replace it or lie inside it."""
    if _SCOPE and path is not None and str(path) != "-":
        _SCOPE["inputs"].add(_quiet_resolve(path))


def note_output(path: str | os.PathLike) -> None:
    """`path` is an output of the running command: an input named later may not be it (nor lie inside it)."""
    if _SCOPE and path is not None and str(path) != "-":
        _SCOPE["outputs"].add(_quiet_resolve(path))


def scope_inputs() -> set[Path]:
    return set(_SCOPE.get("inputs", ()))


def scope_outputs() -> set[Path]:
    return set(_SCOPE.get("outputs", ()))


def _quiet_resolve(path: str | os.PathLike) -> Path:
    try:
        return Path(os.fsdecode(os.fspath(path))).expanduser().resolve()
    except (OSError, RuntimeError, TypeError, ValueError):
        return Path(os.fsdecode(os.fspath(path))).expanduser().absolute()


def own(folder: str | os.PathLike) -> None:
    """This process writes `folder` as its owner (a training run its run folder, from its lock on): its
    entries are not refused to it as a model's or a run's files. `disown` ends it."""
    key = _quiet_resolve(folder)
    _OWNED[key] = _OWNED.get(key, 0) + 1


def disown(folder: str | os.PathLike) -> None:
    key = _quiet_resolve(folder)
    if _OWNED.get(key, 0) > 1:
        _OWNED[key] -= 1
    else:
        _OWNED.pop(key, None)


@contextlib.contextmanager
def owning(folder: str | os.PathLike) -> Iterator[Path]:
    """`own(folder)` while the block runs (atomic_dir's temporary, a model's own maintenance)."""
    own(folder)
    try:
        yield Path(folder)
    finally:
        disown(folder)


def _owned(o: Path) -> bool:
    return any(o == f or o.is_relative_to(f) for f in list(_OWNED))


def guard_output(path: str | os.PathLike, folder: bool) -> None:
    """The output rule at the moment of writing: never a link or a special file (/dev/null is written
    through), never an input of the running command, and, unless this process owns the folder, never a
    model folder's file nor a training run's own entry, whether or not that entry exists yet."""
    given = as_path(path, "output")
    refuse_special(given, folder)
    o = _resolved(given)
    if _owned(o):
        return
    _refuse_inputs(path, o, scope_inputs(), folder)
    _refuse_kept(path, o)


def copy_file(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """A copy under the output rule: `src` read as a regular file (a FIFO or device is refused, never
    waited on), `dst` written atomically, never through a link; `src` counts as an input of the command."""
    from edge_xsent.inputs import open_regular

    note_input(src)
    fd = open_regular(src, "copy source")
    with os.fdopen(fd, "rb") as source, atomic_write(dst, "wb") as out:
        shutil.copyfileobj(source, out, 1 << 20)


def copy_tree(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """A folder copied file by file through copy_file: a link inside it (to a user's file, which would travel
    with the copy) is refused, never followed; a FIFO or a device is refused without waiting."""
    src, dst = Path(src), Path(dst)
    for path in sorted(src.rglob("*")):
        if path.is_symlink():
            raise UserError(f"{path} is a link: a copied folder holds only its own files; replace it with the file")
        if path.is_dir():
            (dst / path.relative_to(src)).mkdir(parents=True, exist_ok=True)
        else:
            copy_file(path, dst / path.relative_to(src))


def check_output(out: str | os.PathLike | None, inputs: Iterable[str | os.PathLike | None] = (),
                 folder: bool = False, replaces: tuple[str, str] = ("manifest.json", "model folder")) -> None:
    """One rule for every output (issue 74), checked before any work: a command replaces only what it
    wrote itself. Refused: the path of an input, a file inside an input folder (a model's config.json),
    a link (its target is not ours to replace), a special file (a FIFO, a device: /dev/null alone is
    written through, never replaced), a part of a model folder or a training run's own files, and for a
    folder output, a folder holding an input or an existing folder without the marker its writer
    leaves (`replaces`: the marker file and the folder's kind; a web app's manifest.json is no marker).
    The error names the fix."""
    if out is None or str(out) == "-":
        return
    given = as_path(out, "output")
    o = _resolved(given)
    inputs = [i for i in inputs if i is not None and str(i) != "-"]
    for i in inputs:
        note_input(i)
    _refuse_inputs(out, o, [*inputs, *scope_inputs()], folder)
    refuse_special(given, folder)
    if not folder and o.is_dir():
        raise UserError(f"{out} is a folder; give a file name")
    _refuse_kept(out, o)
    marker, kind = replaces  # a folder output replaces only a folder of its own kind (a model, a corpus)
    if folder and o.exists() and (not o.is_dir() or (any(o.iterdir()) and not has_marker(o, marker))):
        raise UserError(f"{out} exists and is not a {kind} edge-xsent wrote (no {marker} of ours): it would be "
                        "replaced whole; choose a new folder (or remove it yourself)")
    probe_writable(given.expanduser().parent)
    note_output(given)


def _resolved(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except RuntimeError:  # Python 3.11: a link loop
        raise UserError(f"{path}: a link that leads back to itself (a loop); give another output") from None
    except OSError as e:
        raise os_error(e, path) from None


def _refuse_inputs(out, o: Path, inputs, folder: bool) -> None:
    for given in inputs:
        if given is None or str(given) == "-" or not Path(given).expanduser().exists():
            continue
        i = Path(given).expanduser().resolve()
        if o == i or o.is_relative_to(i) or (folder and i.is_relative_to(o)):
            what = "is" if o == i else "is inside" if o.is_relative_to(i) else "holds"
            raise UserError(f"{out} {what} an input of this command ({given}): writing it would destroy the input; "
                            "choose another output")


def refuse_special(path: Path, folder: bool) -> None:
    """A link or a special file is never replaced; /dev/null (a file output) is written through."""
    try:
        mode = path.expanduser().lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise os_error(e, path) from None
    if stat.S_ISLNK(mode):
        raise UserError(f"{path} is a link: an output replaces only a file of its own, never a link or what it "
                        "points to; give the real path or a new name (- for standard output where offered)")
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or (not folder and is_devnull(path)):
        return
    raise UserError(f"{path} is {kind_of(mode)}: an output is written to a new or regular file (or /dev/null), "
                    "never a special file; give a file name")


def is_devnull(path: Path) -> bool:
    """`path` is the null device (by its device number, under any name): written to, never replaced."""
    try:
        st = os.stat(path)
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def _refuse_kept(out, o: Path) -> None:
    """Nothing inside a model folder, nor a training run's own files (its model/, checkpoints, log)."""
    keeper = kept_folder(o)
    if keeper is None:
        return
    if o.is_file() or keeper[1] == "model folder" or _runs_own(keeper, o):
        raise UserError(f"{out} is part of a {keeper[1]} ({keeper[0]}): writing it would break that; choose an "
                        "output outside it")


def _runs_own(keeper: tuple[Path, str], path: Path) -> bool:
    """`path` is, or lies inside, one of a run's own entries (layout.RUN_OWN) in the training run `keeper`."""
    from edge_xsent.layout import RUN_OWN

    folder, kind = keeper
    return kind == "training run" and (path == folder or path.relative_to(folder).parts[0] in RUN_OWN)


def is_run(folder: Path) -> bool:
    """`folder` is an edge-xsent training run: it holds the marker a run writes first (layout.RUN_MARKER)."""
    from edge_xsent.layout import RUN_MARKER

    return has_marker(folder, RUN_MARKER)


def check_run_folder(out: Path, what: str = "--out") -> None:
    """--out is a new folder or a run's own (resumed): never a file, a link, a model folder (the shipped
    default's files would be overwritten), nor a folder of other files (the run would mix its own
    in, or append to a user's log.jsonl), and never inside a model folder or another run. `what` names it."""
    from edge_xsent.layout import RUN_MARKER

    refuse_special(out, folder=True)
    if out.exists() and not out.is_dir():
        raise UserError(f"{what} {out} is a file; a run writes a folder: name a new or existing run folder")
    keeper = kept_folder(out.resolve() / "x")
    if keeper is not None and keeper[1] == "model folder":
        raise UserError(f"{what} {out} is or lies inside a model folder ({keeper[0]}): a run would overwrite its files; "
                        "name a new folder")
    if keeper is not None and keeper[0] != out.resolve():
        raise UserError(f"{what} {out} lies inside another training run ({keeper[0]}): its entries are that run's; "
                        "name a folder of its own")
    if out.is_dir() and set(os.listdir(out)) - {".lock"} and not is_run(out):
        other = sorted(os.listdir(out))
        raise UserError(f"{what} {out} holds files and is not an edge-xsent training run (no {RUN_MARKER}, which a run "
                        f"writes first; it holds {', '.join(other[:3])}): name a new folder. A run made before runs "
                        f"were marked (2026-12-07) is marked by: printf '{{\"format\": \"edge-xsent-run\"}}' > "
                        f"{out}/{RUN_MARKER}")


def has_marker(folder: Path, marker: str) -> bool:
    """`folder` holds the marker its edge-xsent writer left: a manifest.json of an edge-xsent model, a
    corpus's stats.json, the reserved benchmark's notice; a file of the same name by anyone else is no marker."""
    from edge_xsent.layout import FORMAT, RUN_FORMAT, RUN_MARKER

    formats = {"manifest.json": FORMAT, RUN_MARKER: RUN_FORMAT}  # JSON markers known by their `format`
    path = folder / marker
    try:
        data = read_bytes(path, CAPS["json"], "marker")
        if path.name not in (*formats, "stats.json"):
            return b"edge-xsent" in data  # the reserved benchmark's notice names the command that refuses it
        doc = parse_json(data, path)
    except (UserError, OSError):
        return False
    if path.name in formats:
        return isinstance(doc, dict) and doc.get("format") == formats[path.name]
    return isinstance(doc, dict) and isinstance(doc.get("pairs"), dict) and "total" in doc


def check_into(folder: str | os.PathLike, what: str) -> Path:
    """A folder a command writes files into (a cache, a benchmark's results): never a model folder, a
    training run or a checkpoint folder, nor inside one; writable, checked before any work."""
    given = as_path(folder, what)
    f = _resolved(given)
    refuse_special(given, folder=True)
    if f.exists() and not f.is_dir():
        raise UserError(f"{what} {folder} is a file; give a folder")
    keeper = kept_folder(f / "x")
    if keeper is not None and (keeper[1] == "model folder" or _runs_own(keeper, f)):
        raise UserError(f"{what} {folder} is or lies inside a {keeper[1]} ({keeper[0]}): writing there would break "
                        "it; choose a folder of its own")
    probe_writable(given.expanduser())
    return given.expanduser()


def check_outputs(outs: Iterable[str | os.PathLike | None], inputs: Iterable[str | os.PathLike | None] = ()) -> None:
    """`check_output` for each file a script writes (a benchmark's .md and .json)."""
    inputs = list(inputs)
    for out in outs:
        check_output(out, inputs)


def check_name(name: str, what: str = "--name") -> str:
    """A name that becomes a file name (a candidate's figures): one plain word, never a path, so it cannot
    point at a model's or anyone's file."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name or name.startswith("-"):
        raise UserError(f"{what} {name!r}: a plain name is needed (letters, digits, '-', '_', '.'), not a path")
    return name


def kept_folder(path: Path) -> tuple[Path, str] | None:
    """The model folder or training run that `path` lies inside, if any: their files are not
    outputs (a new file beside them, like a run's model-debiased/, is)."""
    for folder in path.parents:
        if has_marker(folder, "manifest.json") or ((folder / "config.json").is_file()
                                                     and (folder / "tokenizer.model").is_file()):
            return folder, "model folder"
        if is_run(folder) or (folder / "checkpoints").is_dir() or (folder / "log.jsonl").is_file():
            return folder, "training run"  # protected by any sign of one (a run made before markers too); only the
            # marker lets `train --out` or a restore write there as its run (check_run_folder)
    return None


def probe_writable(parent: Path) -> None:
    """Create (and remove) a temporary where the output will go: a read-only, protected or missing
    place fails now, as an OSError naming `parent`, not after the work is done."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix=f".probe.{os.getpid()}.", suffix=".tmp", dir=parent):
            pass
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(parent)) from None


def save_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict | None = None) -> None:
    """safetensors' save_file, its I/O errors (a full disk: "os error 28") raised as the OSError they
    are, so the one handler of OS errors (the CLI, a training run's clean stop) sees them."""
    import re

    from safetensors.torch import save_file

    try:
        save_file(tensors, str(path), metadata=metadata)
    except Exception as e:  # SafetensorError is not an OSError  # noqa: BLE001
        code = re.search(r"os error (\d+)", str(e))
        if code is None:
            raise
        raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(path)) from None
