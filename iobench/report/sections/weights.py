"""The ``weights`` kind's section: how long each config took to put a model's weights in memory
(the copy or restore first, then the load), what the volume served and at what rate, and —
when the verdict names a winner — the lines a pod's start script needs for it (``HF_HOME``, the
copy, the restore), priced per start and per month (``iobench.cost.kinds.weights``).

Read only from the run folder: trials.csv's weights columns (medians over each config's ok
trials) and meta.json (the roles' paths, the scenario's ``source``). The start script speaks
the user's folders: the model's cache entry on the weights' role (``HF_HOME``), copied or
restored to the local role.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from iobench.cost.kinds.weights import Month, month
from iobench.cost.prices import format_usd
from iobench.report.charts import OKABE_ITO, save_figure, style_axes, tex_escape
from iobench.report.page import fragment
from iobench.report.part import Context, Part
from iobench.rundir.kinds import weights as rows_of
from iobench.stats import median
from iobench.units import fmt_num, noise_known, noise_word

NAME = rows_of.NAME
#: the model's cache entry in a start script when the run generated its own
MODEL_DIR = "models--ORG--NAME"


@dataclass
class ConfigLoads:
    """One config's medians over its ok trials."""

    config: str
    n: int
    weights_role: str
    local_role: str  # "off": loaded in place
    staged: str  # "copy", "packed" or ""
    load_method: str
    readers: int
    copy_s: float  # NaN without a copy
    load_s: float
    load_mb_per_s: float
    total_s: float
    weights_mb: float
    volume_mb: float  # NaN off the lab
    volume_mb_per_s: float
    major_faults: float
    files: int = 0
    tensors: int = 0
    framework: str = ""
    cold_method: str = ""
    verified: str = ""

    @property
    def how(self) -> str:
        """The config in a few words: ``mmap in place``, ``copy to tmp, then mmap``, ``unpack a
        tar to tmp, then mmap``."""
        load = f"{self.readers} readers" if self.load_method == "concurrent" else self.load_method
        if self.staged:
            what = "unpack a tar" if self.staged == "packed" else "copy"
            return f"{what} to {self.local_role}, then {load}"
        return f"{load} in place"


def _med(frame: pd.DataFrame, col: str) -> float:
    if col not in frame.columns:
        return math.nan
    values = [float(v) for v in pd.to_numeric(frame[col], errors="coerce") if not pd.isna(v)]
    return median(values) if values else math.nan


def _text(frame: pd.DataFrame, col: str) -> str:
    if col not in frame.columns:
        return ""
    return next((str(v) for v in frame[col] if isinstance(v, str) and v), "")


def _int(x: float, default: int = 0) -> int:
    return int(x) if math.isfinite(x) else default


def build_rows(trials: pd.DataFrame, order: list[str]) -> list[ConfigLoads]:
    """Each config's medians, in ``order`` (the summary's)."""
    if (
        "load_method" not in trials.columns
        or not trials["load_method"].fillna("").astype(str).any()
    ):
        return []
    ok = trials[trials["status"] == "ok"]
    rank = {c: i for i, c in enumerate(order)}
    out = []
    for config, g in sorted(
        ok.groupby("config", sort=False), key=lambda x: rank.get(str(x[0]), 1e9)
    ):
        out.append(ConfigLoads(
            config=str(config), n=len(g), weights_role=_text(g, "weights_role"),
            local_role=_text(g, "local_role") or "off", staged=_text(g, "staged"),
            load_method=_text(g, "load_method"), readers=_int(_med(g, "readers"), 1),
            copy_s=_med(g, "local_copy_s"), load_s=_med(g, "load_s"),
            load_mb_per_s=_med(g, "load_mb_per_s"), total_s=_med(g, "time_to_ready_s"),
            weights_mb=_med(g, "weights_bytes") / 1e6, volume_mb=_med(g, "volume_read_bytes") / 1e6,
            volume_mb_per_s=_med(g, "volume_mb_per_s"), major_faults=_med(g, "major_faults"),
            files=_int(_med(g, "weight_files")), tensors=_int(_med(g, "tensors")),
            framework=_text(g, "framework"), cold_method=_text(g, "cold_method"),
            verified=_text(g, "tensors_checked"),
        ))  # fmt: skip
    return out


