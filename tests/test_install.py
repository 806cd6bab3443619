"""Where `make venv` gets torch (tools/torch_index.py and the Makefile's venv recipe), without the network.

The choice: TORCH_INDEX=default -> the default index, no probe; a URL or a name -> that index; unset -> probe the CPU
index (TORCH_CPU_INDEX, pointed here at loopback servers): answered -> the CPU index, refused or silent -> the default
index within the probe's timeout, saying so. `make -n venv` in a copy of the Makefile shows the pip command it runs;
with .venv up to date nothing is probed. The torch pin is the same in the Makefile, pyproject.toml and environment.yml.
"""

from __future__ import annotations

import http.server
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "torch_index.py"

_spec = importlib.util.spec_from_file_location("torch_index", SCRIPT)
torch_index = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(torch_index)


def _no_probe(url):
    raise AssertionError(f"probed {url} although TORCH_INDEX was set")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: connecting is refused at once


@pytest.fixture
def index_server():
    """A loopback 'PyPI simple index': /cpu/torch/ answers 200, anything else 404. Yields its base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            ok = self.path.rstrip("/") == "/cpu/torch"
            body = b"<a href='torch-2.13.0+cpu.whl'>torch</a>" if ok else b"not here"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent_server():
    """A loopback port that accepts connections and never answers (a hanging index). Yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


# --- the decision, a pure function -------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", ["default", "DEFAULT", "pypi"])
def test_default_setting_uses_the_default_index_without_probing(setting):
    args, message = torch_index.choose(setting, _no_probe, system="Linux")
    assert args == []
    assert "default index" in message and f"TORCH_INDEX={setting}" in message and "CUDA build" in message


@pytest.mark.parametrize(
    "setting,url",
    [
        ("https://download.pytorch.org/whl/cu128", "https://download.pytorch.org/whl/cu128"),
        ("http://mirror.example/simple", "http://mirror.example/simple"),
        ("cu128", "https://download.pytorch.org/whl/cu128"),
        ("cpu", "https://download.pytorch.org/whl/cpu"),
        ("rocm6.4", "https://download.pytorch.org/whl/rocm6.4"),
    ],
)
def test_url_or_name_setting_uses_that_index_without_probing(setting, url):
    for system in ("Linux", "Darwin"):
        args, message = torch_index.choose(setting, _no_probe, system=system)
        assert args == ["--index-url", url]
        assert url in message


def test_an_unknown_setting_is_an_error_naming_the_choices():
    with pytest.raises(ValueError, match="default.*cu128"):
        torch_index.choose("cuda please", _no_probe, system="Linux")


@pytest.mark.parametrize("setting", [None, "", "  ", "auto"])
def test_unset_probes_the_cpu_index_and_uses_it_when_it_answers(setting):
    probed = []

    def reachable(url):
        probed.append(url)
        return True, "HTTP 200, 0.2 s"

    args, message = torch_index.choose(setting, reachable, cpu_index="http://cpu.example/whl/cpu", system="Linux")
    assert probed == ["http://cpu.example/whl/cpu"]
    assert args == ["--index-url", "http://cpu.example/whl/cpu"]
    assert "CPU build" in message


def test_unset_falls_back_to_the_default_index_in_one_line_when_unreachable():
    args, message = torch_index.choose(None, lambda url: (False, "no answer within 3 s"), system="Linux")
    assert args == []
    assert message.startswith("torch: CPU index unreachable (")
    assert "no answer within 3 s" in message and "installing torch from the default index" in message
    assert "\n" not in message


@pytest.mark.parametrize("system", ["Darwin", "Windows"])
def test_unset_off_linux_takes_the_default_index_without_probing(system):
    args, message = torch_index.choose(None, _no_probe, system=system)
    assert args == [] and system in message


# --- the probe, against loopback servers -----------------------------------------------------------------------


def _within(seconds: float, fn, *args):
    """fn(*args), failing instead of hanging when it has not returned within `seconds`: a hang guard (>= 10x the
    expected time), not a timing. How long the probes take is bench/timings.py's business."""
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("value", fn(*args)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"no answer within {seconds} s: hung"
    return result["value"]


def test_probe_of_a_closed_port_fails_as_refused_not_timed_out():
    ok, detail = _within(60, torch_index.probe_index, f"http://127.0.0.1:{_closed_port()}/cpu", 3)
    assert not ok and "refused" in detail.lower() and "timed out" not in detail  # at once, not at the timeout


def test_probe_of_a_silent_server_gives_up_at_its_timeout(silent_server):
    ok, detail = _within(30, torch_index.probe_index, silent_server + "/cpu", 0.5)
    assert not ok and ("0.5 s" in detail or "timed out" in detail)


def test_probe_of_a_serving_index(index_server):
    assert torch_index.probe_index(index_server + "/cpu", timeout=3)[0] is True
    ok, detail = torch_index.probe_index(index_server + "/nothing", timeout=3)  # 404: not an index
    assert not ok and "HTTP 404" in detail


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_INDEX", "TORCH_CPU_INDEX", "TORCH_INDEX_TIMEOUT",
                                                             "MAKEFLAGS", "MFLAGS")}
    env.update(extra)
    return env


