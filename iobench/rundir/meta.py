"""A run's meta.json as a typed record, and its one loader with a version history.

``RunMeta`` says what was measured where: host, roles, scenario, index, GPU, versions,
status. ``load_meta`` is the only reader (the report, compare and --resume all use it): it
upgrades older versions in memory, refuses newer or unknown ones in one line, and checks
every value it returns, because a run directory is untrusted input — ``run_id`` must be a
safe path component, role paths absolute and without ``..``, every number finite and in
range. Keys this version does not know are kept (``extra``) so that rewriting the file loses
nothing.

Schema versions (pyperf's habit: say here what changed in each, and teach ``_UPGRADES`` the
step from the previous one). Since version 2 a reader ignores CSV columns and keeps JSON keys
it does not know, so a new column or key needs no new version; bump when an older reader
would misread the files (a key or column renamed, removed, or given another meaning).

- 1: first version (iobench 0.1.0 up to d8a1c15).
- 2: trials.csv gains ``position`` (a trial's place in its round, whose order is shuffled);
  meta.json gains ``order_seed`` (the seed of that order); readers ignore columns and keep
  keys they do not know. Version 1 upgrades on reading: ``order_seed`` null, ``position``
  empty. Added within version 2 (a missing key reads as the behaviour before it):
  ``cache_mode`` (``--cache-mode`` of runs with start-up strategies; missing: ``cold``, the
  only mode before the key); ``overhead`` (iobench's own cost; missing: unknown);
  ``pack_method`` (``--pack-method`` as asked; missing: ``auto``, the default before the key;
  later also a squashfs restore way, or several methods comma-separated, which older readers refuse).
- 3: trials.csv holds its kind's row (``iobench.rundir.kinds``): the core columns, then the
  kind's own group, and no other kind's; two columns that meant two things by kind are
  renamed: a dataset's ``read_s`` is ``epochs_s``, a checkpoint's ``read_s`` and
  ``read_mb_per_s`` are ``ckpt_read_s`` and ``ckpt_read_mb_per_s``. An older trials.csv is
  read with its names mapped (its header holds the old names, never the new ones).
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobench import reading
from iobench.errors import RunDirError
from iobench.rundir.codec import decode, encode, extra, hints, key

SCHEMA_VERSION = 3
#: run statuses meta.json may hold
RUN_STATUSES = (
    "running",
    "complete",
    "interrupted",
    "lock-lost",
    "volume-hung",
    "volume-lost",
    "failed",
)
#: a meta.json larger than this is not one iobench wrote
MAX_META_BYTES = 32 * 1024 * 1024


#: the causes of meta.json's ``overhead.parts_s``, in the order the summary line names them
OVERHEAD_CAUSES = ("setup", "probe", "priming", "cleanup", "records", "trial", "other")


OVERHEAD_LABELS = {
    "setup": "set-up",
    "probe": "probe",
    "priming": "priming",
    "cleanup": "cleanup",
    "records": "records",
    "trial": "trial steps",
    "other": "other",
}


def overhead_figure(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def overhead_ratio(account: Mapping[str, Any] | None) -> float | None:
    """Run wall over the trials' measured time (1.0: no overhead); None when unknown."""
    if not account:
        return None
    wall, trials = overhead_figure(account.get("wall_s")), overhead_figure(account.get("trials_s"))
    if wall is None or not trials:
        return None
    return wall / trials


@dataclass(frozen=True)
class GpuInfo:
    """What the cost model needs to know about the GPUs: model, how many, and where from."""

    name: str
    count: int
    driver: str | None = None
    memory_mib: int | None = None
    source: str = "nvidia-smi"  # "nvml" | "nvidia-smi" | "meta"
    instance_type: str | None = None

    def to_meta(self) -> dict[str, Any]:
        """The ``gpu`` object of meta.json (contract keys first, optional extras after)."""
        out: dict[str, Any] = {
            "name": self.name,
            "count": self.count,
            "driver": self.driver,
            "source": self.source,
        }
        if self.memory_mib is not None:
            out["memory_mib"] = self.memory_mib
        if self.instance_type:
            out["instance_type"] = self.instance_type
        return out

    @classmethod
    def from_meta(cls, data: object) -> GpuInfo | None:
        """Rebuild from meta.json's ``gpu`` (null, or a dict); tolerant of missing keys."""
        if not isinstance(data, dict) or not data.get("name"):
            return None
        try:
            count = int(data.get("count") or 1)
        except (TypeError, ValueError):
            count = 1
        mem = data.get("memory_mib")
        return cls(
            name=str(data["name"]),
            count=max(count, 1),
            driver=str(data["driver"]) if data.get("driver") else None,
            memory_mib=int(mem) if isinstance(mem, (int, float)) else None,
            source=str(data.get("source") or "meta"),
            instance_type=str(data["instance_type"]) if data.get("instance_type") else None,
        )


