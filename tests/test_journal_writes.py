"""Session files rewritten by parallel broad tracks: every writer's rename finds its file."""

from __future__ import annotations

import threading

from autoresearch import journal


def test_two_threads_rewriting_one_session_file_never_lose_their_temporary_file(tmp_path):
    # Local jobs (a broad session's track ends) are threads of Snakemake's one process.
    target = tmp_path / "session.md"
    errors: list[OSError] = []

    def rewrite(text: str) -> None:
        try:
            for _ in range(300):
                journal._atomic(target, text)
        except OSError as err:  # reported by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=rewrite, args=(t,)) for t in ("a\n" * 5000, "b\n")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_text() in ("a\n" * 5000, "b\n")
