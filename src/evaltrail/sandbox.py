"""Run untrusted Python (a model's generated code and its tests) in a real sandbox.

Generated code is data from an untrusted source, so each program runs in a separate process that:
- is confined by bubblewrap (Debian's `bubblewrap`; `.ci/run` installs it): new user, PID, IPC,
  UTS, cgroup and network namespaces, so no network and no other process is visible; a filesystem
  of read-only /usr (the system interpreter and its standard library), fresh /proc, /dev and
  /tmp, and one writable throwaway directory (its working directory), deleted afterwards: no file
  of the host is readable or writable;
- runs without root's powers: as user `nobody` (setpriv) when evaltrail runs as root, with no
  capabilities and a new session (no terminal to inject into);
- has hard limits (setrlimit, before the program starts): CPU seconds, address space, processes
  of its user, file size, open files; and a wall-clock timeout after which the whole process
  group is killed;
- writes its output to files in its directory (capped by the file-size limit), never into pipes
  the caller would have to drain.

The outcome is pass (exit 0) or fail with a one-line reason (the exception, the limit hit, the
signal, the timeout). Nothing the program does can fail the caller.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import EvaltrailError

NOBODY = 65534


@dataclass(frozen=True)
class Limits:
    """What one sandboxed program may use."""

    cpu_s: int = 10
    """CPU seconds (RLIMIT_CPU): past it the kernel kills the program."""
    wall_s: float = 20.0
    """Wall-clock seconds before the process group is killed (sleeping programs use no CPU)."""
    memory_mb: int = 1024
    """Address space (RLIMIT_AS)."""
    processes: int = 16
    """Processes of the sandbox's user (RLIMIT_NPROC): a fork bomb stops here."""
    file_mb: int = 8
    """Largest file it may write (RLIMIT_FSIZE), its stdout and stderr included."""
    open_files: int = 64
    """Open file descriptors (RLIMIT_NOFILE)."""


@dataclass(frozen=True)
class Outcome:
    passed: bool
    """The program exited 0 within its limits."""
    reason: str
    """"passed", or why not in one line (an exception, a limit, a signal, the timeout)."""
    seconds: float
    """Wall time (a measurement: never part of a result's identity)."""


# Runs inside the sandbox: set the limits, then replace itself with the program's interpreter.
_LAUNCHER = """
import os, resource, sys
cpu, mem, nproc, fsize, nofile = map(int, sys.argv[1:6])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at the limit, SIGKILL a second later
for what, n in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_FSIZE, fsize),
                (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(what, (n, n))
out = os.open("stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
err = os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.dup2(out, 1); os.dup2(err, 2); os.close(0)
os.execv(sys.executable, [sys.executable, "-I", "-B", "program.py"])
"""


PYTHON = "/usr/bin/python3"
"""The sandbox's interpreter: the system's, under /usr, which the sandbox shows read-only (a venv's
or pyenv's python lives in directories the unprivileged sandbox must not see)."""


def available() -> str | None:
    """None when the sandbox can run here, else what is missing and how to get it."""
    for tool, package in (("bwrap", "bubblewrap"), ("setpriv", "util-linux"), (PYTHON, "python3")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: the code sandbox needs it (apt-get install {package})"
    return None


def interpreter_version() -> str:
    """The sandbox interpreter's version: part of what a code metric's outcome depends on."""
    out = subprocess.run([PYTHON, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True)
    return f"python {out.stdout.strip()}"


def _command(workdir: Path, limits: Limits) -> list[str]:
    binds = ["--ro-bind", "/usr", "/usr"]
    for link in ("/bin", "/lib", "/lib64", "/sbin"):  # usr-merged systems: symlinks into /usr
        if os.path.islink(link):
            binds += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            binds += ["--ro-bind", link, link]
    sandbox = [
        "bwrap",
        *binds,
        "--proc", "/proc",
        "--dev", "/dev",
        "--tmpfs", "/tmp",
        "--bind", str(workdir), "/sandbox",
        "--chdir", "/sandbox",
        "--remount-ro", "/",  # nothing writable but its directory and /tmp
        "--unshare-all",  # user, pid, ipc, uts, cgroup and net namespaces: no network
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", "/sandbox",
        "--",
        PYTHON, "-I", "-c", _LAUNCHER,
        str(limits.cpu_s), str(limits.memory_mb << 20), str(limits.processes),
        str(limits.file_mb << 20), str(limits.open_files),
    ]  # fmt: skip
    if os.geteuid() == 0:  # drop root before anything untrusted starts
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", *sandbox]
    return sandbox


def _last_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            lines = [x for x in f.read().decode("utf-8", "replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:200] if lines else ""


_SIGNALS = {
    signal.SIGXCPU: "CPU time limit",
    signal.SIGKILL: "killed (SIGKILL)",
    signal.SIGXFSZ: "file size limit",
    signal.SIGSEGV: "segmentation fault",
}


def _reason(code: int, workdir: Path) -> str:
    err = _last_line(workdir / "stderr.txt")
    if code > 128 and code - 128 in set(signal.Signals):  # bwrap reports a killed child as 128 + signal
        sig = signal.Signals(code - 128)
        return _SIGNALS.get(sig, f"killed by {sig.name}") + (f" ({err})" if err else "")
    if code < 0:
        sig = signal.Signals(-code)
        return _SIGNALS.get(sig, f"killed by {sig.name}")
    return err or f"exit status {code}"


def run_python(program: str, limits: Limits = Limits(), finished: str | None = None) -> Outcome:
    """Run `program` (Python source) in the sandbox: pass when it exits 0 within its limits and,
    when `finished` is given, its stdout ends with that line (what the program prints last, so an
    early `sys.exit(0)` or `os._exit(0)` in untrusted code cannot pass for a finished test)."""
    missing = available()
    if missing:
        raise EvaltrailError(missing)
    workdir = Path(tempfile.mkdtemp(prefix="evaltrail-sandbox-"))
    start = time.monotonic()
    try:
        (workdir / "program.py").write_text(program, encoding="utf-8")
        if os.geteuid() == 0:
            os.chown(workdir, NOBODY, NOBODY)
        workdir.chmod(0o700)
        proc = subprocess.Popen(
            _command(workdir, limits),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, setup = proc.communicate(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return Outcome(False, f"timeout: still running after {limits.wall_s:g} s wall", time.monotonic() - start)
        seconds = time.monotonic() - start
        if proc.returncode == 0:
            if finished is not None and _last_line(workdir / "stdout.txt") != finished:
                return Outcome(False, "exited before its test finished", seconds)
            return Outcome(True, "passed", seconds)
        if setup.strip() and not (workdir / "stderr.txt").exists():  # bwrap itself failed
            raise EvaltrailError(f"the code sandbox did not start: {setup.decode('utf-8', 'replace').strip()[:300]}")
        return Outcome(False, _reason(proc.returncode, workdir), seconds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
