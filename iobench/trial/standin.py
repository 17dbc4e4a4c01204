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

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from iobench.errors import ScenarioError
from iobench.scenario import settings
from iobench.scenario.settings import Number
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
#: the numbers a stand-in takes (their defaults are Params')
_NUMBERS: dict[str, Number] = {
    "files": Number(int, 1, 1_000_000),
    "kb": Number(float, 0, 1_048_576),
    "rate": Number(float, 0, 1e7),
    "pause_s": Number(float, 0, 86_400),
    "exit": Number(int, 0, 255),
}
_DELAY_MS = Number(float, 0, 60_000)


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


def _params(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    out = settings.read_table(table, _NUMBERS, where, extra=("delay_ms",))
    if "delay_ms" in table:
        value = table["delay_ms"]
        if not isinstance(value, Mapping):
            raise ScenarioError(f"{where}.delay_ms: expected a table of role = milliseconds")
        out["delay_ms"] = {
            str(role): float(settings.number(ms, _DELAY_MS, f"{where}.delay_ms.{role}"))
            for role, ms in value.items()
        }
    return out


def params_for(table: Mapping[str, Any], config: str, where: str = "workload") -> Params:
    """The stand-in's settings for ``config``: the table, then its ``by_config`` entry."""
    own = settings.config_table(table, config, where)
    return Params(**{**_params(table, where), **_params(own, f"{where}.by_config.{config}")})


def check_params(table: Mapping[str, Any], configs: Sequence[str], where: str) -> None:
    """Every setting of the table valid for every config (before anything runs)."""
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
