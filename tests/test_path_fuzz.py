"""The fuzzer that finds its own targets (issue 88). Every lab script under train/ and benchmarks/ (and the demo's
prepare.py) that parses a command line is found by globbing; its parser is caught as the script parses, each
subcommand walked; every path argument is known by its type (edge_xsent.paths: its `role` says input, file,
folder written into, folder written whole, run) and gets the hostile paths of its role. A new script, or a new
argument, is fuzzed without anyone adding it to a list; an argument that takes a path without a path type
fails the census. The click commands are walked the same way (tests/test_hostile.py runs them end to end).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path

import click
import pytest

from conftest import mark_run, time_limit
from edge_xsent.atomic import copy_file
from edge_xsent.errors import UserError
from edge_xsent.layout import FORMAT
from edge_xsent.paths import Role, owning

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(str(p.relative_to(ROOT)) for d in ("train", "benchmarks", "android_demo") for p in (ROOT / d).glob("*.py")
                 if "argparse" in p.read_text() or "Parser(" in p.read_text())
# Arguments that take a name, a spec or a number, never only a path: a corpus or benchmark by name or folder
# (`sample`, `oog`: resolved and read by edge_xsent.data, which refuses special files itself), a model by name
# or folder (`default`, `git:REF`), a commit. Anything else that names a file needs a path type.
NOT_PATHS = {"data", "corpus", "oog", "oog_wide", "corpus_g", "old", "refit_data", "init", "before", "teacher", "recipe",
             "bundle", "model", "models", "graph", "name", "best_name", "stop_after", "paths", "worker", "setup", "texts"}
PATH_WORDS = ("file", "folder", "path", ".json", ".md", ".toml", "out")


class Parsed(BaseException):
    """Raised in place of a script's work once its command line is parsed."""


