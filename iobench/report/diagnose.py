"""Name each config's bottleneck from its trials and samples, quoting the figures used.

Inputs per config are medians over its successful trials: phase times and installer
counters from trials.csv, and per-trial figures computed here from samples/<trial>.csv.

Rules, applied in this order (first match wins):

1. **CPU bound** — the installer's process tree is on CPU >= 75 % of the wall time
   (``cpu_s / time_to_ready_s``, i.e. ``offcpu_frac`` <= 0.25; ``CPU_SHARE``): a core is
   busy unzipping, hashing or compiling, and faster storage will not help much. It comes
   first because an installer that busy cannot be waiting on the network either: with a
   local (loopback) index the download phase is mostly pip's own start-up and resolver.
2. **network bound** — the download phase takes >= 40 % of time-to-ready
   (``NETWORK_SHARE``). Quotes the download time and the median received MB/s (or that the
   network interfaces saw no traffic: a loopback index).
3. storage wait — any of: installer threads in a filesystem or block-layer wait in >= 30 %
   of the samples (``fswait_frac`` from trials.csv, else ``tree_fswait`` from the samples;
   ``FSWAIT_SHARE``), off CPU >= 50 % of the time (``WAIT_OFFCPU``), or installer threads in
   uninterruptible sleep (D state) in >= 20 % of the samples (``DSTATE_SHARE``). Then:

   * **bandwidth bound** — the install-phase write rate is flat near its ceiling
     (median of 1-second rates >= 60 % of their 95th percentile, ``PLATEAU``) *and* writes
     are large (>= 32 KiB per write call on average, ``BIG_WRITE``): bytes, not operations,
     set the pace;
   * **latency/metadata bound** — otherwise: many small writes, a low and uneven MB/s,
     time spent waiting per file (cost ~= files x per-operation latency). Network
     filesystems usually land here.
4. **mixed** — none of the above; names the longest phase.

Why ``fswait_frac`` and why 30 %: FUSE and NFS clients wait for their server in an
*interruptible* sleep (kernel wait channel ``request_wait_answer``, ``rpc_wait_bit_killable``
...), so those waits show neither as CPU iowait nor as D state; on the lab's FUSE volume
``tree_dstate`` stays ~0 while the installer waits on the volume in ~80 % of the samples.
Off-CPU time does show them, but it also counts every other sleep (the network, a child
process), so the wait channel is the direct evidence. Measured per trial on the lab
(smoke scenario, 0.5, 1 and 2 ms per operation): 0.83–0.94 with the venv on the slow
volume, 0–0.08 with it on tmpfs, so 30 % sits far from both; it still counts a sample when *any* installer thread
waits, so it reads "the filesystem held the installer up in at least 30 % of the run",
enough to name storage as the limit once CPU and the network have been ruled out. Runs
written before the column existed read as unknown, and the other two tests decide alone.
When the samples know filesystem waits and they are rare while off CPU is high, ``why``
says so (the wait is then probably elsewhere).

CPU iowait is quoted but never decides alone: FUSE and NFS waits do not count as iowait
(see above), while filesystem waits, off-CPU time and D state do show them.

The per-trial figures from the samples, and how a throughput drop is found, are
``iobench.report.series``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iobench.report.series import (
    DROP_RATIO,
    DROP_WINDOWS,
    MIN_DROP_MBPS,
    SAMPLE_COLUMNS_USED,
    WRITE_GAP_MIN_S,
    Drop,
    SampleData,
    SampleFigures,
    change_point,
    combine_sample_figures,
    drop_window_s,
    find_drop,
    find_write_gaps,
    install_drop,
    install_write_rates,
    sample_figures,
    window_rates,
)
from iobench.units import fmt_s, fmt_share

NETWORK_SHARE = 0.40
CPU_SHARE = 0.75
WAIT_OFFCPU = 0.50
DSTATE_SHARE = 0.20
FSWAIT_SHARE = 0.30
NO_TRAFFIC_MBPS = 0.05  # a median receive rate below this: the download did not cross a NIC
MACHINE_BUSY = 0.90  # the median share of all the machine's CPU time in use: CPU-saturated
PLATEAU = 0.60
BIG_WRITE = 32 * 1024


@dataclass(frozen=True)
class ConfigFigures:
    """Medians of one config's successful trials: the evidence for the diagnosis."""

    time_to_ready_s: float
    download_s: float = math.nan
    install_s: float = math.nan
    import_s: float = math.nan
    cpu_s: float = math.nan
    offcpu_frac: float = math.nan
    write_bytes: float = math.nan
    write_calls: float = math.nan
    files_installed: float = math.nan
    dstate_max: float = math.nan
    fswait_frac: float = math.nan  # share of samples with a thread in a filesystem wait
    iowait_p95_pct: float = math.nan
    stalls: float = 0.0
    stall_longest_s: float = math.nan
    phases: tuple[tuple[str, float], ...] = ()
    samples: SampleFigures = SampleFigures()
    drop_trials: int = 0  # trials whose samples show a throughput drop
    sampled_trials: int = 0


