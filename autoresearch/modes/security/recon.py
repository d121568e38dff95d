"""Security's recon, done by code: entry points, routes and CLIs, dependencies, config and
secrets handling, CI, data stores; the assets and trust boundaries they imply; a baseline from
an installed scanner. It reads the worktree and changes nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autoresearch.safety import child_env, git, worktree_files

from ...checks.finding_schema import STRIDE

ENTRY = (
    ("main guard", re.compile(r"""^if __name__ == ["']__main__["']""")),
    ("web route", re.compile(r"@\w+\.(route|get|post|put|patch|delete|websocket)\(")),
    ("CLI", re.compile(r"\bArgumentParser\(|@click\.(command|group)|\btyper\.Typer\(")),
    ("network server", re.compile(r"\b(socketserver|http\.server|asyncio\.start_server)\b")),
)
SECRETS = re.compile(r"os\.environ|getenv\(|password|passwd|secret|token|api_?key", re.I)
STORES = re.compile(
    r"\b(sqlite3|psycopg|sqlalchemy|pymongo|redis|pickle|shelve)\b|open\(.*['\"][wa]"
)
CI_FILES = (
    ".github/workflows",
    ".gitlab-ci.yml",
    ".circleci",
    "Jenkinsfile",
    "azure-pipelines.yml",
)
CONFIG_NAME = re.compile(r"(^|/)(\.env[^/]*|settings\.py|config[^/]*\.(py|ya?ml|toml|json|ini))$")
MAX_HITS = 40
BOUNDARIES = (
    "user input → entry points",
    "program → files and data stores",
    "program → network and dependencies",
    "CI → repository and releases",
)


@dataclass
class Recon:
    files: list[str]
    entry_points: list[str] = field(default_factory=list)  # "path:line kind"
    dependencies: list[str] = field(default_factory=list)
    config_files: list[str] = field(default_factory=list)
    secret_handling: list[str] = field(default_factory=list)  # "path:line"
    data_stores: list[str] = field(default_factory=list)
    ci: list[str] = field(default_factory=list)
    assets: list[str] = field(default_factory=list)
    scanners: dict[str, str] = field(default_factory=dict)  # name -> result or why skipped
    # "path: not read: why": links out of the worktree, FIFOs, oversized files
    unread: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _is_test(path: str) -> bool:
    return (
        path.startswith(("tests/", "test/"))
        or "/tests/" in path
        or path.split("/")[-1].startswith("test_")
    )


def scan(worktree: Path, scope: list[str] | None = None) -> Recon:
    """What the worktree exposes; `scope`: only these files (diff_base)."""
    tracked = git.git(worktree, "ls-files").splitlines()
    files = [f for f in tracked if scope is None or f in scope]
    recon = Recon(files=files)
    for path in files:
        if not path.endswith(".py") or _is_test(path):
            continue
        text = worktree_files.read_if_any(worktree, path, recon.unread) or ""
        for number, line in enumerate(text.splitlines(), 1):
            for kind, pattern in ENTRY:
                if pattern.search(line.strip()):
                    recon.entry_points.append(f"{path}:{number} {kind}")
            if SECRETS.search(line):
                recon.secret_handling.append(f"{path}:{number}")
            if STORES.search(line):
                recon.data_stores.append(f"{path}:{number}")
    recon.config_files = [f for f in files if CONFIG_NAME.search(f)]
    recon.ci = [f for f in tracked if f.startswith(CI_FILES)]
    recon.dependencies = dependencies(worktree, recon.unread)
    recon.entry_points += scripts_of(worktree)
    for name in ("entry_points", "secret_handling", "data_stores"):
        setattr(recon, name, getattr(recon, name)[:MAX_HITS])
    recon.assets = assets(recon)
    return recon


def _project(worktree: Path, unread: list[str] | None = None) -> dict:
    """pyproject.toml's [project] table; empty when there is none or it does not parse."""
    try:
        data = tomllib.loads(worktree_files.read_if_any(worktree, "pyproject.toml", unread) or "")
    except tomllib.TOMLDecodeError:
        return {}
    return data.get("project", {})


