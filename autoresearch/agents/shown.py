"""What one conversation has already been shown of the worktree's files, so a tool need not
send the same text twice (docs/cost.md: every token a tool returns is paid for again).

A record is a file's bytes (their sha256) and the line numbers whose full text an earlier
output carried. It stands only while that output is still in the conversation and the
file still has those bytes: the backend calls `forget` when a conversation starts and
whenever it shortens old outputs, and every use compares the digest of the file as it is
now, so a change by edit_file, by a command, or by a restore between fixes means the text
is sent again. A note in place of text is given once: asking again gets the text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Seen:
    digest: str  # of the file's bytes when its lines were shown
    lines: set[int] = field(default_factory=set)
    noted: bool = False  # the last read of it was answered with a note, not the text


class Shown:
    """Per conversation: path -> what of it is in the conversation. Off until `forget` is
    first called, so a toolbox that no conversation-keeping backend drives (a script, a
    test) answers every call in full."""

    def __init__(self) -> None:
        self.active = False
        self._files: dict[str, Seen] = {}
        # A listing or search call (its name and arguments) -> (digest of its output, noted)
        self._outputs: dict[str, tuple[str, bool]] = {}

    def forget(self) -> None:
        """The conversation starts, or lost outputs: nothing shown before counts."""
        self.active = True
        self._files.clear()
        self._outputs.clear()

    def drop(self, rel: str) -> None:
        """The agent wrote `rel`: what it was shown before is not what it now has in mind,
        even if the bytes come back (a restore, an edit undone)."""
        self._files.pop(rel, None)

    def add(self, rel: str, file_digest: str, lines: range | set[int]) -> None:
        if not self.active:
            return
        seen = self._files.get(rel)
        if seen is None or seen.digest != file_digest:
            seen = self._files[rel] = Seen(file_digest)
        seen.lines.update(lines)
        seen.noted = False

    def lines_of(self, rel: str, data: bytes) -> set[int]:
        """The lines of `rel` whose text is in the conversation, if it still has bytes `data`
        (hashed only for a file shown: a search reads every file)."""
        seen = self._files.get(rel) if self.active else None
        if seen is None or seen.digest != digest(data):
            return set()
        return seen.lines

    def note_instead(self, rel: str, file_digest: str, lines: range) -> bool:
        """Whether a read of `lines` may be answered with a note: all of them are in the
        conversation, unchanged, and the last read of the file was not already a note."""
        seen = self._files.get(rel) if self.active else None
        if seen is None or seen.digest != file_digest or seen.noted:
            return False
        if not seen.lines.issuperset(lines):
            return False
        seen.noted = True
        return True

    def same_output(self, call: str, output: str) -> bool:
        """Whether `call` (a listing or a search) gave this very output earlier in the
        conversation, still there, and that one was not already answered with a note."""
        if not self.active:
            return False
        mark = digest(output.encode())
        earlier = self._outputs.get(call)
        if earlier == (mark, False):
            self._outputs[call] = (mark, True)
            return True
        self._outputs[call] = (mark, False)
        return False
