"""A package index on loopback that serves a folder of wheels (the simple repository API).

Why: installing from a folder (``--find-links DIR``) makes pip read wheels in place, so
TMPDIR and the HTTP cache would never be touched and their placement could not matter.
Served over HTTP, pip and uv take their real path: download into TMPDIR, store in the
HTTP cache, reuse it when warm. PEP 503 HTML pages with ``#sha256=`` fragments and PEP 658 metadata; files are
sent with long-lived ``Cache-Control`` as PyPI does, so a warm cache downloads nothing.

``mbps`` caps the total rate of file bytes sent (one token bucket shared by all
connections) to emulate a slow download link. Counters (requests, file bytes served) let a
trial record what it really downloaded.
"""

from __future__ import annotations

import hashlib
import html
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from iobench.errors import UsageError

_CHUNK = 64 * 1024


def normalize(name: str) -> str:
    """PEP 503 project-name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _project_of(filename: str) -> str | None:
    if filename.endswith(".whl"):
        return normalize(filename.split("-")[0])
    for ext in (".tar.gz", ".zip", ".tar.bz2"):
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            return normalize(stem.rsplit("-", 1)[0]) if "-" in stem else None
    return None


def _sha256(path: Path) -> str:
    """In 1 MiB chunks: a CUDA torch wheel is 2.5 GB."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _wheel_metadata(path: Path) -> bytes | None:
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            name = next((n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
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


class _Bucket:
    """Token bucket in bytes per second, shared by all connections."""

    def __init__(self, mbps: float | None) -> None:
        self.rate = mbps * 1e6 / 8 if mbps else None  # megabits per second -> bytes/s
        self.lock = threading.Lock()
        self.tokens = 0.0
        self.last = time.monotonic()

    def take(self, n: int) -> None:
        if self.rate is None:
            return
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.rate * 0.25, self.tokens + (now - self.last) * self.rate)
            self.last = now
            self.tokens -= n
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if wait > 0:
            time.sleep(wait)


class LocalIndex:
    """Serve ``wheelhouse`` on a free 127.0.0.1 port; use as a context manager."""

    def __init__(self, wheelhouse: Path, mbps: float | None = None) -> None:
        if not wheelhouse.is_dir():
            raise UsageError(f"wheelhouse {wheelhouse} is not a folder")
        if mbps is not None and mbps <= 0:
            raise UsageError(f"--index-mbps must be > 0 (got {mbps})")
        self.wheelhouse = wheelhouse
        self.mbps = mbps
        self.counters = IndexCounters()
        self._lock = threading.Lock()
        self._bucket = _Bucket(mbps)
        self.projects: dict[str, list[tuple[str, str]]] = {}
        # PEP 658: a wheel's METADATA served beside it, as PyPI does, so that pip and uv
        # resolve without fetching whole wheels (uv would otherwise download each one twice)
        self.metadata: dict[str, bytes] = {}
        for path in sorted(wheelhouse.iterdir()):
            project = _project_of(path.name)
            if project and path.is_file():
                digest = _sha256(path)
                self.projects.setdefault(project, []).append((path.name, digest))
                if path.name.endswith(".whl"):
                    meta = _wheel_metadata(path)
                    if meta is not None:
                        self.metadata[path.name] = meta
        if not self.projects:
            raise UsageError(f"wheelhouse {wheelhouse} holds no wheels or sdists")
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle
    @property
    def url(self) -> str:
        """The index URL to give pip (``--index-url``) or uv (``--index-url``)."""
        assert self._server is not None, "index not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/simple/"

    def start(self) -> LocalIndex:
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

            def do_HEAD(self) -> None:  # noqa: N802
                self._serve(head=True)

            def do_GET(self) -> None:  # noqa: N802
                self._serve(head=False)

            def _send(self, code: int, body: bytes, ctype: str, cache: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", cache)
                self.end_headers()

            def _serve(self, head: bool) -> None:
                with index._lock:
                    index.counters.requests += 1
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                if path in ("/simple", "/simple/"):
                    links = "".join(
                        f'<a href="/simple/{p}/">{p}</a><br>\n' for p in sorted(index.projects)
                    )
                    body = f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()
                    self._send(200, body, "text/html", "max-age=600")
                    if not head:
                        self.wfile.write(body)
                    return
                m = re.fullmatch(r"/simple/([^/]+)/?", path)
                if m:
                    files = index.projects.get(normalize(m.group(1)))
                    if files is None:
                        body = b"not found\n"
                        self._send(404, body, "text/plain", "no-cache")
                        if not head:
                            self.wfile.write(body)
                        return
                    links = "".join(
                        f'<a href="/files/{urllib.parse.quote(fn)}#sha256={d}"{_meta_attrs(index.metadata.get(fn))}>'
                        f"{html.escape(fn)}</a><br>\n"
                        for fn, d in files
                    )
                    body = (
                        f"<!DOCTYPE html><html><head><meta name=\"pypi:repository-version\" "
                        f"content=\"1.0\"></head><body>\n{links}</body></html>\n"
                    ).encode()
                    self._send(200, body, "text/html", "max-age=600")
                    if not head:
                        self.wfile.write(body)
                    return
                m = re.fullmatch(r"/files/([^/]+)\.metadata", path)
                if m and m.group(1) in index.metadata:
                    body = index.metadata[m.group(1)]
                    self._send(200, body, "text/plain", "max-age=365000000, immutable, public")
                    if not head:
                        self.wfile.write(body)
                    return
                m = re.fullmatch(r"/files/([^/]+)", path)
                target = index.wheelhouse / m.group(1) if m else None
                if target is None or not target.is_file():
                    body = b"not found\n"
                    self._send(404, body, "text/plain", "no-cache")
                    if not head:
                        self.wfile.write(body)
                    return
                size = target.stat().st_size
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(size))
                self.send_header("Cache-Control", "max-age=365000000, immutable, public")
                self.send_header("ETag", f'"{size}-{int(target.stat().st_mtime)}"')
                self.end_headers()
                if head:
                    return
                with index._lock:
                    index.counters.file_requests += 1
                with open(target, "rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        index._bucket.take(len(chunk))
                        try:
                            self.wfile.write(chunk)
                        except (BrokenPipeError, ConnectionResetError):
                            return
                        with index._lock:
                            index.counters.file_bytes += len(chunk)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="iobench-index", daemon=True
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
