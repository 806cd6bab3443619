"""A loopback mirror of published files that fails on demand (tests only; nothing leaves 127.0.0.1).

`Mirror(root)` writes the synthetic published fixture (`published_fixtures.write_published`) under `root/files`, a
manifest of it in the format of data/published_manifest.tsv (`root/manifest.tsv`), and serves each file at
/<commit>/<repo_path>. `mirror.env()` is what a client needs: CIRCUITDEV_PUBLISHED_URL pointing here and
CIRCUITDEV_PUBLISHED_MANIFEST naming the manifest. Faults, per local path (`mirror.faults[path] = kind`):

    "404" / "503"  that HTTP error
    "corrupt"      the right length, one byte changed
    "short"        the first half only, with a Content-Length that says so
    "drop"         the full Content-Length announced, half the body sent, then the connection closed
    "trickle"      one byte every 50 ms (a 60 kB file would take most of an hour)
    "hang"         the request is read and nothing is ever answered
    "hold"         half the body, then wait until `mirror.release()` (a fetch caught mid-file, e.g. to kill it);
                   `mirror.arrived` is set when such a request is being held
    "loop"         a redirect to itself, for ever
    "endless"      no Content-Length, the file's bytes repeated without end (until the client hangs up)
    "pause"        as "hold", but after `mirror.release()` the rest of the body follows (a slow fetch that
                   completes: what a second run meets while the first is still downloading)

`mirror.requests` lists the paths asked for, in order.
"""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
import time
from pathlib import Path

from published_fixtures import write_published

COMMIT = "c0ffee" * 6 + "c0ff"  # 40 hex digits


class Mirror:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.files = write_published(self.root / "files")
        self.entries = []  # (local_path, repo_path, bytes, sha256)
        for path in sorted(p for p in self.files.rglob("*") if p.is_file()):
            data = path.read_bytes()
            local = str(path.relative_to(self.files))
            self.entries.append((local, f"results/{local}", len(data), hashlib.sha256(data).hexdigest()))
        self.manifest = self.root / "manifest.tsv"
        rows = "".join(f"{local}\t{repo}\t{COMMIT}\t{n}\t{sha}\n" for local, repo, n, sha in self.entries)
        self.manifest.write_text(f"# the fixture mirror's files\nlocal_path\trepo_path\tcommit\tbytes\tsha256\n{rows}")
        self.by_url = {f"/{COMMIT}/{repo}": local for local, repo, _, _ in self.entries}
        self.faults: dict[str, str] = {}
        self.requests: list[str] = []
        self.arrived, self._released, self._stopping = threading.Event(), threading.Event(), threading.Event()
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                mirror.requests.append(self.path)
                local = mirror.by_url.get(self.path)
                if local is None:
                    self.send_error(404)
                    return
                mirror.serve(self, local, (mirror.files / local).read_bytes())

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/{{commit}}/{{repo_path}}"

    # ------------------------------------------------------------------------------------------------- serving

    def serve(self, handler, local: str, body: bytes) -> None:
        fault = self.faults.get(local)
        if fault in ("404", "503"):
            handler.send_error(int(fault))
            return
        if fault == "hang":
            self._stopping.wait(120)
            return
        if fault == "loop":
            handler.send_response(302)
            handler.send_header("Location", handler.path)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        if fault == "endless":
            handler.send_response(200)
            handler.end_headers()  # no length: the body ends when the connection does
            try:
                while not self._stopping.is_set():
                    handler.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass
            handler.close_connection = True
            return
        if fault == "corrupt":
            body = body[:10] + bytes([body[10] ^ 0xFF]) + body[11:]
        if fault == "short":
            body = body[: len(body) // 2]
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        try:
            if fault == "trickle":
                for i in range(len(body)):
                    if self._stopping.is_set():
                        return
                    handler.wfile.write(body[i:i + 1])
                    handler.wfile.flush()
                    time.sleep(0.05)
                return
            if fault == "pause":
                handler.wfile.write(body[: len(body) // 2])
                handler.wfile.flush()
                self.arrived.set()
                self._released.wait(120)
                handler.wfile.write(body[len(body) // 2:])
                return
            if fault in ("drop", "hold"):
                handler.wfile.write(body[: len(body) // 2])
                handler.wfile.flush()
                if fault == "hold":
                    self.arrived.set()
                    self._released.wait(120)
                handler.connection.shutdown(socket.SHUT_RDWR)
                handler.close_connection = True
                return
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up: what a deadline does
            pass

    # ------------------------------------------------------------------------------------------------- clients

    def env(self) -> dict[str, str]:
        return {"CIRCUITDEV_PUBLISHED_URL": self.url, "CIRCUITDEV_PUBLISHED_MANIFEST": str(self.manifest)}

    @property
    def local_paths(self) -> list[str]:
        return [local for local, _, _, _ in self.entries]

    def release(self) -> None:
        self._released.set()

    def stop(self) -> None:
        self._stopping.set()
        self._released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port_url() -> str:
    """A URL template whose port refuses connections (an offline machine, as far as the client can tell)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/{{commit}}/{{repo_path}}"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by relative path, with its bytes (for before/after comparisons)."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} \
        if folder.is_dir() else {}
