"""The stand-in workload: a trial's plumbing without a venv or an installer, for iobench's own
tests (as hyperfine tests its runner on a mock executor and pyperf on a fake timer).

Each timed step is a real process run through the same phase runner, sampler and watchdog as
an install's: ``mkdir`` makes the folder (the "venv" phase), a small Python writer writes N
files of a set size at a set rate into it from one pre-made buffer (the "install" phase),
and ``test -e`` checks the first file (the "import" phase); a ``pyvenv.cfg`` marks the folder
as the venv it stands for, which a start-up strategy will pack. Its ``[workload]`` table sets
the rest, and ``[workload.by_config.NAME]`` changes any of it for one config:

- ``files`` (40), ``kb`` (4): how many files, how large;
- ``rate`` (0: as fast as it can): files per second at most;
- ``delay_ms`` (``{}``): extra milliseconds per file on a role, e.g. ``{ target = 5 }``, a
  slow target without a FUSE mount;
- ``pause_s`` (0): a pause without any I/O half-way through (a stall);
- ``exit`` (0): the writer's exit status (non-zero: the step fails, as an installer can).

A start-up strategy's restart works on it as on a venv (``iobench.trial.restart``): its
folder is what is packed, copied and restored, and reinstall writes it again.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from iobench.errors import ScenarioError
from iobench.trial.outcome import Stop, check
from iobench.trial.restart import Restart
from iobench.trial.sampler import Sampler, SamplerResult
from iobench.trial.steps import Step, Trial

#: the writer: files from one pre-made buffer, paced, with an optional pause and exit status
WRITER = """\
import os, sys, time
folder, n, size, rate, delay, pause, code = sys.argv[1:8]
n, size, rate, delay, pause = int(n), int(size), float(rate), float(delay), float(pause)
buf = b"x" * size
with open(os.path.join(folder, "pyvenv.cfg"), "w") as fh:  # what a strategy packs is a venv
    fh.write("home = (iobench's stand-in workload)\\n")
t0 = time.monotonic()
for i in range(n):
    if pause and i == n // 2:
        time.sleep(pause)
    with open(os.path.join(folder, f"f{i}"), "wb") as fh:
        fh.write(buf)
    if delay:
        time.sleep(delay)
    if rate:
        ahead = t0 + (i + 1) / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
sys.exit(int(code))
"""
#: each parameter: (kind, lowest, highest, default)
_NUMBERS: dict[str, tuple[type, float, float, float]] = {
    "files": (int, 1, 1_000_000, 40),
    "kb": (float, 0, 1_048_576, 4),
    "rate": (float, 0, 1e7, 0),
    "pause_s": (float, 0, 86_400, 0),
    "exit": (int, 0, 255, 0),
}


@dataclass(frozen=True)
class Params:
    """The stand-in's settings for one config."""

    files: int = 40
    kb: float = 4.0
    rate: float = 0.0
    pause_s: float = 0.0
    exit: int = 0
    delay_ms: Mapping[str, float] = field(default_factory=dict)

    def delay_s(self, role: str) -> float:
        return float(self.delay_ms.get(role, 0.0)) / 1000.0


