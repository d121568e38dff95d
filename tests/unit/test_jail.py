"""The jail around the target's commands: each test is an attack a target's code has made
(or could make) on the machine running the session, and proves that the jail stops it."""

from __future__ import annotations

import dataclasses
import os
import pwd
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import ROOT

from autoresearch.safety import commands, jail

PROBE = jail.probe()
needs_bwrap = pytest.mark.skipif(
    not PROBE.works, reason=f"the bwrap jail cannot run here: {PROBE.reason}"
)


def jailed(dirs, **settings) -> jail.Jail:
    built = jail.build_jail({"sandbox": "bwrap", **settings}, dirs.worktree, hide=[dirs.sessions])
    assert built.mode == "bwrap"
    return built


def run_in(dirs, command: str, box: jail.Jail | None = None, **kw) -> commands.CommandResult:
    box = box or jailed(dirs)
    return commands.run(command, dirs.worktree, timeout_s=120, jail=box, **kw)


# --- our process's environment -------------------------------------------------------------

# Run as a child with the secrets in its real (exec-time) environment, which is what
# /proc/<pid>/environ shows: the command then hunts for them in every process it can see.
HUNT_ENVIRON = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from autoresearch.safety import commands, jail
    worktree, sessions, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    box = jail.build_jail({"sandbox": mode}, worktree, hide=[sessions])
    hunt = "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\\\0' '\\\\n'"
    hunt += " | grep -c -e sk-ant-hidden -e hunter2"
    print(commands.run(hunt, worktree, extra_secrets=["DB_PASSWORD"], jail=box).output.strip())
    """
)


def hunt_secrets_in_ancestors(dirs, mode: str) -> int:
    env = dict(os.environ, ANTHROPIC_API_KEY="sk-ant-hidden", DB_PASSWORD="hunter2")
    args = [sys.executable, "-c", HUNT_ENVIRON, str(dirs.worktree), str(dirs.sessions), mode]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


@needs_bwrap
def test_command_cannot_read_secrets_from_an_ancestors_environ(session_dirs):
    assert hunt_secrets_in_ancestors(session_dirs, "bwrap") == 0


def test_without_a_jail_an_ancestors_environ_is_readable(session_dirs):
    # What `sandbox: none` leaves open (docs/safety.md), and proof that the hunt above works.
    assert hunt_secrets_in_ancestors(session_dirs, "none") >= 2


@needs_bwrap
def test_command_sees_only_its_own_processes(session_dirs):
    result = run_in(session_dirs, "ls /proc | grep -c '^[0-9]'")
    assert int(result.output) <= 6  # the jail's init, sh, ls, grep (and nothing of ours)


# --- the user's checkout, its git directory and sessions/ --------------------------------


@needs_bwrap
def test_git_works_read_only_in_the_worktree(session_dirs):
    result = run_in(session_dirs, "git log --format=%s && git status --porcelain && echo ok")
    assert result.ok, result.output
    assert result.output.split() == ["initial", "ok"]


@needs_bwrap
def test_command_cannot_write_into_the_checkout_it_finds_through_git(session_dirs):
    attack = (
        "common=$(git rev-parse --path-format=absolute --git-common-dir) && "
        'checkout=$(dirname "$common") && echo "$checkout" && ls -A "$checkout" && '
        'echo pwned > "$checkout/pwned"'
    )
    result = run_in(session_dirs, attack)
    assert not result.ok
    assert str(session_dirs.target) in result.output  # git still names it...
    assert "calc.py" not in result.output  # ...but the user's files are not there
    assert "Read-only file system" in result.output
    assert not (session_dirs.target / "pwned").exists()


@needs_bwrap
def test_command_cannot_plant_a_hook_in_the_repository(session_dirs):
    # The harness runs git outside the jail: a hook written here would run there.
    hook = session_dirs.target / ".git" / "hooks" / "post-commit"
    result = run_in(session_dirs, f"echo 'touch /tmp/owned' > {hook} && chmod +x {hook}")
    assert "Read-only file system" in result.output
    assert not hook.exists()


@needs_bwrap
def test_command_cannot_unmount_what_hides_the_checkout(session_dirs):
    result = run_in(session_dirs, f"umount -l {session_dirs.target}; ls {session_dirs.target}")
    assert "calc.py" not in result.output
    assert (
        "CapEff:\t0000000000000000" in run_in(session_dirs, "grep CapEff /proc/self/status").output
    )


@needs_bwrap
def test_sessions_folder_shows_nothing_but_the_worktree(session_dirs):
    sessions = session_dirs.sessions
    result = run_in(session_dirs, f"find {sessions} -maxdepth 2; cat {sessions}/s/session.yaml")
    listed = {Path(line) for line in result.output.splitlines() if line.startswith("/")}
    assert listed == {sessions, sessions / "s", sessions / "s" / "worktree"}
    assert "DB_PASSWORD" not in result.output
    written = run_in(session_dirs, f"echo x > {sessions}/s/decision.json")
    assert "Read-only file system" in written.output
    assert not (sessions / "s" / "decision.json").exists()


@needs_bwrap
def test_worktree_is_writable_and_changes_reach_the_session(session_dirs):
    result = run_in(session_dirs, "echo 'def sub(a, b):' > new.py && mkdir -p d && touch d/f")
    assert result.ok, result.output
    assert (session_dirs.worktree / "new.py").read_text() == "def sub(a, b):\n"
    assert (session_dirs.worktree / "d" / "f").exists()


@needs_bwrap
def test_targets_tests_run_in_the_jail_with_the_toolchain_read_only(session_dirs):
    result = run_in(session_dirs, "python -m pytest -q -p no:cacheprovider")
    assert result.ok, result.output
    assert "2 passed" in result.output
    venv = Path(sys.prefix)
    written = run_in(session_dirs, f"touch {venv}/planted")
    assert "Read-only file system" in written.output
    assert not (venv / "planted").exists()


@needs_bwrap
def test_a_virtualenv_on_path_inside_a_hidden_folder_stays_usable(session_dirs, monkeypatch):
    # Hiding the whole working directory must not take away the Python the tests run with.
    workdir = session_dirs.sessions.parent
    venv = workdir / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    (workdir / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-in-a-dotenv\n")
    monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    box = jail.build_jail({}, session_dirs.worktree, hide=[workdir])
    result = run_in(
        session_dirs, f"python -c 'import sys; print(sys.prefix)'; cat {workdir}/.env", box
    )
    assert result.output.splitlines()[0] == str(venv)
    assert "sk-ant-in-a-dotenv" not in result.output


@needs_bwrap
def test_a_program_named_by_absolute_path_in_the_checkout_runs_with_its_install(session_dirs):
    venv = session_dirs.target / ".venv"  # untracked: only the user's checkout has it
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    result = run_in(
        session_dirs,
        f"{venv}/bin/python -c 'import sys; print(sys.prefix)'; ls -A {session_dirs.target}",
    )
    assert result.output.split() == [str(venv), ".git", ".venv"]


# --- $HOME and /tmp ---------------------------------------------------------------------------


@needs_bwrap
def test_home_is_an_empty_folder_whose_writes_are_thrown_away(session_dirs, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    result = run_in(
        session_dirs, 'ls -A "$HOME"; cat ~/.ssh/id_ed25519; echo x > ~/.planted && echo w'
    )
    assert "PRIVATE KEY" not in result.output
    assert result.output.splitlines()[-1] == "w"  # writing works: tools may keep caches there
    assert sorted(p.name for p in home.iterdir()) == [".ssh"]


@needs_bwrap
@pytest.mark.parametrize("named", ["~/.ssh/id_ed25519", "{home}/.ssh/id_ed25519", "{home}/.ssh"])
def test_naming_a_file_in_the_home_does_not_show_it(session_dirs, tmp_path, monkeypatch, named):
    # Only programs named by absolute path are shown again (with their installation).
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    path = named.format(home=home)
    result = run_in(session_dirs, f"ls -A {path}; cat {path}")
    assert "PRIVATE KEY" not in result.output
    assert "id_ed25519" not in result.output.split()  # the folder's listing


def fake_passwd(monkeypatch, tmp_path) -> tuple[Path, Path]:
    """Our passwd home and another user's, each holding a key; HOME is then set apart."""
    ours, theirs = tmp_path / "passwd-home", tmp_path / "home" / "other"
    for home in (ours, theirs):
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text(f"PRIVATE KEY of {home.name}\n")
    me = pwd.struct_passwd(("me", "x", os.getuid(), os.getgid(), "", str(ours), "/bin/sh"))
    other = pwd.struct_passwd(("other", "x", 1234, 1234, "", str(theirs), "/bin/sh"))
    system = pwd.struct_passwd(("bin", "x", 2, 2, "", "/bin", "/usr/sbin/nologin"))
    monkeypatch.setattr(jail.pwd, "getpwuid", lambda uid: me)
    monkeypatch.setattr(jail.pwd, "getpwall", lambda: [me, other, system])
    return ours, theirs


