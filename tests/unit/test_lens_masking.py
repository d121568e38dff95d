"""The secret masker: each kind of secret planted in a text is replaced; ordinary text is not."""

from __future__ import annotations

import random
import string

import pytest

from autoresearch.modes.lens.masking import REDACTED, entropy, mask, scan

# Each value is a made-up credential of the named kind (none is real).
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAx3Jb0f9s0Xw1c0Rz5ke8Vq2L1tX7nB4mQ9pZ6yU3hG2wK5rT\n"
    "k8sJ2aP0vN7cQ1dF4gH6jL9mR3tW5yZ8bC0eE2iI4oO6uU8aA1sS3dD5fF7gG9hH\n"
    "-----END RSA PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AWS_KEY_ID = "AKIAZ7QW3RT5YU6OP2LM"
AWS_SECRET = "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"
GITHUB = "ghp_Q8w2E4r6T8y0U2i4O6p8A0s2D4f6G8h0J2k4"
SLACK = "xoxb-2048-4096-Xk3Jq9ZpL2mN7vB4cR8tY1wE"
STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
ANTHROPIC = "sk-ant-api03-Zq8Xv2Bn4Mk6Lj8Hg0Fd2Sa4Pq6Wr8Et0Yu2Io4"
HEX_SECRET = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
BASE64_SECRET = "Zk9xR3p2TmhLd1ViQ2VZdG1QcUE4c0oxbkQ2Zkg0"

PLANTED = {
    "private key": ("key = '''\n{}\n'''", PRIVATE_KEY),
    "JWT": ("headers['Cookie'] = 'session={}'", JWT),
    "AWS access key id": ("aws_access_key_id: {}", AWS_KEY_ID),
    "AWS secret key": ("aws_secret_access_key = {}", AWS_SECRET),
    "AWS secret key next to its id": (f"creds = ('{AWS_KEY_ID}', '{{}}')", AWS_SECRET),
    "GitHub token": ("GH = {}", GITHUB),
    "Slack token": ("client = WebClient({})", SLACK),
    "Stripe key": ("stripe.api = {}", STRIPE),
    "Anthropic key": ("export CLAUDE={}", ANTHROPIC),
    "password in URL": ("DATABASE_URL = 'postgres://admin:{}@db.internal:5432/app'", "S3cr3t!pw"),
    "password assignment": ('password = "{}"', "hunter2-horse"),
    "password in JSON": ('{{"db_password": "{}"}}', "correct-battery"),
    "password in .env": ("DB_PASSWORD={}", "Tr0ub4dor&3"),
    "bearer token": ("Authorization: Bearer {}", "a1b2c3d4e5f6g7h8i9j0k1l2"),
    "hex secret next to a key word": ("SECRET_KEY = {}", HEX_SECRET),
    "random base64 string": ("blob = {}", BASE64_SECRET),
}


@pytest.mark.parametrize("kind", PLANTED)
def test_mask_removes_each_planted_kind_of_secret(kind):
    template, secret = PLANTED[kind]
    masked, count = mask(template.format(secret))
    assert secret not in masked
    assert REDACTED in masked
    assert count >= 1


def test_mask_removes_every_secret_from_a_file_holding_all_kinds_at_once():
    text = "\n".join(template.format(secret) for template, secret in PLANTED.values())
    masked, count = mask(text)
    assert count >= len(PLANTED)
    for _template, secret in PLANTED.values():
        assert secret not in masked


def test_mask_keeps_the_syntax_around_an_assigned_secret():
    masked, _ = mask('password = "hunter2-horse"')
    assert masked == f'password = "{REDACTED}"'


def test_mask_keeps_user_and_host_of_a_url_with_a_password():
    masked, _ = mask("redis://cache:pa55word@redis.local:6379/0")
    assert masked == f"redis://cache:{REDACTED}@redis.local:6379/0"


def test_mask_removes_a_private_key_block_without_its_end_line():
    truncated = PRIVATE_KEY.rsplit("\n", 1)[0]
    masked, count = mask(truncated + "\n\nThe key above is committed.")
    assert count == 1
    assert "MIIEow" not in masked
    assert masked.endswith("The key above is committed.")


ORDINARY = """\
def check_password(password: str, token_count: int = 0) -> bool:
    secret_key: Optional[str] = None
    token = new_token
    api_key = settings.api_key
    return hashlib.sha256(password.encode()).hexdigest() == stored
# See src/autoresearch/checks/masking.py:42 and tests/test_lens_masking.py::test_one
value = 12345678901234567890; ratio = 0.987654321
id = 550e8400-e29b-41d4-a716-446655440000
url = "https://example.com:8443/path/to/resource?page=2"
test_green_restores_worktree_when_tests_fail_and_the_guard_is_red_again()
AbstractSingletonProxyFactoryBeanConfigurationLoader
password = os.environ["DB_PASSWORD"]
password = "${DB_PASSWORD}"
STREAM_ABOVE_TOKENS = 16_000
dsn = f"redis://cache:{password}@redis.local:6379/0"
"""


def test_mask_leaves_ordinary_code_paths_and_numbers_untouched():
    assert mask(ORDINARY) == (ORDINARY, 0)


def test_mask_leaves_commit_ids_in_a_report_untouched():
    report = (
        "Kept in commit 3f2a9c1d4e5b6a7980c1d2e3f4a5b6c7d8e9f0a1 (base 3f2a9c1).\n"
        "Reverted a1b2c3d4e5f60718293a4b5c6d7e8f9012345678.\n"
        "sha256 of the archive: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
    )
    assert mask(report) == (report, 0)


