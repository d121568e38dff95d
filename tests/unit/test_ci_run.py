"""What .ci/run runs and requires: on a root machine with apt-get it installs Chromium and
npm, and a part it cannot test there fails CI; elsewhere it runs what the machine has and
says what it left out. Run on a copy of the script, with make, id, apt-get, npm and the
browser played by small scripts that log their calls."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

# make logs its targets and the variables it was given; a target named in fail-make fails.
MAKE = """#!/bin/bash
echo "make $* ${AUTORESEARCH_BROWSER_REQUIRED:--}${AUTORESEARCH_CLAUDE_CODE_REQUIRED:--}\
${AUTORESEARCH_SLURM_REQUIRED:--}" >> "$LOG"
case "$1" in */.claude-code/*) grep -qx claude "$FAKE/fail-make" 2>/dev/null && exit 2 ;; esac
case "$1" in */.jest/*) grep -qx jest "$FAKE/fail-make" 2>/dev/null && exit 2 ;; esac
grep -qx -- "$1" "$FAKE/fail-make" 2>/dev/null && exit 2
exit 0
"""
# apt-get installs a package only once its lists are updated, and only one named in apt-has.
APT = """#!/bin/bash
echo "apt-get $*" >> "$LOG"
[ "$1" = update ] && { touch "$FAKE/updated"; exit 0; }
[ -e "$FAKE/updated" ] || exit 100
for p in "$@"; do
  case "$p" in -*|install) ;; *) grep -qx "$p" "$FAKE/apt-has" 2>/dev/null || exit 100
    command="${p/golang-go/go}"
    printf '#!/bin/bash\\necho %s 1.0\\n' "$p" > "$FAKE/bin/$command"
    chmod +x "$FAKE/bin/$command" ;;
  esac
done
"""


@dataclass
class Machine:
    """A copy of the checkout's .ci/run and the commands it finds on its PATH."""

    root: Path
    fake: Path

    def tool(self, name: str, text: str) -> None:
        path = self.fake / "bin" / name
        path.write_text(text)
        path.chmod(0o755)

    def run(self, uid: int = 0, **env: str) -> subprocess.CompletedProcess:
        self.tool("id", f"#!/bin/bash\necho {uid}\n")
        environ = {"PATH": str(self.fake / "bin"), "LOG": str(self.log), "FAKE": str(self.fake)}
        environ["TMPDIR"] = str(self.fake)
        return subprocess.run(
            [shutil.which("bash"), str(self.root / ".ci" / "run")],
            env={**environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    @property
    def log(self) -> Path:
        return self.fake / "log"

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def machine(tmp_path) -> Machine:
    found = Machine(tmp_path / "clone", tmp_path / "fake")
    (found.root / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", found.root / ".ci" / "run")
    (found.fake / "bin").mkdir(parents=True)
    for name in ("bash", "dirname", "mktemp", "grep", "touch", "chmod"):
        (found.fake / "bin" / name).symlink_to(shutil.which(name))
    found.tool("make", MAKE)
    found.tool("go", "#!/bin/bash\n")  # the tests of its install take it away
    return found


def test_as_root_with_apt_it_installs_chromium_and_requires_every_part(machine):
    machine.tool("apt-get", APT)
    machine.tool("npm", "#!/bin/bash\n")
    (machine.fake / "apt-has").write_text("chromium\n")
    run = machine.run()
    assert run.returncode == 0, run.stderr
    calls = machine.calls()
    installs = [c for c in calls if c.startswith("apt-get")]
    # Installed from the lists there are; updated once when that fails, then installed.
    assert installs == [
        "apt-get install -y -qq --no-install-recommends chromium",
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends chromium",
    ]
    assert "Chromium: " + str(machine.fake / "bin" / "chromium") in run.stdout
    made = [c for c in calls if c.startswith("make")]
    assert made[:2] == [
        "make lint ---",
        f"make {machine.root.resolve()}/.jest/node_modules/.bin/jest 11-",
    ]
    assert made[2].startswith("make test PYTEST_ARGS=--basetemp=") and made[2].endswith(" 11-")
    assert made[3:] == [
        "make test-slurm 111",
        f"make {machine.root.resolve()}/.claude-code/node_modules/.bin/claude 11-",
        "make test-claude-code 11-",
    ]


def test_as_root_a_chromium_that_cannot_be_installed_fails_before_the_suite(machine):
    machine.tool("apt-get", APT)
    machine.tool("npm", "#!/bin/bash\n")
    run = machine.run()
    assert run.returncode == 1
    assert "error: no Chromium (Debian: apt-get install chromium), and " in run.stderr
    assert "AUTORESEARCH_BROWSER_REQUIRED is set" in run.stderr
    assert [c for c in machine.calls() if c.startswith("make")] == ["make lint ---"]


def test_as_root_a_claude_code_that_cannot_be_installed_fails_the_run(machine):
    machine.tool("apt-get", APT)
    machine.tool("chromium", "#!/bin/bash\n")
    machine.tool("npm", "#!/bin/bash\n")
    (machine.fake / "fail-make").write_text("claude\n")
    run = machine.run()
    assert run.returncode == 1
    assert "error: no Claude Code CLI: npm is missing or could not install it" in run.stderr
    assert "make test-claude-code 11-" not in machine.calls()


def test_as_root_npm_is_installed_when_missing(machine):
    machine.tool("apt-get", APT)
    machine.tool("chromium", "#!/bin/bash\n")
    (machine.fake / "apt-has").write_text("npm\n")
    run = machine.run()
    assert run.returncode == 0, run.stderr
    assert "apt-get install -y -qq --no-install-recommends npm" in machine.calls()
    assert machine.calls()[-1] == "make test-claude-code 11-"


def test_without_root_it_runs_what_the_machine_has_and_says_what_it_left_out(machine):
    machine.tool("apt-get", APT)  # there, but not usable without root
    run = machine.run(uid=1000)
    assert run.returncode == 0, run.stderr
    assert "note: no Chromium (Debian: apt-get install chromium): those tests" in run.stdout
    assert "note: no Claude Code CLI: npm is missing" in run.stdout
    calls = machine.calls()
    assert not [c for c in calls if c.startswith("apt-get")]
    assert [c.split()[1] for c in calls] == ["lint", "test"]
    assert calls[1].endswith(" ---")  # the browser tests skip, not fail, without Chromium


def test_without_root_npm_that_cannot_install_claude_code_is_a_note(machine):
    machine.tool("npm", "#!/bin/bash\n")
    (machine.fake / "fail-make").write_text("claude\n")
    run = machine.run(uid=1000)
    assert run.returncode == 0, run.stderr
    assert "note: no Claude Code CLI" in run.stdout
    assert "make test-claude-code ---" not in machine.calls()


def test_a_variable_set_by_the_caller_requires_a_part_on_any_machine(machine):
    run = machine.run(uid=1000, AUTORESEARCH_BROWSER_REQUIRED="1")
    assert run.returncode == 1
    assert "AUTORESEARCH_BROWSER_REQUIRED is set" in run.stderr


def test_a_failing_suite_fails_the_run(machine):
    machine.tool("chromium", "#!/bin/bash\n")
    (machine.fake / "fail-make").write_text("test\n")
    run = machine.run(uid=1000)
    assert run.returncode == 2
    assert [c.split()[1] for c in machine.calls()] == ["lint", "test"]


def test_the_variables_it_sets_are_the_ones_the_tests_read():
    # AUTORESEARCH_CLAUDE_CODE_REQUIRED is .ci/run's own: those tests fail without the CLI.
    others = [p for p in (ROOT / "tests").rglob("test_*.py") if p.name != Path(__file__).name]
    text = "".join(p.read_text() for p in others)
    variables = ("BROWSER", "SLURM", "GO", "JEST")
    for variable in (f"AUTORESEARCH_{name}_REQUIRED" for name in variables):
        assert f'"{variable}"' in text, variable


def test_as_root_go_is_installed_when_missing_and_jest_made(machine):
    machine.tool("apt-get", APT)
    machine.tool("chromium", "#!/bin/bash\n")
    machine.tool("npm", "#!/bin/bash\n")
    (machine.fake / "bin" / "go").unlink()
    (machine.fake / "apt-has").write_text("golang-go\n")
    run = machine.run()
    assert run.returncode == 0, run.stderr
    assert "apt-get install -y -qq --no-install-recommends golang-go" in machine.calls()
    jest = f"make {machine.root.resolve()}/.jest/node_modules/.bin/jest 11-"
    assert jest in machine.calls()


def test_as_root_a_go_that_cannot_be_installed_fails_before_the_suite(machine):
    machine.tool("apt-get", APT)
    machine.tool("chromium", "#!/bin/bash\n")
    (machine.fake / "bin" / "go").unlink()
    run = machine.run()
    assert run.returncode == 1
    assert "error: no go (Debian: apt-get install golang-go), and " in run.stderr
    assert "AUTORESEARCH_GO_REQUIRED is set" in run.stderr
    assert [c for c in machine.calls() if c.startswith("make")] == ["make lint ---"]


def test_as_root_a_jest_that_cannot_be_installed_fails_before_the_suite(machine):
    machine.tool("apt-get", APT)
    machine.tool("chromium", "#!/bin/bash\n")
    machine.tool("npm", "#!/bin/bash\n")
    (machine.fake / "fail-make").write_text("jest\n")
    run = machine.run()
    assert run.returncode == 1
    assert "error: no Jest: npm is missing or could not install it" in run.stderr
    assert "AUTORESEARCH_JEST_REQUIRED is set" in run.stderr
    assert not [c for c in machine.calls() if c.startswith("make test")]


def test_without_root_no_go_and_no_jest_are_notes(machine):
    (machine.fake / "bin" / "go").unlink()
    run = machine.run(uid=1000)
    assert run.returncode == 0, run.stderr
    assert "note: no go (Debian: apt-get install golang-go): those tests" in run.stdout
    assert "note: no Jest: npm is missing" in run.stdout