def parsers(script: str) -> list[tuple[list[str], argparse.ArgumentParser]]:
    """The script's parser and each subcommand's, with the words that select it, caught as it parses."""
    caught = []

    def catch(self, args=None, namespace=None):
        caught.append(self)
        raise Parsed

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", catch)
        mp.setattr(sys, "argv", [str(ROOT / script)])
        try:
            runpy.run_path(str(ROOT / script), run_name="__main__")
        except Parsed:
            pass
    assert caught, f"{script} imports argparse but never parsed a command line"
    out, todo = [], [([], caught[0])]
    while todo:
        words, parser = todo.pop()
        out.append((words, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [([*words, name], sub) for name, sub in action.choices.items()]
    return out


def is_path_type(t) -> bool:
    return isinstance(getattr(t, "role", None), Role)


def example(role: Role) -> str:
    """How a value of `role` is written around its path(s): A:B, NAME=PATH, or the path alone."""
    return ("x" + role.sep + "{}" if role.named else "{}" + role.sep + "{}") if role.sep else "{}"


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
            and a.nargs != 0]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """What a user has where a script may be aimed: a file of theirs and links to it, a model folder, a training
    run (paused: its log and checkpoint, no model/ or summary yet), a folder of notes, a FIFO."""
    root = tmp_path_factory.mktemp("world")
    (root / "user.json").write_text('{"mine": 1}')
    (root / "link").symlink_to(root / "user.json")
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("my notes")
    (root / "link-dir").symlink_to(root / "mine")
    (root / "model").mkdir()
    (root / "model" / "manifest.json").write_text(f'{{"format": "{FORMAT}", "files": {{}}}}')
    (root / "model" / "config.json").write_text("{}")
    (root / "run" / "checkpoints").mkdir(parents=True)
    (root / "run" / "checkpoints" / "last.pt").write_bytes(b"checkpoint")
    (root / "run" / "log.jsonl").write_text('{"step": 1}\n')
    mark_run(root / "run")
    (root / "user-log").mkdir()  # a user's folder whose only file is named as a run's log: no run (issue 104)
    (root / "user-log" / "log.jsonl").write_text('{"mine": 1}\n')
    os.mkfifo(root / "fifo")
    return root


def hostile(role: str, w: Path) -> dict[str, str]:
    """The paths a careless or hostile user gives an argument of `role`."""
    common = {"a FIFO": w / "fifo", "a device": Path("/dev/zero")}
    by_role = {
        "input": {"a missing file": w / "absent.json"},
        "file": {"a link to a user's file": w / "link", "a model's file": w / "model" / "config.json",
                "a run's log": w / "run" / "log.jsonl", "a run's summary before it exists": w / "run" / "summary.json",
                "a run's model/ before it exists": w / "run" / "model", "a checkpoint": w / "run" / "checkpoints" / "last.pt",
                "a folder": w / "mine"},
        "into": {"a link to a folder": w / "link-dir", "a model folder": w / "model", "a run": w / "run",
                 "a run's checkpoints": w / "run" / "checkpoints", "a file": w / "user.json"},
        "folder": {"a link to a folder": w / "link-dir", "a folder of user files": w / "mine", "a file": w / "user.json",
                   "a run's model/ before it exists": w / "run" / "model", "inside a model": w / "model" / "sub"},
        "run": {"a link to a folder": w / "link-dir", "a folder of user files": w / "mine", "a model folder": w / "model",
                "a file": w / "user.json", "a user's folder holding a log.jsonl": w / "user-log"},
    }
    return {k: str(v) for k, v in {**common, **by_role[role]}.items()}


def fill(action: argparse.Action, w: Path, n: int) -> str:
    """A harmless value for an argument that is not under test."""
    role = getattr(getattr(action.type, "role", None), "name", None)
    if role == "input":
        return example(action.type.role).format(w / "user.json", w / "user.json")
    if role in ("file", "into", "folder", "run"):
        return str(w / "fresh" / f"{n}-{action.dest}")
    if action.choices:
        return str(list(action.choices)[0])
    return "1" if action.type in (int, float) or getattr(action.type, "__name__", "") in ("thread_count", "chunk_mb",
                                                                                            "thread_counts") else "x"


def command_line(words: list[str], parser, tested: argparse.Action, value: str, w: Path,
                 also: dict[str, str] | None = None) -> list[str]:
    """The words, `tested` given `value`, every other required argument a harmless value (`also`: chosen ones)."""
    line = list(words)
    positionals = []
    for n, a in enumerate(arguments(parser)):
        if a is tested:
            v = value
        elif also and a.dest in also:
            v = also[a.dest]
        elif a.option_strings and not a.required:
            continue
        elif not a.option_strings and a.nargs in ("?", "*"):
            continue
        else:
            v = fill(a, w, n)
        if a.option_strings:
            line += [a.option_strings[-1], v]
        else:
            positionals.append(v)
    return line + positionals


def parse_only(script: str, argv: list[str], capsys) -> tuple[int | str, str]:
    """Run the script on `argv` up to its parse: the exit code of a refusal, or "accepted"."""
    def accepted(self, args=None, namespace=None):
        original(self, args, namespace)
        raise Parsed

    original = argparse.ArgumentParser.parse_args
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", accepted)
        mp.setattr(sys, "argv", [str(ROOT / script), *argv])
        try:
            runpy.run_path(str(ROOT / script), run_name="__main__")
        except Parsed:
            return "accepted", capsys.readouterr().err
        except SystemExit as e:
            return e.code, capsys.readouterr().err
    return "ran", capsys.readouterr().err


def _label(action: argparse.Action) -> str:
    """How argparse names an argument in its error (so a refusal is known to be this argument's, not a filler's)."""
    return "/".join(action.option_strings) or action.metavar or action.dest


def path_arguments(script: str):
    for words, parser in parsers(script):
        for a in arguments(parser):
            if is_path_type(a.type):
                yield words, parser, a


def test_every_script_is_found_and_takes_paths_only_through_a_path_type():
    assert {"train/carry.py", "train/device_pack.py", "benchmarks/models_table.py"} <= set(SCRIPTS)
    untyped = []
    for script in SCRIPTS:
        for words, parser in parsers(script):
            for a in arguments(parser):
                wordy = a.dest in ("out", "results") or any(w in (a.help or "").lower() for w in PATH_WORDS)
                text = a.type in (None, str) and not a.choices  # a number, a choice or a checked value is no path
                if not is_path_type(a.type) and (a.type is Path or (text and wordy and a.dest not in NOT_PATHS)):
                    untyped.append(f"{script} {' '.join(words)} {a.dest}")
    assert not untyped, "give these a type of edge_xsent.paths (or, for a name, list it in NOT_PATHS):\n" + \
        "\n".join(untyped)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_path_argument_refuses_every_hostile_path_of_its_role(script, world, capsys):
    before = {p: p.read_bytes() for p in world.rglob("*") if p.is_file() and not p.is_symlink()}
    failures, tried = [], 0
    for words, parser, a in path_arguments(script):
        for name, target in hostile(a.type.role.name, world).items():
            if name == "a missing file" and a.type.role.optional:
                continue  # an optional input (a peers' table): missing means none
            value = example(a.type.role).format(target, target)
            code, err = parse_only(script, command_line(words, parser, a, value, world), capsys)
            tried += 1
            if code != 2 or "Traceback" in err or f"error: argument {_label(a)}:" not in err:  # refused for this one
                failures.append(f"{' '.join(words)} {a.dest} <- {name}: {code} {err[-300:]}")
    assert not failures, "\n".join(failures)
    assert {p: p.read_bytes() for p in world.rglob("*") if p.is_file() and not p.is_symlink()} == before
    assert tried or not any(True for _ in path_arguments(script))


def outputs_and_inputs(script: str):
    """(words, parser, output, input): each file output of a parser with each plain input beside it."""
    for words, parser, out in path_arguments(script):
        if out.type.role.name == "file":
            for inp in arguments(parser):
                if is_path_type(inp.type) and inp.type.role.name == "input" and inp is not out and not inp.type.role.sep:
                    yield words, parser, out, inp


def given_default(a: argparse.Action) -> str | None:
    """An argument's default as a user would type it, where it names a path that exists (else None)."""
    if a.default is None or not is_path_type(a.type):
        return None
    path = Path(str(a.default)).expanduser()
    return str(a.default) if path.exists() else None


PAIRED = [s for s in SCRIPTS if any(outputs_and_inputs(s))]  # the cases that apply, no skip for the rest
DEFAULTED = [s for s in PAIRED if any(given_default(i) or given_default(o) for _, _, o, i in outputs_and_inputs(s))]


@pytest.mark.parametrize("script", PAIRED)
def test_an_output_is_never_one_of_the_same_commands_inputs(script, world, capsys):
    """Its own input as its output, in both orders on the line: refused at the parse."""
    for words, parser, out, inp in outputs_and_inputs(script):
        target = str(world / "user.json")
        line = command_line(words, parser, out, target, world, also={inp.dest: target})
        code, err = parse_only(script, line, capsys)
        assert code == 2 and "of this command" in err, (words, out.dest, inp.dest, code, err[-300:])


@pytest.mark.parametrize("script", DEFAULTED)
def test_an_output_is_never_an_inputs_default_nor_an_input_its_default(script, world, capsys):
    """Round eight (issue 104): argparse applies `type` to string defaults only, so an input's Path default was
    never checked (`extend_vocab.py --out train/tokenizers/m1-48k.model` replaced its own default --new). Each
    default is checked as if given (paths.Parser): an output named as an input's default, or an input named as
    an output's default, is refused at the parse."""
    tried = 0
    for words, parser, out, inp in outputs_and_inputs(script):
        for given, value in ((out, given_default(inp)), (inp, given_default(out))):
            if value is None:
                continue
            code, err = parse_only(script, command_line(words, parser, given, value, world), capsys)
            assert code == 2 and "of this command" in err, (words, given.dest, value, code, err[-300:])
            tried += 1
    assert tried


class Accepted(BaseException):
    """Raised where a command's output checks end: every refusal comes before probe_writable."""


class Overran(BaseException):
    """Raised in a command that still runs long after a hostile path was given: it is doing work."""


OUTPUT_NAMES = ("out", "md_path", "cache")  # the names the CLI writes under: --out, --md, --cache


def click_params() -> list[tuple[list[str], click.Command, click.Parameter]]:
    """Every click command's parameters, with the words that select the command, found by walking the group."""
    from edge_xsent.cli import main as cli

    def walk(cmd, words=()):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, (*words, name))
        else:
            yield list(words), cmd

    return [(words, cmd, p) for words, cmd in walk(cli) for p in cmd.params]


