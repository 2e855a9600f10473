"""A real single-node Slurm cluster for tests: munged + slurmctld + slurmd, all in one temp folder.

Everything the daemons touch (munge key, socket, pid and log files, state and spool folders,
slurm.conf, gres.conf, cgroup.conf) lives in the cluster's own folder, and the ports are chosen
free at random, so a system munge or Slurm on the same machine is left alone. Client commands
find the cluster through ``SLURM_CONF`` (``cluster.env``); nothing is put into ``os.environ``.

The node is the local host on 127.0.0.1 with ``nproc`` CPUs (at least 2) and one fake GPU
(``gres.conf``: ``Name=gpu File=/dev/null``), so ``--gres=gpu:1`` jobs run one at a time.
Settings proven on Debian 12's Slurm 22.05 in a container without systemd or usable cgroups:
proctrack/linuxproc, task/none, select/cons_tres with CR_CPU, no accounting storage.

Use from a test module::

    from slurm_cluster import slurm_cluster  # noqa: F401  (the module-scoped fixture)

    def test_x(slurm_cluster):
        job = slurm_cluster.sbatch("--wrap", "true")
        slurm_cluster.wait_done([job])

Stopping cancels every job, stops the daemons and kills whatever process still carries this
cluster's ``SLURM_CONF`` in its environment (slurmstepd and job steps inherit it), so nothing
is left behind.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "scancel")
APT_PACKAGES = "slurmctld slurmd slurm-client munge"


def _which(name: str) -> str | None:
    # The daemons live in /usr/sbin, which a non-login PATH may lack.
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def skip_reason() -> str | None:
    """Why a cluster cannot be started here, or None when it can."""
    if os.name != "posix" or os.geteuid() != 0:
        return "the Slurm test cluster runs its daemons as root"
    missing = [n for n in DAEMONS + CLIENTS if _which(n) is None]
    if missing:
        return f"Slurm/munge not installed (missing {', '.join(missing)}): apt-get install {APT_PACKAGES}"
    return None


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


class SlurmError(RuntimeError):
    pass


class SlurmCluster:
    """One controller and one compute node on this host. ``start()``/``stop()``, or use as a context manager."""

    def __init__(self, root: Path | None = None, cpus: int | None = None, gpus: int = 1,
                 name: str = "rendertest", cred_expire: int = 5):
        self._own_root = root is None
        # Keep the path short: the munge socket path must fit in sun_path (108 bytes).
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="slurm-"))
        self.cpus = cpus or max(2, os.cpu_count() or 1)
        self.gpus = gpus
        # A requeued job may start again only once its old credential expired (AuthInfo
        # cred_expire, 120 s by default): keep it short so requeue tests take seconds.
        self.cred_expire = cred_expire
        self.cluster_name = name
        self.node = socket.gethostname().split(".")[0]
        self.partition = "test"
        self.conf = self.root / "etc" / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket.2"
        self._procs: dict[str, subprocess.Popen] = {}
        self._logs: list = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_"))}
        self.env["SLURM_CONF"] = str(self.conf)
        path = self.env.get("PATH", "")
        for extra in ("/usr/sbin", "/sbin"):
            if extra not in path.split(os.pathsep):
                path += os.pathsep + extra
        self.env["PATH"] = path

    # --- configuration -------------------------------------------------------------------------

    def _write_configs(self) -> None:
        r = self.root
        for d in ("etc", "munge", "state", "spool", "log", "run"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r, 0o755)
        os.chmod(r / "munge", 0o700)
        ctld_port, slurmd_port = _free_ports(2)
        self.ctld_port, self.slurmd_port = ctld_port, slurmd_port
        (r / "etc" / "plugstack.conf").write_text("")
        (r / "etc" / "cgroup.conf").write_text(
            # Not used (no cgroup plugin is configured) but present, so nothing reads /etc/slurm.
            "CgroupAutomount=no\nConstrainCores=no\nConstrainRAMSpace=no\nConstrainDevices=no\n")
        (r / "etc" / "gres.conf").write_text(
            "AutoDetect=off\n"
            f"NodeName={self.node} Name=gpu File=/dev/null Count={self.gpus}\n" if self.gpus else "")
        gres_node = f" Gres=gpu:{self.gpus}" if self.gpus else ""
        self.conf.write_text(f"""\
