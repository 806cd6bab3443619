"""A throw-away single-node SLURM cluster on this machine, for tests/test_cluster.py and bench/cluster.py.

    reason = why_not()                 # None, or the exact reason this machine cannot have one (then skip)
    install()                          # apt-get the daemons and pip the executor plugin when missing
    cluster = Cluster.start()          # munge, slurmctld, slurmd as root, no systemd; waits for the node to be idle
    ...                                # snakemake --profile profiles/slurm ...
    cluster.stop()                     # cancels its jobs, stops every daemon it started by PID, removes its config

What it writes: `/etc/slurm/slurm.conf` (Slurm's compiled-in default path: the jobstep plugin strips `SLURM_CONF`
from a job's environment, so a config elsewhere breaks the jobs), and only when that file is absent or was written
by this module (its first line says so) -- a real cluster's configuration is never touched. Everything else (munge
key and socket, state, spool, logs, PID files) lives in one temporary folder, removed by `stop()`.

The cluster keeps no accounting (no slurmdbd): `sacct` fails on it, as on a laptop test cluster, so the profile polls
job states with `squeue` (facts: ../shared/cluster_notes.md).
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")  # Debian's names: Slurm 22.05 and munge 0.5 on Debian 12
COMMANDS = ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo", "munged", "mungekey")
CONF = Path("/etc/slurm/slurm.conf")
MARK = "# written by circuitdev's tests/slurm_cluster.py: a throw-away test cluster (removed when its test ends)"
PARTITION = "test"  # the cluster's only partition; the test asks for it by name through config `cluster: partition`
PORTS = (6817, 6818)  # slurmctld, slurmd (Slurm's defaults)


def why_not() -> str | None:
    """None when this machine can run the cluster, else the exact reason it cannot (a skip message)."""
    if not sys.platform.startswith("linux"):
        return f"a SLURM test cluster needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return (f"starting slurmctld/slurmd/munged needs root (running as {getpass.getuser()}, uid {os.geteuid()}); "
                "CI runs as root")
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing and shutil.which("apt-get") is None:
        return (f"{', '.join(missing)} not installed and no apt-get to install them "
                f"(Debian/Ubuntu packages: {' '.join(PACKAGES)})")
    if CONF.exists() and not CONF.read_text(errors="replace").startswith(MARK):
        return f"{CONF} exists and was not written by this test (a real cluster's configuration?): left alone"
    busy = [p for p in PORTS if _port_in_use(p)]
    if busy and not _leftovers():  # an interrupted earlier run's daemons are stopped by Cluster.start()
        return f"port(s) {', '.join(map(str, busy))} already in use (another slurmctld/slurmd?): left alone"
    return None


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _leftovers() -> list[tuple[str, Path]]:
    """(daemon, PID file) named by a configuration this module wrote in an earlier run that was killed before its
    clean-up (slurmd first: the order to stop them in)."""
    if not CONF.is_file() or not CONF.read_text(errors="replace").startswith(MARK):
        return []
    text = CONF.read_text(errors="replace")
    found = [(name, Path(m.group(1))) for name, key in (("slurmd", "SlurmdPidFile"), ("slurmctld", "SlurmctldPidFile"))
             for m in [re.search(rf"^{key}=(.+)$", text, re.M)] if m]
    sock = re.search(r"^AuthInfo=socket=(.+)/munge\.socket\.2$", text, re.M)
    return found + ([("munged", Path(sock.group(1)) / "munged.pid")] if sock else [])


def stop_leftovers() -> None:
    """Stop (by the PIDs in their own PID files) the daemons of an interrupted earlier run and remove its folder."""
    found = [(name, pid_file, _pid(pid_file, name)) for name, pid_file in _leftovers()]
    _terminate(*[pid for name, _, pid in found if pid and name != "munged"])
    _terminate(*[pid for name, _, pid in found if pid and name == "munged"])
    for name, pid_file, _ in found:
        folder = pid_file.parent.parent if name == "munged" else pid_file.parent
        if folder.name.startswith("circuitdev-slurm-"):
            shutil.rmtree(folder, ignore_errors=True)
    if CONF.is_file() and CONF.read_text(errors="replace").startswith(MARK):
        CONF.unlink()


def _run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def install_packages() -> float:
    """apt-get the daemons when a command is missing (apt-get update first only if the install fails). Returns
    the seconds it took (0.0: all there). Raises RuntimeError with apt's output when it cannot install."""
    if all(shutil.which(c) for c in COMMANDS):
        return 0.0
    start = time.perf_counter()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    proc = _run(cmd, 600, env=env)
    if proc.returncode != 0:  # a fresh machine has no package lists yet
        _run(["apt-get", "update", "-qq"], 600, env=env)
        proc = _run(cmd, 600, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def plugin_requirement() -> str:
    """The executor plugin's pin, from pyproject.toml's `slurm` extra (one place for the version)."""
    found = re.search(r'"(snakemake-executor-plugin-slurm==[^"]+)"', (REPO / "pyproject.toml").read_text())
    if found is None:
        raise RuntimeError("pyproject.toml's `slurm` extra names no snakemake-executor-plugin-slurm==VERSION")
    return found.group(1)


def install_plugin() -> float:
    """pip-install the `slurm` extra's pin of the plugin into this interpreter's environment when it is missing or
    another version (the same as `pip install -e '.[slurm]'`, without reinstalling circuitdev). Returns the seconds
    it took (0.0: already there)."""
    wanted = plugin_requirement()
    try:
        if f"snakemake-executor-plugin-slurm=={metadata.version('snakemake-executor-plugin-slurm')}" == wanted:
            return 0.0
    except metadata.PackageNotFoundError:
        pass
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", wanted]
    proc = _run(cmd, 600)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def install() -> dict[str, float]:
    """Everything the cluster path needs that is missing; seconds per part."""
    return {"apt": install_packages(), "pip": install_plugin()}


# ------------------------------------------------------------------------------------------------------ the cluster


def node_size() -> tuple[int, int]:
    """(CPUs, RealMemory in MB) to declare: all cores, ~90% of the memory (slurmd drains a node declared larger)."""
    total_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith("MemTotal:"))
    return os.cpu_count() or 1, int(total_kb / 1024 * 0.9)


