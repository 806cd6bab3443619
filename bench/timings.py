"""How long the things the tests used to time take here, against the budgets they used to assert (issue 22).

The tests assert behaviour only (plus hang guards >= 10x the expected time); speed lives here, measured on demand and
printed as a ratio to its budget (< 1: within it). Wall time follows the machine's load: run it on a quiet machine
and read the ratios, not single numbers. Nothing leaves 127.0.0.1: the "hub" is offline (HF_HUB_OFFLINE=1, an empty
HF_HOME) and the indexes and mirrors are loopback sockets.

    command start-up   `circuitdev probe` on a hub panel, offline: interpreter, imports, our message   budget 90 s
    hub error          `load_revision` of a hub model, offline, in a fresh interpreter                   budget 15 s
    probe, refused     tools/torch_index.py's probe of a closed port (timeout 3 s): at once               budget 2 s
    probe, silent      the same probe of a port that never answers (timeout 0.5 s): at its timeout        budget 1.5 s
    make -n, refused   `make -n venv` with a closed CPU index                                             budget 5 s
    make -n, silent    `make -n venv` with a silent CPU index, TORCH_INDEX_TIMEOUT=1                       budget 4 s
    download deadline  `published fetch --timeout 1` (in-process) from a server trickling a byte / 50 ms  budget 1.5 s
    page run           `circuitdev notebook run method` (kernel start, one page, no data)                 budget 60 s

    .venv/bin/python bench/timings.py [--only NAME ...] [--repeats 1]
"""

from __future__ import annotations

import argparse
import http.server
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CLI = Path(PY).parent / "circuitdev"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_INDEX", "TORCH_CPU_INDEX", "TORCH_INDEX_TIMEOUT",
                                                             "MAKEFLAGS", "MFLAGS")}
    return {**env, "PYTHONPATH": str(ROOT / "lib"), **extra}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _silent_port() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock, sock.getsockname()[1]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)


def startup(tmp: Path) -> float:
    env = _env(HF_HUB_OFFLINE="1", HF_HOME=str(tmp / "hf"))
    return _timed(lambda: _run([str(CLI), "probe", "--panel", "olmo-1b-0724", "--revision", "step2000-tokens4B",
                                "--out", str(tmp / "out"), "--no-progress"], env=env))


def hub_error(tmp: Path) -> float:
    code = ("from circuitdev.sources.loading import load_revision\ntry:\n"
            "    load_revision('pythia-1b', 'step3000', progress=False)\nexcept Exception:\n    pass\n")
    return _timed(lambda: _run([PY, "-c", code], env=_env(HF_HUB_OFFLINE="1", HF_HOME=str(tmp / "hf"))))


def _torch_index():
    spec = importlib.util.spec_from_file_location("torch_index", ROOT / "tools" / "torch_index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe_refused(tmp: Path) -> float:
    return _timed(lambda: _torch_index().probe_index(f"http://127.0.0.1:{_closed_port()}/cpu", timeout=3))


def probe_silent(tmp: Path) -> float:
    sock, port = _silent_port()
    try:
        return _timed(lambda: _torch_index().probe_index(f"http://127.0.0.1:{port}/cpu", timeout=0.5))
    finally:
        sock.close()


def _make_n(tmp: Path, **env: str) -> float:
    checkout = tmp / "checkout"
    if not checkout.is_dir():
        (checkout / "tools").mkdir(parents=True)
        for name in ("Makefile", "pyproject.toml"):
            shutil.copy(ROOT / name, checkout / name)
        shutil.copy(ROOT / "tools" / "torch_index.py", checkout / "tools" / "torch_index.py")
    return _timed(lambda: _run(["make", "-n", "venv", f"PYTHON={PY}"], cwd=checkout, env=_env(**env)))


def make_refused(tmp: Path) -> float:
    return _make_n(tmp, TORCH_CPU_INDEX=f"http://127.0.0.1:{_closed_port()}/cpu")


def make_silent(tmp: Path) -> float:
    sock, port = _silent_port()
    try:
        return _make_n(tmp, TORCH_CPU_INDEX=f"http://127.0.0.1:{port}/cpu", TORCH_INDEX_TIMEOUT="1")
    finally:
        sock.close()


def download_deadline(tmp: Path) -> float:
    """A one-file manifest served a byte every 50 ms; the fetch gives up at its 1 s deadline (in-process)."""
    import hashlib

    body = b"x" * 4096
    manifest = tmp / "manifest.tsv"
    manifest.write_text("local_path\trepo_path\tcommit\tbytes\tsha256\n"
                        f"a.json\tr/a.json\t{'0' * 40}\t{len(body)}\t{hashlib.sha256(body).hexdigest()}\n")
    stop = threading.Event()

    class Trickle(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    if stop.is_set():
                        return
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["CIRCUITDEV_PUBLISHED_URL"] = f"http://127.0.0.1:{server.server_address[1]}/{{commit}}/{{repo_path}}"
    os.environ["CIRCUITDEV_PUBLISHED_MANIFEST"] = str(manifest)
    try:
        sys.path.insert(0, str(ROOT / "lib"))
        import contextlib
        import io

        import circuitdev.commands.published  # noqa: F401 -- imported first: the deadline, not the imports, is timed
        import circuitdev.sources.fetch  # noqa: F401
        from circuitdev.cli import build_parser, main

        build_parser()

        with contextlib.redirect_stderr(io.StringIO()):
            return _timed(lambda: main(["published", "fetch", "--to", str(tmp / "pub"), "--timeout", "1"]))
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        for key in ("CIRCUITDEV_PUBLISHED_URL", "CIRCUITDEV_PUBLISHED_MANIFEST"):
            os.environ.pop(key, None)


def page_run(tmp: Path) -> float:
    env = _env(CIRCUITDEV_PUBLISHED="none", CIRCUITDEV_RESULTS=str(tmp / "results"), CIRCUITDEV_PANELS="[]")
    return _timed(lambda: _run([str(CLI), "notebook", "run", "method", "--out", str(tmp / "page")], env=env))


BENCHES = {  # name: (function, budget in seconds)
    "command start-up": (startup, 90.0),
    "hub error": (hub_error, 15.0),
    "probe, refused": (probe_refused, 2.0),
    "probe, silent": (probe_silent, 1.5),
    "make -n, refused": (make_refused, 5.0),
    "make -n, silent": (make_silent, 4.0),
    "download deadline": (download_deadline, 1.5),
    "page run": (page_run, 60.0),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME", help="only these (default: all)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds; the best time per bench is kept")
    args = ap.parse_args()
    chosen = {k: v for k, v in BENCHES.items() if not args.only or k in args.only}
    if shutil.which("make") is None:
        chosen = {k: v for k, v in chosen.items() if not k.startswith("make")}
    print(f"{'bench':<20} {'seconds':>8} {'budget':>7} {'ratio':>6}")
    for name, (fn, budget) in chosen.items():
        with tempfile.TemporaryDirectory(prefix="circuitdev-bench-") as tmp:
            best = min(fn(Path(tmp)) for _ in range(max(1, args.repeats)))
        print(f"{name:<20} {best:8.2f} {budget:7.1f} {best / budget:6.2f}", flush=True)


if __name__ == "__main__":
    main()