# Written by tests/slurm_cluster.py: a throwaway single-node cluster.
ClusterName={self.cluster_name}
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket},cred_expire={self.cred_expire}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={r}/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
GresTypes=gpu
JobRequeue=1
ReturnToService=2
MinJobAge=600
KillWait=2
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=60
MessageTimeout=10
NodeName={self.node} NodeAddr=127.0.0.1 NodeHostname={self.node} CPUs={self.cpus} RealMemory=1000{gres_node} State=UNKNOWN
PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
""")

    # --- lifecycle -----------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")
        self._logs.append(log)
        self._procs[name] = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)

    def _wait(self, what: str, check, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self._procs.items():
                if p.poll() is not None:
                    raise SlurmError(f"{name} exited with {p.returncode} while waiting for {what}:\n"
                                     + self.logs())
            if check():
                return
            time.sleep(0.2)
        raise SlurmError(f"timed out after {timeout:.0f}s waiting for {what}:\n" + self.logs())

    def start(self, timeout: float = 60) -> "SlurmCluster":
        reason = skip_reason()
        if reason:
            raise SlurmError(reason)
        self._write_configs()
        r = self.root
        key = r / "munge" / "munge.key"
        if _which("mungekey"):
            subprocess.run([_which("mungekey"), "-c", "-f", "-k", str(key)], check=True,
                           capture_output=True)
        else:
            key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        try:
            self._spawn("munged", [_which("munged"), "-F", "-f", f"--socket={self.munge_socket}",
                                   f"--key-file={key}", f"--pid-file={r}/munge/munged.pid",
                                   f"--log-file={r}/log/munged.log", f"--seed-file={r}/munge/munged.seed"])
            self._wait("the munge socket", self.munge_socket.exists, timeout)
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-c", "-i", "-f", str(self.conf)])
            self._wait("slurmctld", lambda: self._ok("scontrol", "ping"), timeout)
            self._spawn("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf), "-N", self.node])
            self._wait("the node to be idle", self._node_idle, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _ok(self, *argv: str) -> bool:
        try:
            p = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return False
        return p.returncode == 0 and "DOWN" not in p.stdout

    def _node_idle(self) -> bool:
        try:
            return self.run("sinfo", "-h", "-N", "-o", "%T").stdout.split() == ["idle"]
        except SlurmError:
            return False

    def _marked_pids(self) -> list[int]:
        """Every process whose environment carries this cluster's SLURM_CONF (daemons, stepds, jobs)."""
        marker = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                if marker in (d / "environ").read_bytes().split(b"\0"):
                    pids.append(int(d.name))
            except OSError:
                continue
        return pids

    def stop(self) -> None:
        """Cancel all jobs, stop the daemons, kill anything left of this cluster; idempotent."""
        if self._procs.get("slurmctld") and self._procs["slurmctld"].poll() is None:
            try:
                subprocess.run(["scancel", "--full", "--partition", self.partition], env=self.env,
                               capture_output=True, timeout=10)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and self.run("squeue", "-h", "-o", "%i").stdout.strip():
                    time.sleep(0.2)
            except (SlurmError, subprocess.TimeoutExpired, OSError):
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            p = self._procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        for _ in range(3):  # slurmstepd and job processes, reparented away from slurmd
            pids = self._marked_pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        self._procs.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()

    def cleanup(self) -> None:
        self.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "SlurmCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()

    # --- clients -------------------------------------------------------------------------------

    def run(self, *argv: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster."""
        p = subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if check and p.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
        return p

    def sbatch(self, *args: str, cwd: Path | None = None) -> str:
        """``sbatch --parsable ARGS``; the job id (an array's base id)."""
        p = subprocess.run(["sbatch", "--parsable", *args], env=self.env, capture_output=True,
                           text=True, timeout=20, cwd=cwd, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise SlurmError(f"sbatch {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
        return p.stdout.strip().split(";")[0]

    def jobs(self) -> dict[str, str]:
        """Queued and running jobs: id (``123`` or ``123_4``, pending arrays as ``123_[0-3%2]``) -> state."""
        out = self.run("squeue", "-h", "-o", "%i %T").stdout
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def job_info(self, job: str) -> dict[str, str]:
        """``scontrol show job -o JOB`` as a dict (first record; works until MinJobAge passes)."""
        out = self.run("scontrol", "-o", "show", "job", job).stdout.splitlines()[0]
        info = {}
        for field in out.split():
            k, _, v = field.partition("=")
            info[k] = v
        return info

    def state(self, job: str) -> str:
        return self.job_info(job).get("JobState", "")

    def wait_done(self, jobs: list[str], timeout: float = 30) -> None:
        """Wait until none of JOBS (base ids or ``id_index``) is pending or running."""
        def gone() -> bool:
            queued = self.jobs()
            for q in queued:
                for j in jobs:
                    if q == j or q.startswith(j + "_") or (("_" in j) and q.startswith(j.split("_")[0] + "_[")):
                        return False
            return True
        self._wait_for(f"jobs {', '.join(jobs)} to finish", gone, timeout)

    def wait_state(self, job: str, states: set[str], timeout: float = 30) -> str:
        found = {}

        def reached() -> bool:
            found["s"] = self.state(job)
            return found["s"] in states
        self._wait_for(f"job {job} to reach {'/'.join(sorted(states))}", reached, timeout)
        return found["s"]

    def _wait_for(self, what: str, check, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if check():
                return
            if time.monotonic() >= deadline:
                queue = self.run("squeue", "-o", "%i %T %r", check=False).stdout
                raise SlurmError(f"timed out after {timeout:.0f}s waiting for {what}; queue:\n{queue}")
            time.sleep(0.2)

    def logs(self, tail: int = 30) -> str:
        out = []
        for f in sorted((self.root / "log").glob("*")):
            try:
                lines = f.read_text(errors="replace").splitlines()[-tail:]
            except OSError:
                continue
            out.append(f"--- {f.name}\n" + "\n".join(lines))
        return "\n".join(out)


@pytest.fixture(scope="module")
def slurm_cluster():
    """A running single-node cluster for the module; skips when not root or Slurm is missing."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster()
    try:
        cluster.start()
    except SlurmError as e:
        cluster.cleanup()
        pytest.fail(f"could not start the Slurm test cluster: {e}")
    try:
        yield cluster
    finally:
        cluster.cleanup()