@dataclass(frozen=True)
class Diagnosis:
    """A bottleneck name and one line that quotes the figures behind it."""

    bottleneck: str
    why: str


# --- the rules --------------------------------------------------------------------------------


def _known(*values: float) -> bool:
    return all(v is not None and not math.isnan(v) for v in values)


def classify(fig: ConfigFigures) -> Diagnosis:
    """Apply the module's rules to one config's figures, in this order: the installer busy
    on CPU; evidence of waiting on a filesystem (threads in a filesystem wait or D state);
    the machine's CPUs saturated (the installer's share with a loopback index, other
    processes); a download that dominates — "network bound" only with bytes on a network
    interface, else "download bound" (a loopback index paces it); off CPU alone (waiting
    on storage); else mixed."""
    ttr = fig.time_to_ready_s
    if not _known(ttr) or ttr <= 0:
        return Diagnosis("no data", "no successful trial to diagnose")
    s = fig.samples
    on_cpu, offcpu = _cpu_shares(fig, ttr)
    extras = _extras(fig)
    if _known(on_cpu) and on_cpu >= CPU_SHARE:
        return Diagnosis("CPU bound", _cpu_why(fig, on_cpu, ttr) + extras)
    fswait = fig.fswait_frac if _known(fig.fswait_frac) else s.fswait_share
    on_fs = (_known(fswait) and fswait >= FSWAIT_SHARE) or (
        _known(s.dstate_share) and s.dstate_share >= DSTATE_SHARE
    )
    if on_fs:
        return _storage_diagnosis(fig, offcpu, fswait, extras)
    downloading = _known(fig.download_s) and fig.download_s / ttr >= NETWORK_SHARE
    if _known(s.machine_busy) and s.machine_busy >= MACHINE_BUSY:
        why = f"the machine's CPUs {fmt_share(s.machine_busy)} busy (median of samples)"
        if _known(on_cpu):
            why += (
                f", the installer {fmt_share(on_cpu)} of {fmt_s(ttr)} (the rest: other processes)"
            )
        if downloading and not _network_bytes(s):
            why += "; the download came from a loopback index, whose CPU is this machine's"
        return Diagnosis("CPU bound", why + extras)
    if downloading:
        if _network_bytes(s):
            return Diagnosis("network bound", _network_why(fig, ttr) + extras)
        return Diagnosis("download bound", _network_why(fig, ttr) + extras)
    if _known(offcpu) and offcpu >= WAIT_OFFCPU:
        return _storage_diagnosis(fig, offcpu, fswait, extras)
    longest = max(fig.phases, key=lambda kv: kv[1] if _known(kv[1]) else -1, default=None)
    why = f"no single limit: on CPU {fmt_share(on_cpu)}" if _known(on_cpu) else "no single limit"
    if longest and _known(longest[1]):
        why += f", longest phase {longest[0]} {fmt_s(longest[1])} of {fmt_s(ttr)}"
    return Diagnosis("mixed", why + extras)


def _network_bytes(s: SampleFigures) -> bool:
    """The download crossed a network interface (a median receive rate above the floor)."""
    return _known(s.net_recv_mbps) and s.net_recv_mbps >= NO_TRAFFIC_MBPS


def _cpu_shares(fig: ConfigFigures, ttr: float) -> tuple[float, float]:
    """The installer's share of the wall time on CPU and off it (NaN when unknown)."""
    on_cpu = math.nan
    if _known(fig.cpu_s):
        on_cpu = fig.cpu_s / ttr
    elif _known(fig.offcpu_frac):
        on_cpu = 1.0 - fig.offcpu_frac
    offcpu = (
        fig.offcpu_frac
        if _known(fig.offcpu_frac)
        else (1.0 - on_cpu if _known(on_cpu) else math.nan)
    )
    return on_cpu, offcpu


def _cpu_why(fig: ConfigFigures, on_cpu: float, ttr: float) -> str:
    if on_cpu >= 1.0:
        return f"installer kept {on_cpu:.1f} cores busy ({fig.cpu_s:.1f} CPU-s in {fmt_s(ttr)})"
    if _known(fig.cpu_s):
        return f"installer on CPU {fmt_share(on_cpu)} of {fmt_s(ttr)} ({fig.cpu_s:.1f} CPU-s)"
    return f"installer on CPU {fmt_share(on_cpu)} of {fmt_s(ttr)}"


