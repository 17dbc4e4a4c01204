"""recommend.py: the variables a start script sets for each installer and placement."""

from __future__ import annotations

from iobench.report.recommend import env_for


def test_env_for_each_installer_and_placement() -> None:
    roles = {
        "target": {"path": "/workspace", "device": "nfs:/vol", "mountpoint": "/workspace"},
        "tmp": {"path": "/tmp", "device": "overlay", "mountpoint": "/"},
    }
    pairs, notes = env_for({"installer": "pip", "venv_role": "tmp", "tmpdir_role": "tmp",
                            "cache_role": "off", "compile": "off", "cache_state": "cold"}, roles)  # fmt: skip
    assert pairs == [("VIRTUAL_ENV", "/tmp/venv"), ("TMPDIR", "/tmp"),
                     ("PIP_NO_CACHE_DIR", "1"), ("PIP_NO_COMPILE", "1")]  # fmt: skip
    pairs, notes = env_for({"installer": "uv", "venv_role": "tmp", "tmpdir_role": "tmp",
                            "cache_role": "target", "compile": "on", "cache_state": "warm"}, roles)  # fmt: skip
    assert ("UV_CACHE_DIR", "/workspace/uv-cache") in pairs and ("UV_LINK_MODE", "copy") in pairs
    assert ("UV_COMPILE_BYTECODE", "1") in pairs
    assert any("hard-link" in n for n in notes)
    pairs, _ = env_for({"installer": "pip", "venv_role": "scratch", "tmpdir_role": "tmp",
                        "cache_role": "tmp", "compile": "on"}, roles)  # fmt: skip
    assert ("VIRTUAL_ENV", "/scratch/venv") in pairs and (
        "PIP_CACHE_DIR",
        "/tmp/pip-cache",
    ) in pairs
