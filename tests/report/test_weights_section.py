"""The weights kind's section (iobench/report/sections/weights.py): the start script's lines for
each way to the weights, in the user's folders, from a run's roles and its source."""

from __future__ import annotations

import math
from types import SimpleNamespace

from iobench.report.sections.weights import MODEL_DIR, ConfigLoads, script


def loads(staged: str = "", method: str = "mmap", readers: int = 1) -> ConfigLoads:
    local = "tmp" if staged else "off"
    return ConfigLoads("c", 1, "target", local, staged, method, readers, *[math.nan] * 8)


def ctx(source: str = "") -> SimpleNamespace:
    roles = {"target": SimpleNamespace(path="/workspace"), "tmp": SimpleNamespace(path="/dev/shm")}
    workload = {"source": source} if source else {}
    return SimpleNamespace(meta=SimpleNamespace(roles=roles, scenario={"workload": workload}))


def test_each_way_to_the_weights_is_its_start_script() -> None:
    assert script(ctx(), loads()) == [  # type: ignore[arg-type]
        "export HF_HOME=/workspace/huggingface  # the weights stay on the volume"
    ]
    assert script(ctx(), loads("copy")) == [  # type: ignore[arg-type]
        "mkdir -p /dev/shm/huggingface/hub",
        f"cp -a /workspace/huggingface/hub/{MODEL_DIR} /dev/shm/huggingface/hub/",
        "export HF_HOME=/dev/shm/huggingface",
    ]
    packed = script(ctx(), loads("packed"))  # type: ignore[arg-type]
    assert packed[0] == (f"# once, after the download: tar -cf /workspace/huggingface/{MODEL_DIR}.tar "
                         f"-C /workspace/huggingface hub/{MODEL_DIR}")  # fmt: skip
    assert packed[1:] == ["mkdir -p /dev/shm/huggingface",
                          f"tar -xf /workspace/huggingface/{MODEL_DIR}.tar -C /dev/shm/huggingface",
                          "export HF_HOME=/dev/shm/huggingface"]  # fmt: skip
    many = script(ctx(), loads(method="concurrent", readers=16))  # type: ignore[arg-type]
    assert "export RUNAI_STREAMER_CONCURRENCY=16  # 16 readers at once" in many
    assert any("safetensors.torch.load" in x for x in script(ctx(), loads(method="sequential")))  # type: ignore[arg-type]


def test_a_source_s_own_folders_are_named() -> None:
    repo = "/workspace/hf/hub/models--meta-llama--Llama-3.2-3B"
    for source in (repo, repo + "/snapshots/0cb88a4f"):
        assert script(ctx(source), loads("copy"))[1] == (  # type: ignore[arg-type]
            f"cp -a {repo} /dev/shm/huggingface/hub/"
        )
    plain = script(ctx("/workspace/models/sdxl"), loads())  # type: ignore[arg-type]
    assert plain == ["export MODEL_DIR=/workspace/models/sdxl  # the weights stay on the volume"]
    assert script(ctx("/workspace/models/sdxl"), loads("copy"))[1:] == [  # type: ignore[arg-type]
        "cp -a /workspace/models/sdxl /dev/shm/models/",
        "export MODEL_DIR=/dev/shm/models/sdxl",
    ]
