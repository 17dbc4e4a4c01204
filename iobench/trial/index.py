"""A package index on loopback that serves a folder of wheels (the simple repository API).

Why: installing from a folder (``--find-links DIR``) makes pip read wheels in place, so
TMPDIR and the HTTP cache would never be touched and their placement could not matter.
Served over HTTP, pip and uv take their real path: download into TMPDIR, store in the
HTTP cache, reuse it when warm. PEP 503 HTML pages with ``#sha256=`` fragments and PEP 658
metadata; files are sent with long-lived ``Cache-Control`` as PyPI does, so a warm cache
downloads nothing.

What it serves, and nothing else: the wheels found in the folder at start (regular files
with a valid wheel name; links, dotfiles, sdists and any other file are not listed and not
served, since any local process can reach the port) and their PEP 658 metadata.

``mbit_per_s`` caps the total rate of file bytes sent, in megabits per second (one token
bucket shared by all connections, :class:`iobench.system.shaping.TokenBucket`) to emulate a
slow download link. Counters (requests, file bytes served) let a trial record what it
really downloaded.
"""

from __future__ import annotations

import hashlib
import html
import math
import os
import re
import stat
import threading
import time
import urllib.parse
import zipfile
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from iobench.errors import UsageError
from iobench.system.shaping import TokenBucket

_CHUNK = 64 * 1024
_MAX_MBIT = 1e6  # 1 Tbit/s: beyond this a cap means nothing
_MIN_MBIT = 0.01
_IMMUTABLE = "max-age=365000000, immutable, public"


def normalize(name: str) -> str:
    """PEP 503 project-name normalisation."""
    return str(canonicalize_name(name))


def _project_of(filename: str) -> str | None:
    """The project a wheel file belongs to, or None when the name is not a wheel's."""
    try:
        return str(parse_wheel_filename(filename)[0])
    except InvalidWheelFilename:
        return None


def _sha256(path: Path) -> str:
    """In 1 MiB chunks: a CUDA torch wheel is 2.5 GB."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _wheel_metadata(path: Path) -> bytes | None:
    try:
        with zipfile.ZipFile(path) as zf:
            name = next(
                (
                    n
                    for n in zf.namelist()
                    if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
                ),
                None,
            )
            return zf.read(name) if name else None
    except (OSError, zipfile.BadZipFile):
        return None


def _meta_attrs(meta: bytes | None) -> str:
    if meta is None:
        return ""
    digest = hashlib.sha256(meta).hexdigest()
    return f' data-dist-info-metadata="sha256={digest}" data-core-metadata="sha256={digest}"'


@dataclass
class IndexCounters:
    """What the index has served since it started (monotonic; subtract two snapshots)."""

    requests: int = 0
    file_requests: int = 0
    file_bytes: int = 0


class _Link:
    """The download link: bytes pass at ``mbit_per_s`` (None: unlimited); blocks the sender."""

    def __init__(self, mbit_per_s: float | None) -> None:
        rate = mbit_per_s * 1e6 / 8 if mbit_per_s else None  # megabits per second -> bytes/s
        self.bucket = TokenBucket(rate, depth=rate * 0.25, start_full=False) if rate else None

    def take(self, n: int) -> None:
        if self.bucket is None:
            return
        now = time.monotonic()
        wait = self.bucket.reserve(now, n) - now
        if wait > 0:
            time.sleep(wait)


def check_mbit(mbit_per_s: float | None) -> float | None:
    """A rate cap in megabits/s: None, or finite and in [0.01, 1e6]; else one UsageError
    line (below 0.01 the pacing's sleeps overflow, and a 10 MB wheel would take days)."""
    if mbit_per_s is None:
        return None
    if not (
        isinstance(mbit_per_s, int | float)
        and math.isfinite(mbit_per_s)
        and _MIN_MBIT <= mbit_per_s <= _MAX_MBIT
    ):
        raise UsageError(
            f"--index-mbit must be a number of megabits/s in [{_MIN_MBIT:g}, {_MAX_MBIT:g}] "
            f"(got {mbit_per_s})"
        )
    return float(mbit_per_s)


def _regular_wheels(wheelhouse: Path) -> list[Path]:
    """Regular files (not links) with a valid wheel name, sorted."""
    found = []
    for path in sorted(wheelhouse.iterdir()):
        try:
            mode = path.lstat().st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) and not path.name.startswith(".") and _project_of(path.name):
            found.append(path)
    return found