def click_outputs():
    return [(w, c, p) for w, c, p in click_params() if p.name in OUTPUT_NAMES]


def test_the_click_commands_declare_their_outputs_as_paths():
    outputs = click_outputs()
    assert len(outputs) >= 10
    assert all(isinstance(p.type, click.Path) for _, _, p in outputs), [(w, p.name) for w, _, p in outputs]


@pytest.mark.parametrize("command", sorted({" ".join(w) for w, _, _ in click_outputs()}))
def test_every_click_output_refuses_every_hostile_path_before_any_work(command, world, tmp_path, monkeypatch):
    """Each output of the command gets the hostile paths, in this process; the checks every command runs before
    its work end in probe_writable, which raises here, so an accepted path is caught, never written."""
    from click.testing import CliRunner

    import edge_xsent.paths as paths
    from edge_xsent.cli import main as cli

    def accepted(parent):  # only the path under test: a default output beside it is let through, unwritten
        if Path(parent).resolve() in (Path(target).resolve(), Path(target).resolve().parent):
            raise Accepted(parent)

    monkeypatch.setattr(paths, "_probe_writable", accepted)
    monkeypatch.chdir(tmp_path)  # a default output (corpus/, oog/) lands here, never in the checkout
    before = {p: p.read_bytes() for p in world.rglob("*") if p.is_file() and not p.is_symlink()}
    failures = []
    for words, cmd, p in (o for o in click_outputs() if " ".join(o[0]) == command):
        for name, target in hostile("file", world).items():
            if name == "a folder":
                continue  # a folder output may be an existing folder of its kind: test_hostile.py's world has them
            with time_limit(20, Overran()):  # a refusal takes milliseconds: a command still running got past its checks
                res = CliRunner().invoke(cli, [*words, p.opts[-1], target, *_required(cmd, p, world)])
            named = Path(target).name in res.output  # the refusal names the path given, not another parameter
            if isinstance(res.exception, (Accepted, Overran)) or res.exit_code not in (1, 2) or not named:
                failures.append(f"{command} {p.opts[-1]} <- {name}: {res.exit_code} {res.exception!r} {res.output[-200:]}")
    assert not failures, "\n".join(failures)
    assert {p: p.read_bytes() for p in world.rglob("*") if p.is_file() and not p.is_symlink()} == before


