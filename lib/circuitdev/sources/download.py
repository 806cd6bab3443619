"""One file over HTTP(S) within a deadline, and an error that says which fault it was.

`download(url, timeout)` returns the whole body or raises `DownloadError`. `timeout` bounds the whole file --
connecting, the headers and every byte -- not one socket read: a server that trickles a byte a second, or stops
answering halfway, is given up on at the deadline. The error names the fault and its fix:

    unreachable  no connection (DNS failure, refused, no route): offline, or a wrong mirror address
    http         the server answered with an HTTP error (404: it has no such file at that commit)
    timeout      no complete file by the deadline (a slow, trickling or hanging server)
    dropped      the connection closed or was reset before the announced length arrived
    oversize     more bytes than the manifest pins (`max_bytes`): reading stops there, memory stays bounded

`url_template()` reads $CIRCUITDEV_PUBLISHED_URL (default: the authors' raw files on GitHub) and checks it before
anything is downloaded: the fields `{commit}` and `{repo_path}` and nothing else, an http(s) or file URL.
"""

from __future__ import annotations

import http.client
import os
import string
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Literal

from circuitdev.errors import ConfigError, DataError

RAW_URL = "https://raw.githubusercontent.com/skydancerosel/spectral-probe-circuits/{commit}/{repo_path}"
URL_ENV = "CIRCUITDEV_PUBLISHED_URL"
FIELDS = ("commit", "repo_path")
SCHEMES = ("http", "https", "file")
CHUNK = 1 << 16  # bytes per read: one socket read each, so the deadline is checked between them

Fault = Literal["unreachable", "http", "timeout", "dropped", "oversize"]


class Oversize(Exception):
    """Raised by the transfer when a body runs past its pinned size."""


class DownloadError(DataError):
    """A file could not be downloaded; `kind` says how, `short` is the cause in a few words (for one-line notes)."""

    def __init__(self, url: str, kind: Fault, short: str, fix: str):
        self.url, self.kind, self.short = url, kind, short
        self.reason = short  # what earlier versions called it
        super().__init__(f"cannot download {url}: {short}; {fix}")


def url_template() -> str:
    """$CIRCUITDEV_PUBLISHED_URL, else the authors' raw files; a malformed template is a ConfigError (exit 2)."""
    template = os.environ.get(URL_ENV, "").strip() or RAW_URL
    example = "e.g. http://127.0.0.1:8000/{commit}/{repo_path}"
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as err:  # an unmatched brace
        raise ConfigError(f"{URL_ENV}={template!r} is not a valid template ({err}); {example}") from None
    unknown = sorted({f for f in fields if f not in FIELDS})
    if unknown or "repo_path" not in fields:
        what = f"unknown field(s) {', '.join('{' + f + '}' for f in unknown)}" if unknown else "no {repo_path} field"
        raise ConfigError(f"{URL_ENV}={template!r} has {what}; it may use {{commit}} and {{repo_path}} only, {example}")
    sample = urllib.parse.urlsplit(template.format(commit="0" * 40, repo_path="x/y.json"))
    if sample.scheme not in SCHEMES or (sample.scheme != "file" and not sample.netloc):
        raise ConfigError(f"{URL_ENV}={template!r} is not an http(s):// or file:// URL; {example}")
    return template


def _fix(kind: Fault, status: int | None = None) -> str:
    mirror = URL_ENV in os.environ and os.environ[URL_ENV].strip()
    if kind == "unreachable":
        return ("offline? Copy the published files from a machine that is online and use `--from DIR` with that "
                f"copy{'; or check the mirror address in ' + URL_ENV if mirror else ''}")
    if kind == "http" and status == 404:
        return (f"the mirror in {URL_ENV} lacks this file at the pinned commit: it must serve each file at "
                "<commit>/<repo_path> as the manifest pins them" if mirror else
                "the authors' repository no longer serves it at the pinned commit: use `--from DIR` with a copy")
    if kind == "http" and status is not None and 300 <= status < 400:  # urllib gives up on a loop: waiting won't help
        return (f"the server redirects in a loop or to nowhere: check the address in {URL_ENV}" if mirror else
                "the server redirects in a loop or to nowhere: use `--from DIR` with a copy")
    if kind == "http" and status is not None and 400 <= status < 500:
        return (f"the server refuses the request: check the address in {URL_ENV}, or use `--from DIR` with a copy"
                if mirror else "the server refuses the request; use `--from DIR` with a copy")
    if kind == "http":
        return "the server failed; try again later, or use `--from DIR` with a copy"
    if kind == "oversize":
        return ("the server sends more than the pinned file (a wrong file or a broken mirror); nothing was written: "
                f"check the mirror in {URL_ENV}, or use `--from DIR` with a copy" if mirror else
                "the server sends more than the pinned file; nothing was written: use `--from DIR` with a copy")
    if kind == "timeout":
        return "the server is too slow or stopped answering; try again, raise --timeout, or use `--from DIR`"
    return "the connection broke off; try again, or use `--from DIR` with a copy"


