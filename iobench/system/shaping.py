"""Rate limits of the emulated volume: an operations token bucket and a byte link with credits.

Both are *reservation* schedulers: a caller asks "when may this request finish?" under a
lock, gets an absolute time on the ``time.monotonic`` clock, and sleeps outside the lock.
Many requests therefore wait concurrently (like requests in flight on a network), while the
budget they draw from is shared and exact.

- :class:`TokenBucket` (``--iops``): the classic token bucket (rate ``r`` tokens/s, depth
  ``b``). Tokens may go negative; a request that finds ``t < 1`` token starts when the
  bucket is back at zero, i.e. after ``(1 - t) / r`` seconds. Long-run rate ≤ ``r``, bursts
  of at most ``b`` requests pass at once.
- :class:`ByteLink` (``--mb-per-s``, ``--burst-mb-per-s``, ``--burst-credits-mb``): one pipe through
  which all read and write bytes pass in order. Without credits it moves bytes at the
  baseline rate ``M``. With credits it follows Amazon EFS's *Bursting* rule: the balance
  earns credit at the baseline rate all the time and spends one credit per (metered) byte
  moved, so it changes at ``M − rate`` (capped at ``cap``, never below zero); while it is
  positive bytes move at the burst rate ``B``, at zero at ``M``. A sequential reader thus
  sees ``B`` for ``C·B/(B−M)`` bytes (``C`` the starting balance), then ``M``; over any window
  ``T`` at most ``C + M·T`` credits are spent. AWS's worked example holds: a 100 GiB file
  system (baseline 5,000 KiB/s) idle for a day then bursting at 100 MiB/s bursts for 72
  minutes a day (tests/lab/test_shaping.py, at a scaled clock).
- :func:`metered`: how EFS counts an operation against the balance — data operations at
  least 32 KiB, metadata operations 4 KiB, reads (of either) at one third.
"""

from __future__ import annotations

import math
import threading
import time


class TokenBucket:
    """Thread-safe token bucket handing out start times for requests (see module docstring)."""

    def __init__(self, rate: float, depth: float | None = None, *, start_full: bool = True) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError("rate must be positive and finite")
        self.rate = float(rate)
        # 100 ms worth of requests may pass back to back; at least one.
        self.depth = float(depth) if depth is not None else max(1.0, rate / 10.0)
        if not (math.isfinite(self.depth) and self.depth > 0):
            raise ValueError("depth must be positive and finite")
        # a link starts empty (no free burst at t=0); a request budget starts full
        self._tokens = self.depth if start_full else 0.0
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def reserve(self, now: float, n: float = 1.0) -> float:
        """Take ``n`` tokens; return the monotonic time at which the request may start."""
        with self._lock:
            tokens = min(self.depth, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens = tokens - n
            if tokens >= n:
                return now
            return now + (n - tokens) / self.rate


#: EFS metering: a data operation counts at least this many bytes, a metadata one this many
METER_DATA_MIN, METER_META = 32 * 1024, 4 * 1024
#: and reads count at one third
METER_READ_SHARE = 1 / 3


def metered(nbytes: int, write: bool, data: bool = True) -> float:
    """The bytes EFS meters for one operation: a data operation (read, write) counts at least
    32 KiB, any other (lookup, create, rename...) 4 KiB; reads — data or metadata — count at
    one third."""
    size = max(nbytes, METER_DATA_MIN) if data else METER_META
    return float(size) if write else size * METER_READ_SHARE


class ByteLink:
    """A serial byte pipe with an optional EFS-Bursting credit balance (see module docstring).

    Rates are in bytes per second, credits in bytes. ``burst_rate``/``credits`` of ``None``
    or ``0`` mean a plain link at ``baseline_rate``; ``cap`` (default: ``credits``) is the
    most the balance may hold; ``start`` (default: now) is when it begins to earn.
    """

    def __init__(
        self,
        baseline_rate: float,
        burst_rate: float | None = None,
        credits: float | None = None,
        cap: float | None = None,
        start: float | None = None,
    ) -> None:
        if not (math.isfinite(baseline_rate) and baseline_rate > 0):
            raise ValueError("baseline_rate must be positive and finite")
        self.baseline_rate = float(baseline_rate)
        self.burst_rate = float(burst_rate) if burst_rate else self.baseline_rate
        bursting = bool(burst_rate) and credits is not None
        self.max_credits = float(cap if cap is not None else credits or 0.0) if bursting else 0.0
        self._credits = min(float(credits or 0.0), self.max_credits) if bursting else 0.0
        self._bursting = bursting and self.burst_rate > self.baseline_rate
        #: when the balance was last brought up to date (it earns from then on)
        self._stamp = time.monotonic() if start is None else float(start)
        self._free_at = 0.0  # when the pipe finishes what it was already given
        self._lock = threading.Lock()

    @property
    def credits(self) -> float:
        """Current credit balance in bytes (as of the last request)."""
        return self._credits

    def balance_at(self, now: float) -> float:
        """The balance at ``now``, counting what it earned since the last request."""
        with self._lock:
            return self._earned(now)

    def _earned(self, now: float) -> float:
        if not self._bursting or now <= self._stamp:
            return self._credits
        return min(self.max_credits, self._credits + (now - self._stamp) * self.baseline_rate)

    def reserve(self, now: float, nbytes: float) -> float:
        """Queue ``nbytes`` on the link; return the monotonic time at which they have moved."""
        return self.reserve_span(now, nbytes)[0]

    def reserve_span(self, now: float, nbytes: float) -> tuple[float, float]:
        """:meth:`reserve`, and the seconds the pipe itself spends on these bytes (at the rate
        in force, waiting behind earlier ones left out): the lab's account of what its rate
        limits allow (:mod:`iobench.lab.delivered`)."""
        with self._lock:
            start = max(now, self._free_at)
            if not self._bursting:
                duration = nbytes / self.baseline_rate
                self._free_at = start + duration
                return self._free_at, duration
            credits = self._earned(start)
            # while bursting the balance falls by (1 - M/B) per byte moved (it earns M meanwhile)
            drain = 1.0 - self.baseline_rate / self.burst_rate
            at_burst = min(float(nbytes), credits / drain)
            duration = at_burst / self.burst_rate + (nbytes - at_burst) / self.baseline_rate
            # at the baseline the balance earns what it spends: it stays where the burst left it
            self._credits = max(0.0, credits - at_burst * drain)
            self._free_at = self._stamp = start + duration
            return self._free_at, duration
