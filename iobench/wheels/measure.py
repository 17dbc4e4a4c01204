"""Profiles measured from real wheels: how many files of which kind, their size
distribution and deflate ratio, per distribution (``iobench wheels profile``), and a profile
written back as TOML."""

from __future__ import annotations

import json
import math
import re
import statistics
import zipfile
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

from iobench.errors import UsageError
from iobench.wheels.profile import Profile, profile_from_dict


def _group_key(filename: str) -> str:
    base = filename.rsplit("/", 1)[-1]
    if ".so" in base:
        return "so"
    if "." not in base:
        return "noext"
    # an extension becomes part of a generated file name: keep it to safe characters
    ext = re.sub(r"[^a-z0-9_-]", "_", base.rsplit(".", 1)[-1].lower())[:32]
    return ext or "noext"


def profile_of_wheels(wheels: list[Path], name: str, seed: int = 1) -> Profile:
    """Measure real wheels into a profile (what `iobench wheels profile` prints)."""
    dists = []
    for wheel in wheels:
        try:
            zf = zipfile.ZipFile(wheel)
        except (OSError, zipfile.BadZipFile) as exc:
            raise UsageError(f"{wheel}: not a readable wheel ({exc})") from None
        with zf:
            parts = wheel.name.split("-")
            if len(parts) < 5:
                raise UsageError(f"{wheel}: not a wheel file name (name-version-...-tag.whl)")
            groups: dict[str, list[tuple[int, int]]] = defaultdict(list)
            dirs = set()
            for info in zf.infolist():
                if info.is_dir() or ".dist-info/" in info.filename:
                    continue
                dirs.add(info.filename.rsplit("/", 1)[0] if "/" in info.filename else "")
                groups[_group_key(info.filename)].append((info.file_size, info.compress_size))
            files = []
            for ext, sizes in sorted(groups.items(), key=lambda kv: -len(kv[1])):
                raw = sorted(s for s, _ in sizes)
                total = sum(raw)
                comp = sum(c for _, c in sizes)
                med = statistics.median(raw)
                sigma = 1.0
                if len(raw) >= 4 and raw[len(raw) // 4] > 0:
                    q1, q3 = raw[len(raw) // 4], raw[(3 * len(raw)) // 4]
                    sigma = max(0.1, math.log(max(q3, 1) / max(q1, 1)) / 1.349)
                files.append(
                    {
                        "ext": ext,
                        "count": len(raw),
                        "median_bytes": int(med),
                        "total_bytes": int(total),
                        "sigma": round(sigma, 3),
                        "compress_ratio": round(min(1.0, max(0.02, comp / max(total, 1))), 3),
                    }
                )
            py = len(groups.get("py", ()))
            dists.append(
                {
                    "name": "synth_" + parts[0].lower().replace("-", "_"),
                    "version": parts[1].split("+")[0],
                    "dirs": len(dirs),
                    "import_modules": min(300, max(1, py // 8)),
                    "files": files,
                }
            )
    return profile_from_dict(
        {
            "name": name,
            "seed": seed,
            "source": "measured from " + ", ".join(w.name for w in wheels),
            "dist": dists,
        },
        "measured profile",
    )


def profile_to_toml(profile: Profile) -> str:
    """Render a profile as TOML (the format `load_profile` reads)."""
    out = [
        "[profile]",
        f"name = {json.dumps(profile.name)}",
        f"source = {json.dumps(profile.source)}",
        f"description = {json.dumps(profile.description)}",
        f"seed = {profile.seed}",
    ]
    for d in profile.dists:
        out += [
            "",
            "[[profile.dist]]",
            f"name = {json.dumps(d.name)}",
            f"version = {json.dumps(d.version)}",
            f"dirs = {d.dirs}",
            f"import_modules = {d.import_modules}",
            f"requires = {json.dumps(list(d.requires))}",
        ]
        if d.compile is not None:
            c = d.compile
            out.append(
                f"compile = {{ s_per_mb = {c.s_per_mb}, code_fraction = {c.code_fraction}, "
                f"pyc_files = {c.pyc_files}, pyc_bytes = {c.pyc_bytes} }}"
            )
        if d.imports is not None:
            fields = ", ".join(f"{k} = {v}" for k, v in asdict(d.imports).items())
            out.append(f"imports = {{ {fields} }}")
        out.append("files = [")
        for g in d.files:
            out.append(
                f"  {{ ext = {json.dumps(g.ext)}, count = {g.count}, median_bytes = {g.median_bytes}, "
                f"total_bytes = {g.total_bytes}, sigma = {g.sigma}, compress_ratio = {g.compress_ratio} }},"
            )
        out.append("]")
    return "\n".join(out) + "\n"


__all__ = ["profile_of_wheels", "profile_to_toml"]
