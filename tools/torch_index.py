#!/usr/bin/env python3
"""Where `make venv` installs torch from. Standard library only: it runs before .venv exists.

    python3 tools/torch_index.py torch==2.13.0

prints the arguments for `pip install` on stdout (the requirement, then `--index-url URL` or nothing for the default
index) and one line on stderr saying what was chosen and why. The choice, from the environment:

- TORCH_INDEX unset, empty or `auto`: on Linux, probe PyTorch's CPU index (one GET of `<index>/torch/`, at most
  TORCH_INDEX_TIMEOUT seconds, default 3, DNS included). Reachable: install from it (the ~190 MB CPU build).
  Unreachable: say so in one line and use the default index (on Linux that is PyPI's CUDA build, about 2.7 GB
  with its NVIDIA libraries; a machine that has a local wheel, like the one this was written on, gets that).
  On macOS and Windows PyPI's torch is already CPU-only (MPS on Apple silicon): default index, no probe.
- TORCH_INDEX=default (or `pypi`): the default index (whatever pip is configured to use), no probe.
- TORCH_INDEX=<URL>: that index, e.g. https://download.pytorch.org/whl/cu128 for a GPU machine.
- TORCH_INDEX=<name> (cpu, cu126, cu128, rocm6.4, ...): https://download.pytorch.org/whl/<name>.
- TORCH_CPU_INDEX: the CPU index to probe and use (default https://download.pytorch.org/whl/cpu); tests point it
  at a loopback server.

`--index-url`, not `--extra-index-url`: PyTorch's indexes mirror torch's own dependencies (filelock, sympy,
networkx, jinja2, fsspec, typing-extensions, setuptools, and the nvidia-* wheels on the CUDA ones), so this one
`pip install torch` resolves entirely there; the rest of the project is installed in the next step from the default
index. With `--extra-index-url` pip takes the highest version from either index: `2.13.0+cpu` sorts above `2.13.0`
so it usually wins, but where the CPU index lacks a wheel for this Python or platform pip would silently take
PyPI's CUDA build instead; with `--index-url` it stops with an error. (Pip's configured find-links and
extra-index-url still apply.)

The decision is `choose()`, a pure function of the setting, a probe callable and the platform, so the tests check it
without the network.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Callable, List, Optional, Tuple

PYTORCH_WHL = "https://download.pytorch.org/whl"
CPU_INDEX = PYTORCH_WHL + "/cpu"
DEFAULT_TIMEOUT = 3.0
DEFAULT_WORDS = ("default", "pypi")
AUTO_WORDS = ("", "auto")
_NAME = re.compile(r"^(cpu|cu\d+|rocm[\d.]+|xpu)$")

Probe = Callable[[str], Tuple[bool, str]]


def probe_index(index_url: str, timeout: float = DEFAULT_TIMEOUT) -> Tuple[bool, str]:
    """(reachable, detail): one GET of the index's torch page, bounded by `timeout` seconds in all.

    urllib's own timeout does not cover the DNS lookup, so the request runs in a daemon thread and is abandoned when
    `timeout` passes; the answer is never waited for longer than that.
    """
    url = index_url.rstrip("/") + "/torch/"
    answer: List[Tuple[bool, str]] = []

    def get() -> None:
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "circuitdev-torch-index-probe"})
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) URL by design
                answer.append((200 <= response.status < 300, f"HTTP {response.status}"))
        except urllib.error.HTTPError as err:
            answer.append((False, f"HTTP {err.code}"))
        except urllib.error.URLError as err:
            answer.append((False, str(err.reason)))
        except Exception as err:  # noqa: BLE001 - any failure means: not usable now
            answer.append((False, f"{type(err).__name__}: {err}"))

    start = time.monotonic()
    thread = threading.Thread(target=get, daemon=True)
    thread.start()
    thread.join(timeout)
    waited = time.monotonic() - start
    if not answer:
        return False, f"no answer within {timeout:g} s"
    ok, detail = answer[0]
    return ok, f"{detail}, {waited:.1f} s"


def resolve(setting: str) -> Optional[str]:
    """The index URL a non-automatic TORCH_INDEX setting names; None for the default index."""
    if setting.lower() in DEFAULT_WORDS:
        return None
    if "://" in setting:
        return setting
    if _NAME.match(setting):
        return f"{PYTORCH_WHL}/{setting}"
    raise ValueError(
        f"TORCH_INDEX={setting!r} is not understood: use `default`, an index URL "
        f"(e.g. {PYTORCH_WHL}/cu128) or a name on download.pytorch.org (cpu, cu126, cu128, rocm6.4)"
    )


def choose(
    torch_index: Optional[str],
    probe: Probe,
    cpu_index: str = CPU_INDEX,
    system: Optional[str] = None,
) -> Tuple[List[str], str]:
    """(pip index arguments, one human line) for `pip install torch==X`; [] means the default index.

    `torch_index` is the TORCH_INDEX setting (None / "" / "auto": decide by probing `cpu_index` on Linux).
    """
    setting = (torch_index or "").strip()
    if setting.lower() not in AUTO_WORDS:
        url = resolve(setting)
        if url is None:
            note = "; on Linux PyPI's torch is the CUDA build" if (system or platform.system()) == "Linux" else ""
            return [], f"torch: from the default index (TORCH_INDEX={setting}{note})"
        return ["--index-url", url], f"torch: from {url} (TORCH_INDEX={setting})"
    system = system or platform.system()
    if system != "Linux":
        return [], (f"torch: from the default index (on {system} PyPI's torch is CPU-only, with MPS on Apple "
                    "silicon; TORCH_INDEX=<url> to choose another)")
    ok, detail = probe(cpu_index)
    if ok:
        return (["--index-url", cpu_index],
                f"torch: CPU build from {cpu_index} ({detail}; TORCH_INDEX=default or a URL overrides)")
    return [], (f"torch: CPU index unreachable ({cpu_index}: {detail}); installing torch from the default index "
                "(set TORCH_INDEX=<url> to choose one)")


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: TORCH_INDEX=[auto|default|<url>|cpu|cu128] python3 tools/torch_index.py torch==VERSION",
              file=sys.stderr)
        return 2
    timeout = float(os.environ.get("TORCH_INDEX_TIMEOUT") or DEFAULT_TIMEOUT)
    cpu_index = os.environ.get("TORCH_CPU_INDEX") or CPU_INDEX
    try:
        index_args, message = choose(os.environ.get("TORCH_INDEX"), lambda url: probe_index(url, timeout), cpu_index)
    except ValueError as err:
        print(f"torch: {err}", file=sys.stderr)
        return 2
    print(message, file=sys.stderr)
    print(shlex.join([args[0], *index_args]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
