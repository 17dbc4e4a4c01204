"""What doctor's probes of the target and tmp say: a hung volume, locks that do not exclude
(with the caches moved to a folder of the user's own on tmp), and how much slower a
small-file create is on the target, its tail included."""

from __future__ import annotations

import os
from typing import Any

from iobench import shell
from iobench.predict.finding import Finding
from iobench.predict.latency import Latency


def probe_findings(doc: dict[str, Any], target: str, tmp: str) -> list[Finding]:
    """Hung probes, locks that do not exclude, and how much slower per file the target is."""
    by_path = {p["path"]: p for p in doc["paths"]}
    t, m = by_path.get(doc["roles"]["target"]), by_path.get(doc["roles"]["tmp"])
    out: list[Finding] = []
    for name, p in (("target", t), ("tmp", m)):
        if p and p.get("hung"):
            out.append(
                Finding(
                    "bad",
                    "probe",
                    f"{name} {p['path']}: the {p['hung']} probe did not return (hung volume)",
                )
            )
    if t:
        for kind in ("flock", "fcntl"):
            verdict = t["locks"].get(kind, "not tested")
            if verdict != "works":
                out.append(
                    Finding(
                        "warn",
                        "locks",
                        f"{kind} locks on the target {target}: {verdict}; pip, uv and "
                        "huggingface_hub caches shared by two processes there are not protected",
                        local_caches(tmp),
                    )
                )
    if t and m and t.get("create") and m.get("create") and m["create"]["ms_each"] > 0:
        ratio = t["create"]["ms_each"] / m["create"]["ms_each"]
        # the tail too: a volume whose 1 % slowest creates take 10x tmp's stalls an install
        tail_t, tail_m = (Latency.from_clat_ns(p["create"].get("clat_ns")) for p in (t, m))
        p99 = [f" (p99 {x.p99_ms:.3f} ms)" if x and x.count else "" for x in (tail_t, tail_m)]
        slow_tail = bool(tail_t and tail_m and 0 < 10 * tail_m.p99_ms <= tail_t.p99_ms)
        level = "info" if ratio >= 10 or slow_tail else "ok"
        out.append(
            Finding(
                level,
                "probe",
                f"a small-file create costs {t['create']['ms_each']:.3f} ms on the target "
                f"{target}{p99[0]}, {m['create']['ms_each']:.3f} ms on tmp {tmp}{p99[1]} "
                f"({ratio:.0f}x)",
            )
        )
    return out


def local_caches(tmp: str) -> tuple[str, ...]:
    """The caches in a folder of the user's own on the fast local folder ``tmp``, where
    locks work (iobench.shell: made private, refused when someone else made it)."""
    mine = shell.per_user(tmp)
    return (
        *shell.PRIVATE_DIR,
        shell.private_dir(mine),
        *(
            f"export {name}={shell.quote(os.path.join(mine, sub))}"
            for name, sub in (
                ("PIP_CACHE_DIR", "pip-cache"),
                ("UV_CACHE_DIR", "uv-cache"),
                ("HF_HOME", "huggingface"),
            )
        ),  # fmt: skip
    )
