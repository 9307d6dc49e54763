"""The rule for every path a command takes, declared once as roles (issue 104), applied as a command line is parsed
(click's `ClickPath`, argparse's `path_arg`), remembered in the command's scope, and again as a writer writes
(`guard_output`). docs/guarantees.md says it in one paragraph."""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import click

from edge_xsent.errors import UserError
from edge_xsent.inputs import CAPS, as_path, is_devnull, kind_of, os_error, parse_json, read_bytes
from edge_xsent.layout import FORMAT, MANIFEST, RUN_FORMAT, RUN_MARKER, RUN_OWN

SCOPE_KEY = "edge_xsent.scope"  # where click keeps a command's scope (its context's meta)
_MARKERS = {MANIFEST: FORMAT, RUN_MARKER: RUN_FORMAT}  # JSON markers, known by their `format`


@dataclass(frozen=True)
class Role:
    """What a path is to its command. `name`: input, file, into, folder or run; the other fields refine one."""

    name: str
    marker: str = MANIFEST  # folder: the file its writer leaves, so that only a folder of its kind is replaced
    kind: str = "model folder"  # folder: that kind, in words
    derives: tuple[str, ...] = ()  # file: suffixes written beside it (".md"); into: names written inside it
    optional: bool = False  # input: a missing file means none (a peers' table)
    sep: str = ""  # input: two paths in one value (A:B), or NAME=PATH where `named`
    named: bool = False
    literal: str = ""  # input: a value starting with this is no path (git:REV)
    stream: bool = False  # input: read once, so a FIFO or a device is a stream (encode --input <(zcat a.gz))

    def check(self, value: str | os.PathLike, inputs: Iterable = (), what: str | None = None) -> Path | str:
        """The role's rule for `value` (and the inputs named here), before any work; noted in an open scope."""
        scope = _SCOPE.get()
        if self.name == "input":
            return self._inputs(str(value), scope) if self.sep or self.literal else self._input(value, scope)
        if self.name == "run":
            return _check_run(value, scope, what or "--out")
        into = self.name == "into"
        out = _check_into(value, scope, what or "output folder") if into else \
            _check_output(value, inputs, scope, self.name == "folder", self.marker, self.kind)
        for derived in self.derives:  # a file's suffix beside it, or a name inside a folder written into
            _check_output(out / derived if into else out.with_suffix(derived), inputs, scope)
        return out

    def _input(self, value, scope) -> Path:
        path = as_path(value, "input").expanduser()
        if self.optional and not path.exists() and not path.is_symlink():
            return path
        try:
            mode = path.stat().st_mode
        except OSError as e:
            raise UserError(f"{value}: no such file or folder") if isinstance(e, FileNotFoundError) else os_error(e, path)
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or (self.stream and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)))):
            raise UserError(f"{value} is {kind_of(mode)}: an input is a regular file or a folder (a FIFO or a device "
                            "would hang or never end); save it to a file first")
        if scope is not None:
            _note_input(path, scope)
        return path

    def _inputs(self, value: str, scope) -> str:
        if self.literal and value.startswith(self.literal):
            return value
        if not self.sep:
            return str(self._input(value, scope))
        a, found, b = value.partition(self.sep)
        if not (found and a and b):
            raise UserError(f"{value}: NAME{self.sep}PATH is needed" if self.named
                            else f"{value}: two paths are needed, A{self.sep}B")
        for part in [b] if self.named else [a, b]:
            self._input(part, scope)
        return value


INPUT, FILE, INTO, FOLDER, RUN = Role("input"), Role("file"), Role("into"), Role("folder"), Role("run")


# ----------------------------------------------------------------------------- a command's scope
@dataclass
class _Scope:
    inputs: set[Path] = field(default_factory=set)
    outputs: set[Path] = field(default_factory=set)


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("edge_xsent_scope", default=None)


@contextlib.contextmanager
def command_scope(scope: _Scope | None = None) -> Iterator[_Scope]:
    """One command's memory of the paths it reads and writes; a nested scope (a group's command) is the same."""
    if (current := _SCOPE.get()) is not None:
        yield current
        return
    token = _SCOPE.set(scope if scope is not None else _Scope())
    try:
        yield _SCOPE.get()
    finally:
        _SCOPE.reset(token)


def _open_scope() -> _Scope:
    if (scope := _SCOPE.get()) is None:
        raise RuntimeError("a path was declared outside a command's scope, so its writes could not know it: run the "
                           "command under edge_xsent.failures.user_errors (or inside paths.command_scope())")
    return scope


def note_input(*paths: str | os.PathLike | None) -> None:
    """Paths the command reads that no path type saw (a model found by its name, a recipe's data): an output
    named before that is one, holds one or lies inside one is refused now; a later write, then."""
    scope = _open_scope()
    for path in paths:
        if path is not None and str(path) != "-" and as_path(path).expanduser().exists():
            _note_input(as_path(path), scope)


