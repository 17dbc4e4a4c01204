"""Entry point of the lab's FUSE daemon: ``python -m iobench.lab.daemon --backing DIR MOUNTPOINT``.

Started detached by :func:`iobench.lab.manage.up`; it serves the slow volume in the
foreground until the volume is unmounted, then writes its final stats. Errors are printed as
one line on stderr (``manage.up`` shows that line) and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iobench.errors import IOBenchError
from iobench.lab.options import DEFAULT_CACHE_S


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m iobench.lab.daemon")
    p.add_argument("mountpoint")
    p.add_argument("--backing", required=True)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--data-latency-ms", type=float, default=0.0)
    p.add_argument("--iops", type=float, default=None)
    p.add_argument("--mbps", type=float, default=None)
    p.add_argument("--burst-mbps", type=float, default=None)
    p.add_argument("--burst-credits-mb", type=float, default=None)
    p.add_argument("--stats", default=None, help="final stats JSON, written on unmount")
    p.add_argument("--live-stats", default=None, help="stats JSON refreshed while mounted")
    p.add_argument(
        "--control",
        default=None,
        help="flush control FIFO (default: 'control' next to --live-stats)",
    )
    p.add_argument("--cache-timeout-s", type=float, default=DEFAULT_CACHE_S)
    p.add_argument("--max-threads", type=int, default=64)
    return p


def _control_path(args: argparse.Namespace) -> Path | None:
    """Where ``iobench lab flush`` finds the daemon: ``--control``, else beside the live stats."""
    if args.control:
        return Path(args.control)
    return Path(args.live_stats).with_name("control") if args.live_stats else None


def main(argv: list[str] | None = None) -> int:
    """Serve until unmounted; return the exit status."""
    args = _parser().parse_args(argv)
    try:
        from iobench.lab.fs import serve
        from iobench.lab.options import VolumeOptions

        options = VolumeOptions(
            latency_ms=args.latency_ms,
            data_latency_ms=args.data_latency_ms,
            iops=args.iops,
            mb_per_s=args.mbps,
            burst_mb_per_s=args.burst_mbps,
            burst_credits_mb=args.burst_credits_mb,
            cache_s=args.cache_timeout_s,
        ).validate()
        serve(
            args.backing,
            args.mountpoint,
            options,
            stats_path=args.stats,
            live_stats_path=args.live_stats,
            cache_timeout_s=options.cache_s,
            max_threads=args.max_threads,
            control_path=_control_path(args),
        )
    except KeyboardInterrupt:
        return 130
    except (OSError, RuntimeError, ValueError, ImportError, IOBenchError) as e:
        print(f"iobench lab daemon: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
