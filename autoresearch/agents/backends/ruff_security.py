"""How the ruff backend plays the security lens: ruff's bandit-derived `S` rules, each mapped
to its OWASP Top 10 2021 category, CWE, STRIDE letter, severity, attack scenario and mitigation.

A diagnostic is a pattern match, never a proven exploit: its confidence is `likely`. Rules
not listed map to the fallback (A05 misconfiguration, Tampering, low).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

IGNORED = ("S101",)  # `assert`: every test file has them; not an attack surface


@dataclass(frozen=True)
class SecurityRule:
    owasp: str
    cwe: str
    stride: str
    severity: str
    scenario: str
    mitigation: str


_INJECTION = "An attacker who controls the data reaching this call runs commands of their choice"
_SHELL = SecurityRule(
    "A03", "CWE-78", "E", "high",
    _INJECTION + " with the program's privileges.",
    "Pass the command as a list without a shell and validate every argument.",
)  # fmt: skip
_CODE = SecurityRule(
    "A03", "CWE-95", "E", "high",
    "Input that reaches this call is executed as Python code: an attacker runs any code.",
    "Parse the input (ast.literal_eval, json) instead of evaluating it.",
)  # fmt: skip
_SECRET = SecurityRule(
    "A07", "CWE-798", "S", "high",
    "Anyone who can read the source or a copy of it learns the credential and can log in as "
    "the program.",
    "Read the credential from the environment or a secret store; rotate the exposed one.",
)  # fmt: skip
_WEAK_HASH = SecurityRule(
    "A02", "CWE-328", "I", "medium",
    "A weak digest can be brute-forced or collided: stored secrets or integrity checks built on "
    "it can be forged or recovered.",
    "Use hashlib.sha256 (or a password hash such as scrypt/argon2 for passwords).",
)  # fmt: skip
_DESERIALIZE = SecurityRule(
    "A08", "CWE-502", "T", "high",
    "Loading attacker-supplied bytes builds arbitrary objects and can run code.",
    "Load only trusted data, or use a data-only format such as JSON.",
)  # fmt: skip
_TLS = SecurityRule(
    "A02", "CWE-295", "I", "medium",
    "Without certificate checks a network attacker reads and alters the traffic.",
    "Keep certificate verification on and use current TLS versions.",
)  # fmt: skip
_XML = SecurityRule(
    "A05", "CWE-611", "I", "medium",
    "A crafted XML document reads local files or exhausts memory (XXE, entity expansion).",
    "Parse untrusted XML with defusedxml.",
)  # fmt: skip
_SQL = SecurityRule(
    "A03", "CWE-89", "T", "high",
    "Input built into the SQL text lets an attacker read or change any row.",
    "Use parameterised queries.",
)  # fmt: skip
_XSS = SecurityRule(
    "A03", "CWE-79", "T", "medium",
    "Unescaped input in a page runs the attacker's script in a victim's browser.",
    "Keep autoescaping on; never mark user data as safe.",
)  # fmt: skip
_SWALLOW = SecurityRule(
    "A09", "CWE-390", "R", "low",
    "Errors vanish without a trace, so an attack that triggers them leaves no record.",
    "Log the exception (or handle it) instead of passing over it.",
)  # fmt: skip
_TEMP = SecurityRule(
    "A05", "CWE-377", "T", "medium",
    "A predictable temporary path lets another local user plant or read the file.",
    "Use tempfile.mkstemp / NamedTemporaryFile.",
)  # fmt: skip
_IMPORT = SecurityRule(
    "A06", "CWE-1104", "T", "info",
    "The module is known for unsafe use; every call to it needs review.",
    "Prefer a safer replacement or review each use.",
)  # fmt: skip
FALLBACK = SecurityRule(
    "A05", "CWE-16", "T", "low",
    "The flagged construct weakens the program's defences.",
    "Follow the rule's documentation to remove the construct.",
)  # fmt: skip

RULES: dict[str, SecurityRule] = {
    "S102": _CODE,
    "S103": SecurityRule(
        "A01", "CWE-732", "E", "medium",
        "A permissive mode lets other users read or change the file.",
        "Create files with the narrowest mode the program needs (0o600 / 0o700).",
    ),
    "S104": SecurityRule(
        "A05", "CWE-605", "I", "medium",
        "Binding every interface exposes the service to every network the host is on.",
        "Bind to 127.0.0.1 or a configured address.",
    ),
    "S105": _SECRET,
    "S106": _SECRET,
    "S107": _SECRET,
    "S108": _TEMP,
    "S110": _SWALLOW,
    "S112": _SWALLOW,
    "S113": SecurityRule(
        "A05", "CWE-400", "D", "medium",
        "A peer that never answers hangs the caller for ever.",
        "Pass a timeout to every request.",
    ),
    "S201": SecurityRule(
        "A05", "CWE-489", "E", "high",
        "Flask's debugger lets anyone who reaches it run code on the server.",
        "Never enable debug outside development; read it from configuration.",
    ),
    "S202": SecurityRule(
        "A01", "CWE-22", "T", "high",
        "A crafted archive writes files outside the target folder (path traversal).",
        "Check every member's path before extracting, or use the `data` filter.",
    ),
    "S301": _DESERIALIZE,
    "S302": _DESERIALIZE,
    "S303": _WEAK_HASH,
    "S304": SecurityRule("A02", "CWE-327", "I", "high", _WEAK_HASH.scenario,
                         "Use a current cipher such as AES-GCM."),
    "S305": SecurityRule("A02", "CWE-327", "I", "medium", _WEAK_HASH.scenario,
                         "Use an authenticated mode such as GCM."),
    "S306": _TEMP,
    "S307": _CODE,
    "S308": _XSS,
    "S310": SecurityRule(
        "A10", "CWE-918", "S", "medium",
        "A URL the attacker controls makes the server fetch internal resources or local files.",
        "Allow only http(s) URLs on an allow-list of hosts.",
    ),
    "S311": SecurityRule(
        "A02", "CWE-330", "S", "low",
        "Values from `random` are predictable: tokens made from them can be guessed.",
        "Use the `secrets` module for anything security-relevant.",
    ),
    "S312": SecurityRule("A02", "CWE-319", "I", "medium",
                         "Telnet sends everything, credentials included, in clear text.",
                         "Use SSH."),
    "S321": SecurityRule("A02", "CWE-319", "I", "medium",
                         "FTP sends credentials and data in clear text.", "Use SFTP or FTPS."),
    "S323": _TLS,
    "S324": _WEAK_HASH,
    "S501": _TLS,
    "S502": _TLS,
    "S503": _TLS,
    "S504": _TLS,
    "S505": SecurityRule("A02", "CWE-326", "I", "high",
                         "A short key can be broken by brute force.",
                         "Use at least 2048-bit RSA/DSA or 224-bit EC keys."),
    "S506": SecurityRule(
        "A08", "CWE-20", "T", "high",
        "yaml.load on untrusted text builds arbitrary Python objects.",
        "Use yaml.safe_load.",
    ),
    "S507": SecurityRule("A07", "CWE-295", "S", "high",
                         "Accepting any host key lets an attacker impersonate the server.",
                         "Verify host keys (RejectPolicy with known hosts)."),
    "S601": _SHELL,
    "S602": _SHELL,
    "S603": SecurityRule("A03", "CWE-78", "E", "low", _SHELL.scenario,
                         "Validate the arguments; never build them from untrusted input."),
    "S604": _SHELL,
    "S605": _SHELL,
    "S606": SecurityRule("A03", "CWE-78", "E", "low", _SHELL.scenario, _SHELL.mitigation),
    "S607": SecurityRule("A03", "CWE-426", "E", "low",
                         "A partial executable path runs whatever program comes first on PATH.",
                         "Call executables by absolute path."),
    "S608": _SQL,
    "S609": SecurityRule("A03", "CWE-155", "E", "high", _SHELL.scenario,
                         "Do not pass shell wildcards to commands."),
    "S610": _SQL,
    "S611": _SQL,
    "S612": SecurityRule("A05", "CWE-94", "E", "high",
                         "logging.config.listen accepts configuration that runs code.",
                         "Do not use logging.config.listen, or verify what it accepts."),
    "S701": _XSS,
    "S702": _XSS,
    "S704": _XSS,
}  # fmt: skip
for _code in ("S313", "S314", "S315", "S316", "S317", "S318", "S319", "S320"):
    RULES[_code] = _XML
for _n in (*range(401, 414), 415):
    RULES.setdefault(f"S{_n}", _IMPORT)


def reach() -> tuple[frozenset[str], frozenset[str]]:
    """The OWASP ids and STRIDE letters some rule maps to: all this auditor can check. An
    iteration on any other category (A04 insecure design) looks at nothing."""
    rules = [*RULES.values(), FALLBACK]
    return frozenset(r.owasp for r in rules), frozenset(r.stride for r in rules)


def rule_for(code: str) -> SecurityRule:
    return RULES.get(code, FALLBACK)


SHORTEST_SECRET = 4  # characters: a shorter literal is a marker or a symbol, no credential


def short_literal(rule: SecurityRule, literal: str) -> SecurityRule:
    """`rule` as it reads for a hard-coded secret whose literal (`literal`, its source text)
    is too short to be one: low, saying so. wcwidth's tests compare a `token` with '÷' and
    '×' (Unicode's break markers); ruff's S105 goes by the name, and the audit failed on
    them at high. Any other rule, or a literal that cannot be read, is left as it is."""
    if rule is not _SECRET:
        return rule
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return rule
    if not isinstance(value, str | bytes) or len(value) >= SHORTEST_SECRET:
        return rule
    return replace(
        rule,
        severity="low",
        scenario=f"The literal {literal} is {len(value)} character(s) long: a marker or a "
        "symbol compared with a name that reads like a secret, not a credential.",
    )


# Test code: pytest's default files and what lies in a tests/ or test/ folder.
TEST_CODE = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")
IN_TEST = (
    " (in test code: it runs under the test runner on data the test makes, not on what a user "
    "sends; low unless the same pattern is in shipped code)"
)


def in_test_code(rule: SecurityRule, path: str) -> SecurityRule:
    """`rule` as it reads for a diagnostic in test code: low, the scenario saying why. A
    test's `pickle.loads(pickle.dumps(x))` is no attack surface (isodate: three of them
    failed a `fail_on: high` audit with nothing shipped at fault). A secret is the exception:
    a credential in a test is as readable as one in the code."""
    if rule is _SECRET or not TEST_CODE.search(path):
        return rule
    return replace(rule, severity="low", scenario=rule.scenario + IN_TEST)


def matches(rule: SecurityRule, vector: dict) -> bool:
    """Whether a diagnostic belongs to the iteration's vector (STRIDE letter or OWASP id)."""
    kind, name = vector.get("kind"), vector.get("name")
    if kind == "stride":
        return rule.stride == name
    if kind == "owasp":
        return rule.owasp == name
    if kind == "dependencies":
        return rule.owasp == "A06"
    if kind == "config":
        return rule.owasp == "A05"
    return False
