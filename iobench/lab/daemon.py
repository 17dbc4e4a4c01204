"""Entry point of the lab's FUSE daemon: ``python -m iobench.lab.daemon CONFIG.json``.

Started detached by the fuse kind (:mod:`iobench.lab.kinds.fuse`), which writes ``CONFIG.json``
into the volume's state folder: the mountpoint, the backing folder, the options in the same
form as the state file (:meth:`~iobench.lab.options.VolumeOptions.to_dict`: one set of names,
the CLI's), the stats files and the flush control. The daemon serves the slow volume in the
foreground until it is unmounted, then writes its final stats. Errors are printed as one line
on stderr (``manage.up`` shows that line) and exit with status 2.

Its command line is one path, not flags: it is started by iobench alone, and one JSON
document means one spelling of every option.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.errors import IOBenchError
from iobench.lab.fs import serve
from iobench.lab.options import VolumeOptions

USAGE = "usage: python -m iobench.lab.daemon CONFIG.json"


@dataclass(frozen=True)
class DaemonConfig:
    """What the daemon serves, and where it reports."""

    mountpoint: str
    backing: str
    options: dict[str, Any]  # VolumeOptions.to_dict()
    live_stats: str | None = None  # refreshed while mounted
    stats: str | None = None  # final stats, written on unmount
    control: str | None = None  # flush control FIFO (default: 'control' beside live_stats)
    max_threads: int = 64

    @classmethod
    def read(cls, path: Path) -> DaemonConfig:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object")
        return cls(**data)

    def control_path(self) -> Path | None:
        """Where ``iobench lab flush`` finds the daemon: ``control``, else beside the live stats."""
        if self.control:
            return Path(self.control)
        return Path(self.live_stats).with_name("control") if self.live_stats else None


def main(argv: list[str] | None = None) -> int:
    """Serve until unmounted; return the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        config = DaemonConfig.read(Path(args[0]))
        options = VolumeOptions.from_dict(config.options).validate()
        serve(
            config.backing,
            config.mountpoint,
            options,
            stats_path=config.stats,
            live_stats_path=config.live_stats,
            cache_timeout_s=options.cache_s,
            max_threads=config.max_threads,
            control_path=config.control_path(),
        )
    except KeyboardInterrupt:
        return 130
    except (OSError, RuntimeError, ValueError, TypeError, ImportError, IOBenchError) as e:
        print(f"iobench lab daemon: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
