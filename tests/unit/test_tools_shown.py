"""A conversation is not sent the same file text twice (autoresearch/agents/shown.py, docs/cost.md),
and never pointed at text it does not have: the file changed since (by an edit, a command,
the harness), the earlier output shortened, a new conversation."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic, message, text_block, tool_call

from autoresearch.agents.backends.base import StageBrief, StageLimits
from autoresearch.agents.backends.claude import ClaudeBackend
from autoresearch.agents.tools import MAX_LINE_CHARS, Toolbox

MODULE = "".join(f"def step_{i}(x):\n    return x + {i}\n" for i in range(1, 21))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(MODULE)
    (tmp_path / "pkg" / "other.py").write_text("from pkg.mod import step_1\nstep_1(2)\n")
    return tmp_path


def conversation(repo: Path, **kw) -> Toolbox:
    """A toolbox as a conversation-keeping backend drives it: told the conversation began."""
    toolbox = Toolbox("green", repo, **kw)
    toolbox.forget_shown()
    return toolbox


def read(toolbox: Toolbox, path: str = "pkg/mod.py", **lines) -> str:
    result = toolbox.call("read_file", {"path": path, **lines})
    assert not result.is_error, result.content
    return result.content


def is_note(text: str) -> bool:
    return text.startswith("[pkg/mod.py has the same content") and "def step_" not in text


# -- read_file ---------------------------------------------------------------------------


def test_a_reread_of_an_unchanged_file_is_a_short_note_pointing_at_the_earlier_output(repo):
    toolbox = conversation(repo)
    full = read(toolbox)
    again = read(toolbox)
    assert "40\t    return x + 20" in full
    assert is_note(again) and "lines 1-40" in again and len(again) < 200


def test_asking_again_after_the_note_gets_the_whole_text(repo):
    toolbox = conversation(repo)
    full = read(toolbox)
    assert is_note(read(toolbox))
    assert read(toolbox) == full


def test_a_range_inside_what_was_shown_is_a_note_and_one_beyond_it_is_text(repo):
    toolbox = conversation(repo)
    read(toolbox, start_line=1, end_line=10)
    assert is_note(read(toolbox, start_line=3, end_line=8))
    wider = read(toolbox, start_line=5, end_line=12)
    assert wider.splitlines()[1].startswith(" 5\tdef step_3") and "12\t    return x + 6" in wider


def test_a_file_changed_by_edit_file_is_sent_again(repo):
    toolbox = conversation(repo)
    read(toolbox)
    edit = {"path": "pkg/mod.py", "old_str": "return x + 20", "new_str": "return x + 21"}
    assert not toolbox.call("edit_file", edit).is_error
    again = read(toolbox)
    assert "40\t    return x + 21" in again and not is_note(again)


def test_a_file_the_agent_wrote_is_sent_again_even_with_its_old_bytes_back(repo):
    # Its edit undone (by the agent, or a restore after a refused fix): what the agent has
    # in mind is its edit, so pointing at the old output would mislead.
    toolbox = conversation(repo)
    full = read(toolbox)
    edit = {"path": "pkg/mod.py", "old_str": "return x + 20", "new_str": "return x + 21"}
    assert not toolbox.call("edit_file", edit).is_error
    (repo / "pkg" / "mod.py").write_text(MODULE)
    assert read(toolbox) == full
    assert not toolbox.call("write_file", {"path": "pkg/mod.py", "content": MODULE}).is_error
    assert read(toolbox) == full


def test_a_file_changed_by_a_command_is_sent_again(repo):
    script = repo / "rewrite.py"
    script.write_text(
        "from pathlib import Path\n"
        "p = Path('pkg/mod.py')\n"
        "p.write_text(p.read_text().replace('x + 20', 'x - 20'))\n"
    )
    toolbox = conversation(repo, test_command=f"{sys.executable} rewrite.py")
    read(toolbox)
    assert not toolbox.call("run_tests", {}).is_error
    again = read(toolbox)
    assert "40\t    return x - 20" in again and not is_note(again)


def test_a_file_the_harness_restored_meanwhile_is_sent_again(repo):
    # A finish_fix that fails restores the files behind the toolbox's back.
    toolbox = conversation(repo)
    read(toolbox)
    (repo / "pkg" / "mod.py").write_text(MODULE.replace("x + 1\n", "x + 100\n"))
    again = read(toolbox)
    assert " 2\t    return x + 100" in again and not is_note(again)


def test_after_forget_shown_the_text_is_sent_again(repo):
    toolbox = conversation(repo)
    full = read(toolbox)
    toolbox.forget_shown()  # the backend shortened earlier outputs, or a conversation began
    assert read(toolbox) == full


def test_a_toolbox_answers_in_full_until_a_backend_says_a_conversation_began(repo):
    toolbox = Toolbox("green", repo)  # a script backend, or none: never told of a conversation
    full = read(toolbox)
    assert read(toolbox) == full
    for _ in range(2):
        assert toolbox.call("search", {"pattern": "def step_1\\b"}).content == (
            "pkg/mod.py:1: def step_1(x):"
        )
    toolbox.forget_shown()
    assert read(toolbox) == full and is_note(read(toolbox))


def test_a_line_cut_in_the_read_is_not_taken_as_shown(repo):
    long_line = "y = '" + "a" * (MAX_LINE_CHARS + 10) + "'"
    (repo / "pkg" / "long.py").write_text(f"x = 1\n{long_line}\n")
    toolbox = conversation(repo)
    read(toolbox, "pkg/long.py")
    again = toolbox.call("read_file", {"path": "pkg/long.py"}).content
    assert "line cut" in again  # line 2 was never shown whole: no note for it
    hits = toolbox.call("search", {"pattern": "aaaa", "path": "pkg/long.py"}).content
    assert hits.startswith("pkg/long.py:2: y = 'aaa")


# -- search ------------------------------------------------------------------------------


def test_search_hits_on_lines_already_shown_are_their_numbers_and_the_rest_are_text(repo):
    toolbox = conversation(repo)
    read(toolbox, start_line=1, end_line=18)
    hits = toolbox.call("search", {"pattern": r"step_1\b|step_1[05]\b"}).content.splitlines()
    assert hits == [
        "pkg/mod.py: 1 matching line already shown above, unchanged: 1",
        "pkg/mod.py:19: def step_10(x):",  # line 19 is past what was read
        "pkg/mod.py:29: def step_15(x):",
        "pkg/other.py:1: from pkg.mod import step_1",
        "pkg/other.py:2: step_1(2)",
    ]


def test_a_long_hit_is_cut_saying_how_many_characters_were_left_out(repo):
    (repo / "pkg" / "wide.py").write_text("key = '" + "v" * 400 + "'\n")
    hit = Toolbox("green", repo).call("search", {"pattern": "key", "path": "pkg/wide.py"})
    assert hit.content == f"pkg/wide.py:1: key = '{'v' * 293} [... 108 more characters]"


def test_search_sends_the_text_of_a_file_changed_since_it_was_read(repo):
    toolbox = conversation(repo)
    read(toolbox)
    (repo / "pkg" / "mod.py").write_text(MODULE.replace("def step_2(", "def step_2b("))
    hits = toolbox.call("search", {"pattern": "def step_2"}).content.splitlines()
    assert hits[0] == "pkg/mod.py:3: def step_2b(x):"
    assert not any("already shown" in h for h in hits)


def test_search_after_forget_shown_sends_the_text(repo):
    toolbox = conversation(repo)
    read(toolbox)
    toolbox.forget_shown()
    assert toolbox.call("search", {"pattern": "def step_3\\b"}).content == (
        "pkg/mod.py:5: def step_3(x):"
    )


def same_note(text: str) -> bool:
    return text.startswith("[the same output (") and "earlier in this conversation" in text


def test_a_search_repeated_with_the_same_output_is_a_note_and_again_the_text(repo):
    toolbox = conversation(repo)
    call = {"pattern": "step_1\\b", "path": "pkg/other.py"}
    full = toolbox.call("search", call).content
    assert full.startswith("pkg/other.py:1:")
    assert same_note(toolbox.call("search", call).content)
    assert toolbox.call("search", call).content == full


def test_a_repeated_search_whose_output_changed_is_sent(repo):
    toolbox = conversation(repo)
    call = {"pattern": "step_1\\b", "path": "pkg/other.py"}
    toolbox.call("search", call)
    (repo / "pkg" / "other.py").write_text("step_1(3)\n")
    assert toolbox.call("search", call).content == "pkg/other.py:1: step_1(3)"


def test_a_listing_repeated_after_a_new_file_is_sent_and_unchanged_is_a_note(repo):
    toolbox = conversation(repo)
    toolbox.call("list_files", {})
    assert same_note(toolbox.call("list_files", {}).content)
    toolbox.call("write_file", {"path": "pkg/new.py", "content": "x = 1\n"})
    assert "pkg/new.py" in toolbox.call("list_files", {}).content
    toolbox.forget_shown()
    assert "pkg/new.py" in toolbox.call("list_files", {}).content


# -- the backend tells the toolbox ---------------------------------------------------------


@pytest.fixture
def fake(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    with FakeAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        yield server


def backend(**agent) -> ClaudeBackend:
    spec = {"model": "claude-haiku-4-5", "max_tokens": 1024, "request_timeout_s": 5}
    prices = {"claude-haiku-4-5": {"input": 1.0, "output": 5.0}}
    return ClaudeBackend({**spec, **agent}, prices)


BRIEF = StageBrief(
    team="green", system="Fix it.", task="# Issues\n- pkg/mod.py", limits=StageLimits()
)


def results_of(body: dict) -> list[str]:
    return [
        block["content"]
        for m in body["messages"]
        if m["role"] == "user"
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]


def test_the_backend_points_a_reread_at_the_earlier_output_of_its_conversation(fake, repo):
    fake.push(
        tool_call("read_file", {"path": "pkg/mod.py"}),
        tool_call("read_file", {"path": "pkg/mod.py"}),
        message([text_block("done")]),
    )
    backend(trim_above_tokens=None).run(BRIEF, Toolbox("green", repo), lambda _: None)
    first, second = results_of(fake.bodies[-1])
    assert "def step_20" in first and is_note(second)


def test_a_second_conversation_on_the_same_toolbox_is_sent_the_text_again(fake, repo):
    toolbox = Toolbox("green", repo)
    for _ in range(2):
        fake.push(
            tool_call("read_file", {"path": "pkg/mod.py"}),
            tool_call("read_file", {"path": "pkg/mod.py"}),
            message([text_block("done")]),
        )
        backend(trim_above_tokens=None).run(BRIEF, toolbox, lambda _: None)
    first, second = results_of(fake.bodies[-1])
    assert "def step_20" in first  # the first conversation's output is not in this one
    assert is_note(second)


def test_a_reread_after_the_backend_shortened_old_outputs_is_sent_the_text(fake, repo):
    (repo / "pkg" / "big.py").write_text("".join(f"value_{i} = {i}\n" for i in range(600)))
    fake.push(
        tool_call("read_file", {"path": "pkg/mod.py"}),
        tool_call("read_file", {"path": "pkg/mod.py"}),  # still there: a note
        tool_call("read_file", {"path": "pkg/big.py"}),  # past the size: mod.py's output is cut
        tool_call("list_files", {}),
        tool_call("list_files", {}),
        tool_call("read_file", {"path": "pkg/mod.py"}),
        message([text_block("done")]),
    )
    backend(trim_above_tokens=1000, keep_turns=1).run(BRIEF, Toolbox("green", repo), lambda _: None)
    outputs = results_of(fake.bodies[-1])
    assert is_note(outputs[1])
    assert "shortened" in outputs[0]  # the first read is no longer in the conversation
    assert "def step_20" in outputs[-1] and not is_note(outputs[-1])