def test_mask_keeps_a_commit_id_the_caller_names_even_next_to_a_key_word():
    commit = "3f2a9c1d4e5b6a7980c1d2e3f4a5b6c7d8e9f0a1"
    text = f"token rotation fixed in {commit}"
    assert mask(text, keep=[commit]) == (text, 0)
    assert mask(f"signing key {commit}") != (f"signing key {commit}", 0)


@pytest.mark.parametrize(
    "path",
    [
        "/tmp/tmp.5uouJRXHap/pytest-of-root/pytest-0/test_ship_lens0/target/src/app.py",
        "cd /tmp/tmp.Q3xZk9LmWp/sessions/demo/cycles/001/Red-Findings.md",
        "C:/Users/Dev/AppData/Local/Temp/tmp8Jq2Lk4x/repo/Src/Main_Module.py",
    ],
)
def test_mask_leaves_a_path_under_a_mktemp_folder_untouched(path):
    # mktemp's random suffix is a short mixed-case run; the path's other parts are words.
    assert mask(path) == (path, 0)


@pytest.mark.parametrize(
    "text",
    [
        "blob: Zm9vYmFy/Q8w2E4r6T8y0U2i4O6p8A0s2D4f6G8h0J2k4L6n8",  # base64 with a slash
        "/tmp/work/Q8w2E4r6T8y0U2i4O6p8A0s2D4f6G8h0J2k4/out",  # a secret as a path's part
        "a/Zq8Xv2Bn4Mk6Lj8H/g0Fd2Sa4Pq6Wr8Et0Yu2Io4R",  # split in short mixed-case runs
    ],
)
def test_mask_still_masks_random_runs_with_slashes(text):
    masked, count = mask(text)
    assert count == 1 and REDACTED in masked


def test_no_random_string_with_slashes_passes_for_a_path():
    # 3,000 random base64 strings of 32 to 60 characters, each with a slash somewhere.
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "+/"
    for _ in range(3000):
        run = "".join(rng.choice(alphabet) for _ in range(rng.randint(32, 60)))
        if "/" not in run.strip("/") or not scan(run.replace("/", "x")):
            continue  # not random enough to be masked without its slashes either
        assert scan(f"blob {run} end"), run


def test_mask_leaves_placeholder_values_untouched():
    text = 'password = "<REDACTED>"\napi_key: "changeme"\ntoken = "${TOKEN}"\n'
    assert mask(text) == (text, 0)


def test_mask_is_idempotent():
    text = "\n".join(template.format(secret) for template, secret in PLANTED.values())
    once, _ = mask(text)
    assert mask(once) == (once, 0)


def test_scan_names_the_kind_of_each_secret():
    kinds = {s.kind for s in scan(f"id {AWS_KEY_ID} and {JWT}")}
    assert kinds == {"AWS access key id", "JWT"}


def test_entropy_is_higher_for_random_text_than_for_words():
    assert entropy(BASE64_SECRET) > entropy("the_quick_brown_fox_jumps_over_the")
    assert entropy("") == 0.0


# --- a value masked once is masked everywhere afterwards ---------------------------------


def session_folder(tmp_path):
    root = tmp_path / "sessions" / "s"
    root.mkdir(parents=True)
    (root / "session.yaml").write_text("mode: security\n")
    return root


def test_a_bare_value_quoted_after_setup_is_masked_in_every_later_file(tmp_path):
    from autoresearch.modes.lens.output import Writer, masked_log
    from autoresearch.safety import seen
    from autoresearch.session import files

    root = session_folder(tmp_path)
    Writer().text(root / "lens-setup.md", 'db.py: password = "Tr0ub4dor-and-3"\n')
    quoted = "The agent says Tr0ub4dor-and-3 is the admin's password (`Tr0ub4dor-and-3`)."
    # A later stage (a new writer), the harness's own writers, and a log.
    Writer().text(root / "cycles/001/findings.md", quoted)
    files.write_text(root / "session.md", quoted)
    files.write_json(root / "decision.json", {"reason": quoted})
    files.append_line(root / "results.tsv", quoted)
    lines: list[str] = []
    masked_log(lines.append, root=root)(quoted)
    written = [p for p in root.rglob("*") if p.is_file() and p.name != seen.STORE]
    assert all("Tr0ub4dor-and-3" not in p.read_text() for p in written)
    assert "Tr0ub4dor-and-3" not in lines[0] and "<REDACTED>" in lines[0]
    assert (root / "session.md").read_text() == quoted.replace("Tr0ub4dor-and-3", "<REDACTED>")


def test_the_seen_values_are_kept_as_private_digests(tmp_path):
    from autoresearch.modes.lens.output import Writer
    from autoresearch.safety import seen

    root = session_folder(tmp_path)
    Writer().text(root / "lens-setup.md", 'API_KEY = "sk-live-0123456789abcdef"\n')
    store = root / seen.STORE
    assert store.stat().st_mode & 0o777 == 0o600
    assert "sk-live-0123456789abcdef" not in store.read_text()  # digests only
    assert store.name.startswith(".")  # not an output any rule or report names


def test_a_log_line_masks_what_the_stages_writer_saw(tmp_path):
    from autoresearch.engine.stage import StageEnv
    from autoresearch.modes.lens.output import Writer

    root = session_folder(tmp_path)
    Writer().text(root / "a.md", 'secret: "correct-horse-battery"\n')
    log = root / "logs" / "red.log"
    log.parent.mkdir()
    env = StageEnv.__new__(StageEnv)
    env.layout, env.log_file = type("L", (), {"root": root})(), log
    env.log("read_file config.py: value correct-horse-battery")
    assert "correct-horse-battery" not in log.read_text()