def _required(cmd: click.Command, tested, w: Path) -> list[str]:
    """A harmless value for each required parameter of a click command other than `tested`."""
    line = []
    for p in cmd.params:
        if p is tested or not p.required:
            continue
        value = str(w / "fresh" / p.name) if p.name in OUTPUT_NAMES else \
            str(w / "user.json") if isinstance(p.type, click.Path) else "1"
        line += [p.opts[-1], value] if isinstance(p, click.Option) else [value]
    return line


# ----------------------------------------------------------------------------- the rule inside the primitives

def test_the_writing_primitives_refuse_a_models_and_a_runs_files_unless_their_owner_writes(world, tmp_path):
    """No script can skip the rule: atomic_write, atomic_dir and copy_file check it when they write."""
    from edge_xsent.atomic import atomic_dir, atomic_write

    src = tmp_path / "src.txt"
    src.write_text("new")
    for target in (world / "model" / "config.json", world / "run" / "log.jsonl", world / "run" / "summary.json",
                   world / "run" / "model" / "x", world / "link"):
        with pytest.raises(UserError):
            with atomic_write(target) as f:
                f.write("replaced")
        with pytest.raises(UserError):
            copy_file(src, target)
    with pytest.raises(UserError):
        with atomic_dir(world / "run" / "model"):
            pass
    assert (world / "model" / "config.json").read_text() == "{}" and not (world / "run" / "summary.json").exists()
    run = mark_run(tmp_path / "run")
    (run / "checkpoints").mkdir(parents=True)
    with owning(run):  # the run's own writer (a training run holds its lock) writes its entries
        with atomic_write(run / "summary.json") as f:
            f.write("{}")
        copy_file(src, run / "log.jsonl")
    assert (run / "log.jsonl").read_text() == "new"