def _note_input(path: Path, scope: _Scope) -> None:
    r = _resolved(path)
    if out := next((o for o in scope.outputs if r.is_relative_to(o) or o.is_relative_to(r)), None):
        raise UserError(f"{path} is also an output of this command ({out}): it would be replaced while read; "
                        "choose another output")
    scope.inputs.add(r)


# ----------------------------------------------------------------------------- the output rule
def _check_output(value, inputs: Iterable, scope: _Scope | None, folder: bool = False, marker: str = MANIFEST,
                  kind: str = "model folder") -> Path:
    given = as_path(value, "output")
    if str(given) == "-":
        return given
    o = _resolved(given)
    named = [_resolved(as_path(i)) for i in inputs if i is not None and str(i) != "-" and as_path(i).expanduser().exists()]
    _refuse_inputs(value, o, [*named, *(scope.inputs if scope else ())], folder)
    _refuse_special(given, folder)
    if not folder and o.is_dir():
        raise UserError(f"{value} is a folder; give a file name")
    _refuse_kept(value, o)
    if folder and o.exists() and (not o.is_dir() or (any(o.iterdir()) and not _has_marker(o, marker))):
        raise UserError(f"{value} exists and is not a {kind} edge-xsent wrote (no {marker} of ours): it would be "
                        "replaced whole; choose a new folder (or remove it yourself)")
    _probe_writable(given.expanduser().parent)
    if scope is not None:
        scope.inputs.update(named)
        scope.outputs.add(o)
    return given.expanduser()


def _check_into(value, scope: _Scope | None, what: str) -> Path:
    """A folder written into (a cache, results): never a model's or a run's, nor inside an input."""
    given, f, keeper = _folder_output(value, what)
    if keeper is not None and (keeper[1] == "model folder" or _runs_own(keeper, f)):
        raise UserError(f"{what} {value} is or lies inside a {keeper[1]} ({keeper[0]}): writing there would break "
                        "it; choose a folder of its own")
    _refuse_inputs(value, f, scope.inputs if scope else (), folder=False)
    _probe_writable(given)
    return given


def _check_run(value, scope: _Scope | None, what: str) -> Path:
    """A new folder or a run's own (resumed): never a model folder, a folder of other files (a user's log.jsonl
    would be appended to), nor inside a model folder or another run."""
    out, r, keeper = _folder_output(value, what)
    if keeper is not None and (keeper[1] == "model folder" or keeper[0] != r):
        raise UserError(f"{what} {out} is or lies inside a {keeper[1]} ({keeper[0]}): its files are not this run's; "
                        "name a new folder")
    if out.is_dir() and (other := sorted(set(os.listdir(out)) - {".lock"})) and not _has_marker(out, RUN_MARKER):
        raise UserError(f"{what} {out} holds files and is not an edge-xsent training run (no {RUN_MARKER}, which a run "
                        f"writes first; it holds {', '.join(other[:3])}): name a new folder. A run made before runs "
                        f"were marked (2026-12-07) is marked by: printf '{{\"format\": \"edge-xsent-run\"}}' > "
                        f"{out}/{RUN_MARKER}")
    if scope is not None:
        _refuse_inputs(value, r, scope.inputs, folder=True)
        scope.outputs.add(r)
    return out


def _folder_output(value, what: str) -> tuple[Path, Path, tuple[Path, str] | None]:
    """A folder written into or as a run, never a file: as given, resolved, and the kept folder it is or lies in."""
    given = as_path(value, what).expanduser()
    _refuse_special(given, folder=True)
    if given.exists() and not given.is_dir():
        raise UserError(f"{what} {given} is a file; give a folder")
    resolved = _resolved(given)
    return given, resolved, _kept_folder(resolved / "x")


def _resolved(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except RuntimeError:  # Python 3.11: a link loop
        raise UserError(f"{path}: a link that leads back to itself (a loop); give another path") from None
    except OSError as e:
        raise os_error(e, path) from None


def _refuse_inputs(out, o: Path, inputs: Iterable[Path], folder: bool) -> None:
    for i in inputs:
        if o == i or o.is_relative_to(i) or (folder and i.is_relative_to(o)):
            what = "is" if o == i else "is inside" if o.is_relative_to(i) else "holds"
            raise UserError(f"{out} {what} an input of this command ({i}): writing it would destroy the input; "
                            "choose another output")


def _refuse_special(path: Path, folder: bool) -> None:
    try:
        mode = path.expanduser().lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise os_error(e, path) from None
    if stat.S_ISLNK(mode):
        raise UserError(f"{path} is a link: an output replaces only a file of its own, never a link or what it "
                        "points to; give the real path or a new name (- for standard output where offered)")
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or (not folder and is_devnull(path))):
        raise UserError(f"{path} is {kind_of(mode)}: an output is written to a new or regular file (or /dev/null), "
                        "never a special file; give a file name")


def _refuse_kept(out, o: Path) -> None:
    keeper = _kept_folder(o)
    if keeper is not None and (o.is_file() or keeper[1] == "model folder" or _runs_own(keeper, o)):
        raise UserError(f"{out} is part of a {keeper[1]} ({keeper[0]}): writing it would break that; choose an "
                        "output outside it")