@needs_bwrap
@pytest.mark.parametrize("home", [None, "/"], ids=["HOME unset", "HOME is /"])
def test_the_passwd_home_is_hidden_whatever_home_says(session_dirs, tmp_path, monkeypatch, home):
    ours, theirs = fake_passwd(monkeypatch, tmp_path)
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)
    result = run_in(
        session_dirs,
        f"cat {ours}/.ssh/id_ed25519 {theirs}/.ssh/id_ed25519; ls -A {ours} {theirs}; "
        f"echo x > {ours}/.cache && echo w",
    )
    assert "PRIVATE KEY" not in result.output
    assert ".ssh" not in result.output.splitlines()  # both homes are empty inside
    assert result.output.splitlines()[-1] == "w"  # our home is a writable scratch folder
    assert sorted(p.name for p in ours.iterdir()) == [".ssh"]
    assert ls_in_jail(session_dirs, "/bin")  # a system account's "home" stays


def ls_in_jail(dirs, folder: str) -> list[str]:
    return run_in(dirs, f"ls -A {folder}").output.split()


@needs_bwrap
def test_every_other_home_is_hidden_and_read_only(session_dirs, tmp_path, monkeypatch):
    ours, theirs = fake_passwd(monkeypatch, tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    stray = tmp_path / "home" / "not-in-passwd"  # a folder of /home that passwd does not list
    stray.mkdir()
    (stray / "notes").write_text("a former user's notes\n")
    monkeypatch.setattr(jail, "HOME_ROOTS", (tmp_path / "home",))
    result = run_in(
        session_dirs,
        f"cat {ours}/.ssh/id_ed25519 {theirs}/.ssh/id_ed25519 {stray}/notes; "
        f"ls -A {ours} {theirs} {stray}; touch {theirs}/planted",
    )
    assert "PRIVATE KEY" not in result.output
    assert "former user" not in result.output
    assert not {".ssh", "notes"} & set(result.output.splitlines())
    assert "Read-only file system" in result.output
    assert not (theirs / "planted").exists()


@needs_bwrap
def test_a_toolchain_in_the_passwd_home_works_with_home_unset(session_dirs, tmp_path, monkeypatch):
    ours, _ = fake_passwd(monkeypatch, tmp_path)
    venv = ours / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    # The faked passwd no longer names the real home our Python lives in, so the jail shows
    # that home as it is, closed to nobody: this test is about the homes, run as ourselves.
    box = dataclasses.replace(jailed(session_dirs), drop_to=None)
    result = run_in(
        session_dirs,
        f"python -c 'import sys; print(sys.prefix)'; cat {ours}/.ssh/id_ed25519",
        box,
    )
    assert result.output.splitlines()[0] == str(venv)
    assert "PRIVATE KEY" not in result.output


@needs_bwrap
def test_tmp_is_private_to_the_command(session_dirs, tmp_path):
    outside = Path("/tmp") / f"autoresearch-jail-test-{os.getpid()}"
    outside.write_text("the host's /tmp\n")
    try:
        result = run_in(session_dirs, f"cat {outside}; echo x > /tmp/left-behind && echo w")
        assert "the host's /tmp" not in result.output
        assert result.output.splitlines()[-1] == "w"
        assert not Path("/tmp/left-behind").exists()
    finally:
        outside.unlink()


# --- the network ----------------------------------------------------------------------------


def connect_command(port: int) -> str:
    script = f"import socket; socket.create_connection(('127.0.0.1', {port}), 10); print('reached')"
    return f'{sys.executable} -c "{script}"'


@pytest.fixture
def local_server():
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        try:
            accepted.append(server.accept()[0])
        except OSError:  # closed at the end of a test in which nothing got through
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()
    for conn in accepted:
        conn.close()


@needs_bwrap
def test_command_cannot_reach_a_server_on_localhost(session_dirs, local_server):
    result = run_in(session_dirs, connect_command(local_server))
    assert not result.ok
    assert "ConnectionRefusedError" in result.output


@needs_bwrap
def test_command_reaches_localhost_when_the_spec_allows_network(session_dirs, local_server):
    result = run_in(session_dirs, connect_command(local_server), jailed(session_dirs, network=True))
    assert result.ok, result.output
    assert "reached" in result.output


@needs_bwrap
def test_command_has_no_route_outside(session_dirs):
    script = (
        "import socket, errno\n"
        "try:\n    socket.create_connection(('192.0.2.1', 443), 10)\n"
        "except OSError as e:\n    print(errno.errorcode.get(e.errno, e))\n"
    )
    result = run_in(session_dirs, f'cat /proc/net/dev; {sys.executable} -c "{script}"')
    interfaces = [line.split(":")[0].strip() for line in result.output.splitlines() if ":" in line]
    assert interfaces == ["lo"]
    assert result.output.splitlines()[-1] == "ENETUNREACH"


@needs_bwrap
@pytest.mark.skipif(not os.access("/run", os.W_OK), reason="needs a socket under the host's /run")
def test_command_cannot_reach_a_daemon_socket_under_run(session_dirs):
    path = Path("/run") / f"autoresearch-test-{os.getpid()}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    script = f"import socket; socket.socket(socket.AF_UNIX).connect('{path}'); print('reached')"
    try:
        reached = commands.run(f'{sys.executable} -c "{script}"', session_dirs.worktree)
        assert "reached" in reached.output  # without the jail the daemon answers
        result = run_in(session_dirs, f'{sys.executable} -c "{script}"')
        assert "FileNotFoundError" in result.output
    finally:
        server.close()
        path.unlink()


# --- choosing the jail -----------------------------------------------------------------------


def test_auto_falls_back_to_none_and_says_why(session_dirs, monkeypatch):
    monkeypatch.setattr(jail, "probe", lambda: jail.Probe(False, "bwrap is not installed"))
    built = jail.build_jail(
        {"sandbox": "auto"}, session_dirs.worktree, hide=[session_dirs.sessions]
    )
    assert built.mode == "none"
    assert "bwrap is not installed" in built.note
    assert built.describe() == {
        "sandbox": "none",
        "requested": "auto",
        "network": True,
        "note": built.note,
    }


def test_bwrap_asked_for_but_unavailable_names_the_key_to_change(session_dirs, monkeypatch):
    monkeypatch.setattr(jail, "probe", lambda: jail.Probe(False, "bwrap is not installed"))
    with pytest.raises(jail.JailError, match="commands.sandbox is bwrap, but bwrap is not"):
        jail.build_jail({"sandbox": "bwrap"}, session_dirs.worktree)


def test_none_is_chosen_without_probing(session_dirs, monkeypatch):
    monkeypatch.setattr(jail, "probe", lambda: pytest.fail("none must not probe bwrap"))
    assert jail.build_jail({"sandbox": "none"}, session_dirs.worktree).mode == "none"


@needs_bwrap
def test_auto_uses_bwrap_where_it_works_and_hides_the_checkout(session_dirs):
    built = jail.build_jail({}, session_dirs.worktree, hide=[session_dirs.sessions])
    assert (built.mode, built.note, built.network) == ("bwrap", None, False)
    assert session_dirs.target in built.hide
    assert session_dirs.target / ".git" in built.read_only


def test_spec_defaults_ask_for_auto_without_network():
    import yaml

    defaults = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert defaults["commands"] == {
        "sandbox": "auto",
        "network": False,
        "pass_env": [],
        "tmp_size_mb": jail.DEFAULT_TMP_SIZE_MB,
        "worktree_growth_mb": jail.DEFAULT_GROWTH_MB,
    }
