"""The fleet's messages: one worker (``Fleet``, a run of one) or MPI ranks (``MpiFleet``).

Built on mpi4py point-to-point messages polled against a deadline, not on blocking
collectives: a blocking barrier or gather waits forever for a rank that died or was stopped,
and MPI has no collective with a timeout. Rank 0 leads: the others report at each trial's
start (``READY``), it answers with the start time, in its clock, or a stop (``GO``), and each
sends its row and samples when its trial ends (``ROW``). A rank that does not answer by the
deadline is *lost*: rank 0 records it and stops the rest, which clean up and exit; the job is
then ended with ``MPI_Abort`` (the lost rank may hang in the kernel), which is what
``python -m mpi4py`` does for an unhandled exception, so no rank waits on a dead one.

Messages are JSON, never pickles (mpi4py's default): unpickling runs whatever the sender
put in, and a rank is not trusted with rank 0's process — a rank that lies, or a message
forged into the job's transport, could have run a command as root. What each message
holds is checked where it is read; one that does not read is the sender's loss.

Clocks: rank 0 measures each rank's offset by ping-pong at the start (the reply's time
against the midpoint of the round trip, the shortest of several rounds, as NTP does), and
each rank starts its trial at the agreed time in its own clock. On one host the offsets are
microseconds; across hosts they are what the hosts' clocks differ by.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import signal
import socket
import sys
import time
from typing import Any

from iobench.errors import IOBenchError

#: message tags
READY, GO, ROW, CLOCK, SHARE, BYE = 11, 12, 13, 14, 15, 16
#: how long rank 0 waits for the others' clean-up before it ends a broken job (within the
#: launcher's own grace: ``--mca odls_base_sigkill_timeout 30``, docs/fleet.md)
BYE_WAIT_S = 20.0
#: how long MPI_Abort may take before rank 0 exits without it
ABORT_WAIT_S = 3
#: after an interruption, how long rank 0 waits for the rows of the others' ended trials
INTERRUPTED_WAIT_S = 5.0
#: ping-pong rounds per rank for its clock offset (the shortest round trip is kept)
CLOCK_ROUNDS = 8
#: how far ahead of the message rank 0 sets a trial's start, so every rank has it in time
START_LEAD_S = 0.05
INSTALL_LINE = (
    "apt-get install openmpi-bin libopenmpi-dev && pip install 'iobench[fleet]' "
    "(mpi4py over the system's Open MPI)"
)


class FleetStopped(IOBenchError):
    """Rank 0 stopped the fleet (a rank was lost, or the run was interrupted)."""

    run_status = "interrupted"


class FleetLost(IOBenchError):
    """A rank sent nothing by the deadline: it died or stopped answering."""

    run_status = "failed"


def _dumps(obj: Any, *_: Any) -> bytes:
    """A message as JSON: plain data only (mpi4py's pickle hook)."""
    return json.dumps(obj).encode()


def _loads(data: Any) -> Any:
    return json.loads(bytes(data))


def fields(msg: Any, n: int, *kinds: type | tuple[type, ...]) -> list[Any] | None:
    """``msg`` as a list of ``n`` values of the given kinds (JSON makes a tuple a list),
    else None: a message that does not read as what its tag says."""
    if not isinstance(msg, (list, tuple)) or len(msg) != n:
        return None
    if any(
        not isinstance(v, k) or isinstance(v, bool) and k is not bool for v, k in zip(msg, kinds)
    ):
        return None
    return list(msg)


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _host(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 255 and value.isprintable()


class Fleet:
    """A run of one: every method is what one worker alone would do."""

    engine = ""  # "mpi" for MpiFleet
    rank = 0
    size = 1

    def __init__(self) -> None:
        self.host = socket.gethostname()
        self.offset_s = 0.0  # this worker's clock minus the reference clock
        self.offsets: dict[int, dict[str, float]] = {}  # rank 0: each rank's offset and RTT
        self.lost: dict[int, str] = {}  # rank -> why it was given up
        self.hosts: dict[int, str] = {0: self.host}  # rank 0: each rank's host
        self.pids: dict[int, int] = {0: os.getpid()}  # rank 0: each rank's process

    @property
    def worker(self) -> str:
        return f"w{self.rank}" if self.engine else ""

    @property
    def leads(self) -> bool:
        return self.rank == 0

    def share(self, value: Any, deadline_s: float = 120.0) -> Any:
        """Rank 0's ``value`` on every rank."""
        return value

    def measure_clocks(self) -> None:
        """Each rank's clock offset against rank 0's (``offset_s``; ``offsets`` and
        ``hosts`` on rank 0)."""

    def start(self, key: str, ranks: range, deadline_s: float, stagger_s: float = 0.0) -> float:
        """Wait until every rank is at the start of ``key``, then until this rank's start
        (``stagger_s`` x rank after the agreed one); the agreed start in the reference clock."""
        return time.time()

    def send(self, key: str, payload: Any) -> None:
        """This rank's result of ``key`` to rank 0 (not waited for)."""

    def gather(self, key: str, ranks: range, deadline_s: float) -> dict[int, Any]:
        """Rank 0: the results of ``key`` the other ``ranks`` sent by the deadline; the
        missing ones are added to ``lost``."""
        return {}

    def gone(self, rank: int) -> str:
        """Why a rank on this host sent nothing, when its process is gone ("" otherwise)."""
        return ""

    def stop(self, reason: str) -> None:
        """Rank 0: tell every rank still there to stop; another rank: tell rank 0 it goes."""

    def close(self, failure: BaseException | None = None) -> None:
        """The end of a fleet run: finalise, or, when a rank was lost or this one failed
        (``failure``), end the whole job at this process's exit."""


class MpiFleet(Fleet):
    """The ranks of ``MPI.COMM_WORLD``, through mpi4py."""

    engine = "mpi"

    def __init__(self) -> None:
        super().__init__()
        try:
            import mpi4py

            mpi4py.rc.finalize = False  # close() decides: finalise, or abort a broken job
            from mpi4py import MPI
        except ImportError as exc:
            raise IOBenchError(f"--fleet needs mpi4py ({exc}): {INSTALL_LINE}") from None
        MPI.Pickle.__init__(MPI.pickle, _dumps, _loads)  # JSON, never a pickle (docstring)
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.library = MPI.Get_library_version().split(",")[0].strip()  # "Open MPI v4.1.4"
        self._pending: list[Any] = []
        self._stopped = False
        self.signalled = False  # a signal came while rank 0 waited for the others

    # ---------------------------------------------------------------- messages
    def _send(self, value: Any, dest: int, tag: int) -> None:
        self._pending = [r for r in self._pending if not r.Test()]
        self._pending.append(self.comm.isend(value, dest=dest, tag=tag))

    def _recv(
        self, source: int, tag: int, deadline: float, spin: bool = False
    ) -> tuple[int, Any] | None:
        """The next message with ``tag`` from ``source`` (or any), or None at the deadline;
        ``spin``: poll without sleeping (the clock's round trips, a few milliseconds)."""
        status = self.MPI.Status()
        pause = 0.0002
        while True:
            if self.comm.iprobe(source=source, tag=tag, status=status):
                src = status.Get_source()
                try:
                    return src, self.comm.recv(source=src, tag=tag)
                except ValueError:  # not JSON: read as nothing the tag means
                    return src, None
            if time.monotonic() >= deadline:
                return None
            if not spin:
                time.sleep(pause)
                pause = min(pause * 2, 0.005)

    def share(self, value: Any, deadline_s: float = 120.0) -> Any:
        if self.leads:
            for r in range(1, self.size):
                self._send(value, r, SHARE)
            return value
        got = self._recv(0, SHARE, time.monotonic() + deadline_s)
        if got is None:
            raise FleetLost(f"rank 0 sent nothing in {deadline_s:g} s")
        return got[1]

    def measure_clocks(self) -> None:
        deadline = time.monotonic() + 60.0
        if not self.leads:
            for _ in range(CLOCK_ROUNDS):
                if self._recv(0, CLOCK, deadline, spin=True) is None:
                    raise FleetLost("rank 0 stopped measuring the clocks")
                self._send((time.time(), self.host, os.getpid()), 0, CLOCK)
            got = self._recv(0, CLOCK, deadline)
            if got is None:
                raise FleetLost("rank 0 sent no clock offset")
            if not finite(got[1]) or abs(got[1]) > 1e9:
                raise FleetLost(f"rank 0 sent a clock offset this rank cannot read ({got[1]!r})")
            self.offset_s = float(got[1])
            return
        self.offsets[0] = {"offset_s": 0.0, "rtt_s": 0.0}
        for r in range(1, self.size):
            best: tuple[float, float] | None = None
            for _ in range(CLOCK_ROUNDS):
                t1 = time.time()
                self._send(None, r, CLOCK)
                got = self._recv(r, CLOCK, deadline, spin=True)
                t2 = time.time()
                if got is None:
                    raise FleetLost(f"rank {r} did not answer the clock measurement")
                said = fields(got[1], 3, (int, float), str, int)
                if said is None or not finite(said[0]) or not _host(said[1]):
                    raise FleetLost(f"rank {r} answered the clock measurement with {got[1]!r:.80}")
                their_time, self.hosts[r], self.pids[r] = said
                rtt, offset = t2 - t1, float(their_time) - (t1 + t2) / 2
                if best is None or rtt < best[0]:
                    best = (rtt, offset)
            assert best is not None
            self.offsets[r] = {"offset_s": round(best[1], 6), "rtt_s": round(best[0], 6)}
            self._send(best[1], r, CLOCK)

    # ---------------------------------------------------------------- a trial
    def start(self, key: str, ranks: range, deadline_s: float, stagger_s: float = 0.0) -> float:
        deadline = time.monotonic() + deadline_s
        if self.leads:
            waiting = {r for r in range(1, self.size) if r not in self.lost}
            while waiting:
                got = self._recv(self.MPI.ANY_SOURCE, READY, deadline)
                if got is None:
                    for r in waiting:
                        self.lost[r] = self.gone(r) or (
                            f"did not reach the start of {key} within {deadline_s:.0f} s"
                        )
                    break
                src, said = got
                parts = fields(said, 2, str, str)
                if parts is None:
                    self.lost[src] = f"sent a start message rank 0 cannot read ({said!r:.80})"
                    waiting.discard(src)
                    continue
                their_key, why = parts
                if why:  # the rank is on its way out
                    self.lost[src] = why
                    waiting.discard(src)
                elif their_key == key:
                    waiting.discard(src)
            if self.lost:
                why = "; ".join(f"rank {r} {w}" for r, w in sorted(self.lost.items()))
                self.stop(why)
                raise FleetLost(why)
            t0 = time.time() + START_LEAD_S
            for r in range(1, self.size):
                self._send(("go", key, t0), r, GO)
        else:
            self._send((key, ""), 0, READY)
            got = self._recv(0, GO, deadline)
            if got is None:
                raise FleetLost(f"rank 0 gave no start for {key} within {deadline_s:.0f} s")
            said = fields(got[1], 3, str, str, (int, float, str))
            if (
                said is None
                or said[0] not in ("go", "stop")
                or said[0] == "go"
                and not finite(said[2])
            ):
                raise FleetLost(f"rank 0 sent a start this rank cannot read ({got[1]!r:.80})")
            what, _, t0 = said
            if what != "go":
                self._stopped = True
                raise FleetStopped(f"rank 0 stopped the fleet: {t0}")
        if self.rank in ranks:  # sleep to the agreed start in this rank's clock
            wait = t0 + self.offset_s + stagger_s * self.rank - time.time()
            if wait > 0:
                time.sleep(wait)
        return t0

    def send(self, key: str, payload: Any) -> None:
        self._send((key, payload), 0, ROW)

    def gather(self, key: str, ranks: range, deadline_s: float) -> dict[int, Any]:
        deadline = time.monotonic() + deadline_s
        waiting = {r for r in ranks if r != 0 and r not in self.lost}
        out: dict[int, Any] = {}
        interrupted = False
        while waiting:
            try:
                got = self._recv(self.MPI.ANY_SOURCE, ROW, deadline)
            except KeyboardInterrupt:  # Ctrl-C, or the launcher ending the job: the others
                interrupted = self.signalled = True  # were told too; their rows come at once
                deadline = min(deadline, time.monotonic() + INTERRUPTED_WAIT_S)
                continue
            if got is None:
                for r in waiting:
                    self.lost[r] = self.gone(r) or (
                        f"sent no result of {key} within {INTERRUPTED_WAIT_S:g} s of the "
                        "interruption" if interrupted
                        else f"sent no result of {key} within {deadline_s:.0f} s"
                    )  # fmt: skip
                break
            src, said = got
            parts = fields(said, 2, str, object)
            if parts is None:
                self.lost[src] = f"sent a result rank 0 cannot read ({said!r:.80})"
                waiting.discard(src)
                continue
            their_key, payload = parts
            if their_key == key and src in waiting:
                out[src] = payload
                waiting.discard(src)
        return out

    def gone(self, rank: int) -> str:
        """Why a rank on this host sent nothing, when its process is gone ("" otherwise)."""
        pid = self.pids.get(rank)
        if pid is None or self.hosts.get(rank) != self.host:
            return ""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"died (pid {pid} is gone)"
        except OSError:
            pass
        return ""

    def stop(self, reason: str) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.leads:
            for r in range(1, self.size):
                if r not in self.lost:
                    self._send(("stop", "", reason), r, GO)
        else:
            self._send(("", reason or "stopped"), 0, READY)

    def close(self, failure: BaseException | None = None) -> None:
        signalled = isinstance(failure, KeyboardInterrupt)
        self.signalled = self.signalled or signalled
        if not self.leads:
            self._send(self.rank, 0, BYE)  # this rank's clean-up is done
        deadline = time.monotonic() + (2.0 if failure is not None else 10.0)
        while self._pending and time.monotonic() < deadline:
            self._pending = [r for r in self._pending if not r.Test()]
            time.sleep(0.005)
        if self.leads and self.lost:
            # a rank that died or hangs would hold MPI_Finalize forever: once the others have
            # cleaned up, end the job (the launcher ends every rank still there)
            waiting = {r for r in range(1, self.size) if r not in self.lost}
            deadline = time.monotonic() + (INTERRUPTED_WAIT_S if self.signalled else BYE_WAIT_S)
            while waiting:
                got = self._recv(self.MPI.ANY_SOURCE, BYE, deadline)
                if got is None:
                    break
                waiting.discard(got[0])
        if failure is not None or (self.leads and self.lost):
            # MPI_Finalize would wait for a rank that is gone: the job ends at this
            # process's exit, after its last line (the error) is out
            atexit.register(self._abort)
            return
        self.MPI.Finalize()

    def _abort(self) -> None:
        """End the job. Open MPI's MPI_Abort can wait forever while its launcher is already
        ending the job (a rank died): after ABORT_WAIT_S this process exits without it, and
        a rank that exits without MPI_Finalize makes the launcher end the rest."""
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        if self.signalled:  # the launcher is ending the job already
            os._exit(1)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # ends the process, GIL or not
        signal.alarm(ABORT_WAIT_S)
        self.comm.Abort(1)


def launched_by_mpi() -> bool:
    """True when a launcher (Open MPI's or a PMI one) started this process."""
    return any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


__all__ = [
    "INSTALL_LINE", "Fleet", "FleetLost", "FleetStopped", "MpiFleet", "launched_by_mpi",
]  # fmt: skip
