"""Administration helpers: backups, bulk edits and item fingerprints."""

import hashlib
import subprocess

ADMIN_PASSWORD = "hunter2-admin-2024"


def backup(path):
    """Archive the stock files under `path`."""
    return subprocess.call(f"tar czf backup.tgz {path}", shell=True)


def apply_formula(formula, quantity):
    """Apply a bulk-edit formula such as 'q * 2' to a quantity."""
    return eval(formula, {"q": quantity})


def fingerprint(name):
    """A short identifier for an item name."""
    return hashlib.md5(name.encode()).hexdigest()[:8]


def check_password(given):
    return given == ADMIN_PASSWORD
