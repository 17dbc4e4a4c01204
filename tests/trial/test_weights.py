"""The weights workload (iobench/trial/kinds/weights.py, its loader iobench/trial/kinds/weights_loader.py,
its settings iobench/scenario/kinds/weights.py): the model's shape by hand, the cache entry
as huggingface_hub lays it out, the three loaders against safetensors' own and against the
generator's checksums, a corrupted byte caught, and real runs on a tmpfs, the disk and the lab
volume — the volume's own counters read the whole model, the read rate against a cap, the
loader on a tmpfs far faster than any preset."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers.files import only_run_dir, read_csv
from helpers.lab import needs_fuse, volume_factory
from helpers.standin import scratch_left
from safetensors import safe_open

from iobench.__main__ import main
from iobench.errors import ScenarioError
from iobench.lab.state import read_stats
from iobench.report import build_report
from iobench.scenario.kinds.weights import Settings
from iobench.scenario.load import load_scenario
from iobench.trial.kinds import weights
from iobench.trial.kinds import weights_loader as loader

volume = pytest.fixture(volume_factory)

#: a 2.0 MB model in 4 files: 64 wide, 8 layers (the embedding and the head each a file)
TINY = Settings(model_mb=2, hidden=64, vocab=4096, shard_mb=0.5, readers=3, read_mb=0.1)
#: a 12 MB model in 3 files, read in 256 kB requests
SMALL = """[workload]
model_mb = 12
hidden = 256
vocab = 4000
shard_mb = 5
read_mb = 0.25
readers = 4

[workload.by_config.read-ahead]
load = "sequential"

[workload.by_config.concurrent]
load = "concurrent"
"""
CONFIGS = """
[configs.in-place]
weights = "target"

[configs.read-ahead]
weights = "target"

[configs.concurrent]
weights = "target"

[configs.copy-first]
weights = "target"
copy_to = "tmp"