def test_script_prints_pip_arguments_on_stdout_and_one_line_on_stderr(index_server):
    run = subprocess.run([sys.executable, str(SCRIPT), "torch==2.13.0"], capture_output=True, text=True, timeout=30,
                         env=_env(TORCH_CPU_INDEX=index_server + "/cpu"))
    assert run.returncode == 0, run.stderr
    if sys.platform.startswith("linux"):
        assert run.stdout.split() == ["torch==2.13.0", "--index-url", index_server + "/cpu"]
    assert len(run.stderr.strip().splitlines()) == 1
    bad = subprocess.run([sys.executable, str(SCRIPT), "torch==2.13.0"], capture_output=True, text=True, timeout=30,
                         env=_env(TORCH_INDEX="cuda please"))
    assert bad.returncode == 2 and bad.stdout == "" and "not understood" in bad.stderr


# --- the Makefile's venv recipe ------------------------------------------------------------------------------------

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


@pytest.fixture
def checkout(tmp_path):
    """A copy of what the venv recipe reads (Makefile, pyproject.toml, the script), with no .venv."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "tools").mkdir()
    shutil.copy(SCRIPT, tmp_path / "tools" / SCRIPT.name)
    return tmp_path


def _make_n(checkout: Path, *args: str, **env) -> tuple[str, str]:
    """`make -n venv` in the checkout: (recipe, what it said). The 60 s limit is a hang guard, not a timing."""
    run = subprocess.run(["make", "-n", "venv", f"PYTHON={sys.executable}", *args], cwd=checkout,
                         capture_output=True, text=True, timeout=60, env=_env(**env))
    assert run.returncode == 0, run.stderr
    return run.stdout, run.stderr


def _torch_line(recipe: str) -> str:
    lines = [line for line in recipe.splitlines() if re.search(r"pip install .*torch==", line)]
    assert len(lines) == 1, recipe
    return lines[0]


@needs_make
def test_make_venv_with_torch_index_default(checkout):
    recipe, said = _make_n(checkout, "TORCH_INDEX=default")
    assert _torch_line(recipe).split() == [".venv/bin/pip", "install", "--quiet", "torch==2.13.0"]
    assert "TORCH_INDEX=default" in said
    # the rest of the recipe is unchanged: venv, pip, the project, the stamp
    assert f"{sys.executable} -m venv .venv" in recipe and "pip install --quiet -e '.[dev]'" in recipe
    assert "touch .venv/.installed" in recipe


@needs_make
@pytest.mark.parametrize("setting,url", [("https://download.pytorch.org/whl/cu128",
                                          "https://download.pytorch.org/whl/cu128"),
                                         ("cu126", "https://download.pytorch.org/whl/cu126")])
def test_make_venv_with_torch_index_url(checkout, setting, url):
    recipe, _ = _make_n(checkout, f"TORCH_INDEX={setting}")
    assert _torch_line(recipe).split()[3:] == ["torch==2.13.0", "--index-url", url]
    recipe_env, _ = _make_n(checkout, TORCH_INDEX=setting)  # from the environment as well as the command line
    assert _torch_line(recipe_env) == _torch_line(recipe)


@needs_make
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="off Linux the CPU index is not probed")
def test_make_venv_unset_uses_the_cpu_index_when_it_answers(checkout, index_server):
    recipe, said = _make_n(checkout, TORCH_CPU_INDEX=index_server + "/cpu")
    assert _torch_line(recipe).split()[3:] == ["torch==2.13.0", "--index-url", index_server + "/cpu"]
    assert "CPU build" in said


@needs_make
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="off Linux the CPU index is not probed")
def test_make_venv_unset_falls_back_at_once_when_the_cpu_index_is_unreachable(checkout):
    recipe, said = _make_n(checkout, TORCH_CPU_INDEX=f"http://127.0.0.1:{_closed_port()}/cpu")
    assert _torch_line(recipe).split()[3:] == ["torch==2.13.0"]
    assert "CPU index unreachable" in said and "installing torch from the default index" in said
    assert "refused" in said.lower()  # at once: no wait for the probe's timeout


@needs_make
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="off Linux the CPU index is not probed")
def test_make_venv_falls_back_within_the_timeout_when_the_index_hangs(checkout, silent_server):
    recipe, said = _make_n(checkout, TORCH_CPU_INDEX=silent_server + "/cpu", TORCH_INDEX_TIMEOUT="1")
    assert _torch_line(recipe).split()[3:] == ["torch==2.13.0"]
    assert "CPU index unreachable" in said and ("no answer within 1 s" in said or "timed out" in said)


@needs_make
def test_make_stops_on_a_bad_torch_index(checkout):
    run = subprocess.run(["make", "-n", "venv", f"PYTHON={sys.executable}", "TORCH_INDEX=cuda please"],
                         cwd=checkout, capture_output=True, text=True, timeout=60, env=_env())
    assert run.returncode != 0
    assert "not understood" in run.stderr and "pip install" not in run.stdout


@needs_make
def test_an_up_to_date_venv_is_not_probed(checkout):
    (checkout / ".venv").mkdir()
    stamp = checkout / ".venv" / ".installed"
    stamp.touch()
    os.utime(checkout / "pyproject.toml", (time.time() - 60, time.time() - 60))
    recipe, said = _make_n(checkout, TORCH_CPU_INDEX=f"http://127.0.0.1:{_closed_port()}/cpu")
    assert "pip install" not in recipe and "torch" not in said  # `make test` on a built venv never waits on it


def test_torch_pin_is_the_same_everywhere():
    makefile = re.search(r"^TORCH_VERSION\s*:?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    pyproject = re.search(r'"torch==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    conda = re.search(r"^\s*-\s*torch==(\S+)", (ROOT / "environment.yml").read_text(), re.M).group(1)
    assert makefile == pyproject == conda
    assert "download.pytorch.org/whl/cpu" in (ROOT / "environment.yml").read_text()
