"""Running the spec's shell commands (tests, linter, measure, guard): jail, timeout, bounded
output, scrubbed environment, and ending every running command on Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from autoresearch.measure import imports
from autoresearch.safety import child_env, growth, trace
from autoresearch.safety.jail import Jail, full_note

DEFAULT_TAIL_CHARS = 4000
# `CommandResult.output` keeps at most this much of the end of the output: a suite that prints
# a gigabyte must not take a gigabyte of memory. Test counts and metric values are read from
# the end.
OUTPUT_TAIL_BYTES = 1 << 20
STDERR_TAIL_BYTES = 64 << 10
# How long to wait for a killed command's processes to be gone before giving up on them.
KILL_WAIT_S = 30
INTERRUPT_MESSAGE = (
    "autoresearch: Ctrl-C: the running commands were ended; "
    "the interrupted stage runs again when you rerun the same command.\n"
)


class Interrupted(KeyboardInterrupt):
    """The user pressed Ctrl-C: the command was ended, and the stage must not record a result.

    A KeyboardInterrupt, so no `except Exception` turns it into a failed test run, and
    Snakemake ends the job quietly (the interrupted stage reruns on the next run).
    """


@dataclass
class CommandResult:
    command: str
    exit_code: int | None  # None when it timed out
    output: str  # the end of stdout and stderr, interleaved (stdout only with stdout_only)
    duration_s: float
    timed_out: bool = False
    stderr: str = ""  # with stdout_only: the end of stderr, kept apart
    output_bytes: int = 0  # the size of the whole output; `output` holds OUTPUT_TAIL_BYTES
    # CPU seconds (user + system) of a command run in a bwrap jail, measured inside it: the
    # jail's processes are never reaped by ours, so rusage does not see them. None outside
    # a jail (rusage counts it) and when the jail was killed before it could say.
    jailed_cpu_s: float | None = None
    # With `stream`: the output's pipe was still held open by something the run left behind
    # when the harness stopped reading, so the output may lack its end.
    output_open: bool = False
    # The line naming the worktree's growth bound the run passed (growth.py): a failed run.
    over_bound: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.over_bound is None

    @property
    def cut(self) -> bool:
        """Whether `output` lacks the beginning of the output."""
        return self.output_bytes > OUTPUT_TAIL_BYTES

    def tail(self, chars: int = DEFAULT_TAIL_CHARS) -> str:
        if len(self.output) <= chars and not self.cut:
            return self.output
        return "[... output cut ...]\n" + self.output[-chars:]


def environment(
    extra_secrets: list[str] | None = None, pass_env: Sequence[str] = ()
) -> dict[str, str]:
    """What a command of the target gets from our environment: `child_env`'s allowlist and
    the names of `commands.pass_env`, never ANTHROPIC_* or a `secrets` name (nor what a
    `make` that started us hands its children: its job server and flags are not listed),
    and PYTHONDONTWRITEBYTECODE. HOME is ours here: the jail covers it with a private
    folder, `none` gets a private one."""
    env = child_env.allowed(pass_env, extra_secrets or ())
    if os.environ.get("HOME"):
        env["HOME"] = os.environ["HOME"]
    # No bytecode written into the tree a command tests: a file rewritten at the same size
    # within the second a run compiled it would run the old bytecode (mtime and size are
    # all a .pyc is checked by), and a test run could pass on code that is gone.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


# Inside a jail, the shell that runs the command (or its strace) reports its children's
# CPU with `times` on its stdin, a file of ours; the command itself gets /dev/null as
# stdin, as outside a jail. (A command bent on it could still reach that file through
# /proc; the figure is a cost, never a verdict.)
CPU_REPORTER = ("/bin/sh", "-c", '"$@" </dev/null; s=$?; times >&0; exit $s', "autoresearch-cpu")
_TIMES = re.compile(r"(\d+)m([\d.]+)s")


class _JailedCpu:
    """The CPU of the jailed commands this process ran: `total` for the whole process, and
    each open `counting()` block's own. A block counts only the commands run in its own
    context (its thread): jobs are threads of one process, so a stage's timer that reads
    `total` would count a sibling job's commands too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0.0
        self._open: ContextVar[tuple[list[float], ...]] = ContextVar("jailed_cpu", default=())

    def add(self, seconds: float) -> None:
        with self._lock:
            self.total += seconds
        for counter in self._open.get():  # this context's blocks, the enclosing ones too
            counter[0] += seconds

    @contextmanager
    def counting(self) -> Iterator[Callable[[], float]]:
        """A block whose reader gives the CPU of the jailed commands run in it so far."""
        counter = [0.0]
        token = self._open.set((*self._open.get(), counter))
        try:
            yield lambda: counter[0]
        finally:
            self._open.reset(token)


