"""The house a newcomer reads: the project's own limits (pyproject.toml, [tool.edge-xsent.limits]) hold
for every module and function of the package, and the command tree a user types stays as documented
(tests/data/command-tree.json; after a deliberate change, EDGE_XSENT_WRITE_TREE=1 rewrites it)."""

from __future__ import annotations

import ast
import json
import os
import tomllib
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edge_xsent"
TREE = Path(__file__).parent / "data" / "command-tree.json"


def house() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["edge-xsent"]


def limits() -> dict:
    return house()["limits"]


def crossings(path: Path, source: str, lim: dict) -> list[str]:
    """Every limit `source` (the module at `path`) crosses, as 'where: what'."""
    lines = source.count("\n") + (not source.endswith("\n"))
    command = path.name == "cli.py" or path.name.endswith("commands.py")
    most = lim["command_module_lines"] if command else lim["module_lines"]
    found = [f"{path}: {lines} lines (at most {most})"] if lines > most else []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > lim["function_lines"]:
                found.append(f"{path}:{node.lineno}: {node.name} is {length} lines (at most {lim['function_lines']})")
    return found


LAB = [ROOT / "train", ROOT / "benchmarks", ROOT / "android_demo"]  # the lab's scripts and modules: the same limits


def test_no_module_or_function_of_the_package_or_the_lab_crosses_the_limits():
    lim = limits()
    files = [*sorted(PACKAGE.rglob("*.py")), *(p for d in LAB for p in sorted(d.glob("*.py")))]
    found = [c for p in files for c in crossings(p.relative_to(ROOT), p.read_text(), lim)]
    assert not found, "split these (or raise a limit in pyproject.toml, with the reason):\n" + "\n".join(found)


SAFETY_LAYER = ("paths", "inputs", "atomic", "failures")


def test_the_safety_layer_stays_small_and_no_script_checks_an_output_by_hand():
    """Issue 104: the output and input rules in one small layer; a script declares each path's role (its type, or
    note_input for an input found later), and never re-checks an output the type checked."""
    lim = limits()
    sources = [(PACKAGE / f"{m}.py").read_text() for m in SAFETY_LAYER]
    lines = sum(s.count("\n") for s in sources)
    names = [n.name for s in sources for n in ast.parse(s).body
             if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")]
    assert lines <= lim["safety_layer_lines"] and len(names) <= lim["safety_layer_names"], (lines, names)
    old = ("check_output(", "check_outputs(", "check_into(", "pathargs", "script_errors")
    by_hand = [f"{p.relative_to(ROOT)}: {o}" for d in LAB for p in sorted(d.glob("*.py")) for o in old
               if o in p.read_text()]
    assert not by_hand, by_hand


def test_the_limits_check_sees_a_long_module_and_a_long_function():
    lim = {"command_module_lines": 5, "module_lines": 8, "function_lines": 3}
    body = "def f():\n    a = 1\n    b = 2\n    return a + b\n"
    assert crossings(Path("x.py"), body, lim) == ["x.py:1: f is 4 lines (at most 3)"]
    assert crossings(Path("eval_commands.py"), "x = 1\n" * 6, lim) == ["eval_commands.py: 6 lines (at most 5)"]
    assert crossings(Path("x.py"), "x = 1\n" * 6, lim) == []


def room_of(module: str, rooms: dict) -> str:
    """A module's room: its sub-package, "base" for the package's other top-level modules, "cli" for the CLI's."""
    parts = module.split(".")[1:] or ["__init__"]
    if parts[0] in rooms["order"]:  # a room's module, or the room's own __init__
        return parts[0]
    return "cli" if parts[0] in rooms["cli"] else "base"


def upward_imports(graph: dict[str, set[str]], rooms: dict) -> list[str]:
    """'a -> b' for every module a that imports b from a room above its own."""
    rank = {room: i for i, room in enumerate(rooms["order"])}
    return [f"{m} -> {d}" for m, deps in sorted(graph.items()) for d in sorted(deps)
            if room_of(m, rooms) != "cli" and rank[room_of(d, rooms)] > rank[room_of(m, rooms)]]


def test_no_module_imports_from_a_room_above_its_own():
    from test_packaging import package_imports

    rooms = house()["rooms"]
    graph = package_imports()
    assert {room_of(m, rooms) for m in graph} == {*rooms["order"], "cli"}  # every module is in a declared room
    assert not upward_imports(graph, rooms), "imports from a room above:\n" + "\n".join(upward_imports(graph, rooms))
    toy = {"edge_xsent.encode.x": {"edge_xsent.train.y"}, "edge_xsent.cli": {"edge_xsent.train.y"}}
    assert upward_imports(toy, rooms) == ["edge_xsent.encode.x -> edge_xsent.train.y"]  # the check sees one


def command_tree(cmd: click.Command, path: str = "edge-xsent") -> dict:
    """{command path: its options and arguments}, every subcommand's too."""
    tree = {path: sorted(" ".join([*p.opts, *p.secondary_opts]) if isinstance(p, click.Option) else p.name.upper()
                         for p in cmd.params)}
    for name, sub in getattr(cmd, "commands", {}).items():
        tree |= command_tree(sub, f"{path} {name}")
    return tree


def test_the_command_tree_is_the_documented_one():
    from edge_xsent.cli import main

    tree = command_tree(main)
    if os.environ.get("EDGE_XSENT_WRITE_TREE"):
        TREE.write_text(json.dumps(tree, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(TREE.read_text())
    assert tree == recorded, "the commands changed: " + json.dumps(
        {k: [tree.get(k), recorded.get(k)] for k in set(tree) | set(recorded) if tree.get(k) != recorded.get(k)})
