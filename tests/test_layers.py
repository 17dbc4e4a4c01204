"""The floor plan holds: imports go one way between wings (docs/design.md's table), no wing
and no module sits in a circle, first-party imports inside functions only where a lazy face
needs them, and only the command line imports argparse.

Every import counts, at module level, under ``TYPE_CHECKING`` and inside functions: a typing
import is still a dependency a reader has to follow."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "iobench"

#: the modules at the bottom, importing nothing but each other
BASE = {
    "iobench",
    "iobench.errors",
    "iobench.files",
    "iobench.reading",
    "iobench.redact",
    "iobench.shell",
    "iobench.stats",
    "iobench.units",
}
#: what each wing may import besides itself and the base (docs/design.md, "Wings")
ALLOWED: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": {"run", "fleet", "predict", "trial", "lab", "report", "scenario", "wheels", "cost", "system", "rundir"},
    "run": {"fleet", "predict", "trial", "lab", "scenario", "wheels", "cost", "system", "rundir"},
    "fleet": {"system"},
    "predict": {"trial", "scenario", "wheels", "system", "rundir"},
    "trial": {"lab", "scenario", "system", "rundir"},
    "lab": {"system"},
    "scenario": {"rundir"},
    "wheels": set(),
    "cost": {"rundir"},
    "system": {"rundir"},
    "rundir": set(),
    "report": {"cost", "rundir"},
    "base": set(),
}  # fmt: skip
#: where a first-party import may sit inside a function: the lazy faces that keep
#: `iobench --help` fast and the report's libraries unloaded until a report is built
LAZY_OK = ("iobench.__main__", "iobench.cli", "iobench.report")
#: the one wing that may parse a command line
ARGPARSE_OK = ("iobench.cli",)
#: a module longer than this holds more than one idea; one may (the lab's FUSE daemon, whose
#: operations are one table of handlers)
MAX_MODULE_LINES = 500
LONG_MODULE_OK = ("iobench.lab.fs",)
#: a function longer than this is several steps with no names; chart drawing is exempt (one
#: figure's axes, bars and labels read best in one place, as matplotlib's own examples do)
MAX_FUNCTION_LINES = 60
LONG_FUNCTION_OK = ("iobench.report.charts", "iobench.report.timeline_chart")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (a package's __init__ as the package)
    line: int
    lazy: bool  # inside a function


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _target(node: ast.ImportFrom, source: str, is_package: bool) -> list[str]:
    base = node.module or ""
    if node.level:
        up = source.split(".")[: len(source.split(".")) - node.level + (1 if is_package else 0)]
        base = ".".join(up + ([node.module] if node.module else []))
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        is_module = (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").is_file() or (
            PACKAGE.parent / Path(*sub.split("."))
        ).is_dir()
        out.append(sub if is_module else base)
    return out


def imports_of(path: Path) -> Iterator[Import]:
    source = module_name(path)
    tree = ast.parse(path.read_text(), str(path))

    def walk(node: ast.AST, lazy: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inside = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                for target in _target(child, source, path.name == "__init__.py"):
                    yield Import(source, target, child.lineno, inside)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(source, alias.name, child.lineno, inside)
            yield from walk(child, inside)

    yield from walk(tree, False)


@functools.cache
def all_imports() -> list[Import]:
    return [i for p in sorted(PACKAGE.rglob("*.py")) for i in imports_of(p)]


def wing(module: str) -> str:
    """``iobench.trial.steps`` -> ``trial``; the base modules -> ``base``."""
    if module in BASE:
        return "base"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "base"


def first_party(imports: list[Import]) -> list[Import]:
    return [i for i in imports if i.target == "iobench" or i.target.startswith("iobench.")]


def wrong_way(imports: list[Import]) -> list[str]:
    out = []
    for i in first_party(imports):
        src, dst = wing(i.source), wing(i.target)
        if src == dst or dst == "base" or dst in ALLOWED.get(src, set()):
            continue
        out.append(f"{i.source}:{i.line} imports {i.target} ({src} may not import {dst})")
    return out


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def module_edges(imports: list[Import]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for i in first_party(imports):
        if i.target != i.source and not (i.source == "iobench.__main__"):
            edges.setdefault(i.source, set()).add(i.target)
    # a package's __init__ importing its own modules is its face, not a dependency back
    return {
        s: {
            t
            for t in ts
            if not (t.startswith(s + ".") and (PACKAGE.parent / Path(*s.split("."))).is_dir())
        }
        for s, ts in edges.items()
    }


def wing_edges(imports: list[Import]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for i in first_party(imports):
        src, dst = wing(i.source), wing(i.target)
        if src != dst:
            edges.setdefault(src, set()).add(dst)
    return edges


def lazy_where_not_allowed(imports: list[Import]) -> list[str]:
    return [
        f"{i.source}:{i.line} imports {i.target} inside a function"
        for i in first_party(imports)
        if i.lazy and not (i.source.startswith(LAZY_OK[1]) or i.source in (LAZY_OK[0], LAZY_OK[2]))
    ]


def argparse_outside_cli(imports: list[Import]) -> list[str]:
    return [
        f"{i.source}:{i.line} imports argparse"
        for i in imports
        if i.target == "argparse" and not i.source.startswith(ARGPARSE_OK)
    ]


def _name(path: Path) -> str:
    return module_name(path) if path.is_relative_to(PACKAGE) else path.stem


def long_modules(paths: list[Path], limit: int = MAX_MODULE_LINES) -> list[str]:
    return [
        f"{_name(p)}: {n} lines"
        for p in paths
        if (n := len(p.read_text().splitlines())) > limit and _name(p) not in LONG_MODULE_OK
    ]


def long_functions(paths: list[Path], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    out = []
    for p in paths:
        if _name(p) in LONG_FUNCTION_OK:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > limit:
                    out.append(f"{_name(p)}:{node.lineno} {node.name}: {n} lines")
    return out


# --------------------------------------------------------------------------------- the tests
def test_imports_go_one_way_between_wings() -> None:
    assert wrong_way(all_imports()) == []


def test_no_wing_and_no_module_is_in_a_circle() -> None:
    imports = all_imports()
    assert circles(wing_edges(imports)) == []
    assert circles(module_edges(imports)) == []


def test_first_party_imports_inside_functions_only_in_the_lazy_faces() -> None:
    assert lazy_where_not_allowed(all_imports()) == []


def test_only_the_command_line_imports_argparse() -> None:
    assert argparse_outside_cli(all_imports()) == []


def test_the_report_reaches_neither_the_runner_nor_the_sampler() -> None:
    reached: set[str] = set()
    edges = module_edges(all_imports())
    todo = [m for m in edges if m.startswith("iobench.report")]
    while todo:
        m = todo.pop()
        for t in edges.get(m, ()):
            if t not in reached:
                reached.add(t)
                todo.append(t)
    assert not {t for t in reached if t.startswith(("iobench.run.", "iobench.trial."))}


def test_no_module_and_no_function_outgrows_one_idea() -> None:
    paths = sorted(PACKAGE.rglob("*.py"))
    assert long_modules(paths) == []
    assert long_functions(paths) == []


def test_the_rule_catches_a_planted_wrong_import(tmp_path: Path) -> None:
    """The checks are not vacuous: the rundir wing importing the runner is caught."""
    planted = [Import("iobench.rundir.folder", "iobench.run.runner", 1, False)]
    assert wrong_way(planted) == [
        "iobench.rundir.folder:1 imports iobench.run.runner (rundir may not import run)"
    ]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert lazy_where_not_allowed([Import("iobench.trial.steps", "iobench.trial.restart", 9, True)])
    assert argparse_outside_cli([Import("iobench.run.plan", "argparse", 3, False)])
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * 61)
    assert long_modules([long], limit=50) and long_functions([long]) == ["long:1 f: 62 lines"]