@dataclass(kw_only=True)
class HostInfo:
    """The machine the run measured."""

    hostname: str = key("the host's name", "")
    platform: str = key("`platform.platform()`", "")
    kernel: str = key("kernel release", "")
    machine: str = key("CPU architecture (`platform.machine()`, e.g. x86_64)", "")
    cpu_count: int | None = key("logical CPUs", lo=0, hi=1e7)
    cpu_model: str = key("the first CPU's model name", "")
    memory_bytes: int | None = key("total memory", lo=0, hi=2**63 - 1)
    extra: dict[str, Any] = extra()


@dataclass(kw_only=True)
class RoleInfo:
    """Where one role (a named folder: target, tmp, ...) lived."""

    path: str = key("the folder, absolute", "", check="path")
    fstype: str = key("its filesystem type", "")
    device: str = key("the mounted device or export", "")
    mountpoint: str = key("the mount point holding it", "")
    mount_options: str = key("the mount's options", "")
    total_bytes: int | None = key("filesystem size at the start", lo=0, hi=2**63 - 1)
    free_bytes: int | None = key("free space at the start", lo=0, hi=2**63 - 1)
    extra: dict[str, Any] = extra()


@dataclass(kw_only=True)
class IndexInfo:
    """Where trials installed from."""

    kind: str = key(
        "`local` (iobench's loopback index) or `remote`", "local", choices=("local", "remote")
    )
    url: str = key("the index URL, credentials redacted", "")
    source: str = key("what the local index served: a wheelhouse folder or a synthetic profile", "")
    mbps: float | None = key("the local index's cap, megabits/s (null: none)", lo=0, hi=1e9)
    downloaded_from: str = key("the real index the packages were downloaded from once "
                               "(credentials redacted; empty: none)", "")  # fmt: skip
    download_bytes: int | None = key("the wheels that one download fetched, bytes", lo=0)
    download_s: float | None = key("its wall time, s (pip's resolution included); `mbps` is "
                                   "its rate unless `--index-mbit` gave one", lo=0)  # fmt: skip
    extra: dict[str, Any] = extra()


