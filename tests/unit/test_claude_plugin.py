"""The Claude Code plugin: its files match Claude Code's schemas, and every command it tells
the model to run is a real `autoresearch` subcommand (or `snakemake` option) that the
command's own `allowed-tools` permits. A check is tested on a bad file too: a checker that
accepts everything would pass the real files as well.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml
from claude_plugin_schema import (
    COMMAND_FRONTMATTER,
    MARKETPLACE,
    PLUGIN_MANIFEST,
    SKILL_FRONTMATTER,
)

from autoresearch import __version__
from autoresearch.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
MARKETPLACE_FILE = ROOT / ".claude-plugin" / "marketplace.json"
COMMANDS = ("new", "plan", "run", "status", "show", "finalize")
# A line that is one code span and nothing else is a command the model is told to run.
RUN_LINE = re.compile(r"^\s*`([^`]+)`\s*$")
SPAN = re.compile(r"`([^`\n]+)`")
PLACEHOLDERS = {"$ARGUMENTS": "NAME", "<NAME>": "NAME"}


def plugin_dir() -> Path:
    entry = json.loads(MARKETPLACE_FILE.read_text())["plugins"][0]
    return (ROOT / entry["source"]).resolve()


def frontmatter(path: Path) -> tuple[dict, str]:
    """The YAML between the first two `---` lines (Claude Code reads it only at the top)."""
    text = path.read_text()
    if not text.startswith("---\n"):
        raise ValueError(f"{path}: no frontmatter: the file must start with a '---' line")
    head, sep, body = text[4:].partition("\n---\n")
    if not sep:
        raise ValueError(f"{path}: the frontmatter has no closing '---' line")
    data = yaml.safe_load(head)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the frontmatter is not a mapping")
    return data, body


def problems(instance: object, schema: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in validator.iter_errors(instance)
    ]


# -- what the CLI really accepts --------------------------------------------------------------


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def snakemake_options() -> set[str]:
    from snakemake.cli import get_argument_parser

    return options(get_argument_parser())


def cli_problems(command: str) -> list[str]:
    """What in one `autoresearch …`/`snakemake …` line the real CLI would not accept."""
    words = shlex.split(command.replace("$ARGUMENTS", ""))
    found: list[str] = []
    if words[:1] == ["autoresearch"]:
        parser = build_parser()
        subs = subcommands(parser)
        if len(words) < 2 or words[1] not in subs:
            return [f"{command!r}: autoresearch has no subcommand {words[1:2]}"]
        known = options(parser) | options(subs[words[1]])
    elif words[:1] == ["snakemake"]:
        known = snakemake_options()
    else:
        return []
    for word in words[1:]:
        flag = word.split("=", 1)[0]
        if flag.startswith("-") and flag not in known:
            found.append(f"{command!r}: {words[0]} has no option {flag}")
    return found


def mentioned_commands(text: str) -> list[str]:
    """Code spans that spell out a command line (not the bare program name); `…` elides."""
    spans = [s.replace("…", "") for s in SPAN.findall(text)]
    return [
        s for s in spans if len(s.split()) > 1 and s.split()[0] in ("autoresearch", "snakemake")
    ]


# -- what Claude Code permits -------------------------------------------------------------------


def allowed(rules: list[str], command: str) -> bool:
    """Whether `Bash(...)` rules permit `command`: `Bash(X:*)` any command starting with X,
    `Bash(X)` that command only (Claude Code's prefix and exact forms)."""
    for rule in rules:
        match = re.fullmatch(r"Bash\((.+)\)", rule.strip())
        if not match:
            continue
        pattern = match[1]
        if pattern.endswith(":*") and command.startswith(pattern[:-2]):
            return True
        if command == pattern:
            return True
    return False


def tool_rules(meta: dict) -> list[str]:
    tools = meta.get("allowed-tools", [])
    if isinstance(tools, str):
        tools = re.split(r",\s*(?![^()]*\))", tools)  # commas inside Bash(...) stay
    return [t.strip() for t in tools if t.strip()]


def run_lines(body: str) -> list[str]:
    lines = [m[1] for m in map(RUN_LINE.match, body.splitlines()) if m]
    for placeholder, value in PLACEHOLDERS.items():
        lines = [line.replace(placeholder, value) for line in lines]
    return lines


REDIRECT = re.compile(r"^\d?(>>?|<)(&\d)?$")


def shell_words(command: str) -> str:
    """The command without its redirections: what Claude Code matches a Bash rule against
    (the redirections' targets are checked as writes: `Edit(...)` rules)."""
    words, skip = [], False
    for word in shlex.split(command):
        if skip:
            skip = False
        elif REDIRECT.match(word):
            skip = not word.endswith(tuple("0123456789"))  # `2>&1` has its target in it
        else:
            words.append(word)
    return " ".join(words)


# -- the files ---------------------------------------------------------------------------------


def test_the_marketplace_file_matches_its_schema():
    assert problems(json.loads(MARKETPLACE_FILE.read_text()), MARKETPLACE) == []


def test_the_marketplace_lists_the_plugin_folder_inside_this_repository():
    market = json.loads(MARKETPLACE_FILE.read_text())
    (entry,) = market["plugins"]
    folder = plugin_dir()
    assert folder.is_relative_to(ROOT) and folder != ROOT
    manifest = json.loads((folder / ".claude-plugin" / "plugin.json").read_text())
    assert entry["name"] == manifest["name"] == "autoresearch"
    # One version everywhere: Claude Code updates a plugin only when its version changes.
    assert entry["version"] == manifest["version"] == __version__


def test_the_plugin_manifest_matches_its_schema():
    manifest = json.loads((plugin_dir() / ".claude-plugin" / "plugin.json").read_text())
    assert problems(manifest, PLUGIN_MANIFEST) == []


def test_the_plugin_has_the_six_commands_and_a_skill_in_their_default_folders():
    folder = plugin_dir()
    assert sorted(p.stem for p in (folder / "commands").glob("*.md")) == sorted(COMMANDS)
    skills = sorted((folder / "skills").glob("*/SKILL.md"))
    assert [p.parent.name for p in skills] == ["choosing-a-mode"]
    # Components sit beside .claude-plugin/, never inside it (Claude Code ignores them there).
    assert sorted(p.name for p in (folder / ".claude-plugin").iterdir()) == ["plugin.json"]


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_frontmatter_parses_and_matches_its_schema(name):
    meta, body = frontmatter(plugin_dir() / "commands" / f"{name}.md")
    assert problems(meta, COMMAND_FRONTMATTER) == []
    assert meta.get("description") and body.strip()


def test_the_skill_frontmatter_parses_and_names_its_folder():
    path = plugin_dir() / "skills" / "choosing-a-mode" / "SKILL.md"
    meta, body = frontmatter(path)
    assert problems(meta, SKILL_FRONTMATTER) == []
    assert meta["name"] == path.parent.name
    from autoresearch import modes

    # It explains every mode there is, so none is left for the model to guess about.
    missing = [m for m in modes.MODES if f"`{m}`" not in body]
    assert missing == []


def test_the_skill_names_the_modes_that_play_without_a_key_as_new_picks_them():
    from autoresearch import cli, modes

    body = " ".join(frontmatter(plugin_dir() / "skills/choosing-a-mode/SKILL.md")[1].split())
    keyless = re.search(r"picks it where it can play the mode: ([a-z, ]+)\.", body)
    keyed = re.search(r"login\)\. ([a-z, ]+) and ([a-z]+) need it\.", body)
    assert keyless and keyed, "the skill no longer says which modes need a key"
    said_ruff = set(keyless[1].replace(" ", "").split(","))
    said_claude = set(keyed[1].replace(" ", "").split(",")) | {keyed[2]}
    ruff = {m for m in modes.MODES if cli.default_backend(modes.get(m)) == "ruff"}
    assert (said_ruff, said_claude) == (ruff, set(modes.MODES) - ruff)


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_runs_its_own_autoresearch_subcommand(name):
    meta, body = frontmatter(plugin_dir() / "commands" / f"{name}.md")
    lines = run_lines(body)
    programs = {
        shlex.split(line)[1] if line.startswith("autoresearch ") else line.split()[0]
        for line in lines
    }
    assert name in programs, f"{name}.md never tells the model to run autoresearch {name}"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_line_names_a_real_subcommand_and_real_flags(name):
    meta, body = frontmatter(plugin_dir() / "commands" / f"{name}.md")
    found = [p for c in mentioned_commands(body) for p in cli_problems(c)]
    found += [p for c in mentioned_commands(meta.get("argument-hint", "")) for p in cli_problems(c)]
    assert found == []


def test_the_skill_and_the_docs_name_only_real_subcommands_and_flags():
    texts = [plugin_dir() / "skills" / "choosing-a-mode" / "SKILL.md", ROOT / "docs/claude-code.md"]
    found = [
        p for path in texts for c in mentioned_commands(path.read_text()) for p in cli_problems(c)
    ]
    assert found == []


@pytest.mark.parametrize("name", COMMANDS)
def test_every_line_a_command_runs_is_permitted_by_its_allowed_tools(name):
    # Claude Code asks before a Bash command no rule permits; in `claude -p` it refuses.
    meta, body = frontmatter(plugin_dir() / "commands" / f"{name}.md")
    rules = tool_rules(meta)
    refused = [line for line in run_lines(body) if not allowed(rules, shell_words(line))]
    assert refused == []


def test_each_command_permits_exactly_its_own_programs():
    # A rule like Bash(autoresearch:*) would let /autoresearch:status run `redo` or
    # `finalize --push` unasked; each command gets its subcommand and the reads it needs.
    expected = {
        "new": ["Bash(autoresearch new:*)", "Read"],
        "plan": ["Bash(autoresearch plan:*)", "Read"],
        "run": ["Bash(autoresearch run:*)", "Bash(autoresearch status:*)"],
        "status": ["Bash(autoresearch status:*)"],
        "show": ["Bash(autoresearch show:*)"],
        "finalize": ["Bash(autoresearch finalize:*)", "Read"],
    }
    found = {n: tool_rules(frontmatter(plugin_dir() / "commands" / f"{n}.md")[0]) for n in COMMANDS}
    assert found == expected


@pytest.mark.parametrize("name", COMMANDS)
def test_every_file_a_command_line_writes_is_permitted_by_an_edit_rule(name):
    # Claude Code treats a redirection as a write: without an Edit rule it is refused.
    meta, body = frontmatter(plugin_dir() / "commands" / f"{name}.md")
    globs = [m[1] for r in tool_rules(meta) if (m := re.fullmatch(r"Edit\((.+)\)", r))]
    targets = [t for line in run_lines(body) for t in written(line)]
    assert [t for t in targets if not any(fnmatch.fnmatch(t, g) for g in globs)] == []


def written(command: str) -> list[str]:
    words = shlex.split(command)
    return [b for a, b in zip(words, words[1:], strict=False) if a in (">", ">>", "1>", "2>")]


def test_finalize_never_pushes_unless_the_user_typed_it():
    _, body = frontmatter(plugin_dir() / "commands" / "finalize.md")
    assert not any("--push" in line for line in run_lines(body))
    assert "only when the user typed it" in body


# -- the checks can fail -----------------------------------------------------------------------


def test_the_checks_refuse_a_bad_manifest_a_bad_marketplace_and_bad_frontmatter():
    assert problems({"name": "auto research", "version": "1"}, PLUGIN_MANIFEST)
    assert problems({"name": "x", "comands": "./c"}, PLUGIN_MANIFEST)  # misspelt key
    market = {"name": "m", "owner": {"name": "o"}, "plugins": [{"name": "p", "source": "../p"}]}
    assert problems(market, MARKETPLACE)  # a source outside the marketplace
    assert problems({"name": "m", "plugins": []}, MARKETPLACE)
    assert problems({"allowed_tools": "Bash"}, COMMAND_FRONTMATTER)  # dropped at run time
    assert problems({"description": "no name"}, SKILL_FRONTMATTER)


def test_the_frontmatter_reader_refuses_a_file_claude_code_would_load_without_metadata(tmp_path):
    for text in ("no frontmatter\n", "---\ndescription: [unclosed\n---\nbody\n", "---\nx: 1\n"):
        path = tmp_path / "c.md"
        path.write_text(text)
        with pytest.raises((ValueError, yaml.YAMLError)):
            frontmatter(path)


def test_the_cli_check_refuses_an_unknown_subcommand_or_an_invented_flag():
    assert cli_problems("autoresearch frobnicate NAME")
    assert cli_problems("autoresearch status --all")
    assert cli_problems("autoresearch run NAME --snakefile x")  # run fixes snakemake's line
    assert cli_problems("snakemake --coress 1 sessions/x/done")
    assert cli_problems("autoresearch plan NAME --target . --no-input") == []


def test_the_permission_check_refuses_a_line_no_rule_covers():
    rules = ["Bash(autoresearch status:*)", "Bash(mkdir -p sessions/_runs)"]
    assert allowed(rules, "autoresearch status foo")
    assert not allowed(rules, "autoresearch redo foo --cycle 1 --stage red")
    assert not allowed(rules, "mkdir -p sessions/_runs/../../x")
    assert shell_words("snakemake --cores 1 s/x/done > l.log 2>&1 < /dev/null") == (
        "snakemake --cores 1 s/x/done"
    )
    assert written("snakemake --cores 1 s/x/done > sessions/l.log 2>&1") == ["sessions/l.log"]


@pytest.mark.parametrize(
    "command",
    [
        "snakemake --cores 1 --snakefile /tmp/evil.smk sessions/x/done",
        "snakemake -n --snakefile /tmp/evil.smk sessions/x/done",  # -n parses it: runs it
        "tail -n 20 sessions/_runs/../../../etc/shadow",
        "autoresearch redo x --cycle 1 --stage red",
        "autoresearch finalize x --push",
    ],
)
def test_no_command_permits_a_line_beyond_the_ones_it_runs(command):
    # A prefix rule permits whatever follows it: only a program that checks every
    # argument itself (our CLI's subcommands) may be allowed by its prefix.
    for name in ("run", "status"):
        rules = tool_rules(frontmatter(plugin_dir() / "commands" / f"{name}.md")[0])
        assert not allowed(rules, command), (name, command)
