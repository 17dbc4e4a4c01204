"""A fake ``nvidia-smi`` for tests: an executable put first on PATH that prints the real
tool's formats for a described machine (several GPUs, busy processes, P2P matrix).

Formats follow the real tool: ``--query-gpu``/``--query-compute-apps`` with
``--format=csv,noheader,nounits`` print one comma+space separated row per GPU/process
(nothing at all when no process runs); ``topo -p2p r`` prints a tab-separated matrix whose
rows start with a space (`` GPU0\\tX\\tOK``) and then the legend. Unknown fields or
arguments fail as the real tool does (non-zero exit, message on stdout).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

H100 = "NVIDIA H100 80GB HBM3"
LEGEND = (
    "\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n  CNS  = Chipset not supported\n"
    "  GNS  = GPU not supported\n  TNS  = Topology not supported\n  NS   = Not supported\n  U    = Unknown\n"
)

_SCRIPT = """#!{python}
import json, sys
spec = json.loads({spec!r})
args = sys.argv[1:]
gpus = spec["gpus"]
def rows(fields, items, table):
    out = []
    for item in items:
        row = []
        for f in fields:
            if f not in table:
                print(f'Field "{{f}}" is not a valid field to query.')
                sys.exit(2)
            row.append(str(table[f](item)))
        out.append(", ".join(row))
    return "".join(line + "\\n" for line in out)
gpu_fields = {{
    "index": lambda g: g["index"], "uuid": lambda g: g["uuid"], "name": lambda g: g["name"],
    "memory.used": lambda g: g["mem_used"], "memory.total": lambda g: g["mem_total"],
    "utilization.gpu": lambda g: g["util"], "driver_version": lambda g: spec["driver"],
}}
app_fields = {{
    "gpu_uuid": lambda a: a["uuid"], "pid": lambda a: a["pid"],
    "process_name": lambda a: a["name"], "used_memory": lambda a: a["mib"],
}}
if args[:3] == ["topo", "-p2p", "r"]:
    n = len(gpus)
    text = "\\t" + "\\t".join(f"GPU{{i}}" for i in range(n)) + "\\t\\n"
    for i in range(n):
        text += f" GPU{{i}}\\t" + "\\t".join(spec["p2p"][i]) + "\\t\\n"
    sys.stdout.write(text + {legend!r})
    sys.exit(0)
for a in args:
    if a.startswith("--query-gpu="):
        sys.stdout.write(rows(a.split("=", 1)[1].split(","), gpus, gpu_fields))
        sys.exit(0)
    if a.startswith("--query-compute-apps="):
        sys.stdout.write(rows(a.split("=", 1)[1].split(","), spec["apps"], app_fields))
        sys.exit(0)
print("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
sys.exit(2)
"""


def machine(
    n: int, p2p_ok: bool = True, busy: dict[int, list[tuple[int, str, int]]] | None = None
) -> dict[str, Any]:
    """``n`` H100s; ``p2p_ok`` False gives CNS between every pair; ``busy`` maps a GPU
    index to its (pid, process name, MiB) processes."""
    busy = busy or {}
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-6f1c2b7e-0000-4000-8000-00000000000{i}",
            "name": H100,
            "mem_used": sum(p[2] for p in busy.get(i, [])),
            "mem_total": 81559,
            "util": 97 if busy.get(i) else 0,
        }
        for i in range(n)
    ]
    apps = [
        {"uuid": gpus[i]["uuid"], "pid": pid, "name": name, "mib": mib}
        for i, procs in busy.items()
        for pid, name, mib in procs
    ]
    p2p = [["X" if i == j else ("OK" if p2p_ok else "CNS") for j in range(n)] for i in range(n)]
    return {"gpus": gpus, "apps": apps, "p2p": p2p, "driver": "550.54.15"}


def install(bin_dir: Path, spec: dict[str, Any]) -> Path:
    """Write the fake into ``bin_dir``; put ``bin_dir`` first on PATH to use it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text(_SCRIPT.format(python=sys.executable, spec=json.dumps(spec), legend=LEGEND))
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def on_path(bin_dir: Path) -> str:
    """A PATH value with ``bin_dir`` first."""
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
