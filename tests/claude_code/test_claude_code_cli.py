"""The plugin through the real Claude Code CLI (`make test-claude-code`; not in `make test`).

Claude Code runs with a dummy key against the fake Messages API on 127.0.0.1, with
`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` and a fresh `HOME`, so it reaches nothing
else. It adds this checkout as a marketplace and installs the plugin the way a user does;
then the fake plays the model: it answers a slash command with the Bash call the command's
prompt asks for, and the test sees what Claude Code sent and what the call really ran.
A missing `claude` fails the tests: this target never passes without the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT
from fake_anthropic import FakeAnthropic, Reply, message, text_block, tool_call

pytestmark = pytest.mark.claude_code

MODEL = "claude-sonnet-5-5"  # one the fake serves
COMMANDS = ("new", "plan", "run", "status", "show", "finalize")
CLAUDE = os.environ.get("CLAUDE") or str(ROOT / ".claude-code/node_modules/.bin/claude")
VENV_BIN = str(Path(sys.executable).parent)  # where `autoresearch` and `snakemake` are


@dataclass
class Home:
    """An isolated HOME holding Claude Code's settings, with the plugin installed."""

    path: Path
    tmp: Path

    def env(self, base_url: str = "http://127.0.0.1:9") -> dict[str, str]:
        return {
            "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
            # The commands' `autoresearch` imports this checkout, wherever the venv's came from.
            "PYTHONPATH": str(ROOT),
            "HOME": str(self.path),
            "TMPDIR": str(self.tmp),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def claude(self, *args: str, base_url: str = "http://127.0.0.1:9", cwd: Path | None = None):
        return subprocess.run(
            [CLAUDE, *args],
            env=self.env(base_url),
            cwd=cwd or self.path,
            capture_output=True,
            text=True,
            timeout=300,
        )


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Home:
    if not Path(CLAUDE).is_file():
        pytest.fail(
            f"no Claude Code CLI at {CLAUDE}: run `make test-claude-code` (it installs "
            "@anthropic-ai/claude-code from npm into .claude-code/) or set CLAUDE=/path/to/claude"
        )
    base = tmp_path_factory.mktemp("claude-code")
    found = Home(base / "home", base / "tmp")
    found.path.mkdir()
    found.tmp.mkdir()
    for step in (
        ("plugin", "marketplace", "add", str(ROOT)),
        ("plugin", "install", "autoresearch@autoresearch"),
    ):
        done = found.claude(*step)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
    return found


def slash(home: Home, fake: FakeAnthropic, line: str, cwd: Path) -> dict:
    """`claude -p LINE` in `cwd`; its JSON result."""
    done = home.claude(
        "-p", line, "--model", MODEL, "--output-format", "json", base_url=fake.url, cwd=cwd
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    return json.loads(done.stdout)


def texts(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        b.get("text", "") if b.get("type") == "text" else texts(b.get("content") or "")
        for b in content
    )


def tool_result(fake: FakeAnthropic, tool_use_id: str) -> dict:
    for body in fake.bodies:
        for msg in body["messages"]:
            for block in msg["content"] if isinstance(msg["content"], list) else []:
                if block.get("type") == "tool_result" and block["tool_use_id"] == tool_use_id:
                    return block
    raise AssertionError(f"no tool_result for {tool_use_id} reached the model")


def workflow_folder(path: Path, snakefile: str = "") -> Path:
    """What the commands expect as the working directory: a folder holding a Snakefile."""
    path.mkdir()
    (path / "Snakefile").write_text(snakefile)
    return path


def test_claude_codes_own_strict_validator_accepts_the_marketplace_and_the_plugin(home):
    for folder in (ROOT, ROOT / "claude-plugin"):
        done = home.claude("plugin", "validate", "--strict", str(folder))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Validation passed" in done.stdout


def test_the_installed_plugin_is_enabled_under_its_marketplace(home):
    done = home.claude("plugin", "list")
    assert "autoresearch@autoresearch" in done.stdout
    assert "enabled" in done.stdout


def test_a_slash_command_reaches_the_model_with_its_prompt_and_runs_our_cli(home, tmp_path):
    folder = workflow_folder(tmp_path / "workflow")
    call = tool_call("Bash", {"command": "autoresearch status", "description": "status"})
    with FakeAnthropic() as fake:
        fake.push(call, message([text_block("No sessions yet.")]))
        result = slash(home, fake, "/autoresearch:status", folder)
    first = texts(fake.bodies[0]["messages"][0]["content"])
    assert "<command-name>/autoresearch:status</command-name>" in first
    assert "Run exactly this with the Bash tool" in first  # the command file's own prompt
    answered = tool_result(fake, call.content[0]["id"])
    # What only our CLI prints, about the folder Claude Code ran in.
    assert texts(answered["content"]).strip() == f"no sessions under {folder}/sessions/"
    assert answered.get("is_error") is False
    assert result["permission_denials"] == []
    assert result["result"] == "No sessions yet."


def test_the_model_is_offered_the_six_commands_and_the_skill(home, tmp_path):
    folder = workflow_folder(tmp_path / "workflow")
    with FakeAnthropic() as fake:
        fake.push(message([text_block("Hello.")]))
        slash(home, fake, "hello", folder)
    offered = "\n".join(texts(m["content"]) for m in fake.bodies[0]["messages"])
    names = [*COMMANDS, "choosing-a-mode"]
    assert [n for n in names if f"- autoresearch:{n}: " not in offered] == []


def test_new_writes_the_spec_in_the_workflow_folder_through_our_cli(home, tmp_path):
    folder = workflow_folder(tmp_path / "workflow")
    target = tmp_path / "target"
    target.mkdir()
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    line = f"autoresearch new demo --target {target} --mode sweep"
    call = tool_call("Bash", {"command": line, "description": "new"})
    with FakeAnthropic() as fake:
        fake.push(call, message([text_block("Wrote it.")]))
        result = slash(home, fake, f"/autoresearch:new demo --target {target} --mode sweep", folder)
    assert result["permission_denials"] == []
    output = texts(tool_result(fake, call.content[0]["id"])["content"])
    assert "wrote config/sessions/demo.yaml" in output
    spec = (folder / "config/sessions/demo.yaml").read_text()
    assert "mode: sweep" in spec and f"target: {target}" in spec


@pytest.mark.parametrize(
    "line",
    [
        "autoresearch redo demo --cycle 1 --stage red --no-run",  # another subcommand
        "autoresearch status && touch sessions/pwned",  # chained after the allowed prefix
        "autoresearch status; touch sessions/pwned",
        "autoresearch status $(touch sessions/pwned)",  # a substitution inside it
        "autoresearch status > sessions/pwned",  # a write the command has no rule for
    ],
)
def test_a_command_refuses_a_bash_call_outside_its_allowed_tools(home, tmp_path, line):
    folder = workflow_folder(tmp_path / "workflow")
    (folder / "sessions").mkdir()
    call = tool_call("Bash", {"command": line, "description": "status"})
    with FakeAnthropic() as fake:
        fake.push(call, message([text_block("Refused.")]))
        result = slash(home, fake, "/autoresearch:status demo", folder)
    answered = tool_result(fake, call.content[0]["id"])
    assert answered.get("is_error") is True
    assert [d["tool_input"]["command"] for d in result["permission_denials"]] == [line]
    assert list((folder / "sessions").iterdir()) == []


def test_run_starts_snakemake_as_a_background_task_with_its_log(home, tmp_path):
    # A stand-in workflow: `autoresearch run` starts snakemake for real against it.
    rule = 'rule done:\n    output: "sessions/{name}/done"\n    shell: "touch {output}"\n'
    folder = workflow_folder(tmp_path / "workflow", rule)
    log = folder / "sessions/_runs/x.log"
    lines = [
        ("autoresearch run x --cores 1 --dry-run", {}),
        ("autoresearch run x --cores 1", {"run_in_background": True}),
    ]
    calls = [tool_call("Bash", {"command": c, "description": "run", **kw}) for c, kw in lines]

    def finished() -> bool:
        return (folder / "sessions/x/done").exists() and "Finished job" in log.read_text()

    # The answer waits for the background run (when Claude Code exits, it stops it); Claude
    # Code then tells the model that the task ended, and the model answers once more.
    started = Reply(content=[text_block("Started.")], hold_until=finished)
    with FakeAnthropic() as fake:
        fake.push(*calls, started, message([text_block("The run has finished.")]))
        result = slash(home, fake, "/autoresearch:run x", folder)
    notice = texts(fake.bodies[-1]["messages"][-1]["content"])
    assert f"<tool-use-id>{calls[1].content[0]['id']}</tool-use-id>" in notice
    assert "<status>completed</status>" in notice and "(exit code 0)" in notice
    assert result["permission_denials"] == []
    first = texts(fake.bodies[0]["messages"][0]["content"])
    assert "run_in_background: true" in first
    dry_run = texts(tool_result(fake, calls[0].content[0]["id"])["content"])
    assert "sessions/x/done" in dry_run
    background = texts(tool_result(fake, calls[1].content[0]["id"])["content"])
    assert "running in background" in background
    assert finished()
    assert "snakemake --cores 1 sessions/x/done" in log.read_text()
