"""``--kind fuse``: the Python FUSE passthrough of :mod:`iobench.lab.fs`, with added delays,
run as a detached daemon (``python -m iobench.lab.daemon``)."""

from __future__ import annotations

import ctypes.util
import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path

from iobench.lab import system
from iobench.lab.options import VolumeOptions
from iobench.lab.state import LabMount

#: the daemon's configuration, in the volume's state folder (iobench.lab.daemon reads it)
DAEMON_CONFIG = "daemon.json"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


class FuseKind:
    """The default kind: every delay and cap of :class:`~iobench.lab.options.VolumeOptions`."""

    name = "fuse"
    fstype = "fuse.iobench-lab"

    def unavailable(self) -> str | None:
        if ctypes.util.find_library("fuse3") is None:
            return "libfuse3 is missing (apt-get install libfuse3-3)"
        if importlib.util.find_spec("mfusepy") is None:
            # the interpreter running iobench, whatever pip is first on PATH
            return (
                f"mfusepy is missing ({shlex.quote(sys.executable)} -m pip install 'iobench[lab]')"
            )
        return None

    def start(self, lab: LabMount, options: VolumeOptions, timeout_s: float) -> None:
        config = {
            "mountpoint": lab.mountpoint,
            "backing": lab.backing,
            "options": options.to_dict(),
            "live_stats": str(lab.live_stats_path),
            "stats": lab.stats_file,
        }
        path = Path(lab.state_dir) / DAEMON_CONFIG
        path.write_text(json.dumps(config, indent=1) + "\n")
        cmd = [sys.executable, "-m", "iobench.lab.daemon", str(path)]
        env = dict(os.environ, FUSE_LIBRARY_NAME="fuse3")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        lab.pid = system.spawn(cmd, lab.log_path, env)
        lab.save()
        system.wait_mounted(
            lab.mountpoint, self.fstype, lab.pid, lab.log_path, timeout_s, "the lab daemon"
        )

    def needles(self, lab: LabMount) -> list[str]:
        return ["iobench.lab.daemon", str(Path(lab.state_dir) / DAEMON_CONFIG)]

    def stop(self, lab: LabMount) -> None:
        return None  # the daemon is all there is, and manage ends it

    def problem(self, lab: LabMount) -> str | None:
        return None


FUSE = FuseKind()
