"""A kind of work is named only in its own files, as the layering test holds imports: every wing
dispatches on its registry (``<wing>/kinds/``), never on a kind's name.

Held here: no string literal that names a kind outside a kind's own files (for ``install``,
which is also a phase, no comparison of a kind with it); no table keyed by kind names; a kind's
file imports no other kind's (the stand-in, the install kind's fake, takes install's); and every
wing registers every kind, in one order."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from iobench.cost import kinds as cost_kinds
from iobench.report import sections
from iobench.rundir import kinds as rundir_kinds
from iobench.scenario import kinds as scenario_kinds
from iobench.trial import kinds as trial_kinds

PACKAGE = Path(__file__).resolve().parents[1] / "iobench"
KINDS = tuple(rundir_kinds.KINDS)
#: names that mean nothing but a kind (``install`` is also a phase: only compared as a kind)
ONLY_KINDS = tuple(k for k in KINDS if k != "install")


def own_file(path: Path) -> str | None:
    """The kind whose own file ``path`` is (a kind's folder, or a file named after it)."""
    parts = path.relative_to(PACKAGE).parts
    stem = path.stem
    for kind in KINDS:
        if (
            len(parts) > 1 and parts[-2] in ("kinds", "sections") and stem == kind
        ) or stem.startswith(f"{kind}_"):
            return kind
    return None


def _mentions_kind(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Name) and "kind" in n.id)
        or (isinstance(n, ast.Attribute) and "kind" in n.attr)
        for n in ast.walk(node)
    )


def literal_problems(source: str, where: str, own: str | None) -> list[str]:
    """Kind names used as data outside their kind's own file, in ``source``."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in ONLY_KINDS and node.value != own:
            found.append(f"{where}:{node.lineno}: the literal {node.value!r}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = [s.value for s in sides if isinstance(s, ast.Constant) and s.value in KINDS]
            if named and named[0] != own and any(_mentions_kind(s) for s in sides):
                found.append(f"{where}:{node.lineno}: a kind compared with {named[0]!r}")
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in KINDS]
            by_kind = len(set(keys)) > 1 or any(
                k in ONLY_KINDS for k in keys
            )  # "install": a phase too
            if by_kind and set(keys) != {own}:
                found.append(f"{where}:{node.lineno}: a table keyed by kind ({', '.join(keys)})")
    return found


def test_no_kind_is_named_outside_its_own_files() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        problems += literal_problems(
            path.read_text(), str(path.relative_to(PACKAGE.parent)), own_file(path)
        )
    assert problems == []


@pytest.mark.parametrize(
    "planted",
    [
        'if meta.kind == "dataset":\n    pass\n',
        'LINES = {"checkpoint": 1, "dataset": 2}\n',
        'if scenario.kind != "install":\n    pass\n',
        'NAME = "standin"\n',
    ],
)
def test_the_rule_catches_a_planted_kind_name(planted: str) -> None:
    assert literal_problems(planted, "report/build.py", None)
    assert literal_problems(planted, "report/build.py", "weights")


def test_install_as_a_phase_is_no_kind_name() -> None:
    assert (
        literal_problems('t.phase("install", argv)\nPHASES = ("venv", "install")\n', "x.py", None)
        == []
    )


def test_a_kind_file_imports_no_other_kind() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = own_file(path)
        if own is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                for name in names:
                    tail = name.rsplit(".", 1)[-1]
                    other = tail if tail in KINDS and tail != own else None
                    if other and not (own == "standin" and other == "install"):
                        problems.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert problems == []


def test_every_wing_registers_every_kind_in_one_order() -> None:
    order = list(rundir_kinds.KINDS)
    assert list(scenario_kinds.KINDS) == order
    assert list(trial_kinds.KINDS) == order
    assert list(cost_kinds.QUESTIONS) == order
    assert list(sections.KINDS) == order
