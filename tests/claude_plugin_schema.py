"""The Claude Code plugin files' schemas, written down as JSON schemas.

From Claude Code's pages (https://code.claude.com/docs/en/plugins/manifest-reference,
.../plugins/marketplace-reference, .../slash-commands, .../skills) and the validator of the
Claude Code CLI itself (2.1.197, `claude plugin validate --strict`): names without spaces,
kebab-case as the marketplace sync requires, a semver `version`, an `owner` with a `name`,
a plugin `source` that is a `./` path inside the marketplace. Only the documented keys are
allowed (`--strict` warns on the rest; at run time an unknown key is silently dropped, so a
misspelt `allowed-tools` would quietly leave a command without its permissions).
"""

from __future__ import annotations

from typing import Any

KEBAB = r"^[a-z0-9]+(-[a-z0-9]+)*$"
SEMVER = r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
# A path inside the marketplace: `./` first, no `..` segment, no backslash.
RELATIVE = r"^\./(?!.*(^|/)\.\.(/|$))[^\\]*$"

_AUTHOR: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "email": {"type": "string"},
        "url": {"type": "string"},
    },
    "additionalProperties": False,
}
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}
_RELATIVE_PATH = {"type": "string", "pattern": RELATIVE}
_PATHS = {"anyOf": [_RELATIVE_PATH, {"type": "array", "items": _RELATIVE_PATH}]}
_INLINE_OR_PATH = {"anyOf": [_RELATIVE_PATH, {"type": "object"}]}

PLUGIN_MANIFEST: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": ".claude-plugin/plugin.json",
    "type": "object",
    "required": ["name"],
    "properties": {
        "$schema": {"type": "string"},
        "name": {"type": "string", "pattern": KEBAB, "maxLength": 64},
        "displayName": {"type": "string"},
        "version": {"type": "string", "pattern": SEMVER},
        "description": {"type": "string", "minLength": 1},
        "author": _AUTHOR,
        "homepage": {"type": "string"},
        "repository": {"type": "string"},
        "license": {"type": "string"},
        "keywords": _STRINGS,
        "commands": _PATHS,
        "agents": _PATHS,
        "skills": _PATHS,
        "outputStyles": _PATHS,
        "hooks": _INLINE_OR_PATH,
        "mcpServers": _INLINE_OR_PATH,
        "lspServers": _INLINE_OR_PATH,
        "userConfig": {"type": "object"},
    },
    "additionalProperties": False,
}

_PLUGIN_ENTRY: dict[str, Any] = {
    "type": "object",
    "required": ["name", "source"],
    "properties": {
        "name": {"type": "string", "pattern": KEBAB, "maxLength": 64},
        "source": _INLINE_OR_PATH,
        "description": {"type": "string", "minLength": 1},
        "version": {"type": "string", "pattern": SEMVER},
        "author": _AUTHOR,
        "homepage": {"type": "string"},
        "repository": {"type": "string"},
        "license": {"type": "string"},
        "keywords": _STRINGS,
        "category": {"type": "string"},
        "tags": _STRINGS,
        "strict": {"type": "boolean"},
    },
    "additionalProperties": False,
}

MARKETPLACE: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": ".claude-plugin/marketplace.json",
    "type": "object",
    "required": ["name", "owner", "plugins"],
    "properties": {
        "$schema": {"type": "string"},
        # "inline" and the names of Anthropic's own marketplaces are reserved.
        "name": {"type": "string", "pattern": KEBAB, "not": {"enum": ["inline"]}},
        "owner": _AUTHOR,
        "description": {"type": "string"},
        "version": {"type": "string"},
        "metadata": {
            "type": "object",
            "properties": {
                "pluginRoot": {"type": "string"},
                "version": {"type": "string"},
                "description": {"type": "string"},
            },
            "additionalProperties": False,
        },
        "plugins": {"type": "array", "minItems": 1, "items": _PLUGIN_ENTRY},
    },
    "additionalProperties": False,
}

_TOOLS = {"anyOf": [{"type": "string", "minLength": 1}, _STRINGS]}

# commands/<name>.md: the file name is the command (`/<plugin>:<name>`); every key optional.
COMMAND_FRONTMATTER: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "commands/*.md frontmatter",
    "type": "object",
    "properties": {
        "description": {"type": "string", "minLength": 1},
        "argument-hint": {"type": "string"},
        "allowed-tools": _TOOLS,
        "disallowed-tools": _TOOLS,
        "model": {"type": "string"},
        "effort": {"type": "string"},
        "disable-model-invocation": {"type": "boolean"},
        "user-invocable": {"type": "boolean"},
        "shell": {"enum": ["bash", "powershell"]},
    },
    "additionalProperties": False,
}

# skills/<name>/SKILL.md: `name` (the folder's) and `description` (when to use it).
SKILL_FRONTMATTER: dict[str, Any] = {
    **COMMAND_FRONTMATTER,
    "title": "skills/*/SKILL.md frontmatter",
    "required": ["name", "description"],
    "properties": {
        **COMMAND_FRONTMATTER["properties"],
        "name": {"type": "string", "pattern": KEBAB, "maxLength": 64},
        "description": {"type": "string", "minLength": 1, "maxLength": 1024},
        "when_to_use": {"type": "string"},
        "paths": _TOOLS,
        "context": {"enum": ["inline", "fork"]},
        "agent": {"type": "string"},
    },
}