def dependencies(worktree: Path, unread: list[str] | None = None) -> list[str]:
    out = list(_project(worktree, unread).get("dependencies", []))
    for req in sorted(worktree.glob("requirements*.txt")):
        text = worktree_files.read_if_any(worktree, req.name, unread) or ""
        out += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    package = worktree_files.read_if_any(worktree, "package.json", unread)
    if package:
        try:
            out += sorted(json.loads(package).get("dependencies", {}))
        except (json.JSONDecodeError, AttributeError):
            pass
    return out


def scripts_of(worktree: Path) -> list[str]:
    # A refusal is noted once, by `dependencies`, which reads the same file.
    scripts = _project(worktree).get("scripts", {})
    return [f"pyproject.toml console script {name} = {target}" for name, target in scripts.items()]


def assets(recon: Recon) -> list[str]:
    """The critical assets: what the recon found worth protecting, most exposed first."""
    found = []
    if recon.secret_handling or recon.config_files:
        found.append("credentials")
    if recon.data_stores:
        found.append("stored data")
    if recon.entry_points:
        found.append("entry points")
    return found[:2] or ["system"]


def baseline_scanners(worktree: Path, timeout_s: float = 300) -> dict[str, str]:
    """bandit when installed (pip-audit needs the network: only noted). Never fails setup."""
    results = {}
    if shutil.which("bandit"):
        try:
            proc = subprocess.run(
                ["bandit", "-r", "-q", "-f", "json", "."],
                cwd=worktree, capture_output=True, text=True, timeout=timeout_s,
                env=child_env.for_tool(),  # no key, no secret, no credential
            )  # fmt: skip
            issues = json.loads(proc.stdout or "{}").get("results", [])
            results["bandit"] = f"{len(issues)} issues"
        except (subprocess.TimeoutExpired, json.JSONDecodeError) as err:
            results["bandit"] = f"failed: {type(err).__name__}"
    else:
        results["bandit"] = "skipped: not installed"
    results["pip-audit"] = (
        "skipped: it queries a vulnerability service over the network"
        if shutil.which("pip-audit")
        else "skipped: not installed"
    )
    return results


def threat_model_md(recon: Recon, critical: list[str]) -> str:
    lines = ["# Threat model", "", "## Assets", ""]
    lines += [f"- {a}{' (critical)' if a in critical else ''}" for a in recon.assets]
    lines += ["", "## Trust boundaries", "", *(f"- {b}" for b in BOUNDARIES), ""]
    lines += ["## STRIDE per critical asset and boundary", ""]
    lines += ["| asset | boundary | " + " | ".join(STRIDE) + " |", "|---|---|" + "---|" * 6]
    for asset in critical:
        for boundary in BOUNDARIES:
            lines.append(
                f"| {asset} | {boundary} | " + " | ".join("to test" for _ in STRIDE) + " |"
            )
    lines += ["", "Each STRIDE letter on each critical asset is one vector of the audit loop;"]
    lines += ["owasp-coverage.md shows which were tested."]
    return "\n".join(lines) + "\n"


def attack_surface_md(recon: Recon) -> str:
    def block(title: str, items: list[str]) -> list[str]:
        return [f"## {title}", "", *(f"- {i}" for i in items or ["(none found)"]), ""]

    lines = ["# Attack surface", "", f"Files examined: {len(recon.files)}", ""]
    lines += block("Entry points (routes, CLIs, servers, main guards)", recon.entry_points)
    lines += block("Dependencies", recon.dependencies)
    lines += block("Configuration files", recon.config_files)
    lines += block("Secrets handling (lines that read or hold credentials)", recon.secret_handling)
    lines += block("Data stores", recon.data_stores)
    lines += block("CI", recon.ci)
    lines += block("Baseline scanners", [f"{k}: {v}" for k, v in recon.scanners.items()])
    if recon.unread:
        lines += block("Files not read (links out of the worktree, special or huge files)",
                       recon.unread)  # fmt: skip
    return "\n".join(lines)