def classify(url: str, err: BaseException, timeout: float, received: int = 0,
             expected: int | None = None) -> DownloadError:
    """The DownloadError for an exception met while downloading `url` (`received` of `expected` bytes so far)."""
    of = f" of {expected}" if expected is not None else ""
    if isinstance(err, Oversize):
        return DownloadError(url, "oversize", str(err), _fix("oversize"))
    if isinstance(err, urllib.error.HTTPError):
        return DownloadError(url, "http", f"HTTP {err.code} {err.reason}", _fix("http", err.code))
    reason = err.reason if isinstance(err, urllib.error.URLError) else err
    if isinstance(reason, TimeoutError):
        return DownloadError(url, "timeout", f"no complete file within {timeout:g} s ({received}{of} bytes)",
                             _fix("timeout"))
    if isinstance(reason, (http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionResetError,
                           ConnectionAbortedError, BrokenPipeError)) or received:
        detail = "" if isinstance(reason, http.client.IncompleteRead) else f" ({type(reason).__name__}: {reason})"
        return DownloadError(url, "dropped", f"connection dropped after {received}{of} bytes{detail}",
                             _fix("dropped"))
    if isinstance(reason, http.client.HTTPException):  # an answer, but not HTTP (a wrong port, a broken proxy)
        return DownloadError(url, "http", f"not an HTTP answer ({type(reason).__name__}: {reason})",
                             _fix("http"))
    return DownloadError(url, "unreachable", f"{reason}", _fix("unreachable"))


def download(url: str, timeout: float, max_bytes: int | None = None) -> bytes:
    """The body at `url`, all of it within `timeout` seconds, or a DownloadError naming the fault. `max_bytes`:
    the pinned size; a body announced or found longer is refused as soon as that is known (never read whole).

    The transfer runs in a worker thread (socket reads bounded by `timeout` too); this thread waits for it until
    the deadline, so neither slow headers nor a trickled body outlast it. A worker past its deadline stops at its
    next read."""
    if not timeout > 0:
        raise ConfigError(f"the download timeout must be > 0 seconds, got {timeout}")
    state: dict = {"received": 0, "expected": None}
    stop = threading.Event()

    def transfer() -> None:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (checked template)
                length = response.headers.get("Content-Length")
                state["expected"] = int(length) if length and length.isdigit() else None
                if max_bytes is not None and state["expected"] is not None and state["expected"] > max_bytes:
                    raise Oversize(f"the server announces {state['expected']} bytes, more than the pinned "
                                   f"{max_bytes} bytes of the manifest")
                read = getattr(response, "read1", response.read)
                chunks = []
                while not stop.is_set():
                    chunk = read(CHUNK)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    state["received"] += len(chunk)
                    if max_bytes is not None and state["received"] > max_bytes:
                        raise Oversize(f"more than the pinned {max_bytes} bytes of the manifest (stopped reading "
                                       f"after {state['received']})")
                if state["expected"] is not None and state["received"] < state["expected"]:
                    raise http.client.IncompleteRead(b"", state["expected"] - state["received"])
                state["body"] = b"".join(chunks)
        except BaseException as err:  # noqa: BLE001 -- handed to the waiting thread, classified there
            state["error"] = err

    worker = threading.Thread(target=transfer, name=f"download {url}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        stop.set()
        raise classify(url, TimeoutError(), timeout, state["received"], state["expected"])
    if "error" in state:
        err = state["error"]
        if not isinstance(err, Exception):
            raise err
        raise classify(url, err, timeout, state["received"], state["expected"]) from err
    return state["body"]