jailed_cpu = _JailedCpu()


def _reported_cpu(path: Path) -> float | None:
    """User + system CPU of the children from `times` output (its second line)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    spans = _TIMES.findall(lines[1]) if len(lines) >= 2 else []
    if len(spans) != 2:
        return None
    return sum(int(m) * 60 + float(s) for m, s in spans)


def run(
    command: str,
    cwd: Path | str,
    timeout_s: float = 600,
    extra_secrets: list[str] | None = None,
    stdout_only: bool = False,
    *,
    jail: Jail | None = None,
    trace_to: Path | None = None,
    extra_env: dict[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
    pass_env: Sequence[str] = (),
    stream: bool = False,
) -> CommandResult:
    """Run a shell command from the spec in `cwd`, inside `jail` when it is a bwrap jail.

    With `trace_to` (a folder), the command runs under strace and its trace is written to a
    new `run-N` folder there (trace.py reads it); where strace is missing, or cannot run,
    the command runs untraced and the folder holds no trace.

    `extra_env` is added to the command's environment; `pass_fds` are descriptors the command
    inherits (the pipe a test runner's report comes through, testrun.py).
    The command's environment is `environment()`'s allowlist with the jail's
    `commands.pass_env` names (`pass_env` for a command run without a jail object).

    With `stream`, the output comes through a pipe the harness reads as the run goes (and
    writes to that file itself): the command's processes hold only the pipe's writing end,
    so none can rewind, truncate or rewrite what it printed before (a test runner's report,
    testrun.py); it can only add.

    Output goes to a file, never through memory: `.output` is its last OUTPUT_TAIL_BYTES. On
    timeout the whole jail (bwrap) or process group (no jail) is killed at once, however many
    processes it started or where they went.
    Raises Interrupted when Ctrl-C ended the command (see `end_commands_on_interrupt`).
    """
    if trace_to is not None and trace.strace() is not None:
        folder = _new_run_folder(Path(trace_to))
        traced = jail.allowing(folder) if jail is not None else None
        # Python's imports, which strace cannot see, are logged from inside (imports.py).
        wrapper = imports.wrapper(folder) + trace.wrapper(folder)
        result = _run(
            command,
            cwd,
            timeout_s,
            extra_secrets,
            stdout_only,
            traced,
            wrapper,
            extra_env,
            pass_fds,
            pass_env,
            stream,
        )
        if trace.written(folder):
            return result
        # strace could not start (no ptrace here): the command never ran, so run it plainly.
        (folder / "failed").write_text(result.tail(2000))
    return _run(
        command,
        cwd,
        timeout_s,
        extra_secrets,
        stdout_only,
        jail,
        (),
        extra_env,
        pass_fds,
        pass_env,
        stream,
    )


def _new_run_folder(parent: Path) -> Path:
    parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while (parent / f"run-{n}").exists():
        n += 1
    folder = parent / f"run-{n}"
    folder.mkdir()
    return folder


def _run(
    command: str,
    cwd: Path | str,
    timeout_s: float,
    extra_secrets: list[str] | None,
    stdout_only: bool,
    jail: Jail | None,
    wrapper: Sequence[str],
    extra_env: dict[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
    pass_env: Sequence[str] = (),
    stream: bool = False,
) -> CommandResult:
    start = time.monotonic()
    _live.refuse_if_interrupted()
    # The harness's own variables for this run (the report's descriptor, the canary, the
    # plugin's folder on PYTHONPATH) go on top of the allowlist: they carry no secret.
    env = environment(extra_secrets, jail.pass_env if jail is not None else pass_env) | (
        extra_env or {}
    )
    with tempfile.TemporaryDirectory(prefix="autoresearch-cmd-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        out_path = work / "output"
        err_path = work / "stderr"
        jailed = jail is not None and jail.mode == "bwrap"
        if not jailed:
            # No jail to cover them: a HOME and a TMPDIR of its own, thrown away after,
            # and the toolchains kept in the real HOME named where they are.
            env |= child_env.toolchain_homes(env, env.get("HOME"))
            for name in ("HOME", "TMPDIR"):
                (work / "scratch" / name.lower()).mkdir(parents=True)
                env[name] = str(work / "scratch" / name.lower())
        info_r, info_w = os.pipe() if jailed else (None, None)
        cpu_path = work / "cpu"
        piped = _OutputPipe(out_path) if stream else None
        watch = None
        if jailed and jail.worktree_growth_mb:
            watch = growth.Watch(jail.worktree, jail.worktree_growth_mb, lambda: None)
        with (
            open(out_path, "wb") if piped is None else piped.writer() as out,
            open(err_path, "wb") as err,
            open(cpu_path, "wb") if jailed else open(os.devnull, "rb") as stdin,
        ):
            try:
                if jailed:
                    jail.hand_over()
                    argv = jail.argv(
                        command,
                        Path(cwd),
                        work / "scratch",
                        env,
                        info_fd=info_w,
                        wrapper=(*CPU_REPORTER, *wrapper),
                    )
                    env = jail.env(env)
                elif wrapper:
                    argv = [*wrapper, "/bin/sh", "-c", command]
                proc = subprocess.Popen(
                    argv if jailed or wrapper else command,
                    shell=not (jailed or wrapper),
                    cwd=str(cwd),
                    env=env,
                    stdout=out,
                    stderr=err if stdout_only else subprocess.STDOUT,
                    stdin=stdin,
                    start_new_session=True,
                    pass_fds=((info_w,) if jailed else ()) + tuple(pass_fds),
                )
            except BaseException:
                if info_r is not None:
                    os.close(info_r)
                if piped is not None:
                    piped.abandon()
                raise
            finally:
                if info_w is not None:
                    os.close(info_w)
        if piped is not None:
            piped.start()
        running = _Running(proc)
        _live.add(running)
        if watch is not None:
            watch.on_exceed = running.kill  # the whole jail, at once
            watch.start()
        namespace = None
        try:
            if info_r is not None:
                running.jail_pid = _read_jail_pid(info_r, start + timeout_s)
                namespace = _held_namespace(running.jail_pid)
            timed_out = not _wait(proc, start + timeout_s)
            if timed_out or running.interrupted:
                running.kill()
            elif not jailed:
                # Whatever the command left running in its process group ends with it (a
                # jail ends everything inside it by itself when the command exits).
                _killpg(proc.pid)
            if namespace is not None:
                _wait_until_empty(namespace[1], time.monotonic() + KILL_WAIT_S)
        except BaseException:  # e.g. Ctrl-C when run() is called from the main thread
            running.kill()
            raise
        finally:
            _live.discard(running)
            if namespace is not None:
                os.close(namespace[0])
        if running.interrupted:
            raise Interrupted(f"`{command}` was ended by Ctrl-C")
        output_open = piped.finish() if piped is not None else False
        over_bound = watch.finish() if watch is not None else None
        jailed_cpu_s = _reported_cpu(cpu_path) if jailed else None
        if jailed_cpu_s is not None:
            jailed_cpu.add(jailed_cpu_s)
        output, size = _read_tail(out_path, OUTPUT_TAIL_BYTES)
        full = None if timed_out or proc.returncode == 0 else full_note(jail, output)
        if full:
            output = f"{output.rstrip()}\n{full}\n"
        if over_bound:
            output = f"{output.rstrip()}\n{over_bound}\n"
        stderr, _ = _read_tail(err_path, STDERR_TAIL_BYTES) if stdout_only else ("", 0)
        return CommandResult(
            command,
            None if timed_out else proc.returncode,
            output,
            time.monotonic() - start,
            timed_out=timed_out,
            stderr=stderr,
            output_bytes=size,
            jailed_cpu_s=jailed_cpu_s,
            output_open=output_open,
            over_bound=over_bound,
        )


# How long the output's pipe may stay open once the command has ended (and, in a jail, every
# process of it): only something that escaped the command's process group holds it then.
PIPE_WAIT_S = 30


class _OutputPipe:
    """A command's output through a pipe: a thread copies it into `path` as it comes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.read_fd, self.write_fd = os.pipe()
        self.thread = threading.Thread(target=self._copy, daemon=True)

    def writer(self):
        """The pipe's writing end, for Popen's stdout; closed in the harness once handed on."""
        return os.fdopen(self.write_fd, "wb", buffering=0)

    def start(self) -> None:
        self.thread.start()

    def abandon(self) -> None:
        os.close(self.read_fd)

    def _copy(self) -> None:
        with os.fdopen(self.read_fd, "rb", buffering=0) as pipe, open(self.path, "wb") as out:
            while block := pipe.read(1 << 16):
                out.write(block)

    def finish(self) -> bool:
        """Wait for the pipe's end; True when something still holds it open."""
        self.thread.join(PIPE_WAIT_S)
        return self.thread.is_alive()


# --- ending commands ---------------------------------------------------------------------


@dataclass(eq=False)
class _Running:
    proc: subprocess.Popen
    jail_pid: int | None = None  # the jail's PID 1: when it dies, everything inside dies
    interrupted: bool = False

    def signal_kill(self) -> None:
        """Send the kill; safe in a signal handler (it never waits)."""
        if self.jail_pid is not None and self.proc.poll() is None:
            try:
                os.kill(self.jail_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            _killpg(self.proc.pid)

    def kill(self) -> None:
        """Kill the jail (or process group) and wait until it is gone."""
        self.signal_kill()
        try:
            # bwrap exits once its PID 1 has gone, and PID 1 goes once all inside are gone.
            self.proc.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            _killpg(self.proc.pid)
            self.proc.wait()


class _LiveCommands:
    """The commands running in this process, so that one Ctrl-C ends them all.

    Process-wide on purpose: Snakemake runs our jobs as threads of its own process, and the
    commands run in sessions of their own, so the terminal's Ctrl-C never reaches them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[_Running] = set()
        self.interrupted = False

    def add(self, running: _Running) -> None:
        with self._lock:
            self._running.add(running)
        if self.interrupted:  # Ctrl-C came between the check in `run` and now
            running.interrupted = True
            running.signal_kill()

    def discard(self, running: _Running) -> None:
        with self._lock:
            self._running.discard(running)

    def refuse_if_interrupted(self) -> None:
        if self.interrupted:
            raise Interrupted("not started: the run is ending after Ctrl-C")

    def end_all(self) -> None:
        """Mark the run interrupted and kill every running command (never waits, no lock:
        this runs in a signal handler, possibly while the main thread holds the lock)."""
        self.interrupted = True
        for running in tuple(self._running):
            running.interrupted = True
            running.signal_kill()


_live = _LiveCommands()


def end_commands_on_interrupt() -> bool:
    """Make Ctrl-C (SIGINT) end every running command before the usual KeyboardInterrupt.

    Call once from the main thread of the Snakemake process (the workflow's `onstart`).
    Returns False when called from another thread, where no signal handler can be set, and
    when the process was started with SIGINT ignored (`nohup`, a background job of a
    script): it asked not to be interrupted, and Snakemake itself will not be.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    previous = signal.getsignal(signal.SIGINT)
    if previous == signal.SIG_IGN:
        return False
    if getattr(previous, "_ends_commands", False):
        return True

    def on_interrupt(signum, frame):
        if not _live.interrupted:
            # os.write, not print: the main thread may be inside a write to stderr right now.
            os.write(2, INTERRUPT_MESSAGE.encode())
        _live.end_all()
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    on_interrupt._ends_commands = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, on_interrupt)
    return True


# --- helpers ---------------------------------------------------------------------------------


def _wait(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait for the command to exit by `deadline`; False when it did not.

    A pidfd wakes us the moment the process exits; Popen.wait(timeout) polls with sleeps
    of up to 50 ms, which was half the jail's cost for a short command.
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3, or already reaped
        pidfd = None
    if pidfd is not None:
        try:
            select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(pidfd)
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        return True
    except subprocess.TimeoutExpired:
        return False


def _read_jail_pid(fd: int, deadline: float) -> int | None:
    """The PID of the jail's init, from bwrap's --info-fd (bwrap closes it once written)."""
    data = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None  # bwrap failed before the jail existed; its own error is in the output


def _held_namespace(pid: int | None) -> tuple[int, str] | None:
    """The PID namespace of the jail's init: a descriptor of ours that holds it, and its name
    as /proc gives it; None once it is gone. Held until the run has waited for it to empty:
    the kernel gives a freed namespace's number to the next one made (the lowest free), so
    by its name alone, once the jail was gone, the wait took another jail's namespace (a
    parallel job's, another session's) for this one and waited on that jail's run."""
    if pid is None:
        return None
    try:
        fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return fd, os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        os.close(fd)
        return None


def _wait_until_empty(namespace: str, deadline: float) -> None:
    """Wait until no process is left in the jail's PID namespace. The kernel kills them all
    when the jail's init exits, but bwrap can return first (with a tmpfs to tear down, a
    left-behind process was still there for a moment): a run returns once its jail is gone."""
    while time.monotonic() < deadline:
        left = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") == namespace and not _zombie(
                    entry.name
                ):
                    left = True
                    break
            except OSError:
                continue
        if not left:
            return
        time.sleep(0.01)


def _zombie(pid: str) -> bool:
    """Whether the process has exited and waits only to be reaped: the jail's init, once
    bwrap has gone, is reaped by the machine's init, which may take seconds; it runs
    nothing any more."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].startswith(("Z", "X"))


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_tail(path: Path, limit: int) -> tuple[str, int]:
    """The last `limit` bytes of a file, decoded, and the file's whole size."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - limit))
            data = handle.read(limit)
    except FileNotFoundError:
        return "", 0
    return data.decode("utf-8", errors="replace"), size
