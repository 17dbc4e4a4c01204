"""The stand-in workload: a trial's plumbing without a venv or an installer, for iobench's own
tests (as hyperfine tests its runner on a mock executor and pyperf on a fake timer). It fakes
the install kind, so it takes that kind's declarations (its config, its row's columns).

Each timed step is a real process run through the same phase runner, sampler and watchdog as
an install's: ``mkdir`` makes the folder (the "venv" phase), a small Python writer writes N
files of a set size at a set rate into it from one pre-made buffer (the "install" phase),
and ``test -e`` checks the first file (the "import" phase); a ``pyvenv.cfg`` marks the folder
as the venv it stands for, which a start-up strategy will pack. Its ``[workload]`` table
(``iobench.scenario.kinds.standin``) sets the files, their rate, a per-role delay, a pause and
the writer's exit status.

A start-up strategy's restart works on it as on a venv (``iobench.trial.restart``): its
folder is what is packed, copied and restored, and reinstall writes it again.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from iobench.rundir.kinds import standin as rows
from iobench.scenario.kinds.standin import Settings, settings_of
from iobench.trial.kinds import install
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


class StandIn:
    """One stand-in trial: a folder, its files, and a check that the first one is there."""

    kind: ClassVar[str] = rows.NAME

    def __init__(self) -> None:
        self.built = Path()  # the folder of files (what a restart persists and restores)
        self.tmpdir = Path()
        self.cache: Path | None = None
        self.params = Settings()

    def prepare(self, t: Trial) -> Stop | None:
        install.placed(t)
        self.params = settings_of(t.ctx.params, t.cfg.name, "workload")
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


NAME = rows.NAME

__all__ = ["NAME", "WRITER", "StandIn"]