def _number(value: object, key: str, where: str) -> float:
    kind, low, high, _ = _NUMBERS[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        ok = ok and float(value).is_integer()  # type: ignore[arg-type]
    if not ok or not math.isfinite(float(value)) or not low <= float(value) <= high:  # type: ignore[arg-type]
        raise ScenarioError(f"{where}.{key}: expected a number from {low:g} to {high:g}")
    return float(value)  # type: ignore[arg-type]


def _params(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in _NUMBERS:
            number = _number(value, key, where)
            out[key] = int(number) if _NUMBERS[key][0] is int else number
        elif key == "delay_ms":
            if not isinstance(value, Mapping):
                raise ScenarioError(f"{where}.delay_ms: expected a table of role = milliseconds")
            out[key] = {}
            for role, ms in value.items():
                if (
                    not isinstance(ms, (int, float))
                    or isinstance(ms, bool)
                    or not 0 <= ms <= 60_000
                ):
                    raise ScenarioError(f"{where}.delay_ms.{role}: expected 0 to 60000 ms")
                out[key][str(role)] = float(ms)
        elif key != "by_config":
            known = ", ".join([*_NUMBERS, "delay_ms", "by_config"])
            raise ScenarioError(f"{where}.{key}: not a stand-in setting (known: {known})")
    return out


def params_for(table: Mapping[str, Any], config: str, where: str = "workload") -> Params:
    """The stand-in's settings for ``config``: the table, then its ``by_config`` entry."""
    base = _params(table, where)
    by_config = table.get("by_config", {})
    if not isinstance(by_config, Mapping):
        raise ScenarioError(f"{where}.by_config: expected tables [workload.by_config.NAME]")
    own = by_config.get(config, {})
    if not isinstance(own, Mapping):
        raise ScenarioError(f"{where}.by_config.{config}: expected a table")
    return Params(**{**base, **_params(own, f"{where}.by_config.{config}")})


def check_params(table: Mapping[str, Any], configs: Sequence[str], where: str) -> None:
    """Every setting of the table valid for every config (before anything runs)."""
    for name in table.get("by_config", {}) or {}:
        if name not in configs:
            raise ScenarioError(f"{where}.by_config.{name}: no such config")
    for name in configs:
        params_for(table, name, where)


class StandIn:
    """One stand-in trial: a folder, its files, and a check that the first one is there."""

    kind: ClassVar[str] = "standin"

    def __init__(self) -> None:
        self.built = Path()  # the folder of files (what a restart persists and restores)
        self.tmpdir = Path()
        self.cache: Path | None = None
        self.params = Params()

    def prepare(self, t: Trial) -> Stop | None:
        self.params = params_for(t.ctx.params, t.cfg.name)
        self.built = t.dirs[t.cfg.venv] / "files"
        self.tmpdir = t.dirs[t.cfg.tmpdir] / "tmp"
        self.tmpdir.mkdir(exist_ok=True)
        t.env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(self.tmpdir), "LC_ALL": "C"}
        return None

    def fs_paths(self, t: Trial) -> dict[str, Path]:
        return {"venv": self.built.parent, "tmpdir": self.tmpdir}

    def timed(self) -> Sequence[Step]:
        return (self.make_folder, self.write_files, self.ready_check)

    def make_folder(self, t: Trial, sampler: Sampler | None = None) -> Stop | None:
        r = t.phase("venv" if sampler is None else "restart-venv",
                    ["mkdir", "-p", str(self.built)], None, sampler)  # fmt: skip
        t.phases["venv"] = r.seconds if sampler is None else t.phases["venv"]
        return check(r, "making the folder")

    def write_files(self, t: Trial, sampler: Sampler | None = None) -> Stop | None:
        p = self.params
        argv = [sys.executable, "-I", "-S", "-c", WRITER, str(self.built), str(p.files),
                str(int(p.kb * 1024)), repr(p.rate), repr(p.delay_s(t.cfg.venv)),
                repr(p.pause_s), str(p.exit)]  # fmt: skip
        r = t.phase("install" if sampler is None else "restart-install", argv, None, sampler)
        if sampler is None:
            t.phases["download"], t.phases["install"] = 0.0, r.seconds
        return check(r, "the stand-in's writer")

    def ready_check(self, t: Trial) -> Stop | None:
        r = t.phase("import", self.ready_argv(t))
        t.phases["import"] = r.seconds
        t.mark_ready(r.end)
        return check(r, "ready check")

    def measured(self, t: Trial, result: SamplerResult) -> None:
        t.row.files_installed = sum(1 for _ in self.built.glob("f*"))

    def after(self, t: Trial, stop: Stop | None) -> None:
        if stop is None and t.ctx.lifecycle:
            Restart(t, self).run()

    # ------------------------------------------------------------------ the restart's hooks
    def ready_argv(self, t: Trial) -> list[str]:
        return ["test", "-e", str(self.built / "f0")]

    def rebuild(self, t: Trial, sampler: Sampler) -> Stop | None:
        return self.make_folder(t, sampler) or self.write_files(t, sampler)


__all__ = ["WRITER", "Params", "StandIn", "check_params", "params_for"]
