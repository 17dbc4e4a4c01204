"""The module map of docs/design.md, generated from the tree: every module of every wing with
the first sentence of its docstring (each module's docstring opens with its one idea). A test
holds the section between the markers equal to this output.

    python tools/module_map.py            # print the section
    python tools/module_map.py --write    # rewrite it in docs/design.md
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "iobench"
DESIGN = ROOT / "docs" / "design.md"
BEGIN = "<!-- generated: python tools/module_map.py -->"
END = "<!-- end generated -->"
#: the wings from the top of the import order down, then the base (docs/design.md)
WINGS = ("cli", "run", "fleet", "predict", "trial", "lab", "report", "scenario", "wheels", "cost",
         "system", "rundir")  # fmt: skip


def first_sentence(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    para = " ".join(doc.split("\n\n")[0].split())
    match = re.match(r"(.+?[.!?])(\s|$)", para)
    text = match.group(1) if match else para
    return (text if len(text) <= 220 else text[:217].rstrip() + "…").replace("|", "\\|")


def modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py"))


def section() -> str:
    lines = [BEGIN, "| module | its idea |", "|---|---|"]
    base = [p for p in sorted(PACKAGE.glob("*.py"))]
    for wing in WINGS:
        for path in modules(PACKAGE / wing):
            name = path.relative_to(ROOT).as_posix()
            lines.append(f"| `{name}` | {first_sentence(path)} |")
    for path in base:
        lines.append(f"| `{path.relative_to(ROOT).as_posix()}` | {first_sentence(path)} |")
    lines.append(END)
    return "\n".join(lines)


def rewrite(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + section() + text[end:]


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        DESIGN.write_text(rewrite(DESIGN.read_text()))
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    print(section())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