[configs.packed]
weights = "target"
copy_to = "tmp"
pack = "tar"
"""


def run(tmp_path: Path, target: Path, tmp: Path, *options: str, workload: str = SMALL,
        configs: str = CONFIGS, repeats: int = 1) -> tuple[int, Path]:  # fmt: skip
    path = tmp_path / "w.toml"
    path.write_text(f'[scenario]\nname = "w"\nkind = "weights"\nrepeats = {repeats}\n'
                    f"{workload}\n{configs}")  # fmt: skip
    results = tmp_path / "results"
    rc = main(["run", "--scenario", str(path), "--target", str(target), "--tmp", str(tmp),
               "--results", str(results), "--no-report", "--quiet", *options])  # fmt: skip
    return rc, only_run_dir(results)


# ------------------------------------------------------------------------------ pure parts


def test_the_model_has_a_llama_s_layers_in_shards_of_at_most_shard_mb() -> None:
    p = Settings(shard_mb=160)
    # embedding and head 2 x 32,000 x 1,024; 8 layers of 11,274,240 weights; fp16
    assert (p.intermediate, p.layers, len(p.tensors())) == (2816, 8, 75)
    assert p.mb * 1e6 == 2 * (2 * 32_000 * 1024 + 1024 + 8 * 11_274_240) == 311_461_888
    assert [len(s) for s in p.shards()] == [41, 34]
    names = [n for n, _ in p.tensors()]
    assert names[:3] == ["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                         "model.layers.0.self_attn.q_proj.weight"]  # fmt: skip
    assert names[-2:] == ["model.norm.weight", "lm_head.weight"]
    assert dict(p.layer(0))["model.layers.0.self_attn.k_proj.weight"] == (256, 1024)  # 4:1 GQA
    large = load_scenario("weights-large").workload
    big = Settings(**{k: v for k, v in large.items() if k != "by_config"})
    assert (big.intermediate, big.layers) == (8192, 27) and 6900 < big.mb < 7000
    assert len(big.shards()) == 2 and load_scenario("weights").size_mb == pytest.approx(
        311.46, abs=0.01
    )


def test_settings_and_configs_are_checked_before_anything_runs(tmp_path: Path) -> None:
    def load(workload: str, configs: str = '[configs.a]\nweights = "target"\n') -> object:
        path = tmp_path / "x.toml"
        path.write_text(f'[scenario]\nname = "x"\nkind = "weights"\n{workload}\n{configs}')
        scenario = load_scenario(str(path))
        weights.check_here(scenario.workload, [c.name for c in scenario.configs], "x: workload")
        return scenario

    cfg = load("").configs[0]  # type: ignore[attr-defined]
    assert cfg.roles() == {"target"} and (cfg.copy_to, cfg.pack) == ("off", "off")
    packed = load("", '[configs.a]\nweights = "target"\ncopy_to = "tmp"\npack = "tar"\n')
    assert packed.configs[0].summary() == "weights=target copy_to=tmp pack=tar"  # type: ignore[attr-defined]
    for bad, says in [
        ("[workload]\nload = 'stream'\n", "workload.load: expected one of mmap"),
        ("[workload]\nreaders = 0\n", "workload.readers: expected a number from 1"),
        ("[workload]\ndtype = 'bfloat16'\n", "workload.dtype: expected one of float16"),
        ("[workload]\nsource = 'models'\n", "workload.source: expected an absolute path"),
        (f"[workload]\nsource = '{tmp_path}/none'\n", "is not a folder"),
        ("[workload.by_config.b]\nreaders = 4\n", "workload.by_config.b: no such config"),
    ]:
        with pytest.raises(ScenarioError, match=says):
            load(bad)
    for configs, says in [
        ('[configs.a]\ndata = "target"\n', "unknown key"),
        ('[configs.a]\nweights = "tmp"\ncopy_to = "tmp"\n', "where the weights already are"),
        ('[configs.a]\nweights = "target"\npack = "tar"\n', "a packed copy is restored to a role"),
        ('[configs.a]\nweights = "target"\ncopy_to = "tmp"\npack = "zip"\n', "not one of off, tar"),
    ]:
        with pytest.raises(ScenarioError, match=says):
            load("", configs)


def test_the_cache_entry_is_laid_out_as_huggingface_hub_does(tmp_path: Path) -> None:
    model = weights.generate(tmp_path / "hf", TINY)
    repo, snap = model.root, model.snapshot
    assert repo.parent == tmp_path / "hf" / "hub" and repo.name.startswith("models--iobench--")
    assert (repo / "refs" / "main").read_text() == snap.name and len(snap.name) == 40
    names = sorted(p.name for p in snap.iterdir())
    shards = weights.shard_names(len(TINY.shards()))
    assert len(shards) == 4 and names == sorted([*shards, "config.json", loader.INDEX])
    for p in snap.iterdir():  # every file a relative link into blobs/, as the hub makes them
        assert p.is_symlink() and os.readlink(p).startswith("../../blobs/") and p.is_file()
    index = json.loads((snap / loader.INDEX).read_text())
    assert list(index["weight_map"]) == sorted(index["weight_map"])  # sorted, as transformers
    assert index["metadata"]["total_size"] == round(TINY.mb * 1e6)
    config = json.loads((snap / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"]) == (TINY.layers, 64)
    with safe_open(str(snap / shards[0]), framework="np") as f:
        assert f.metadata() == {"format": "pt"}
        embed = f.get_tensor("model.embed_tokens.weight")
    assert embed.shape == (4096, 64) and embed.dtype == np.float16
    assert 0.015 < float(embed.astype(np.float32).std()) < 0.025  # N(0, 0.02), as trained
    assert weights.find_model(tmp_path / "hf") == model  # an HF_HOME
    assert weights.find_model(repo) == model and weights.find_model(snap).snapshot == snap
    manifest = json.loads((tmp_path / "hf" / weights.MANIFEST).read_text())["tensors"]
    assert len(manifest) == len(TINY.tensors()) and (tmp_path / "hf" / ".complete").exists()


def _loader(mode: str, settings: dict, out: Path) -> subprocess.CompletedProcess[str]:
    spec = out.with_suffix(".settings.json")
    spec.write_text(json.dumps(settings))
    return subprocess.run([sys.executable, "-I", str(weights.LOADER), mode, str(spec), str(out)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_every_loader_gives_safetensors_own_tensors_and_a_changed_bit_is_named(
    tmp_path: Path,
) -> None:
    model = weights.generate(tmp_path / "hf", TINY)
    manifest = tmp_path / "hf" / weights.MANIFEST
    base = {"folder": str(model.snapshot), "manifest": str(manifest), "readers": 3,
            "read_bytes": 4096 * 7, "framework": "numpy"}  # fmt: skip
    for method in ("mmap", "sequential", "concurrent"):
        r = _loader("load", {**base, "load": method}, tmp_path / f"{method}.json")
        assert r.returncode == 0, r.stderr
        rec = json.loads((tmp_path / f"{method}.json").read_text())
        assert rec["verified"] == f"crc32 of all {len(TINY.tensors())} tensors"
        assert rec["tensors"] == len(TINY.tensors()) and rec["bytes"] == round(TINY.mb * 1e6)
        assert rec["readers"] == (3 if method == "concurrent" else 1) and rec["end"] > rec["go"]
    # the buffer loaders' views are exactly safe_open's tensors
    buffers = loader.read_files(str(model.snapshot), 3, 4096 * 5)
    mine = loader.tensors_from(buffers, None)
    files, order = loader.plan(str(model.snapshot))
    assert order is not None and len(files) == 4 and [n for n, _ in order] == sorted(mine)
    for name, f in order:
        with safe_open(str(model.snapshot / f), framework="np") as h:
            theirs = h.get_tensor(name)
        assert theirs.shape == mine[name].shape and np.array_equal(theirs, mine[name])
    # the source's manifest, read by its headers, is the generator's
    r = _loader("manifest", {"folder": str(model.snapshot)}, tmp_path / "m.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "m.json").read_text()) == json.loads(manifest.read_text())
    blob = (model.snapshot / files[2]).resolve()
    data = bytearray(blob.read_bytes())
    data[-100] ^= 0x01  # one bit of the file's last tensor
    blob.write_bytes(bytes(data))
    for method in ("mmap", "concurrent"):
        bad = _loader("load", {**base, "load": method}, tmp_path / "bad.json")
        assert bad.returncode == 3 and "crc32" in bad.stderr, bad.stderr
        assert any(n in bad.stderr for n, f in order if f == files[2])


# ------------------------------------------------------------------------------ real runs


def check_rows(run_dir: Path, nbytes: int, tensors: int) -> dict[str, dict[str, str]]:
    """Every ok row's figures agree with the loader's record and with each other."""
    rows = read_csv(run_dir / "trials.csv")
    assert rows and all(r["status"] == "ok" for r in rows), rows
    for r in rows:
        rec = json.loads((run_dir / "logs" / f"{r['trial_id']}.load.json").read_text())
        assert int(r["weights_bytes"]) == rec["file_bytes"] and rec["bytes"] == nbytes
        assert (
            int(r["tensors"]) == tensors
            and r["tensors_checked"] == f"crc32 of all {tensors} tensors"
        )
        load_s = float(r["load_s"])
        assert load_s == pytest.approx(rec["end"] - rec["go"], abs=1e-3)
        copy = float(r["local_copy_s"] or 0)
        assert float(r["time_to_ready_s"]) == pytest.approx(copy + load_s, abs=2e-3)
        assert bool(r["local_copy_s"]) == (r["local_role"] != "off") == bool(r["staged"])
        assert r["framework"] == "numpy" and r["cold_method"] in (
            "lab-flush",
            "drop_caches",
            "fadvise",
        )
        assert r["venv_s"] == "" and "save_role" not in r  # its row: the core and its own
    return {r["trial_id"]: r for r in rows}


def test_weights_run_on_the_disk_and_a_tmpfs_then_its_report(
    tmp_path: Path, tmpfs, disk_dir: Path
) -> None:
    fast = tmpfs(size="256m")
    rc, run_dir = run(tmp_path, disk_dir, fast, "--gpu-price", "2", repeats=2)
    assert rc == 0
    p = Settings(model_mb=12, hidden=256, vocab=4000, shard_mb=5)
    by = check_rows(run_dir, round(p.mb * 1e6), len(p.tensors()))
    assert by["copy-first-r1"]["local_fstype"] == "tmpfs" and by["packed-r1"]["staged"] == "packed"
    assert (
        by["concurrent-r1"]["readers"] == "4" and by["read-ahead-r1"]["load_method"] == "sequential"
    )
    assert by["in-place-r1"]["weight_files"] == "3" and by["in-place-r1"]["volume_read_bytes"] == ""
    assert scratch_left(disk_dir, fast) == {str(disk_dir): set(), str(fast): set()}
    report = build_report(run_dir, cost=None)
    text = "\n".join(report.section_lines)
    assert "Model weights (12 MB in 3 files" in text and "unpack a tar to tmp, then mmap" in text
    html = (run_dir / "report.html").read_text()
    assert 'id="weights"' in html and "time to weights in memory" in html
    assert (run_dir / "weights.png").stat().st_size > 10_000
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["measure"] == {"name": "time to weights in memory", "unit": "s"}
    assert any(line.startswith("A month of 30 starts") for line in summary["advice"])


@pytest.mark.timing  # a rate: a loaded machine slows the reader
def test_the_loader_on_a_tmpfs_is_far_faster_than_any_preset(tmp_path: Path, tmpfs) -> None:
    """The harness is not the limit: the buffer loaders on a tmpfs against EFS Elastic's
    per-client ceiling, 1,500 MiB/s (1,573 MB/s), the fastest preset."""
    fast, other = tmpfs(size="1g"), tmpfs(size="8m", name="other")
    workload = "[workload]\nshard_mb = 160\n[workload.by_config.b]\nload = 'sequential'\n"
    workload += "[workload.by_config.c]\nload = 'concurrent'\n"
    configs = '[configs.b]\nweights = "target"\n[configs.c]\nweights = "target"\n'
    rc, run_dir = run(tmp_path, fast, other, workload=workload, configs=configs, repeats=3)
    assert rc == 0
    rows = read_csv(run_dir / "trials.csv")
    rates = {c: sorted(float(r["load_mb_per_s"]) for r in rows if r["config"] == c) for c in "bc"}
    print(f"tmpfs loads, 311 MB (MB/s): {rates}; load {os.getloadavg()}")
    assert max(rates["b"]) > 1573 and max(rates["c"]) > 1573, rates


@needs_fuse
def test_a_cold_load_reads_the_whole_model_from_the_lab_volume(tmp_path: Path, volume) -> None:
    mnt = volume("w")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    time.sleep(0.3)
    before = read_stats(mnt) or {}
    rc, run_dir = run(tmp_path, mnt, tmp)
    assert rc == 0
    p = Settings(model_mb=12, hidden=256, vocab=4000, shard_mb=5)
    by = check_rows(run_dir, round(p.mb * 1e6), len(p.tensors()))
    time.sleep(0.6)  # the daemon refreshes its live counters every 0.25 s
    after = read_stats(mnt)
    assert after is not None
    size = int(by["in-place-r1"]["weights_bytes"])
    for r in by.values():  # each config read the model (or its archive) from the volume
        assert r["cold_method"] == "lab-flush" and r["weights_fstype"] == "fuse.iobench-lab"
        assert size <= int(r["volume_read_bytes"]) <= size * 1.1, r
    assert int(by["in-place-r1"]["major_faults"]) > 0  # mapped pages the volume served
    # the daemon's own count: the five loads, besides the generator's and packer's reads
    assert after["bytes_read"] - before.get("bytes_read", 0) >= 5 * size


@needs_fuse
@pytest.mark.timing  # rates through the lab's byte link
def test_the_read_rate_on_a_capped_lab_volume_stays_near_the_cap(tmp_path: Path, volume) -> None:
    mnt = volume("cap", mb_per_s=50)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    workload = "[workload]\nmodel_mb = 40\nhidden = 256\nvocab = 4000\nshard_mb = 10\nreaders = 8\n"
    workload += "[workload.by_config.concurrent]\nload = 'concurrent'\n"
    configs = '[configs.in-place]\nweights = "target"\n[configs.concurrent]\nweights = "target"\n'
    configs += '[configs.copy-first]\nweights = "target"\ncopy_to = "tmp"\n'
    rc, run_dir = run(tmp_path, mnt, tmp, workload=workload, configs=configs)
    assert rc == 0
    rows = {r["config"]: r for r in read_csv(run_dir / "trials.csv")}
    rates = {c: float(r["volume_mb_per_s"]) for c, r in rows.items()}
    print(f"capped at 50 MB/s, volume read rate (MB/s): {rates}; load {os.getloadavg()}")
    for c in ("concurrent", "copy-first"):
        assert 0.7 * 50 <= rates[c] <= 1.1 * 50, rates
    assert rates["in-place"] <= 1.1 * 50, rates  # never faster than the link


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torch_s_tensors_are_read_before_the_clock_stops(tmp_path: Path) -> None:
    """safe_open's torch tensors are views of the mapped file: the loader copies them, so the
    time is the reads' (the check, after the clock, would else read them)."""
    model = weights.generate(tmp_path / "hf", TINY)
    base = {"folder": str(model.snapshot), "manifest": str(tmp_path / "hf" / weights.MANIFEST),
            "readers": 3, "read_bytes": 4096 * 7, "framework": "torch"}  # fmt: skip
    for method in ("mmap", "sequential", "concurrent"):
        r = _loader("load", {**base, "load": method}, tmp_path / f"{method}.json")
        assert r.returncode == 0, r.stderr
        rec = json.loads((tmp_path / f"{method}.json").read_text())
        assert rec["framework"] == "torch" and rec["torch"] and rec["verified"].startswith("crc32")