def slurm_conf(folder: Path, host: str, cpus: int, mem_mb: int) -> str:
    """A minimal single-node slurm.conf (cluster_notes.md): no accounting, no cgroups, everything under `folder`."""
    return f"""{MARK}
ClusterName=circuitdev-test
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge/munge.socket.2
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without it a job that asks no memory takes the whole node, and jobs run one at a time
DefMemPerCPU=1000
ReturnToService=2
# no slurmdbd: sacct fails here, so clients poll with squeue, which shows a finished job for MinJobAge seconds
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class Cluster:
    """A running single-node cluster started by `Cluster.start()`; `stop()` undoes everything it did."""

    folder: Path
    cpus: int
    mem_mb: int
    pid_files: dict[str, Path] = field(default_factory=dict)  # daemon -> its PID file, in start order
    wrote_conf: bool = False
    seconds: float = 0.0  # from the first daemon's start to the idle node

    @classmethod
    def start(cls, timeout: float = 60.0) -> "Cluster":
        stop_leftovers()
        host = socket.gethostname().split(".")[0]
        cpus, mem_mb = node_size()
        folder = Path(tempfile.mkdtemp(prefix="circuitdev-slurm-"))
        folder.chmod(0o755)  # munged runs as `munge` and must reach its socket folder
        cluster = cls(folder=folder, cpus=cpus, mem_mb=mem_mb)
        started = time.perf_counter()
        try:
            cluster._start_munge()
            for sub in ("state", "spool"):
                (folder / sub).mkdir(mode=0o755)
            CONF.parent.mkdir(parents=True, exist_ok=True)
            CONF.write_text(slurm_conf(folder, host, cpus, mem_mb))
            cluster.wrote_conf = True
            cluster._daemon("slurmctld", ["slurmctld", "-c"])  # -c: a clean state (no jobs of an earlier run)
            cluster._daemon("slurmd", ["slurmd"])
            cluster._wait_idle(timeout)
        except BaseException:
            cluster.stop()
            raise
        cluster.seconds = time.perf_counter() - started
        return cluster

    def _start_munge(self) -> None:
        m = self.folder / "munge"
        m.mkdir()
        m.chmod(0o755)  # munged: the socket folder must be searchable by all (clients connect there)
        shutil.chown(m, "munge", "munge")
        proc = _run(["mungekey", "--create", f"--keyfile={m}/munge.key"], 30, user="munge")
        if proc.returncode != 0:
            raise RuntimeError(f"mungekey failed: {proc.stderr}")
        self._daemon("munged", ["munged", f"--socket={m}/munge.socket.2", f"--key-file={m}/munge.key",
                                f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log",
                                f"--seed-file={m}/munged.seed"], pid_file=m / "munged.pid", user="munge")
        check = subprocess.run(f"munge -n -S {m}/munge.socket.2 | unmunge -S {m}/munge.socket.2", shell=True,
                               capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            raise RuntimeError(f"munge self-test failed: {check.stderr}")

    def _daemon(self, name: str, cmd: list[str], pid_file: Path | None = None, user: str | None = None) -> None:
        """Start a self-daemonising daemon and wait for its PID file."""
        pid_file = pid_file or self.folder / f"{name}.pid"
        self.pid_files[name] = pid_file
        proc = _run(cmd, 60, user=user)
        if proc.returncode != 0:
            raise RuntimeError(f"{name} did not start ({proc.returncode}): {proc.stderr.strip()}{self._log(name)}")
        deadline = time.monotonic() + 30
        while not (pid_file.is_file() and pid_file.read_text().strip()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} wrote no PID file {pid_file}{self._log(name)}")
            time.sleep(0.05)

    def _log(self, name: str) -> str:
        log = self.folder / ("munge/munged.log" if name == "munged" else f"{name}.log")
        return f"\n--- {log} (tail):\n{log.read_text(errors='replace')[-3000:]}" if log.is_file() else ""

    def _wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            proc = _run(["sinfo", "--noheader", "--format=%T"], 30)
            state = proc.stdout.strip()
            if state == "idle":
                return
            time.sleep(0.2)
        raise RuntimeError(f"the node is not idle after {timeout:.0f} s (sinfo: {state!r}){self._log('slurmctld')}"
                           f"{self._log('slurmd')}")

    # --- using it
    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld knows (finished ones for MinJobAge): id, name, state, partition, comment."""
        proc = _run(["squeue", "--states=all", "--noheader", "--format=%i|%j|%T|%P|%k"], 30)
        keys = ("id", "name", "state", "partition", "comment")
        return [dict(zip(keys, line.split("|", 4))) for line in proc.stdout.splitlines() if line.strip()]

    def cancel(self, job_id: str) -> subprocess.CompletedProcess:
        return _run(["scancel", job_id], 30)

    # --- stopping it
    def stop(self) -> None:
        """Cancel the jobs still there, stop each daemon this cluster started by its PID (munged last),
        remove the configuration it wrote and its folder. Safe to call twice, and after a failed start."""
        if "slurmctld" in self.pid_files and _pid(self.pid_files["slurmctld"], "slurmctld"):
            _run(["scancel", "--full", "--state=PENDING"], 30)
            _run(["scancel", "--full", "--state=RUNNING"], 30)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and any(j["state"] in ("RUNNING", "COMPLETING", "PENDING")
                                                      for j in self.jobs()):
                time.sleep(0.2)
        slurm = [_pid(f, n) for n, f in self.pid_files.items() if n != "munged"]
        _terminate(*[pid for pid in slurm if pid])  # slurmd and slurmctld at once
        munged = _pid(self.pid_files["munged"], "munged") if "munged" in self.pid_files else None
        if munged:  # last: the Slurm daemons authenticate through it until they are gone
            _terminate(munged)
        self.pid_files.clear()
        if self.wrote_conf and CONF.is_file() and CONF.read_text(errors="replace").startswith(MARK):
            CONF.unlink()
        self.wrote_conf = False
        shutil.rmtree(self.folder, ignore_errors=True)


def _pid(pid_file: Path, name: str) -> int | None:
    """The live PID in `pid_file` when that process is `name` (a stale file's PID may belong to another process)."""
    try:
        pid = int(pid_file.read_text().strip())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return None
    return pid if comm == name else None


def _terminate(*pids: int, grace: float = 10.0) -> None:
    """SIGTERM to each, then SIGKILL to those still there after `grace` seconds; returns when all are gone."""
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.05)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    """Running (a zombie left for an init that does not reap counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