class LocalIndex:
    """Serve the wheels of ``wheelhouse`` on a free 127.0.0.1 port; use as a context manager."""

    def __init__(self, wheelhouse: Path, mbit_per_s: float | None = None) -> None:
        if not wheelhouse.is_dir():
            raise UsageError(f"wheelhouse {wheelhouse} is not a folder")
        self.wheelhouse = wheelhouse
        self.mbit_per_s = check_mbit(mbit_per_s)
        self.counters = IndexCounters()
        self._lock = threading.Lock()
        self._link = _Link(self.mbit_per_s)
        self.projects: dict[str, list[tuple[str, str]]] = {}
        self.files: set[str] = set()  # the only names ever served
        # PEP 658: a wheel's METADATA served beside it, as PyPI does, so that pip and uv
        # resolve without fetching whole wheels (uv would otherwise download each one twice)
        self.metadata: dict[str, bytes] = {}
        for path in _regular_wheels(wheelhouse):
            self.projects.setdefault(str(_project_of(path.name)), []).append(
                (path.name, _sha256(path))
            )
            self.files.add(path.name)
            meta = _wheel_metadata(path)
            if meta is not None:
                self.metadata[path.name] = meta
        if not self.projects:
            raise UsageError(f"wheelhouse {wheelhouse} holds no wheels (regular *.whl files)")
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle
    @property
    def url(self) -> str:
        """The index URL to give pip (``--index-url``) or uv (``--index-url``)."""
        assert self._server is not None, "index not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/simple/"

    def start(self) -> LocalIndex:
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY: the headers and the body go out as two writes; with Nagle on, the
            # body waited for the client's delayed ACK of the headers, 40 ms per request on a
            # kept-alive connection (~0.4 s of every smoke install's download phase)
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

            def do_HEAD(self) -> None:  # noqa: N802
                index._respond(self, head=True)

            def do_GET(self) -> None:  # noqa: N802
                index._respond(self, head=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        server = self._server
        self._thread = threading.Thread(
            # shutdown() waits for the loop to look at its flag: every 0.5 s by default,
            # which was most of a run's clean-up; 20 wake-ups a second cost nothing
            target=lambda: server.serve_forever(poll_interval=0.05),
            name="iobench-index",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def snapshot(self) -> IndexCounters:
        with self._lock:
            return IndexCounters(**vars(self.counters))

    def __enter__(self) -> LocalIndex:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving
    def _page(self, path: str) -> tuple[int, bytes, str, str] | None:
        """The response to a page or metadata request; None when ``path`` asks for a wheel."""
        if path in ("/simple", "/simple/"):
            links = "".join(f'<a href="/simple/{p}/">{p}</a><br>\n' for p in sorted(self.projects))
            return (
                200,
                f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode(),
                "text/html",
                "max-age=600",
            )
        m = re.fullmatch(r"/simple/([^/]+)/?", path)
        if m:
            files = self.projects.get(normalize(m.group(1)))
            if files is None:
                return 404, b"not found\n", "text/plain", "no-cache"
            links = "".join(
                f'<a href="/files/{urllib.parse.quote(fn)}#sha256={d}"{_meta_attrs(self.metadata.get(fn))}>'
                f"{html.escape(fn)}</a><br>\n"
                for fn, d in files
            )
            body = (
                '<!DOCTYPE html><html><head><meta name="pypi:repository-version" '
                f'content="1.0"></head><body>\n{links}</body></html>\n'
            ).encode()
            return 200, body, "text/html", "max-age=600"
        m = re.fullmatch(r"/files/([^/]+)\.metadata", path)
        if m and m.group(1) in self.metadata:
            return 200, self.metadata[m.group(1)], "text/plain", _IMMUTABLE
        m = re.fullmatch(r"/files/([^/]+)", path)
        if m and m.group(1) in self.files:
            return None
        return 404, b"not found\n", "text/plain", "no-cache"

    def _open_wheel(self, name: str) -> tuple[int, os.stat_result] | None:
        """Open a listed wheel without following links; None unless it is still a regular file."""
        try:
            fd = os.open(self.wheelhouse / name, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        return fd, st

    def _respond(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        with self._lock:
            self.counters.requests += 1
        path = urllib.parse.unquote(urllib.parse.urlsplit(h.path).path)
        page = self._page(path)
        opened = self._open_wheel(path.removeprefix("/files/")) if page is None else None
        if page is None and opened is None:
            page = (404, b"not found\n", "text/plain", "no-cache")
        if page is not None:
            code, body, ctype, cache = page
            _headers(h, code, ctype, len(body), cache)
            if not head:
                h.wfile.write(body)
            return
        fd, st = opened  # type: ignore[misc]
        with open(fd, "rb") as fh:
            _headers(
                h,
                200,
                "application/octet-stream",
                st.st_size,
                _IMMUTABLE,
                f'"{st.st_size}-{int(st.st_mtime)}"',
            )
            if head:
                return
            with self._lock:
                self.counters.file_requests += 1
            while chunk := fh.read(_CHUNK):
                self._link.take(len(chunk))
                with self._lock:  # counted before it is sent: a client that has it sees it counted
                    self.counters.file_bytes += len(chunk)
                try:
                    h.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return


def _headers(
    h: BaseHTTPRequestHandler, code: int, ctype: str, length: int, cache: str, etag: str = ""
) -> None:
    h.send_response(code)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(length))
    h.send_header("Cache-Control", cache)
    if etag:
        h.send_header("ETag", etag)
    h.end_headers()