def section_lines(loads: list[ConfigLoads]) -> list[str]:
    """The console's lines: the model, then each config's copy, load and volume."""
    first = loads[0]
    width = max(len(r.config) for r in loads)
    lines = [f"Model weights ({first.weights_mb:,.0f} MB in {first.files} files, {first.tensors} "
             f"tensors, made as {first.framework or '?'}); until every tensor is in memory:"]  # fmt: skip
    for r in loads:
        copy = f"{r.staged} {r.copy_s:.2f} s + " if r.staged and math.isfinite(r.copy_s) else ""
        volume = ""
        if math.isfinite(r.volume_mb):
            volume = (
                f"; volume read {r.volume_mb:,.0f} MB at {fmt_num(r.volume_mb_per_s, ',.0f')} MB/s"
            )
        faults = f", {r.major_faults:,.0f} major faults" if r.load_method == "mmap" else ""
        lines.append(f"  {r.config:<{width}}  {copy}load {r.load_s:.2f} s ({r.how}, "
                     f"{fmt_num(r.load_mb_per_s, ',.0f')} MB/s){volume}{faults}")  # fmt: skip
    return lines


# ---------------------------------------------------------------------------------- the advice


def _home(ctx: Context, role: str) -> tuple[str, str, str]:
    """(the folder on the volume, the model's path in it, the variable naming it): a Hugging
    Face cache (``HF_HOME``, ``hub/models--ORG--NAME``) — the source's own when the run read
    one, else ``<role's path>/huggingface`` — or a plain folder of safetensors files."""
    source = str((ctx.meta.scenario.get("workload") or {}).get("source") or "").rstrip("/")
    parts = Path(source).parts
    if source and "hub" in parts[:-1]:  # .../hub/models--X[/snapshots/REV]
        at = len(parts) - 1 - parts[::-1].index("hub")
        return str(Path(*parts[:at])), f"hub/{parts[at + 1]}", "HF_HOME"
    if source and not parts[-1].startswith("models--"):
        return str(Path(source).parent), parts[-1], "MODEL_DIR"
    if source:
        return str(Path(source).parent.parent), f"hub/{parts[-1]}", "HF_HOME"
    roles = ctx.meta.roles
    base = roles[role].path if role in roles else f"/{role}"
    return f"{base.rstrip('/')}/huggingface", f"hub/{MODEL_DIR}", "HF_HOME"


def script(ctx: Context, r: ConfigLoads) -> list[str]:
    """The start script's lines for config ``r``."""
    home, model, var = _home(ctx, r.weights_role)
    q = shlex.quote
    cache = var == "HF_HOME"
    if not r.staged:
        lines = [
            f"export {var}={q(home if cache else home + '/' + model)}  # the weights stay on the volume"
        ]
    else:
        local_root = ctx.meta.roles[r.local_role].path if r.local_role in ctx.meta.roles else "/tmp"
        local = f"{local_root.rstrip('/')}/{'huggingface' if cache else 'models'}"
        into = str(Path(local, model).parent)
        if r.staged == "packed":
            tar = f"{home}/{Path(model).name}.tar"
            lines = [f"# once, after the download: tar -cf {q(tar)} -C {q(home)} {q(model)}",
                     f"mkdir -p {q(local)}", f"tar -xf {q(tar)} -C {q(local)}"]  # fmt: skip
        else:
            lines = [f"mkdir -p {q(into)}", f"cp -a {q(home + '/' + model)} {q(into + '/')}"]
        lines.append(f"export {var}={q(local if cache else local + '/' + model)}")
    if r.load_method == "concurrent":
        lines += [f"export RUNAI_STREAMER_CONCURRENCY={r.readers}  # {r.readers} readers at once",
                  "# vLLM: vllm serve MODEL --load-format runai_streamer"]  # fmt: skip
    elif r.load_method == "sequential":
        lines.append(
            '# load each file whole first: safetensors.torch.load(open(path, "rb").read())'
        )
    return lines


def _month(r: ConfigLoads, ctx: Context) -> Month | None:
    fields = SimpleNamespace(
        time_to_ready_s=r.total_s if math.isfinite(r.total_s) else None,
        weights_bytes=r.weights_mb * 1e6 if math.isfinite(r.weights_mb) else None,
        volume_read_bytes=r.volume_mb * 1e6 if math.isfinite(r.volume_mb) else None,
    )
    return month(fields, ctx.pricing)


