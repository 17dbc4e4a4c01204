"""The ``install`` kind at the bottom: a trial makes a venv and installs a scenario's packages
into it (pip or uv), compiles its bytecode and runs the ready check; with a start-up strategy it
then persists the venv and measures a restart (docs/strategies.md). Its columns: where the venv,
TMPDIR and the cache lived, how it installed, what the strategy kept and how the restart went,
and a fleet's fan-out."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.rundir.kind import Choice, Kind, Place
from iobench.rundir.records import TrialRow, column, text


@dataclass(kw_only=True, slots=True)
class Row(TrialRow):
    """A line of a install run's trials.csv: the core columns, then the install kind's."""

    venv_role: str = text("the role (folder) the venv lived in")
    tmpdir_role: str = text("the role TMPDIR pointed into")
    cache_role: str = text("the role of the installer's cache, or `off`")
    venv_fstype: str = text("filesystem type of the venv's role")
    tmpdir_fstype: str = text("filesystem type of TMPDIR's role")
    cache_fstype: str = text("filesystem type of the cache's role (empty when `off`)")
    cache_state: str = text("`cold` (empty cache) or `warm` (primed by an untimed install)")
    installer: str = text("`pip` or `uv`")
    compile: str = text("`on`/`off`: bytecode compiled after the install")
    index_bytes: int | None = column(
        "bytes the local index served during the trial (empty for a remote index)", "bytes"
    )
    tmpdir_peak_bytes: int | None = column(
        "peak growth of TMPDIR's filesystem (statvfs, no walking)", "bytes"
    )
    cache_bytes: int | None = column("growth of the cache's filesystem at the end", "bytes")
    venv_bytes: int | None = column("growth of the venv's filesystem at the end", "bytes")
    files_installed: int | None = column("files in the installed distributions' RECORDs", "count")
    strategy: str = text(
        "start-up strategy (docs/strategies.md): `reinstall`, `persistent-venv`, `packed-venv`, "
        "`copied-venv`, `fan-out`; empty in runs written before strategies"
    )
    first_start_s: float | None = column(
        "first start: time_to_ready_s plus the strategy's persist step (pack, copy-out); empty unless "
        "the run measured restarts",
        "s",
    )
    persist_method: str = text(
        "how the first start kept the venv: `tar`, `tar+zstd`, `squashfs`, `copy`"
    )
    persist_tool: str = text("what ran the persist step (e.g. `zstd binary`, `squashfuse`, `cp`)")
    persist_command: str = text("the persist step's shell line, as a start script would run it")
    persist_s: float | None = column("the persist step (pack or copy-out)", "s")
    stored_bytes: int | None = column(
        "bytes the strategy keeps on the target between starts (archive, tree or venv)", "bytes"
    )
    restart_s: float | None = column(
        "restart: from the first step after the caches were dropped (restore, copy-in, venv "
        "creation for reinstall) to ready-check success; empty unless ok",
        "s",
    )
    restore_s: float | None = column("the restart's restore step (unpack, mount or copy-in)", "s")
    restore_command: str = text("the restart's restore line, as a start script would run it")
    restore_method: str = text(
        "how the restart restored what was kept: `squashfs-loop`, `squashfs-fuse`, "
        "`squashfs-extract` (a squashfs image loop-mounted, mounted by squashfuse, unpacked by "
        "unsquashfs), `tar+zstd`, `tar`, `copy`; empty when nothing was restored"
    )
    restore_tool: str = text(
        "what ran the restore (e.g. `mount -t squashfs`, `squashfuse`, `unsquashfs`, `zstd binary`)"
    )
    restart_import_s: float | None = column("the restart's ready check", "s")
    restart_read_bytes: int | None = column(
        "bytes the restart's processes passed to read() (`rchar`, page cache hits included)",
        "bytes",
    )
    restart_target_read_bytes: int | None = column(
        "bytes the lab volume's daemon served during the restart (empty when the target is not "
        "an iobench lab volume): proof the restart read from the target",
        "bytes",
    )
    restart_target_creates: int | None = column(
        "files the restart created on the lab volume (its daemon's count; empty off the lab): "
        "bytecode an import wrote there",
        "count",
    )
    restart_pyc_local: int | None = column(
        "bytecode files in the `PYTHONPYCACHEPREFIX` folder after the restart (pycache `local`: "
        "what its imports compiled again on the new machine)",
        "count",
    )
    restart_index_bytes: int | None = column(
        "wheel bytes the loopback index served during a restart's install (reinstall, "
        "packed-cache): 0 when its cache held every package",
        "bytes",
    )
    venv_creator: str = text(
        "how the venv was made: `virtualenv`, `venv` (`python -m venv`, pip via ensurepip), "
        "`venv-without-pip` or `uv` (`uv venv`)"
    )
    link_mode: str = text("uv's link mode asked for (`UV_LINK_MODE`; `default`: uv's choice)")
    pycache: str = text(
        "where imports wrote bytecode: `beside` the source (the venv's `__pycache__`) or `local` "
        "(`PYTHONPYCACHEPREFIX` in the TMPDIR role's folder)"
    )
    link_observed: str = text(
        "what the installed files are, read from disk: `hardlink` (the cache's inode), `symlink`, "
        "`clone` (own inode, no fall-back reported), `copy`, or `mixed`"
    )
    link_fallback: str = text(
        "uv's fall-back warning, when it printed one (e.g. failed to hardlink)"
    )
    lock_lines: int | None = column(
        "lines of the installer's output that name a lock (waits, retries, failures: a cache "
        "shared by a fleet)",
        "count",
    )
    fanout_wait_s: float | None = column(
        "fan-out (docs/fleet.md): this worker's wait for the first worker's archive on the "
        "target, part of its time-to-ready; empty for the worker that built it",
        "s",
    )
    fanout_restore_s: float | None = column(
        "fan-out: restoring that archive onto this worker's tmp (a relocation included)", "s"
    )
    fanout_relocated: int | None = column(
        "fan-out: files rewritten because this worker restored the venv at another path than "
        "it was built at (workers sharing a host); 0 on hosts of their own",
        "count",
    )

    def details(self) -> list[str]:
        """A start-up strategy's trial: both events side by side, then the first start's."""
        if self.restart_s is None:
            return TrialRow.details(self)
        both = f"first start {self.first_start_s or 0:.2f} s, restart {self.restart_s:.2f} s"
        return [f"{both} ({self.cold_method})", *TrialRow.details(self)]


NAME = "install"
KIND = Kind(
    name=NAME,
    doc="a venv made and a scenario's packages installed, compiled and imported",
    row=Row,
    places=(
        Place("venv", "venv_role", "venv_fstype"),
        Place("TMPDIR", "tmpdir_role", "tmpdir_fstype"),
        Place("cache", "cache_role", "cache_fstype"),
    ),
    choices=(
        Choice("installer", "installer"),
        Choice("cache", "cache_state"),
        Choice("bytecode compile", "compile"),
        Choice("venv creator", "venv_creator"),
        Choice("uv link mode", "link_mode"),
        Choice("start-up strategy", "strategy"),
    ),
    installs=True,
    built=("persist_command", "persist_method", "persist_tool", "persist_s", "stored_bytes"),
)
