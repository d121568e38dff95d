"""The measured process held: a Python measurement's stdlib and builtins checked from inside.

The code under test runs in the measuring process (the metric's script imports it), so it can
rebind what the script measures with: `statistics.median`, `print`, reached by a name built at
run time (`import_module("statis" + "tics")`) that no screen of the diff reads. So each run of
a measurement gets a `sitecustomize` of the harness's, first on PYTHONPATH (a `python` shim
first on PATH keeps it there after a `PYTHONPATH=.` the command sets), from a folder the jail
shows read-only. Before the measured script runs it:

- holds, as objects, every callable of `builtins` and of each stdlib module (their classes'
  methods, a function's code and defaults), those imported later as each import completes;
- records at once any attribute a module of the worktree sets on one of those modules (the
  module's class is swapped for one that sees each set), so a patch taken back right after
  its use is seen too;
- checks them all again when `__main__` has ended (a wrapper of `threading._shutdown`, which
  the interpreter calls before it joins the threads and runs the `atexit` handlers), with
  `sys.modules` and its own place first on `sys.meta_path`;
- seals the output at that point: every descriptor of the process onto the script's stdout
  goes to /dev/null, so what an `atexit` handler or a thread prints after the script's last
  line (the metric's format reads the last line) goes nowhere; the output opened again by a
  name, or a process started, after that is a change;

and writes what it saw to a descriptor the harness holds (a pipe: nothing written can be
taken back). An exec is checked when it is made (an audit hook), and one the worktree's code
makes is a change; a process that started the guard and never wrote its end (os._exit, a
signal) is not checked, so not a pass. Any change makes the measurement tampered. What the
measured script's own code sets (it is protected) is the measurement's choice.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.measure import imports  # its SHIMMED names
from autoresearch.safety.held_pipe import HeldPipe

ENV_FD = "AUTORESEARCH_GUARD_FD"
ENV_ROOT = "AUTORESEARCH_GUARD_ROOT"
MAX_REPORT_BYTES = 1_000_000

HOOK = """\
import os as _os
import sys as _sys