def answer_lines(ctx: Context, loads: list[ConfigLoads]) -> tuple[list[str], list[str]]:
    """After the verdict: the winner's start script and each config's month, priced; (the
    words, the script)."""
    s, p = ctx.summary, ctx.pricing
    by = {r.config: r for r in loads}
    win = by.get(s.winner or "")
    lines: list[str] = []
    shell = script(ctx, win) if win is not None else []
    if win is not None:
        lines += [f"Start script (bash), for {win.config} ({win.how}):", *(f"  {x}" for x in shell)]
    months = [(r, m) for r in loads if (m := _month(r, ctx)) is not None]
    if months:
        starts = f"{p.starts_per_month:g} starts"
        lines.append(f"A month of {starts}, the weights loaded at each ({p.label}"
                     f"{'; ' + p.storage if p.storage else ''}):")  # fmt: skip
        for r, m in sorted(months, key=lambda x: x[1].total):
            volume = f" + reads {format_usd(m.reads)}" if p.read_usd_per_gb else ""
            kept = f" + kept {format_usd(m.kept)}" if p.gb_month_usd else ""
            lines.append(f"  {r.config}: {format_usd(m.per_start)} a start, {format_usd(m.total)}"
                         f"/month (GPU idle {format_usd(m.gpu)}{volume}{kept})")  # fmt: skip
        base = by.get(s.baseline or "")
        bm = _month(base, ctx) if base is not None else None
        wm = _month(win, ctx) if win is not None else None
        if win is not None and base is not None and win is not base and bm and wm:
            lines.append(f"  {win.config} saves {format_usd(bm.total - wm.total)}/month against "
                         f"{base.config} ({format_usd(bm.per_start - wm.per_start)} a start)")  # fmt: skip
    return lines, shell


# ---------------------------------------------------------------------------------- the page


def loads_chart(loads: list[ConfigLoads], title: str, path: Path) -> Path | None:
    """Per config: the copy or restore, then the load, side by side; the volume's rate."""
    rows = [r for r in loads if math.isfinite(r.load_s)]
    if not rows:
        return None
    fig = Figure(figsize=(10, 1.6 + 0.7 * len(rows)))
    ax = fig.add_subplot()
    style_axes(ax)
    y = np.arange(len(rows))[::-1]
    copy = [r.copy_s if math.isfinite(r.copy_s) else 0.0 for r in rows]
    load = [r.load_s for r in rows]
    ax.barh(y, copy, height=0.6, color=OKABE_ITO["orange"], label="copy or restore to local")
    ax.barh(y, load, left=copy, height=0.6, color=OKABE_ITO["blue"], label="load into memory")
    top = max(a + b for a, b in zip(copy, load, strict=True))
    for yi, r, a, b in zip(y, rows, copy, load, strict=True):
        rate = (
            f" · volume {r.volume_mb_per_s:,.0f} MB/s" if math.isfinite(r.volume_mb_per_s) else ""
        )
        ax.text(a + b + top * 0.01, yi, tex_escape(f"{a + b:.2f} s{rate}"), va="center", fontsize=9)
    ax.set_yticks(y, labels=[tex_escape(f"{r.config}\n{r.how}") for r in rows], fontsize=9)
    ax.set_xlim(0, top * 1.45)
    ax.set_xlabel("seconds until every tensor is in memory (medians over each config's trials)")
    fig.legend(loc="lower center", ncol=2, fontsize=8, frameon=False)
    ax.set_title(tex_escape(title), loc="left", fontsize=11)
    fig.subplots_adjust(left=0.27, right=0.98, top=1 - 0.5 / fig.get_figheight(),
                        bottom=1.15 / fig.get_figheight())  # fmt: skip
    return save_figure(fig, path)


TEMPLATE = """\
{% from "macros.html.j2" import table, img %}
<h2>Per config: {{ measure }}</h2>
<p class="caption">Medians over each config's successful trials; ★ marks the verdict's winner (none when it names none). The copy (or the restore of a packed copy) and the load are what a starting pod waits for; the volume's bytes and rate are its own counters' (an iobench lab volume). Every tensor's bytes were checked after the clock stopped.</p>
{{ table(["config", "weights on", "copied to", "ok", "loader", "copy (s)", "load (s)", "load MB/s", "volume MB read", "volume MB/s", "major faults", measure, "vs " ~ baseline, "noise", "cold by", "checked"], rows, num=(3, 5, 6, 7, 8, 9, 10, 11), classes=classes) }}
{{ img(png, "copy and load per config") }}
"""

