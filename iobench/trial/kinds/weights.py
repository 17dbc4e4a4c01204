"""The ``weights`` workload: what loading a model's weights costs at a pod's start, on a role.

A pod serving a model is ready when its weights are in memory. They sit in a Hugging Face
cache on the network volume (``HF_HOME``) and are read again at every start. A trial loads
every tensor cold, in a process of its own (``weights_loader.py``, as a server does):
memory-mapped in place (safetensors' ``safe_open``, tensor by tensor in the index's order),
read whole file by file, or by many readers at once (the streamers' way); or after copying
the model's folder to a local role, or restoring a packed copy of it kept on the volume.
Every tensor's bytes are then checked against the generator's (untimed).

Untimed, before measuring: the model is generated once per run and role with the real
``safetensors`` library — a cache entry as ``huggingface_hub`` lays it out (``blobs/`` holding
the files, ``snapshots/<revision>/`` linking to them, ``refs/main``), with ``config.json``,
``model-0000N-of-0000M.safetensors`` shards and ``model.safetensors.index.json``, its tensors in
the shapes and sizes of a Llama-family model's layers (``iobench.scenario.kinds.weights``),
their values fp16 draws of a normal distribution as trained weights have — or ``source`` names
a real model's folder, only ever read. A packing config's archive is made once beside it.
Then the model (or the archive) is made cold as a restart is (``iobench.trial.coldcache``).
Timed: the copy (``cp -a``) or the restore (``tar -x``) when the config has one, then the load.
The row says how long until the weights were in memory, the bytes the volume served (a lab
volume's own counters) and its rate, and the loader's major page faults.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from iobench import files
from iobench.errors import IOBenchError, ScenarioError
from iobench.rundir.kinds import weights as rows
from iobench.scenario.kinds.weights import Settings, settings_of
from iobench.system.scratch import remove
from iobench.trial import coldcache
from iobench.trial.outcome import Stop, check
from iobench.trial.sampler import SamplerResult
from iobench.trial.steps import Step, Trial

#: the loader script (run by path: it imports nothing of iobench)
LOADER = Path(__file__).with_name("weights_loader.py")
#: the model a run generates lives in its role's scratch under this name (one per settings)
MODEL_PREFIX = "weights-"
#: the generator's record of every tensor's crc32 and size, beside ``hub/`` in its HF_HOME
MANIFEST = "iobench-manifest.json"
ORG = "iobench"
_STEP = 7919  # a prime: each tensor its own offset into the generated values

NAME = rows.NAME


@dataclass(frozen=True)
class Model:
    """A model's folder: ``root`` is what a copy or a pack takes (``models--org--name``, or a
    plain folder), ``snapshot`` what the loader reads (inside it)."""

    root: Path
    snapshot: Path

    def relative(self) -> Path:
        """The snapshot's path from the root's parent: where a copy puts it."""
        return self.snapshot.relative_to(self.root.parent)


def find_model(source: Path) -> Model:
    """The model in ``source``: an HF_HOME (one model under ``hub/``), a ``models--org--name``
    folder (its ``refs/main`` snapshot, else its newest), or a folder of safetensors files."""
    if not source.is_dir():
        raise ScenarioError(f"workload.source: {source} is not a folder")
    if (source / "hub").is_dir():
        repos = sorted((source / "hub").glob("models--*"))
        if len(repos) != 1:
            raise ScenarioError(f"workload.source: {source}/hub holds {len(repos)} models; "
                                "name one model's folder (hub/models--ORG--NAME)")  # fmt: skip
        source = repos[0]
    snaps = source / "snapshots"
    if snaps.is_dir():
        ref = source / "refs" / "main"
        rev = ref.read_text().strip() if ref.is_file() else ""
        found = sorted((d for d in snaps.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime)
        snap = snaps / rev if rev and (snaps / rev).is_dir() else (found[-1] if found else None)
        if snap is None:
            raise ScenarioError(f"workload.source: {snaps} holds no snapshot")
        return Model(source, snap)
    return Model(source, source)


def check_here(table: Mapping[str, Any], configs: Sequence[str], where: str) -> None:
    """The source folder holds a model and the loader's interpreter runs here, every config."""
    for name in configs:
        p = settings_of(table, name, where)
        if p.source:
            find_model(Path(p.source))
        if p.python and not os.access(p.python, os.X_OK):
            raise ScenarioError(f"{where}.python: {p.python} is not an executable interpreter")


