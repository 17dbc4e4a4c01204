"""The documents say what the code does: docs/cli.md is the parser's, the module map of
docs/design.md is the tree's, the README stays a README, and nothing links outside the
repository."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from iobench.cli.reference import markdown

ROOT = Path(__file__).resolve().parents[1]
needs_repo = pytest.mark.skipif(
    not (ROOT / "tools").is_dir(), reason="the sdist carries no tools/ (a clone's test)"
)


def test_docs_cli_md_is_generated_from_the_parser() -> None:
    assert (ROOT / "docs" / "cli.md").read_text() == markdown(), (
        "run: python -m iobench.cli.reference > docs/cli.md"
    )


def test_every_option_of_run_is_in_docs_cli_md() -> None:
    from iobench.cli import build_parser

    text = (ROOT / "docs" / "cli.md").read_text()
    run = build_parser()._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    options = {o for a in run._actions for o in a.option_strings if a.help != "==SUPPRESS=="}
    missing = sorted(o for o in options if f"`{o}`" not in text and o not in ("-h", "--help"))
    assert missing == []


@needs_repo
def test_the_module_map_of_docs_design_md_is_the_tree() -> None:
    spec = importlib.util.spec_from_file_location("module_map", ROOT / "tools" / "module_map.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text = (ROOT / "docs" / "design.md").read_text()
    assert tool.section() in text, "run: python tools/module_map.py --write"
    listed = set(re.findall(r"^\| `(iobench/[^`]+\.py)` \|", text, re.M))
    assert listed == {p.relative_to(ROOT).as_posix() for p in (ROOT / "iobench").rglob("*.py")}


def test_the_readme_is_a_readme() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    assert max(len(line) for line in lines) <= 200  # no paragraph folded into one line


def test_nothing_links_outside_the_repository() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        assert "../shared" not in text, path
        for target in re.findall(r"\]\(([^)#]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            assert (path.parent / target).exists(), f"{path.name}: broken link {target}"
