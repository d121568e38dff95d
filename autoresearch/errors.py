"""Errors a user must act on: each message names the file or key to fix, in one line.

Every job runs through one runner (`jobs.run_job`): a `UserError` reaches the terminal as
its message alone, and its traceback goes to the rule's log with every other failure's.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user must fix or decide; the message says what and where."""


class SpecError(UserError, ValueError):
    """A spec problem: the message names the file and the key."""


class SessionError(UserError):
    """A session cannot start or resume as things stand (lock held, version, a missing key)."""
