"""The one argument type for every path a lab script takes (train/, benchmarks/): `type=in_path` for
what it reads, `type=out_file`, `type=out_into` or `type=out_folder(...)` for what it writes.

Each checks its path while the command line is parsed, before any work: an output by the output rule
(edge_xsent.atomic.check_output: never a link, a special file, a model's or a run's own file, nor an
input named before it on the line), an input as a file that can be read without hanging (never a FIFO,
a device or a socket), nor an output named before it. A refusal is argparse's usage error (exit 2),
naming the argument. The writes themselves check again (atomic_write, atomic_dir, copy_file), so a
script that forgot its type is still refused when it writes. `role` on each type tells a fuzzer
(tests/test_path_fuzz.py) which hostile paths to try.
"""

from __future__ import annotations

import argparse
import stat
from pathlib import Path
from typing import Callable

from edge_xsent.atomic import (check_into, check_output, check_run_folder, kept_folder, note_input, note_output,
                               scope_inputs, scope_outputs)
from edge_xsent.errors import UserError
from edge_xsent.inputs import as_path, kind_of, os_error


def _usage(fn: Callable[[str], Path], role: str) -> Callable[[str], Path]:
    """`fn`'s UserError as argparse's usage error (argparse would hide the message of a ValueError)."""

    def checked(value: str) -> Path:
        try:
            return fn(value)
        except UserError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        except OSError as e:
            raise argparse.ArgumentTypeError(f"{e.filename or value}: {e.strerror or e}") from None

    checked.__name__ = fn.__name__
    checked.role = role
    return checked


def _in_path(value: str) -> Path:
    path = as_path(value, "input").expanduser()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UserError(f"{value}: no such file or folder") from None
    except OSError as e:
        raise os_error(e, path) from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UserError(f"{value} is {kind_of(mode)}: an input is a regular file or a folder (a FIFO or a device "
                        "would hang or never end); save it to a file first")
    r = path.resolve()
    for out in scope_outputs():
        if r == out or r.is_relative_to(out) or out.is_relative_to(r):
            raise UserError(f"{value} is also an output of this command ({out}): it would be replaced while read; "
                            "choose another output")
    note_input(path)
    return path


def _out_file(value: str) -> Path:
    check_output(value)  # against the inputs named so far; it notes the output for the inputs named later
    return as_path(value).expanduser()


def _out_into(value: str) -> Path:
    path = check_into(value, "output folder")
    _refuse_named(value, path, holding=False)
    note_output(path)
    return path


def _maybe_in_path(value: str) -> Path:
    path = as_path(value, "input").expanduser()
    return path if not path.exists() and not path.is_symlink() else _in_path(value)


in_path = _usage(_in_path, "in")
maybe_in_path = _usage(_maybe_in_path, "in")  # an optional input: a missing file means none (a peers' table)
maybe_in_path.missing_ok = True
out_file = _usage(_out_file, "out")
out_into = _usage(_out_into, "into")  # a folder the script writes its files into (a results folder)


def _out_run(value: str) -> Path:
    path = as_path(value, "run folder").expanduser()
    check_run_folder(path, "run folder")  # the train command's rule for its --out: a new folder or a marked run
    _refuse_named(value, path)
    note_output(path)
    return path


def _checkout(value: str) -> Path:
    """A checkout whose own files the script updates (its README, its DECISIONS.md): a folder, not a model's or
    a run's; the files it reads there are its inputs only by name, so they are not refused as outputs."""
    return check_into(value, "checkout")


def _refuse_named(value: str, path: Path, holding: bool = True) -> None:
    """An output folder that is an input named before it on the line or lies inside one (`holding`: or
    holds one; a results folder may hold inputs: its writes are refused only their exact names)."""
    r = path.resolve()
    for i in scope_inputs():
        if r.is_relative_to(i) or (holding and i.is_relative_to(r)):
            raise UserError(f"{value} and the input {i} overlap: writing one would change the other; choose another "
                            "output")


out_run = _usage(_out_run, "run")  # a training run's folder, written as its owner (a carried run restored)
checkout = _usage(_checkout, "into")


def out_folder(marker: str = "manifest.json", kind: str = "model folder") -> Callable[[str], Path]:
    """A folder the script writes whole (replacing one of its own kind: `marker` is the file its writer
    leaves there)."""

    def _folder(value: str) -> Path:
        check_output(value, folder=True, replaces=(marker, kind))
        return as_path(value).expanduser()

    _folder.__name__ = "out_folder"
    return _usage(_folder, "folder")


def path_pair(sep: str = ":") -> Callable[[str], str]:
    """Two input paths in one argument, `A<sep>B` (a run's FIGURES.json:SUMMARY.json), each checked as
    `in_path`; the argument itself is returned."""

    def _pair(value: str) -> str:
        a, found, b = value.partition(sep)
        if not found:
            raise UserError(f"{value}: two paths are needed, A{sep}B")
        _in_path(a), _in_path(b)
        return value

    _pair.__name__ = "path_pair"
    checked = _usage(_pair, "in")
    checked.example = f"{{}}{sep}{{}}"
    return checked


def named_path(value_sep: str = "=") -> Callable[[str], str]:
    """A name and an input path in one argument, `NAME=PATH`, the path checked as `in_path`; the argument
    itself is returned."""

    def _named(value: str) -> str:
        name, found, path = value.partition(value_sep)
        if not found or not name:
            raise UserError(f"{value}: NAME{value_sep}PATH is needed")
        _in_path(path)
        return value

    _named.__name__ = "named_path"
    checked = _usage(_named, "in")
    checked.example = f"x{value_sep}{{}}"
    return checked


def _init_spec(value: str) -> str:
    """A start as recipes name it: `git:REV`, or a run's or model's folder, which is an input as every path is."""
    return value if value.startswith("git:") else str(_in_path(value))


init_spec = _usage(_init_spec, "in")


def is_path_type(t) -> bool:
    return getattr(t, "role", None) in ("in", "out", "into", "folder", "run")


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose path types check an argument's default as they check a given value: argparse
    applies `type` to string defaults only, so a `Path` default (a results file, a shipped folder) was never
    checked against the inputs nor noted as an output (issue 104)."""

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        for a in self._actions:
            default = a.default
            if is_path_type(a.type) and default is not None and not isinstance(default, str) \
                    and getattr(ns, a.dest, None) is default:
                try:
                    setattr(ns, a.dest, a.type(str(default)))
                except argparse.ArgumentTypeError as e:  # argparse's own words for a given value's refusal
                    self.error(f"argument {'/'.join(a.option_strings) or a.dest} (its default {default}): {e}")
        return ns, rest


__all__ = ["in_path", "maybe_in_path", "out_file", "out_into", "out_folder", "out_run",
           "checkout", "path_pair", "named_path", "init_spec", "is_path_type", "Parser"]