def _runs_own(keeper: tuple[Path, str], path: Path) -> bool:
    folder, kind = keeper
    return kind == "training run" and (path == folder or path.relative_to(folder).parts[0] in RUN_OWN)


def _kept_folder(path: Path) -> tuple[Path, str] | None:
    """The model folder or training run `path` lies inside. A run is kept by any sign of one (one made before
    markers too); only its marker lets `train --out` or a restore write there as its run (RUN)."""
    for folder in path.parents:
        if _has_marker(folder, MANIFEST) or all((folder / n).is_file() for n in ("config.json", "tokenizer.model")):
            return folder, "model folder"
        if _has_marker(folder, RUN_MARKER) or (folder / "checkpoints").is_dir() or (folder / "log.jsonl").is_file():
            return folder, "training run"
    return None


def _has_marker(folder: Path, marker: str) -> bool:
    """`folder` holds the marker its edge-xsent writer left (a model's manifest.json, a run's marker, a corpus's
    stats.json, the reserved benchmark's notice); a file of that name by anyone else is no marker."""
    try:
        data = read_bytes(folder / marker, CAPS["json"], "marker")
        if marker not in (*_MARKERS, "stats.json"):
            return b"edge-xsent" in data  # the reserved benchmark's notice names the command that refuses it
        doc = parse_json(data, folder / marker)
    except (UserError, OSError):
        return False
    if not isinstance(doc, dict):
        return False
    return doc.get("format") == _MARKERS[marker] if marker in _MARKERS else isinstance(doc.get("pairs"), dict) and "total" in doc


def _probe_writable(place: Path) -> None:
    """A read-only or protected place fails now, naming `place`, not after the work; a check creates nothing."""
    existing = next(p for p in (place, *place.absolute().parents) if p.exists() or p == Path("/"))
    try:
        with tempfile.NamedTemporaryFile(prefix=f".probe.{os.getpid()}.", suffix=".tmp", dir=existing):
            pass
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(place)) from None


# ----------------------------------------------------------------------------- as a writer writes
_OWNED: dict[Path, int] = {}  # folders this process writes as their owner: a run under its lock, atomic_dir's temporary


@contextlib.contextmanager
def owning(folder: str | os.PathLike) -> Iterator[Path]:
    """This process writes `folder` as its owner while the block runs: its entries are not refused to it."""
    key = _resolved(as_path(folder))
    _OWNED[key] = _OWNED.get(key, 0) + 1
    try:
        yield Path(folder)
    finally:
        _OWNED[key] -= 1
        if not _OWNED[key]:
            del _OWNED[key]


def guard_output(path: str | os.PathLike, folder: bool) -> None:
    """The output rule as a writer writes: never a link or a special file, never an input of the running command,
    and, unless this process owns the folder, never a model folder's file nor a run's own entry."""
    given = as_path(path, "output")
    _refuse_special(given, folder)
    o = _resolved(given)
    if any(o == f or o.is_relative_to(f) for f in list(_OWNED)):
        return
    _refuse_inputs(path, o, (scope := _SCOPE.get()) and scope.inputs or (), folder)
    _refuse_kept(path, o)


# ----------------------------------------------------------------------------- argparse and click
def path_arg(role: Role = INPUT) -> Callable[[str], Path | str]:
    """argparse's `type=` for a path of `role`: a refusal is argparse's usage error (exit 2) naming the argument."""

    def parse(value: str) -> Path | str:
        _open_scope()
        try:
            return role.check(value)
        except (UserError, OSError) as e:
            raise argparse.ArgumentTypeError(_said(e)) from None

    parse.__name__, parse.role = f"{role.name} path", role
    return parse


class ClickPath(click.Path):
    """click's type for a path of `role`; its scope lives in click's context, which the command's body shares."""

    def __init__(self, role: Role = INPUT) -> None:
        super().__init__(path_type=Path)
        self.role = role

    def convert(self, value, param, ctx):
        if self.role.name == "input" and str(value) == "-":
            return Path("-")
        try:
            with command_scope(ctx.meta.setdefault(SCOPE_KEY, _Scope()) if ctx is not None else None):
                return self.role.check(value)
        except (UserError, OSError) as e:
            self.fail(_said(e), param, ctx)


def _said(e: UserError | OSError) -> str:  # a refusal as the parsers' usage error says it
    return str(e) if isinstance(e, UserError) else f"{e.filename}: {e.strerror}"


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose path types check a default as they check a given value: argparse applies `type`
    to string defaults only, so a `Path` default was never checked nor noted (issue 104)."""

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        for a in self._actions:
            if isinstance(getattr(a.type, "role", None), Role) and a.default is not None \
                    and not isinstance(a.default, str) and getattr(ns, a.dest, None) is a.default:
                try:
                    setattr(ns, a.dest, a.type(str(a.default)))
                except argparse.ArgumentTypeError as e:
                    self.error(f"argument {'/'.join(a.option_strings) or a.dest} (its default {a.default}): {e}")
        return ns, rest