# ---------------------------------------------------------------------------------- the model


def values(p: Settings, count: int) -> np.ndarray:
    """``count`` weights drawn from N(0, 0.02), trained weights' scale, in the model's dtype."""
    rng = np.random.default_rng(p.seed)
    out = np.empty(count, dtype=p.dtype)
    step = 1 << 23
    for at in range(0, count, step):
        n = min(step, count - at)
        out[at : at + n] = rng.standard_normal(n, dtype=np.float32) * 0.02
    return out


def _git_sha1(data: bytes) -> str:
    """A small file's blob name in an HF cache: its git object id."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _add(repo: Path, snap: Path, name: str, data: bytes) -> None:
    """A small file as a blob, linked from the snapshot."""
    blob = _git_sha1(data)
    files.write(repo / "blobs" / blob, data)
    os.symlink(f"../../blobs/{blob}", snap / name)


def shard_names(n: int) -> list[str]:
    return ["model.safetensors"] if n == 1 else [
        f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]  # fmt: skip


def generate(home: Path, p: Settings) -> Model:
    """Write the model as an HF cache entry under ``home`` (an HF_HOME inside iobench's
    scratch) and its manifest; a ``.complete`` marker last, so a stopped run makes it again.

    Each tensor is a view of one array of drawn values at its own offset (nothing is copied
    to write it); a shard's blob is named by a digest of its tensors' names and crc32s (the
    file's sha256 would read the whole model back through the volume)."""
    from safetensors.numpy import save_file

    tensors, shards = p.tensors(), p.shards()
    largest = max(math.prod(s) for _, s in tensors)
    pool = values(p, largest + (64 << 20) // p.itemsize)
    repo = home / "hub" / f"models--{ORG}--synthetic-{p.model_key()}"
    rev = hashlib.sha1(p.model_key().encode()).hexdigest()
    snap = repo / "snapshots" / rev
    files.make_folders(repo / "blobs")
    files.make_folders(snap)
    files.make_folders(repo / "refs")
    crcs: dict[str, list[int]] = {}
    weight_map: dict[str, str] = {}
    names = shard_names(len(shards))
    i = 0
    for fname, shard in zip(names, shards, strict=True):
        arrays = {}
        for tname, shape in shard:
            n = math.prod(shape)
            at = (i * _STEP) % (len(pool) - n + 1)
            arrays[tname] = pool[at : at + n].reshape(shape)
            crcs[tname] = [zlib.crc32(pool[at : at + n].view(np.uint8).data), n * p.itemsize]
            weight_map[tname] = fname
            i += 1
        part = repo / "blobs" / f".incomplete-{fname}"
        save_file(arrays, str(part), metadata={"format": "pt"})
        blob = hashlib.sha256(json.dumps(sorted((k, crcs[k]) for k in arrays)).encode()).hexdigest()
        os.replace(part, repo / "blobs" / blob)
        os.symlink(f"../../blobs/{blob}", snap / fname)
    total = sum(n for _, n in crcs.values())
    if len(shards) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        _add(repo, snap, "model.safetensors.index.json", json.dumps(index, indent=2).encode())
    _add(repo, snap, "config.json", json.dumps(model_config(p), indent=2).encode())
    files.write(repo / "refs" / "main", rev)
    files.write(home / MANIFEST, json.dumps({"tensors": crcs}))
    files.fresh(home / ".complete")
    return Model(repo, snap)


def model_config(p: Settings) -> dict[str, Any]:
    """config.json of a Llama-family model of these settings."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": p.hidden, "intermediate_size": p.intermediate,
            "num_hidden_layers": p.layers, "num_attention_heads": max(1, p.hidden // 128),
            "num_key_value_heads": max(1, p.hidden // 512), "vocab_size": p.vocab,
            "torch_dtype": p.dtype, "tie_word_embeddings": False}  # fmt: skip


def _untimed(argv: list[str], timeout: float, what: str) -> None:
    """A preparation step as a process of its own (bounded); IOBenchError when it fails."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise IOBenchError(f"{what}: still running after {timeout:.0f} s") from None
    if r.returncode != 0:
        raise IOBenchError(f"{what} failed (exit {r.returncode}): {r.stderr.strip()[-400:]}")


# ---------------------------------------------------------------------------------- the trial


class Weights:
    """One weights trial: the model made cold, an optional copy or restore, then the load."""

    kind: ClassVar[str] = NAME

    def __init__(self) -> None:
        self.params = Settings()
        self.model = Model(Path(), Path())
        self.manifest = Path()
        self.archive: Path | None = None  # the packed copy on the weights' role
        self.local: Path | None = None  # the trial's folder on the local role
        self.read_from = Path()  # the snapshot the loader reads
        self.record = Path()
        self.before: dict[str, Any] | None = None  # the volume's counters before the timed part
        self.stage_s: float | None = None

    def prepare(self, t: Trial) -> Stop | None:
        p = self.params = settings_of(t.ctx.params, t.cfg.name, "workload")
        if p.python and not os.access(p.python, os.X_OK):
            return Stop("failed", f"workload.python: {p.python} is not executable")
        try:
            self.model, self.manifest = self._model(t)
            if t.cfg.pack != "off":
                self.archive = self._packed(t)
            cold = coldcache.make_cold(self.archive or self.model.root, t.ctx.cache_mode)
        except IOBenchError as exc:
            return Stop("failed", f"preparing the weights: {exc}")
        if t.cfg.copy_to != "off":
            self.local = t.dirs[t.cfg.copy_to]
        self.read_from = self.local / self.model.relative() if self.local else self.model.snapshot
        t.env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TMPDIR": str(t.ctx.cwd)}
        row = t.row
        row.weights_role, row.local_role = t.cfg.weights, t.cfg.copy_to
        row.weights_fstype = t.fstype(self.model.root) or t.ctx.fstypes.get(t.cfg.weights, "")
        if self.local is not None:
            row.local_fstype = t.fstype(self.local) or t.ctx.fstypes.get(t.cfg.copy_to, "")
            row.staged = "packed" if self.archive else "copy"
        row.load_method = p.load
        row.readers = p.readers if p.load == "concurrent" else 1
        row.cold_method, row.cold_warm_left = cold.method, cold.warm_left
        t.watch_credits(self.model.root)
        t.phases = dict.fromkeys(t.phases)  # an install's phases: none of them ran
        self.record = t.ctx.logs / f"{t.tid}.load.json"
        self.before = coldcache.lab_counters(self.model.root)
        return None

    def _model(self, t: Trial) -> tuple[Model, Path]:
        """The model (generated once per run on the weights' role, or the source) and its
        manifest (a source's made once per run, in the run's logs)."""
        p = self.params
        if p.source:
            model = find_model(Path(p.source))
            key = hashlib.sha1(str(model.root).encode()).hexdigest()[:12]
            manifest = t.ctx.logs / f"weights-source-{key}.json"
            if not manifest.is_file():
                t.message(f"reading {model.snapshot} once for its tensors' checksums")
                spec = t.ctx.logs / f"weights-source-{key}-settings.json"
                files.write(spec, json.dumps({"folder": str(model.snapshot)}))
                argv = [sys.executable, "-I", str(LOADER), "manifest", str(spec), str(manifest)]
                _untimed(argv, t.ctx.trial_timeout_s, "reading the source's tensors")
            return model, manifest
        home = t.ctx.scratch[t.cfg.weights].run_root / f"{MODEL_PREFIX}{p.model_key()}"
        if not (home / ".complete").exists():
            t.message(f"generating a {p.mb:,.0f} MB model ({len(p.shards())} files, "
                      f"{len(p.tensors())} tensors) on {t.cfg.weights}")  # fmt: skip
            remove(home)  # a stopped run's half-made model (inside this run's own scratch)
            return generate(home, p), home / MANIFEST
        repo = next((home / "hub").glob(f"models--{ORG}--*"))
        return find_model(repo), home / MANIFEST

    def _packed(self, t: Trial) -> Path:
        """The model's folder as one tar archive beside it on the weights' role (made once)."""
        root = self.model.root
        name = f"{MODEL_PREFIX}{hashlib.sha1(str(root).encode()).hexdigest()[:12]}.tar"
        archive = t.ctx.scratch[t.cfg.weights].run_root / name
        if not archive.exists():
            t.message(f"packing the model into {archive.name} on {t.cfg.weights}")
            part = archive.with_name(f".{archive.name}.part")
            argv = ["tar", "-cf", str(part), "-C", str(root.parent), root.name]
            _untimed(argv, t.ctx.trial_timeout_s, "packing the model")
            os.replace(part, archive)
        return archive

    def fs_paths(self, t: Trial) -> dict[str, Path]:
        return {}

    def timed(self) -> Sequence[Step]:
        return (self.stage, self.load)

    def stage(self, t: Trial) -> Stop | None:
        if self.local is None:
            return None
        if self.archive is not None:
            argv, what = ["tar", "-xf", str(self.archive), "-C", str(self.local)], "restore"
        else:
            argv, what = ["cp", "-a", "--", str(self.model.root), f"{self.local}/"], "copy"
        r = t.phase(what, argv)
        self.stage_s = r.seconds
        return check(r, f"the weights' {what} to {t.cfg.copy_to}")

    def load(self, t: Trial) -> Stop | None:
        p = self.params
        spec = t.ctx.logs / f"{t.tid}.load-settings.json"
        files.write(spec, json.dumps({
            "folder": str(self.read_from), "manifest": str(self.manifest), "load": p.load,
            "readers": p.readers, "read_bytes": max(4096, round(p.read_mb * 1e6) // 4096 * 4096),
            "framework": p.framework, "zero": t.t0,
        }))  # fmt: skip
        python = p.python or sys.executable
        r = t.phase("load", [python, "-I", str(LOADER), "load", str(spec), str(self.record)])
        stop = check(r, "loading the weights")
        t.mark_ready(t.t0 + float(self._record()["end"]) if stop is None else r.end)
        return stop

    def _record(self) -> dict[str, Any]:
        return json.loads(self.record.read_text())

    def measured(self, t: Trial, result: SamplerResult) -> None:
        rec, row = self._record(), t.row
        row.framework = rec["framework"] + (f" {rec['torch']}" if rec.get("torch") else "")
        row.weight_files, row.tensors = len(rec["files"]), int(rec["tensors"])
        row.weights_bytes = int(rec["file_bytes"])
        row.load_s = max(0.0, float(rec["end"]) - float(rec["go"]))
        row.load_mb_per_s = row.weights_bytes / 1e6 / row.load_s if row.load_s > 0 else None
        row.major_faults = int(rec["major_faults"])
        row.tensors_checked = str(rec.get("verified", ""))
        row.local_copy_s = self.stage_s
        row.time_to_ready_s = (self.stage_s or 0.0) + row.load_s
        after = coldcache.lab_counters(self.model.root) if self.before is not None else None
        if self.before is not None and after is not None:
            row.volume_read_bytes = coldcache.target_reads(self.before, after)["bytes_read"]
            reading = self.stage_s if self.stage_s is not None else row.load_s
            row.volume_mb_per_s = row.volume_read_bytes / 1e6 / reading if reading else None

    def after(self, t: Trial, stop: Stop | None) -> None:
        return None


__all__ = ["LOADER", "NAME", "Model", "Weights", "check_here", "find_model", "generate",
           "shard_names", "values"]  # fmt: skip