def _network_why(fig: ConfigFigures, ttr: float) -> str:
    s = fig.samples
    why = f"download {fmt_s(fig.download_s)} of {fmt_s(ttr)} ({fmt_share(fig.download_s / ttr)})"
    if _network_bytes(s):
        why += f", receiving {s.net_recv_mbps:.1f} MB/s"
    elif _known(s.net_recv_mbps):
        why += ", no traffic on the network interfaces: a loopback index, paced by its cap"
    else:
        why += ", network traffic not sampled"
    return why


def _storage_diagnosis(fig: ConfigFigures, offcpu: float, fswait: float, extras: str) -> Diagnosis:
    """Waiting on storage: bandwidth bound (a flat write rate in big calls) or latency bound."""
    s = fig.samples
    per_call = (
        fig.write_bytes / fig.write_calls
        if _known(fig.write_bytes, fig.write_calls) and fig.write_calls > 0
        else math.nan
    )
    mbps = s.install_write_mbps
    if not _known(mbps) and _known(fig.write_bytes, fig.install_s) and fig.install_s > 0:
        mbps = fig.write_bytes / fig.install_s / 1e6
    wait = _wait_text(offcpu, fswait, s.dstate_share, fig.dstate_max, fig.iowait_p95_pct)
    flat = _known(s.write_plateau) and s.write_plateau >= PLATEAU
    big = _known(per_call) and per_call >= BIG_WRITE
    if flat and big:
        why = (
            f"writes held near {mbps:.1f} MB/s (median {s.write_plateau:.2f} of peak) "
            f"in {per_call / 1024:.0f} KiB calls; {wait}"
        )
        return Diagnosis("bandwidth bound", why + extras)
    parts = [wait]
    if _known(fig.write_calls):
        size = f" of {per_call / 1024:.1f} KiB" if _known(per_call) else ""
        rate = f"only {mbps:.1f} MB/s in " if _known(mbps) else ""
        parts.append(f"{rate}{fig.write_calls:,.0f} write calls{size}")
    elif _known(mbps):
        parts.append(f"only {mbps:.1f} MB/s")
    if _known(fig.files_installed) and fig.files_installed > 0 and _known(fig.install_s):
        ms = 1000 * fig.install_s / fig.files_installed
        parts.append(f"{fig.files_installed:,.0f} files at {ms:.2f} ms each")
    return Diagnosis("latency/metadata bound", "; ".join(parts) + extras)


def _wait_text(offcpu: float, fswait: float, dshare: float, dmax: float, iowait95: float) -> str:
    bits = []
    if _known(fswait):
        if fswait >= FSWAIT_SHARE:
            bits.append(f"installer waited on the filesystem in {fmt_share(fswait)} of samples")
        else:
            bits.append(f"in a filesystem wait in only {fmt_share(fswait)} of samples")
    if _known(offcpu):
        bits.append(f"off CPU {fmt_share(offcpu)}")
    if _known(dshare) and dshare > 0:
        bits.append(f"D state in {fmt_share(dshare)} of samples")
    if _known(dmax) and dmax > 0:
        bits.append(f"up to {dmax:.0f} thread(s) in D")
    if _known(iowait95):
        bits.append(f"iowait p95 {iowait95:.0f}%")
    return ", ".join(bits) if bits else "waiting"


def _extras(fig: ConfigFigures) -> str:
    s = fig.samples
    out = ""
    if _known(s.drop_at_s):
        out += (
            f"; write rate fell from {s.drop_before_mbps:.1f} to {s.drop_after_mbps:.1f} MB/s "
            f"at {s.drop_at_s:.0f} s ({fig.drop_trials}/{fig.sampled_trials} trials)"
        )
    if fig.stalls and fig.stalls > 0:
        longest = f", longest {fmt_s(fig.stall_longest_s)}" if _known(fig.stall_longest_s) else ""
        out += f"; {fig.stalls:.0f} stall(s){longest}"
    return out


__all__ = [
    "BIG_WRITE", "CPU_SHARE", "DROP_RATIO", "DROP_WINDOWS", "DSTATE_SHARE", "FSWAIT_SHARE",
    "MACHINE_BUSY", "MIN_DROP_MBPS", "NETWORK_SHARE", "PLATEAU", "SAMPLE_COLUMNS_USED",
    "WAIT_OFFCPU", "WRITE_GAP_MIN_S", "ConfigFigures", "Diagnosis", "Drop", "SampleData",
    "SampleFigures", "change_point", "classify", "combine_sample_figures", "drop_window_s",
    "find_drop", "find_write_gaps", "install_drop", "install_write_rates", "sample_figures",
    "window_rates",
]  # fmt: skip
