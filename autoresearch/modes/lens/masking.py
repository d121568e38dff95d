"""The secret masker: every text a lens writes passes `mask` first, so no credential found in a
target (or made up by a model) reaches a file under `sessions/`.

Rule: each secret-looking span is replaced by `<REDACTED>`; the surrounding syntax stays, so a
finding still reads `password = "<REDACTED>"`. Kinds: private-key blocks, JWTs, AWS access key ids
and secret keys, vendor tokens (GitHub, Slack, Stripe, Anthropic, OpenAI, Google), passwords in
URLs, values assigned to key-like names, and long random strings: base64-like ones by entropy
anywhere, hex ones only next to a key-like word — so commit ids and digests in reports survive, and
the caller's own commit ids (`keep`) are never masked. A path whose parts read as words keeps a
short random part (mktemp's `/tmp/tmp.5uouJRXHap`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

REDACTED = "<REDACTED>"

# Names whose value is a secret: `password = ...`, `API_KEY=...`, `"client_secret": ...`.
_KEY_WORD = (
    r"(?:passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|"
    r"private[_-]?key|auth(?:orization)?|credentials?|bearer|salt|signature|hmac|session[_-]?key)"
)
_KEY_NAME = re.compile(_KEY_WORD, re.IGNORECASE)
# A long hex string is a secret only when a word like these stands just before it.
_HEX_NEIGHBOUR = re.compile(rf"{_KEY_WORD}|\bkeys?\b", re.IGNORECASE)


@dataclass(frozen=True)
class Secret:
    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    group: int | str = 0  # the part of the match that is the secret
    word_start: bool = False  # the match must not continue a word (checked in code: a leading
    # \b would cost the regex engine its fast scan for the pattern's literal prefix)
    key_name: bool = False  # the name assigned to, just before the match, must be key-like


_RULES: tuple[_Rule, ...] = (
    _Rule(
        "private key",
        re.compile(
            r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----"
            r"(?:.*?-----END \1PRIVATE KEY\2-----|(?:\r?\n[A-Za-z0-9+/=:, -]+)*)",
            re.DOTALL,
        ),
    ),
    _Rule(
        "JWT",
        re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        word_start=True,
    ),
    _Rule(
        "AWS access key id",
        re.compile(r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}\b"),
        word_start=True,
    ),
    _Rule(
        "AWS secret key",
        re.compile(
            r"(?i:aws.{0,20}?(?:secret|key).{0,20}?)[=:>\s\"']+([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        1,
    ),
    _Rule(
        "GitHub token",
        re.compile(r"g(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_\w{22,})"),
        word_start=True,
    ),
    _Rule("Slack token", re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}"), word_start=True),
    _Rule("Slack webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}")),
    _Rule(
        "Stripe key",
        re.compile(r"_(?:live|test)_[A-Za-z0-9]{10,}"),  # widened to its sk/rk/pk/whsec prefix
    ),
    _Rule("Anthropic key", re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}"), word_start=True),
    _Rule("OpenAI key", re.compile(r"sk-(?:proj-)?[A-Za-z0-9_-]{32,}"), word_start=True),
    _Rule("Google API key", re.compile(r"AIza[0-9A-Za-z_-]{35}"), word_start=True),
    _Rule("password in URL", re.compile(r"://[^\s:/@\"'<>]*:([^\s@/\"'<>]+)@"), 1),
    _Rule(
        "Bearer token",
        re.compile(r"(?i:bearer|basic|token)\s+((?=[^\s\"']*\d)[A-Za-z0-9._~+/-]{16,}=*)"),
        1,
        word_start=True,
    ),
    # A quoted value assigned to a key-like name, in code, JSON, YAML or TOML.
    _Rule(
        "assigned secret",
        re.compile(r"(?:=>|->|:=|=|:)\s*[rbuf]?(?P<q>[\"'])(?P<value>[^\"'\n]{4,})(?P=q)"),
        "value",
        key_name=True,
    ),
    # An unquoted value on a `NAME=value` / `name: value` line (.env, shell, YAML, INI).
    _Rule(
        "assigned secret",
        re.compile(
            r"(?m)^[ \t]*(?:export[ \t]+)?(?P<name>[\w.-]+)[ \t]*[=:][ \t]*"
            r"(?P<value>[^\s\"'#,;()\[\]{}<>]{6,})[ \t]*$"
        ),
        "value",
    ),
)
_STRIPE_PREFIX = re.compile(r"(?:sk|rk|pk|whsec)$")
_NAME_BEFORE = re.compile(r"([\w.-]+)[\"']?\s*$")

# Long runs of base64 or hex characters; judged by `_looks_random` and `_hex_is_secret`.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{32,}={0,2}(?![A-Za-z0-9+/_=-])")
_HEX_RUN = re.compile(r"(?<![A-Za-z0-9])[0-9a-fA-F]{32,}(?![A-Za-z0-9])")
_PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>|\$\{?\w+\}?|\{\{?[^}]*\}?\}|%\(?\w*\)?s|\*+|x+|\.{3}|changeme|"
    r"your[_-]?\w*|example\w*|dummy\w*|none|null|true|false|redacted)$",
    re.IGNORECASE,
)
_WORD_CHAR = re.compile(r"\w")
_MAY_BE_PLACEHOLDER = ("assigned secret", "Bearer token", "password in URL")
MIN_ENTROPY = 4.0  # bits per character; random base64 of 32+ chars scores about 4.5 and above


def scan(text: str, keep: Iterable[str] = ()) -> list[Secret]:
    """Every secret-looking span in `text`, ordered and not overlapping (wider spans win)."""
    kept = {k.lower() for k in keep if k}
    found: list[Secret] = []
    for rule in _RULES:
        for match in rule.pattern.finditer(text):
            start, end = match.span(rule.group)
            if rule.word_start and match.start() and _WORD_CHAR.match(text, match.start() - 1):
                continue
            if rule.kind == "Stripe key":
                prefix = _STRIPE_PREFIX.search(text, max(0, match.start() - 5), match.start())
                if prefix is None:
                    continue
                start = prefix.start()
            if rule.kind == "assigned secret" and not _assigned_to_key(text, match, rule):
                continue
            if rule.kind in _MAY_BE_PLACEHOLDER and _is_placeholder(match.group(rule.group)):
                continue
            found.append(Secret(rule.kind, start, end))
    for match in _BASE64_RUN.finditer(text):
        token = match.group()
        if _looks_random(token) and not _is_hex(token) and not _is_path(token):
            found.append(Secret("random string", *match.span()))
    for match in _HEX_RUN.finditer(text):
        if _hex_is_secret(text, match, kept):
            found.append(Secret("hex secret", *match.span()))
    return _without_overlaps(found)


def mask(text: str, keep: Iterable[str] = ()) -> tuple[str, int]:
    """(text with each secret replaced by `<REDACTED>`, how many were replaced).

    `keep`: strings the caller knows are not secrets (the session's commit ids), left as they are.
    Masking is idempotent: masking masked text changes nothing and counts 0.
    """
    masked, values = redact(text, keep)
    return masked, len(values)


def redact(text: str, keep: Iterable[str] = ()) -> tuple[str, list[str]]:
    """(text masked as `mask` masks it, the values it replaced): the session keeps those
    (seen.remember), so a bare value quoted later is masked too."""
    secrets = scan(text, keep)
    out: list[str] = []
    position = 0
    for secret in secrets:
        out.append(text[position : secret.start])
        out.append(REDACTED)
        position = secret.end
    out.append(text[position:])
    return "".join(out), [text[s.start : s.end] for s in secrets]


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    if not text:
        return 0.0
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(token: str) -> bool:
    # Identifiers, paths and words have long runs of lowercase letters and low entropy; random
    # base64 mixes upper case, lower case and digits throughout.
    core = token.rstrip("=")
    has_classes = (
        any(c.isupper() for c in core)
        and any(c.islower() for c in core)
        and any(c.isdigit() for c in core)
    )
    longest_word = max((len(w) for w in re.findall(r"[a-z]+|[A-Z][a-z]*", core)), default=0)
    return has_classes and longest_word < 12 and entropy(core) >= MIN_ENTROPY


# A part of a path that reads as words: `pytest-of-root`, `test_ship_lens0`, `Local`, `001`.
_PATH_WORDS = re.compile(r"(?:[A-Z]?[a-z]+\d*|\d+)(?:[_+-](?:[A-Z]?[a-z]+\d*|\d+))*")


def _is_path(token: str) -> bool:
    """A run with slashes made mostly of parts that read as words, with fewer than 32
    characters in the others (mktemp's `5uouJRXHap`): a path, not a secret. In a random
    string a part that reads as a word is short, and chance makes few of them."""
    if "/" not in token:
        return False
    parts = token.split("/")
    odd = sum(len(part) for part in parts if not _PATH_WORDS.fullmatch(part))
    return odd < 32 and len(token) - len(parts) + 1 - odd >= odd


def _is_hex(token: str) -> bool:
    return re.fullmatch(r"[0-9a-fA-F]+", token) is not None


def _hex_is_secret(text: str, match: re.Match[str], kept: set[str]) -> bool:
    token = match.group().lower()
    if any(k.startswith(token) or token.startswith(k) for k in kept if len(k) >= 7):
        return False
    line_start = text.rfind("\n", 0, match.start()) + 1
    before = text[max(line_start, match.start() - 40) : match.start()]
    return _HEX_NEIGHBOUR.search(before) is not None


def _assigned_to_key(text: str, match: re.Match[str], rule: _Rule) -> bool:
    """The value is assigned to a key-like name, and is a literal rather than code."""
    if rule.key_name:
        line_start = text.rfind("\n", 0, match.start()) + 1
        name = _NAME_BEFORE.search(text, line_start, match.start())
        if name is None:
            return False
        name_text = name.group(1)
    else:
        name_text = match.group("name")
    return bool(_KEY_NAME.search(name_text)) and not _is_code(match.group("value"))


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER.match(value.strip()) is not None or REDACTED in value


def _is_code(value: str) -> bool:
    """An unquoted value that is an expression or a name, not a literal: `token = new_token`."""
    value = value.strip()
    if re.fullmatch(r"[A-Za-z_][A-Za-z_.]*", value):  # names, types and dotted attributes
        return True
    if re.fullmatch(r"[-+]?[\d_.,]+", value):  # numbers: MAX_TOKENS = 16_000
        return True
    return value.startswith(("$", "%", "os.", "self.", "env(", "getenv"))


def _without_overlaps(found: list[Secret]) -> list[Secret]:
    # Earliest start first; at equal start the widest span wins.
    ordered = sorted(found, key=lambda s: (s.start, -(s.end - s.start)))
    merged: list[Secret] = []
    for secret in ordered:
        if merged and secret.start < merged[-1].end:
            last = merged[-1]
            if secret.end > last.end:
                merged[-1] = Secret(last.kind, last.start, secret.end)
            continue
        merged.append(secret)
    return merged