def _install():
    here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    try:
        fd, _, inode = _os.environ["AUTORESEARCH_GUARD_FD"].partition(":")
        fd = int(fd)
        root = _os.path.join(_os.path.abspath(_os.environ["AUTORESEARCH_GUARD_ROOT"]), "")
        if _os.fstat(fd).st_ino != int(inode):
            return  # that number is another file here (the pipe was closed for this child)
    except (KeyError, ValueError, OSError):
        return  # no channel here (a child whose descriptors were closed): nothing to report
    import atexit
    import types
    from functools import partial

    import threading

    write, getpid, getframe = _os.write, _os.getpid, _sys._getframe
    module_type, start_cwd = types.ModuleType, _os.getcwd()
    stdlib = frozenset(_sys.stdlib_module_names)
    import builtins

    builtin_names = frozenset(vars(builtins))
    # The measured script (protected, or the command's own `-c` code) runs in __main__'s
    # namespace, made before this hook (runpy uses the same one for -m): what its code sets
    # itself is the measurement's own.
    main = vars(_sys.modules["__main__"])
    # Held as copies of their namespaces (a C-speed copy; compared at the end, once):
    modules = {}  # module name -> the module object held
    spaces = {}  # module name -> a copy of its namespace when held
    classes = []  # (module name, class, a copy of its namespace): the module's own classes
    codes = []  # (function, its code, defaults, kwdefaults): swapped in place, still seen
    said = []

    def say(line):
        try:
            write(fd, (line.replace("\\n", " ") + "\\n").encode("utf-8", "replace"))
        except OSError:
            pass

    function = types.FunctionType
    # Hooks made to be set by a program (what it does with an uncaught exception or a
    # warning): they change no figure the script prints.
    hooks = frozenset(("sys.excepthook", "sys.displayhook", "sys.unraisablehook",
                       "sys.breakpointhook", "threading.excepthook", "warnings.showwarning"))
    streams = frozenset(("sys.stdout", "sys.__stdout__"))
    described = (classmethod, staticmethod, property)
    missing = object()

    def code_of(funcs):
        return [(f, f.__code__, f.__defaults__, f.__kwdefaults__)
                for f in funcs if type(f) is function]

    def watched(name, module):
        if name.partition(".")[0] not in stdlib or not isinstance(module, module_type):
            return False
        origin = getattr(module, "__file__", None)
        return not (origin and _os.path.abspath(origin).startswith(root))

    def hold(name, module):
        if name in modules or not watched(name, module):
            return
        modules[name] = module
        space = spaces[name] = dict(vars(module))
        codes.extend(code_of(space.values()))
        for obj in space.values():
            if isinstance(obj, type) and getattr(obj, "__module__", None) == name:
                inner = dict(vars(obj))
                classes.append((name, obj, inner))
                codes.extend(code_of(inner.values()))
        if type(module) is module_type:
            try:
                module.__class__ = Watched
            except TypeError:
                pass

    def mine(code, space):
        # Whether `code` (run with globals `space`) is the worktree's: a file under the root,
        # or code made at run time ("<string>"), outside the measured script's namespace.
        path = code.co_filename
        if space is main or path.startswith("<frozen "):
            return False
        full = _os.path.normpath(_os.path.join(start_cwd, path))
        return path.startswith("<") or full.startswith(root)

    def shown(path, line):
        full = _os.path.normpath(_os.path.join(start_cwd, path))
        return "%s:%d" % (_os.path.relpath(full, root) if full.startswith(root) else path, line)

    def made_here(value):
        # Whether `value` is a callable the worktree's code defined (through a partial, a
        # bound method or a callable object too): set by a library's helper
        # (`mock.patch.object`), it is still the code's own patch.
        for _ in range(8):
            if isinstance(value, partial):
                value = value.func
            elif isinstance(value, types.MethodType):
                value = value.__func__
            else:
                break
        if not isinstance(value, (function, type)):
            value = getattr(type(value), "__call__", None)
        if isinstance(value, type):
            return any(isinstance(v, function) and mine(v.__code__, v.__globals__)
                       for v in vars(value).values())
        return isinstance(value, function) and mine(value.__code__, value.__globals__)

    def forged(stream):
        for _ in range(4):  # a text stream, its buffer, the raw file under it
            if stream is None or made_here(getattr(type(stream), "write", None)):
                return stream is not None
            stream = getattr(stream, "buffer", None) or getattr(stream, "raw", None)
        return False

    def blame(value):
        # Where the worktree's code made this set: the frame that sets, when it is the
        # worktree's, or the first of the worktree's frames when what is set was made there.
        # None for a library's own set (warnings.catch_warnings), judged at exit instead.
        try:
            frame = getframe(3)  # blame, seen, Watched.__setattr__, then the setter
        except ValueError:
            return None
        if mine(frame.f_code, frame.f_globals):
            return shown(frame.f_code.co_filename, frame.f_lineno)
        if made_here(value):
            up = frame
            while up is not None and not mine(up.f_code, up.f_globals):
                up = up.f_back
            up = up or frame
            return shown(up.f_code.co_filename, up.f_lineno)
        return None

    def changed(what, where):
        said.append(what)
        say("changed\\t%d\\t%s\\t%s" % (getpid(), what, where))

    class Watched(module_type):
        def __setattr__(self, attr, value):
            seen(self, attr, value)
            module_type.__setattr__(self, attr, value)

        def __delattr__(self, attr):
            seen(self, attr, None)
            module_type.__delattr__(self, attr)

    def seen(module, attr, value):
        name = module_type.__getattribute__(module, "__name__")
        if name + "." + attr in streams:
            # What the script prints goes through it: a stream (or the buffer under it) of a
            # class the worktree's code wrote can rewrite the measured figure, whoever set it.
            if forged(value):
                changed(name + "." + attr, blame(type(value)) or "a stream of its own")
            return
        if attr.startswith("__") and attr not in ("__class__", "__getattr__"):
            return
        if name + "." + attr in hooks:
            return
        if isinstance(value, module_type) and _sys.modules.get(name + "." + attr) is value:
            return  # the import system binding a submodule to its package
        # What a function the script calls may run with: a callable rebound or added (a
        # global that shadows a builtin too). Data (`sys.stdout`, a flag) is the code's own.
        was = spaces.get(name, {}).get(attr)
        if not (callable(was) or callable(value) or attr in builtin_names
                or attr.startswith("__")):
            return
        where = blame(value)
        if where is not None:
            changed(name + "." + attr, where)
        elif name in spaces and getframe(2).f_globals is main:
            spaces[name][attr] = value  # the measured script's own choice

    def check():
        found = []
        for name, module in modules.items():
            if _sys.modules.get(name, module) is not module:
                found.append("sys.modules[%r]" % name)
            now, was = module_type.__getattribute__(module, "__dict__"), spaces[name]
            for attr, obj in was.items():
                if (attr[:2] != "__" and callable(obj) and now.get(attr, missing) is not obj
                        and name + "." + attr not in hooks):
                    found.append(name + "." + attr)
            for attr in now.keys() - was.keys():
                if attr in builtin_names and name != "builtins":
                    found.append(name + "." + attr)
        for name, cls, was in classes:
            now = vars(cls)
            for attr, obj in was.items():
                if (callable(obj) or isinstance(obj, described)) and now.get(attr) is not obj:
                    found.append("%s.%s.%s" % (name, cls.__qualname__, attr))
        for f, code, defaults, kwdefaults in codes:
            if not (f.__code__ is code and f.__defaults__ is defaults
                    and f.__kwdefaults__ is kwdefaults):
                found.append("%s.%s" % (f.__module__, f.__qualname__))
        for name, module in list(_sys.modules.items()):
            if "." not in name and name not in modules and watched(name, module):
                found.append("%s (imported past the guard)" % name)
        if forged(_sys.stdout):
            found.append("sys.stdout")
        if not _sys.meta_path or _sys.meta_path[0] is not Finder:
            found.append("sys.meta_path")
        return sorted(set(found) - set(said))

    class Loader:
        def __init__(self, real, name):
            self.real, self.name = real, name  # a C module may call itself otherwise

        def __getattr__(self, attr):
            return getattr(self.real, attr)

        def create_module(self, spec):
            return self.real.create_module(spec)

        def exec_module(self, module):
            real = self.real
            try:
                real.exec_module(module)
            finally:
                spec = getattr(module, "__spec__", None)
                if spec is not None and spec.loader is self:
                    spec.loader = real
                if getattr(module, "__loader__", None) is self:
                    module_type.__setattr__(module, "__loader__", real)
            hold(self.name, module)

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name.partition(".")[0] not in stdlib:
                return None
            for finder in list(_sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is Finder or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = Loader(spec.loader, name)
                    return spec
            return None

    # The output: what the script's figure is read from (a file, or a pipe to `tail`).
    # A character device (/dev/null, a terminal) holds no figure to protect.
    try:
        out = _os.fstat(1)
        output = None if out.st_mode & 0o170000 == 0o020000 else (out.st_dev, out.st_ino)
    except OSError:
        output = None
    sealing, sealed = [], []

    def same(fd):
        try:
            st = _os.fstat(fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == output

    def seal():
        # __main__ has ended: what is printed after it (an atexit handler, a thread that
        # waits for the main thread's end) is no part of the figure, so every descriptor of
        # this process onto the output goes to /dev/null (copies made with dup or opened by a
        # /proc name too). First a check of every held name: a patch an atexit handler or a
        # thread would take back before the exit check is still in place here.
        if sealing:
            return
        sealing.append(True)
        try:
            for name in check():
                changed(name, "when the script ended")
            for stream in (_sys.stdout, _sys.__stdout__):
                try:
                    stream.flush()
                except Exception:
                    pass
            if output is None:
                return
            try:
                fds = [int(n) for n in _os.listdir("/proc/self/fd")]
            except (OSError, ValueError):
                fds = range(1024)
            null = _os.open(_os.devnull, _os.O_WRONLY)
            for fd in fds:
                if fd != null and same(fd):
                    try:
                        _os.dup2(null, fd, inheritable=fd <= 2)
                    except OSError:
                        pass
            _os.close(null)
        finally:
            sealed.append(True)  # from here, a way back to the output is a change

    shutdown = threading._shutdown

    def sealed_shutdown():
        # Called once __main__ has ended, before the threads are joined and before the
        # atexit handlers run (Py_FinalizeEx), whoever holds the main thread's lock.
        try:
            seal()
        finally:
            shutdown()

    threading._shutdown = sealed_shutdown

    def end():
        # Once sealed, nothing this process does reaches the figure: the seal's check holds.
        found = []
        if not sealed:  # the interpreter never called threading._shutdown
            seal()
            found.append("the output left open after the script ended")
        say("end\\t%d\\t%s" % (getpid(), ";".join(found)))

    starts = frozenset(("subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty",
                        "os.system", "os.spawn"))

    def same_path(path):
        # The name as the open may read it: from the working folder, or (a relative name)
        # from any folder this process holds open, since the audit event does not say which
        # `dir_fd` the open was given.
        bases = [None]
        if not _os.path.isabs(path):
            try:
                bases += [int(n) for n in _os.listdir("/proc/self/fd")]
            except (OSError, ValueError):
                pass
        for base in bases:
            try:
                st = _os.stat(path, dir_fd=base)
            except (OSError, ValueError):
                continue
            if (st.st_dev, st.st_ino) == output:
                return True
        return False

    def culprit():
        frame = getframe(2)
        while frame is not None and not mine(frame.f_code, frame.f_globals):
            frame = frame.f_back
        if frame is None:
            return "after __main__"
        return shown(frame.f_code.co_filename, frame.f_lineno)

    def audit(event, args):
        # An exec ends the Python code of this process: check it now. A library's exec is
        # its way to run (`python -m ruff` runs the ruff binary); one the worktree's code
        # makes replaces the measurement with a program of its choice.
        if sealed and event == "open" and isinstance(args[0], (str, bytes)):
            # The sealed output reached again by a name (the shell's /proc/<pid>/fd/1, the
            # file's path); a path object comes here as the name it gave the open.
            try:
                if same_path(args[0]):
                    changed("the output opened again after the script ended", culprit())
            except (OSError, ValueError):
                pass
            return
        if sealed and event in starts:
            # A program started now would hold no output but could open it by a name.
            changed("a process started after the script ended", culprit())
            return
        if event != "os.exec":
            return
        found = check()
        frame = getframe(1)
        while frame is not None and not mine(frame.f_code, frame.f_globals):
            frame = frame.f_back
        if frame is not None:
            where = shown(frame.f_code.co_filename, frame.f_lineno)
            found.append("an exec of %s (%s)" % (args[0] if args else "?", where))
        say("end\\t%d\\t%s" % (getpid(), ";".join(found)))

    for name, module in list(_sys.modules.items()):
        hold(name, module)
    _sys.meta_path.insert(0, Finder)
    atexit.register(end)
    _sys.addaudithook(audit)
    say("start\\t%d" % getpid())


_install()
del _install
_me = _sys.modules.pop("sitecustomize", None)
try:
    import sitecustomize  # noqa: F401  (the environment's own, if it has one)
except ImportError:
    _sys.modules["sitecustomize"] = _me
"""


@dataclass
class Verdict:
    """What the guard of a measurement's Python processes reported."""

    started: int = 0
    changed: list[str] = field(default_factory=list)  # "statistics.median (src.py:7)"
    unchecked: int = 0  # processes that started the guard and never wrote its end
    problem: str | None = None  # the report itself is wrong (too long, a second end)

    @property
    def tampered(self) -> bool:
        return bool(self.changed or self.unchecked or self.problem)

    def why(self) -> str:
        parts = []
        if self.changed:
            parts.append("the measured process changed " + ", ".join(self.changed))
        if self.unchecked:
            parts.append(
                f"{self.unchecked} measured Python process(es) ended without the guard's "
                "check (os._exit or a signal)"
            )
        if self.problem:
            parts.append(self.problem)
        return "; ".join(parts)


# A `python` first on PATH that puts the hook first on PYTHONPATH again, after whatever the
# command set (`PYTHONPATH=. python bench.py`), and runs the next `python` on PATH
# (imports.SHIM's way, with no process of its own to take itself off PATH).
SHIM = """#!/bin/sh
rest=${{PATH#{bin}:}}
real=$(PATH="$rest" command -v "${{0##*/}}") || exit 127
PYTHONPATH={hook}${{PYTHONPATH:+:$PYTHONPATH}} PATH="$rest" exec "$real" "$@"
"""


def folder(parent: Path) -> Path:
    """The guard's hook and `python` shims under `parent` (outside the worktree; the jail
    shows it read-only)."""
    where = Path(parent) / "guard"
    hook, bin_dir = where / "hook", where / "bin"
    hook.mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    for name in imports.SHIMMED:
        shim = bin_dir / name
        shim.write_text(SHIM.format(bin=shlex.quote(str(bin_dir)), hook=shlex.quote(str(hook))))
        shim.chmod(0o755)
    for path in (Path(parent), where, hook, bin_dir):
        path.chmod(0o755)  # the jail's user (nobody under a root harness) must read them
    (hook / "sitecustomize.py").chmod(0o644)
    return where


def prefix(where: Path) -> str:
    """Shell words that put the hook first on PYTHONPATH and the shim first on PATH for
    the command after them (the shim keeps the hook first after a `PYTHONPATH=.` the
    command sets itself)."""
    hook, bin_dir = shlex.quote(str(where / "hook")), shlex.quote(str(where / "bin"))
    return (
        f'PYTHONPATH={hook}"${{PYTHONPATH:+:$PYTHONPATH}}"; PATH={bin_dir}:"$PATH"; '
        "export PYTHONPATH PATH; "
    )


def read(data: bytes | None) -> Verdict:
    """The verdict from what came through the guard's pipe."""
    out = Verdict()
    if data is None:
        out.problem = "the guard's report was still open after the run"
        return out
    if len(data) > MAX_REPORT_BYTES:
        out.problem = "the guard's report is longer than any run's"
        return out
    open_pids: set[str] = set()
    ended: set[str] = set()
    for line in data.decode("utf-8", "replace").splitlines():
        kind, _, rest = line.partition("\t")
        pid, _, what = rest.partition("\t")
        if kind == "start":
            out.started += 1
            open_pids.add(pid)
        elif kind == "changed":
            name, _, where = what.partition("\t")
            text = f"{name} ({where})"
            if text not in out.changed:
                out.changed.append(text)
        elif kind == "end":
            if pid in ended:
                out.problem = f"process {pid} reported two ends"
            ended.add(pid)
            open_pids.discard(pid)
            for name in filter(None, what.split(";")):
                if name not in out.changed:
                    out.changed.append(name)
        elif line.strip():
            out.problem = "the guard's report holds a line it never writes"
    out.unchecked = len(open_pids)
    return out


def environment(fd: int, root: Path) -> dict[str, str]:
    """The hook's variables: the pipe's descriptor with its inode (a child that did not
    inherit it may hold another file under that number) and the worktree's root."""
    return {ENV_FD: f"{fd}:{os.fstat(fd).st_ino}", ENV_ROOT: str(root)}


WAIT_S = 30  # for the pipe's end once the command (and its jail) has ended


def pipe() -> HeldPipe:
    """The guard's channel: the run's processes hold the writing end (inherited), the
    harness reads the other as the run goes, so nothing written can be taken back; its
    `finish` is None while a process still holds it."""
    return HeldPipe(MAX_REPORT_BYTES, WAIT_S)