@dataclass(kw_only=True)
class RunMeta:
    """meta.json: one run's identity, conditions and status."""

    schema_version: int = key(
        "the run directory's format version (history: iobench/rundir/meta.py)", SCHEMA_VERSION
    )
    iobench_version: str = key("the iobench that ran it", "")
    run_id: str = key(
        "`YYYYmmdd-HHMMSS-<host>-<scenario>-<pid>` (`-2`, `-3`... after a run of the same process in the same second); the folder's name",
        "",
        check="name",
    )
    command: list[str] = key("the command line (credentials redacted)", [])
    label: str = key("free text from `--label`, e.g. the pod type", "")
    started_at: str = key("ISO 8601 UTC", "")
    ended_at: str | None = key("ISO 8601 UTC; null while running")
    resumed_at: str | None = key("when `--resume` last continued it (ISO 8601 UTC)")
    status: str = key(
        "`running`, `complete`, `interrupted`, `lock-lost` (another run took the target's "
        "lock), `volume-hung` (a role's volume stopped answering), `volume-lost` (a role's "
        "scratch folder vanished: its volume unmounted) or `failed` (another error ended "
        "it; `status_reason` says which)",
        "running",
        choices=RUN_STATUSES,
    )
    status_reason: str = key("why the run ended as it did, when it did not complete", "")
    scenario: dict[str, Any] = key(
        "the resolved scenario: name, source, kind, packages (credentials redacted), wheels, "
        "ready, repeats, configs ({name, venv, tmpdir, cache, cache_state, installer, compile, "
        "description}), description, size_mb, extra",
        {},
    )
    repeats: int | None = key("trials per config", lo=1, hi=1000)
    order_seed: int | None = key(
        "seed of the per-round trial order (null: written before schema 2)", lo=0, hi=2**64 - 1
    )
    roles: dict[str, RoleInfo] = key("{role: where it lived}", {})
    host: HostInfo = field(default_factory=HostInfo, metadata={"doc": "the machine"})
    versions: dict[str, Any] = key(
        "python, iobench, virtualenv, pip_host, uv, and `venv`: what the trial venvs were made "
        "of (their Python and seeded pip)",
        {},
    )
    pip_config: dict[str, Any] = key(
        "pip's configuration files and PIP_* variables the run saw, and whether trials were "
        "isolated from them",
        {},
    )
    index: IndexInfo | None = key("where trials installed from")
    gpu: dict[str, Any] | None = key(
        "null, or {name, count, driver, source, and optionally memory_mib, instance_type}"
    )
    pricing: dict[str, Any] | None = key(
        "the cost options the run was priced with: gpu, gpu_price, gpus, starts_per_month, "
        "storage, storage_usd_per_gb, au_target, mtbf_hours, every_minutes, training_hours, "
        "entered; `report` and `compare` price the run with them unless given others (null: "
        "written before the key; the command line's cost options are read then)"
    )
    sample_hz: float | None = key("the sampler's rate (`--sample-hz`)", lo=0.001, hi=1000)
    cache_mode: str = key(
        "how restarts found the caches (`--cache-mode`: `cold` or `warm`; runs written before "
        "the key: `cold`)",
        "cold",
        choices=("cold", "warm"),
    )
    pack_method: str = key(
        "packed-venv's archive as asked (`--pack-method`: `auto`, `squashfs`, `squashfs-loop`, "
        "`squashfs-fuse`, `squashfs-extract`, `tar+zstd`, `tar`, or several, comma-separated: one "
        "config each; `restore_method` says which ran; runs written before the key: `auto`)",
        "auto",
        check="list",
        choices=tuple(
            "auto squashfs squashfs-loop squashfs-fuse squashfs-extract tar+zstd tar".split()
        ),
    )
    stall_after_s: float | None = key(
        "seconds without progress that open a stall (`--stall-after`)", lo=0, hi=1e7
    )
    stall_timeout_s: float | None = key(
        "a stall this long ends the trial (`--stall-timeout`; null: off)", lo=0, hi=1e7
    )
    trial_timeout_s: float | None = key(
        "wall-clock limit of one trial (`--trial-timeout`)", lo=0, hi=1e7
    )
    give_up_after: float | None = key(
        "`--give-up-after K`: a trial past K x the best median was ended as `censored` (null: "
        "off; docs/early-stop.md)",
        lo=0,
        hi=1e6,
    )
    repeats_auto: dict[str, Any] | None = key(
        "`--repeats auto`: {max, rounds_run, rule, stopped_because} (null: fixed repeats)"
    )
    predicted_s: dict[str, float] = key(
        "time-to-ready per config predicted before the first trial (the figure printed and "
        "reported; trials.csv's predicted_s is re-predicted per trial for the give-up bound)",
        {},
    )
    same_storage: list[list[str]] = key("groups of roles that share one filesystem", [])
    role_notes: list[str] = key("defaults chosen for the roles and facts said at the start", [])
    venv_python: str | None = key("the interpreter the venvs were made with", check="path")
    trusted_owners: list[str] = key(
        "users whose role folders (or folders above them) the run was told to trust "
        "(`--trust-owner`; by default only root's and the running user's)",
        [],
    )
    fleet: dict[str, Any] | None = key(
        "a fleet run (docs/fleet.md): {engine (`mpi` or `fleet-dir`), size, library, sizes "
        "(`--ranks`), stagger_s, workers: [{rank or worker, host, clock_offset_s, rtt_s}]}; "
        "a worker's own folder: {worker, rank, clock_offset_s} (null: a run of one)"
    )
    env: dict[str, str] = key(
        "environment variables the run saw, credentials redacted (iobench/run/facts.py)", {}
    )
    overhead: dict[str, Any] | None = key(
        "iobench's own cost (iobench/run/overhead.py): wall_s (started_at to ended_at), trials_s "
        "(measured), parts_s by cause, before_start_s, report_s, primes, primes_reused, primes_adopted (a cold trial's cache kept as the warm one) (null: "
        "not recorded, as before the key)"
    )
    extra: dict[str, Any] = extra()

    # -------------------------------------------------------------- typed accessors
    @property
    def hostname(self) -> str:
        return self.host.hostname

    @property
    def scenario_name(self) -> str:
        """The scenario's name, or '?' when the meta lacks it."""
        name = self.scenario.get("name")
        return name if isinstance(name, str) and name else "?"

    @property
    def kind(self) -> str:
        """The scenario's workload kind (``install`` for runs made before there were others)."""
        kind = self.scenario.get("kind")
        return kind if isinstance(kind, str) and kind else "install"

    @property
    def config_names(self) -> list[str]:
        """The scenario's configs, in its order."""
        return [
            str(c.get("name")) for c in self.scenario.get("configs") or [] if isinstance(c, dict)
        ]

    @property
    def role_paths(self) -> dict[str, Path]:
        return {name: Path(r.path) for name, r in self.roles.items()}

    @property
    def gpu_info(self) -> GpuInfo | None:
        return GpuInfo.from_meta(self.gpu)

    @property
    def index_kind(self) -> str | None:
        return self.index.kind if self.index is not None else None

    # -------------------------------------------------------------- JSON
    def to_json(self) -> dict[str, Any]:
        """The JSON object written to meta.json (known keys in order, then kept extras)."""
        return encode(self)

    @classmethod
    def from_json(cls, data: object, where: str = "meta.json") -> RunMeta:
        """Validate a parsed meta.json of this version; one RunDirError line naming the key."""
        return decode(cls, data, where)