def test_a_copy_never_waits_on_a_fifo_nor_reads_a_device(world, tmp_path):
    for source in (world / "fifo", Path("/dev/zero")):
        with pytest.raises(UserError):
            copy_file(source, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_a_command_never_writes_what_it_was_given_to_read(tmp_path):
    """Inside a command's scope (every CLI command and script), a file named as an input is not an output."""
    from edge_xsent.atomic import atomic_write
    from edge_xsent.paths import command_scope, note_input

    mine = tmp_path / "a.json"
    mine.write_text("{}")
    with command_scope():
        note_input(mine)
        with pytest.raises(UserError, match="input of this command"):
            with atomic_write(mine) as f:
                f.write("x")
    assert mine.read_text() == "{}"
    with atomic_write(mine) as f:  # outside a scope, nothing is remembered
        f.write("[]")


def test_a_copied_folder_never_follows_a_link_inside_it(tmp_path):
    """copy_tree (carry's save of a finished model, ship's --recard) copies file by file: a link inside the source,
    to a user's file that would travel with the copy, is refused."""
    from edge_xsent.atomic import copy_tree

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("a")
    copy_tree(src, tmp_path / "copy")
    assert (tmp_path / "copy" / "sub" / "a.txt").read_text() == "a"
    (tmp_path / "secret").write_text("a user's file")
    (src / "sub" / "b.txt").symlink_to(tmp_path / "secret")
    with pytest.raises(UserError, match="is a link"):
        copy_tree(src, tmp_path / "again")
    assert not (tmp_path / "again" / "sub" / "b.txt").exists()


def test_every_script_reads_json_files_bounded():
    """A script's JSON file goes through edge_xsent.inputs.read_json (a regular file, bounded in size and depth: a
    deep JSON or a copy of /dev/zero is one error): with the path types refusing FIFOs and devices as parsed, no
    script can hang on, exhaust memory over or recurse into an input. The one exception is training_cost's worker,
    which runs against another commit's package and reads only the setup its parent wrote."""
    import re

    unbounded = re.compile(r"json\.load\(|json\.loads\([^)]*\.read_(text|bytes)\(")
    found = [f"{s}:{n}" for s in SCRIPTS if s != "benchmarks/training_cost.py"
             for n, line in enumerate((ROOT / s).read_text().splitlines(), 1) if unbounded.search(line)]
    assert not found, found


def click_inputs():
    return [(w, c, p) for w, c, p in click_params() if isinstance(p.type, click.Path) and p.name not in OUTPUT_NAMES]


@pytest.mark.parametrize("command", sorted({" ".join(w) for w, _, _ in click_inputs()}))
def test_every_click_input_refuses_every_hostile_path(command, world, tmp_path, monkeypatch):
    """Each path a command reads gets a FIFO, /dev/zero (never read forever), a JSON nested 100,000 deep and a
    missing path: one error line, exit 1 or 2, in seconds. The FIFO is fed as a shell's `<(echo ...)` would feed
    it: a text read once may take it as a stream (exit 0 then); any other input refuses it without waiting. The
    error may come from a check before this input's (`compare` wants two sentences, `eval oog` a benchmark, export's
    --keep-vocab-from a model first): for those the test shows no hang and no traceback, not the input's refusal."""
    from click.testing import CliRunner

    from edge_xsent.cli import main as cli

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    monkeypatch.chdir(tmp_path)
    failures = []
    for words, cmd, p in (i for i in click_inputs() if " ".join(i[0]) == command):
        for name, target in {"a FIFO": world / "fifo", "a device": "/dev/zero", "a deep JSON": deep,
                             "a missing path": tmp_path / "absent"}.items():
            line = [*words, *(p.opts[-1:] if isinstance(p, click.Option) else []), str(target),
                    *_required(cmd, p, world)]
            if any(o.name == "out" and not o.required for o in cmd.params):
                line += ["--out", str(tmp_path / "out" / p.name)]  # never the default beside the checkout
            fifo = name == "a FIFO"
            if fifo:
                _feed(world / "fifo")
            try:
                with time_limit(20, Overran()):
                    res = CliRunner().invoke(cli, line, input="")
            finally:
                if fifo:
                    _drain(world / "fifo")
            text = name in ("a FIFO", "a deep JSON")  # as a text read once, each is a valid stream of one line
            ok = res.exit_code in (1, 2) and "rror" in res.output or (text and res.exit_code == 0)
            crashed = res.exception is not None and not isinstance(res.exception, SystemExit)
            if crashed or not ok or "Traceback" in res.output:
                failures.append(f"{command} {p.name} <- {name}: {res.exit_code} {res.exception!r} {res.output[-200:]}")
    assert not failures, "\n".join(failures)


def _feed(fifo: Path) -> None:
    """A writer of one line into `fifo`, in the background, as `<(echo ...)` is."""
    import threading

    def write():
        with open(fifo, "w") as f:  # blocks until a reader opens it (or _drain does)
            f.write("Open the file\n")

    threading.Thread(target=write, daemon=True).start()


def _drain(fifo: Path) -> None:
    """Open the FIFO's read end if the command did not, so that the writer ends."""
    import time

    time.sleep(0.05)
    try:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    time.sleep(0.05)
    try:
        os.read(fd, 1 << 16)
    except BlockingIOError:
        pass
    os.close(fd)


def test_every_script_main_is_under_user_errors():
    """A refusal in any script is one line and exit 1, never a traceback: each main is wrapped."""
    wrapped = ("@user_errors", "user_errors(main)")  # training_cost wraps it late: its worker runs old commits
    bare = [s for s in SCRIPTS if not any(w in (ROOT / s).read_text() for w in wrapped)]
    assert not bare, bare


def test_a_config_nested_deep_or_a_path_too_long_is_one_error(tmp_path):
    """Encoder.load on a folder whose config.json (its manifest refreshed to match) nests 100,000 deep, and on a path
    longer than the system takes: UserErrors naming them, not a RecursionError or a raw OSError."""
    import shutil

    from edge_xsent import Encoder
    from edge_xsent.encode.bundle import refresh_manifest

    folder = tmp_path / "m"
    shutil.copytree(ROOT / "edge_xsent/resources/fast-model", folder)
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with owning(folder):
        refresh_manifest(folder, ["config.json"])
    with pytest.raises(UserError, match="nested more than"):
        Encoder.load(folder)
    with pytest.raises(UserError, match="too long"):
        Encoder.load("a" * 5000)


def test_a_scripts_path_types_take_a_good_value_and_name_what_a_value_lacks(tmp_path):
    """The good side of the fuzzed types: a results folder to write into is taken as given; a NAME=PATH
    without its name or its `=`, or a pair without its second path, says what it needs. A path type outside a
    command's scope fails loudly: its writes could not know the path (issue 104)."""
    from edge_xsent.paths import INTO, command_scope, path_arg

    (tmp_path / "results").mkdir()
    (tmp_path / "a.json").write_text("{}")
    named, pair = path_arg(Role("input", sep="=", named=True)), path_arg(Role("input", sep=":"))
    with pytest.raises(RuntimeError, match="outside a command's scope"):
        path_arg(INTO)(str(tmp_path / "results"))
    with command_scope():
        assert path_arg(INTO)(str(tmp_path / "results")) == tmp_path / "results"
        assert named(f"base={tmp_path / 'a.json'}") == f"base={tmp_path / 'a.json'}"
        for value in (str(tmp_path / "a.json"), f"={tmp_path / 'a.json'}"):
            with pytest.raises(argparse.ArgumentTypeError, match="NAME=PATH is needed"):
                named(value)
        with pytest.raises(argparse.ArgumentTypeError, match="two paths are needed"):
            pair(str(tmp_path / "a.json"))
