"""Rate limits of the emulated volume: an operations token bucket and a byte link with credits.

Both are *reservation* schedulers: a caller asks "when may this request finish?" under a
lock, gets an absolute time on the ``time.monotonic`` clock, and sleeps outside the lock.
Many requests therefore wait concurrently (like requests in flight on a network), while the
budget they draw from is shared and exact.

- :class:`TokenBucket` (``--iops``): the classic token bucket (rate ``r`` tokens/s, depth
  ``b``). Tokens may go negative; a request that finds ``t < 1`` token starts when the
  bucket is back at zero, i.e. after ``(1 - t) / r`` seconds. Long-run rate ≤ ``r``, bursts
  of at most ``b`` requests pass at once.
- :class:`ByteLink` (``--mbps``, ``--burst-mbps``, ``--burst-credits-mb``): one pipe through
  which all read and write bytes pass in order. Without credits it moves bytes at the
  baseline rate ``M``. With credits it follows the Amazon EFS *Bursting* model: while the
  credit balance is positive bytes move at the burst rate ``B`` and each byte spends one
  credit; at zero credits bytes move at ``M``. Credits refill at the baseline's unused rate:
  every second the link is idle earns ``M`` bytes of credit (capped at the initial balance
  ``C``). So a sequential writer sees ``B`` for the first ``C`` bytes, then ``M``; over any
  window ``T`` at most ``C + M·T`` bytes pass, as with EFS.
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


class ByteLink:
    """A serial byte pipe with an optional EFS-Bursting credit balance (see module docstring).

    Rates are in bytes per second, credits in bytes. ``burst_rate``/``credits`` of ``None``
    or ``0`` mean a plain link at ``baseline_rate``.
    """

    def __init__(
        self,
        baseline_rate: float,
        burst_rate: float | None = None,
        credits: float | None = None,
    ) -> None:
        if not (math.isfinite(baseline_rate) and baseline_rate > 0):
            raise ValueError("baseline_rate must be positive and finite")
        self.baseline_rate = float(baseline_rate)
        self.burst_rate = float(burst_rate) if burst_rate else self.baseline_rate
        self.max_credits = float(credits) if credits and burst_rate else 0.0
        self._credits = self.max_credits
        self._free_at = 0.0  # when the pipe finishes what it was already given
        self._lock = threading.Lock()

    @property
    def credits(self) -> float:
        """Current credit balance in bytes (as of the last request)."""
        return self._credits

    def reserve(self, now: float, nbytes: int) -> float:
        """Queue ``nbytes`` on the link; return the monotonic time at which they have moved."""
        with self._lock:
            start = max(now, self._free_at)
            idle = start - self._free_at
            credits = self._credits
            if self.max_credits and idle > 0:
                credits = min(self.max_credits, credits + idle * self.baseline_rate)
            if credits >= nbytes:
                duration = nbytes / self.burst_rate
                credits -= nbytes
            else:
                duration = credits / self.burst_rate + (nbytes - credits) / self.baseline_rate
                credits = 0.0
            self._credits = credits
            self._free_at = start + duration
            return self._free_at