ANSWER = """\
{% for line in words %}<p>{{ line }}</p>{% endfor %}
{% if shell %}<h3>Start script (bash), for {{ winner }}</h3><pre>{{ shell | join("\\n") }}</pre>{% endif %}
"""

ABOUT = """\
<li><b>time to weights in memory</b> (what the verdict compares): from the start of the copy (or the restore of a packed copy) when the config has one, else the loader's, until every tensor of the model exists in the loader's memory, the files cold (docs/weights.md). <b>mmap</b> is safetensors' <code>safe_open</code>, tensor by tensor in the index's order; <b>sequential</b> reads each file whole first; <b>concurrent</b> reads ranges of every file with many threads at once, as the Run:ai Model Streamer does.</li>
<li><b>A month</b>: each start's wait at the pod's price, times {{ starts }} starts, plus what the volume charges for the weights read at each start and kept (a packed copy is kept instead of the files).</li>
"""


def _cells(ctx: Context, loads: list[ConfigLoads]) -> tuple[list[list[object]], list[str]]:
    s, by = ctx.summary, {r.config: r for r in loads}
    cells, classes = [], []
    nan = math.nan
    for c in sorted(s.configs, key=lambda c: c.median if c.n else math.inf):
        r, row = by.get(c.name), s.row(c.name)
        star = " ★" if c.name == s.winner else ""
        local = str(row.get("local_role") or "off")
        cells.append([f"{c.name}{star}", f"{row.get('weights_role') or '?'} ({row.get('weights_fstype') or '?'})",
                      "— (in place)" if local in ("off", "nan", "<NA>") else f"{local} ({r.staged if r else '?'})",
                      f"{row['n_ok']}/{row['n_ok'] + row['n_failed'] + row['n_censored']}",
                      r.how if r else "", fmt_num(r.copy_s if r else nan, ".2f"), fmt_num(r.load_s if r else nan, ".2f"),
                      fmt_num(r.load_mb_per_s if r else nan, ",.0f"), fmt_num(r.volume_mb if r else nan, ",.0f"),
                      fmt_num(r.volume_mb_per_s if r else nan, ",.0f"), fmt_num(r.major_faults if r else nan, ",.0f"),
                      c.fmt(c.median) if c.n else "—", row["vs_baseline"] or "—",
                      noise_word(noise_known(row["beyond_noise_vs_baseline"])) or "—",
                      r.cold_method if r else "", r.verified if r else ""])  # fmt: skip
        classes.append("winner" if c.name == s.winner else ("failed" if not c.n else ""))
    return cells, classes


def build(ctx: Context) -> Part | None:
    s, run = ctx.summary, ctx.run
    loads = build_rows(run.trials, list(s.median_trials))
    if not loads:
        return None
    paths: dict[str, Path] = {}
    png = None
    if ctx.charts:
        title = f"Time to weights in memory — {run.scenario_name} on {run.hostname or '?'}"
        png = loads_chart(loads, title, ctx.out / "weights.png")
        if png is not None:
            paths["weights_png"] = png
    words, shell = answer_lines(ctx, loads)
    cells, classes = _cells(ctx, loads)
    prose = [w for w in words if not w.startswith(("Start script", "  "))]
    prose += [w.strip() for w in words if w.startswith("  ") and w.strip() not in shell]
    return Part(
        NAME, lines=section_lines(loads), answer=words,
        answer_html=fragment(ANSWER, words=prose, shell=shell, winner=s.winner or ""),
        html=fragment(TEMPLATE, measure=s.measure.name, rows=cells, classes=classes,
                      baseline=s.baseline or "baseline", png=png),
        about=fragment(ABOUT, starts=f"{ctx.pricing.starts_per_month:g}"), paths=paths,
        data={"script": shell},
    )  # fmt: skip


__all__ = ["NAME", "ConfigLoads", "build", "build_rows", "loads_chart", "script", "section_lines"]