# ------------------------------------------------------------------ versions
def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added ``order_seed`` (and the ``position`` column, empty in old rows)."""
    return {**data, "schema_version": 2, "order_seed": data.get("order_seed")}


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 renamed trials.csv columns by kind (mapped when trials.csv is read)."""
    return {**data, "schema_version": 3}


#: version -> the step to the next version
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}
#: versions that can no longer be upgraded -> what the user can do instead (none yet)
_REFUSED: dict[int, str] = {}
SUPPORTED_SCHEMA_VERSIONS = (*sorted(_UPGRADES), SCHEMA_VERSION)


def upgrade(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Bring a parsed meta.json of any supported version to SCHEMA_VERSION, or refuse."""
    version = data.get("schema_version")
    if version is None:
        raise RunDirError(f"{where}: no schema_version; not written by iobench run")
    if version in _REFUSED:
        raise RunDirError(
            f"{where}: schema_version {version!r} can no longer be read: {_REFUSED[version]}"
        )
    if isinstance(version, bool) or version not in SUPPORTED_SCHEMA_VERSIONS:
        newer = (
            isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION
        )
        why = "written by a newer iobench; upgrade iobench" if newer else "unknown version"
        supported = ", ".join(map(str, SUPPORTED_SCHEMA_VERSIONS))
        raise RunDirError(
            f"{where}: schema_version {version!r:.20} is not supported (this iobench reads {supported}): {why}"
        )
    while data["schema_version"] != SCHEMA_VERSION:
        data = _UPGRADES[data["schema_version"]](data)
    return data


def parse_meta(data: object, where: str) -> RunMeta:
    """A parsed meta.json of any supported version, upgraded and validated."""
    if not isinstance(data, dict):
        raise RunDirError(f"{where}: expected a JSON object, found {type(data).__name__}")
    return RunMeta.from_json(upgrade(data, where), where)


def load_meta(run_dir: Path) -> RunMeta:
    """Read ``run_dir/meta.json``: the one loader (report, compare and --resume)."""
    path = run_dir / "meta.json"
    if not path.is_file():
        hint = ""
        if run_dir.is_dir():
            if inner := sorted(p.name for p in run_dir.iterdir() if (p / "meta.json").is_file()):
                shown = ", ".join(inner[:5]) + (" ..." if len(inner) > 5 else "")
                hint = f"; it contains run directories ({shown}): pass one of those"
        raise RunDirError(f"{run_dir} is not an iobench run directory (no meta.json){hint}")
    try:
        if path.stat().st_size > MAX_META_BYTES:
            raise RunDirError(
                f"{path}: larger than {MAX_META_BYTES >> 20} MiB; not an iobench meta.json"
            )
        data = json.loads(reading.read_text(path, MAX_META_BYTES), parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: cannot be read ({_one_line(exc)})") from None
    except json.JSONDecodeError as exc:
        raise RunDirError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise RunDirError(f"{path}: not valid JSON ({_one_line(exc)})") from None
    return parse_meta(data, str(path))


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def markdown_keys(record: type = RunMeta, prefix: str = "") -> list[str]:
    """README lines for meta.json's keys, nested records' keys as ``host.machine``."""
    lines = []
    for f in dataclasses.fields(record):
        if f.metadata.get("extra"):
            continue
        hint = hints(record)[f.name]
        inner = [
            a
            for a in (typing.get_args(hint) or (hint,))
            if isinstance(a, type) and dataclasses.is_dataclass(a)
        ]
        if f.name == "roles":
            inner_lines = markdown_keys(RoleInfo, f"{prefix}roles.<role>.")
            lines.append(f"| `{prefix}{f.name}` | {f.metadata['doc']} |")
            lines.extend(inner_lines)
        elif inner:
            lines.append(f"| `{prefix}{f.name}` | {f.metadata['doc']} |")
            lines.extend(markdown_keys(inner[0], f"{prefix}{f.name}."))
        else:
            lines.append(f"| `{prefix}{f.name}` | {f.metadata['doc']} |")
    return lines
