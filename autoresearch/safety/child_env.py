"""The environment of every process the harness starts: an allowlist, never a blocklist.

git, ruff, bandit, the target's commands in or out of the jail, `finalize`'s test runs and
`plan`'s dry runs all get the same few names from our environment (what a program needs to
run and to find its toolchain) plus the names the spec lists in `commands.pass_env`. The
API key, the spec's `secrets` and every credential nobody listed (GITHUB_TOKEN, AWS_*, a
cloud's token) are in none of them: a blocklist misses whatever it did not foresee.
HOME and TMPDIR point at private folders (docs/safety.md, "Environments").
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

# What a program needs to run: where programs are, how to speak, what time it is.
BASE = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")
BASE_PREFIXES = ("LC_",)
# Where a toolchain lives when it is not on PATH's default places; names of folders and
# versions, never credentials.
TOOLCHAIN = (
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "JAVA_HOME",
    "GOROOT",
    "GOPATH",
    "GOCACHE",
    "GOMODCACHE",
    "GOFLAGS",
    "GOTOOLCHAIN",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "PYENV_ROOT",
    "PYENV_VERSION",
)
# Toolchains that live under $HOME unless told otherwise: a private HOME would hide them
# from a command run without the jail (the jail shows them at their place, read-only).
HOME_TOOLCHAINS = {
    "CARGO_HOME": ".cargo",
    "RUSTUP_HOME": ".rustup",
    "PYENV_ROOT": ".pyenv",
    "GOPATH": "go",
}
# Never passed, whatever a spec lists: the model API's key and settings.
NEVER_PREFIXES = ("ANTHROPIC_",)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def allowed(
    pass_env: Iterable[str] = (),
    secrets: Iterable[str] = (),
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The allowlisted names of `source` (our environment) and those in `pass_env`;
    never ANTHROPIC_* or a name in `secrets`. HOME and TMPDIR are the caller's to set."""
    source = os.environ if source is None else source
    wanted = set(BASE) | set(TOOLCHAIN) | set(pass_env)
    drop = set(secrets or ())
    return {
        key: value
        for key, value in source.items()
        if (key in wanted or key.startswith(BASE_PREFIXES))
        and key not in drop
        and not key.startswith(NEVER_PREFIXES)
    }


def problem(names: object, secrets: Iterable[str] = ()) -> str | None:
    """Why a spec's `commands.pass_env` cannot be used, or None."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return "must be a list of environment variable names"
    secret = set(secrets or ())
    for name in names:
        if not NAME.match(name):
            return f"{name!r} is not an environment variable name"
        if name.startswith(NEVER_PREFIXES):
            return f"{name} is the model API's; it is never passed to a command"
        if name in secret:
            return f"{name} is also listed in `secrets`: a secret is never passed"
    return None


class _Private:
    """One private folder per process for the HOME and TMPDIR of the harness's own tools
    (git, ruff, bandit): empty, mode 0700, removed when the process ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._root: Path | None = None

    def root(self) -> Path:
        with self._lock:
            if self._root is None or not self._root.is_dir():
                self._root = Path(tempfile.mkdtemp(prefix="autoresearch-env-"))
                for name in ("home", "tmp"):
                    (self._root / name).mkdir(mode=0o700)
                atexit.register(shutil.rmtree, self._root, True)
            return self._root


_private = _Private()


def for_tool(pass_env: Iterable[str] = ()) -> dict[str, str]:
    """The environment of a tool the harness runs itself (git, ruff, bandit): the
    allowlist, with a private HOME and TMPDIR that hold nothing of the user's."""
    root = _private.root()
    env = allowed(pass_env)
    env["HOME"] = str(root / "home")
    env["TMPDIR"] = str(root / "tmp")
    return env


def toolchain_homes(env: Mapping[str, str], home: str | None) -> dict[str, str]:
    """For a command given a private HOME: where the toolchains under the real `home` are
    (CARGO_HOME, RUSTUP_HOME, ...), for those `env` does not name already."""
    if not home or not os.path.isabs(home):
        return {}
    found = {}
    for name, folder in HOME_TOOLCHAINS.items():
        path = Path(home) / folder
        if name not in env and path.is_dir():
            found[name] = str(path)
    return found
