"""What keeps a session's work where it belongs: the jail the target's commands run in,
the agents' file sandbox, protected paths and the one commit door, the harness's git,
the files a command names, and the masker's values."""
