import json
import math

import pytest

from autoresearch.measure.metrics import (
    Measurement,
    MetricError,
    Target,
    check_format,
    direction_of,
    is_better,
    is_closer,
    mann_whitney_u_p,
    measure,
    median,
    number_in,
    parse_target,
    parse_value,
)

# --- parse_value: last_line ---


@pytest.mark.parametrize(
    "output,expected",
    [
        ("Training complete.\nFinal validation loss: 1.234\n1.234\n", 1.234),
        ("123ms\n", 123.0),
        ("coverage: 45%\n\n\n", 45.0),
        ("   12345\n", 12345.0),
        ("-0.5\n", -0.5),
        ("1.5e3\n", 1500.0),
        ("p99 latency: 87.5ms\n", 87.5),  # the 99 in "p99" is part of a word
        ("bundle size 1,234,567 bytes\n", 1234567.0),
    ],
)
def test_last_line_reads_the_first_number_of_the_last_nonempty_line(output, expected):
    value, raw, passed, notes = parse_value(output, "last_line", None, None)
    assert value == expected
    assert raw == output.strip().splitlines()[-1].strip()
    assert (passed, notes) == (None, None)


def test_last_line_skips_makes_directory_lines_whose_paths_carry_digits():
    output = (
        "make: Entering directory '/tmp/pytest-0/bench'\n12.5 ms\n"
        "make: Leaving directory '/tmp/pytest-0/bench'\n"
    )
    assert parse_value(output, "last_line", None, None)[0] == 12.5
    nested = "make[1]: Leaving directory '/w/run-3'\n"
    assert parse_value("7\n" + nested, "last_line", None, None)[0] == 7


def test_last_line_without_number_is_an_error():
    with pytest.raises(MetricError, match="no number"):
        parse_value("42\ndone\n", "last_line", None, None)
    with pytest.raises(MetricError, match="no output"):
        parse_value("\n\n", "last_line", None, None)


def test_number_in_rejects_nan_and_inf():
    with pytest.raises(MetricError):
        number_in("nan")
    assert number_in("x=.5") == 0.5


# --- json_stdout ---


def test_json_stdout_whole_output():
    out = '{"val_loss": 1.234, "train_loss": 1.1, "epoch": 10}\n'
    value, raw, _, _ = parse_value(out, "json_stdout", "val_loss", None)
    assert value == 1.234
    assert raw == {"val_loss": 1.234, "train_loss": 1.1, "epoch": 10}


def test_json_stdout_uses_the_last_object_among_many():
    out = '{"val_loss": 2.0}\n{"val_loss": 1.5}\n'
    assert parse_value(out, "json_stdout", "val_loss", None)[0] == 1.5


def test_json_stdout_finds_object_lines_in_log_output():
    out = (
        "epoch 1 ... {not json}\n"
        'INFO results: {"val_loss": 0.75, "acc": 0.9} (saved)\n'
        '{"event": "shutdown"}\n'
        "bye\n"
    )
    value, raw, _, _ = parse_value(out, "json_stdout", "val_loss", None)
    assert value == 0.75
    assert raw == {"val_loss": 0.75, "acc": 0.9}


def test_json_stdout_pretty_printed_and_nested_keys():
    out = "running...\n" + json.dumps({"bench": {"p99": {"ms": 12.5}}, "runs": [3, 4]}, indent=2)
    assert parse_value(out, "json_stdout", "bench.p99.ms", None)[0] == 12.5
    assert parse_value(out, "json_stdout", "runs.1", None)[0] == 4.0


def test_json_stdout_literal_dotted_key_wins():
    assert parse_value('{"a.b": 1, "a": {"b": 2}}', "json_stdout", "a.b", None)[0] == 1.0


def test_json_stdout_string_values_with_units():
    assert parse_value('{"latency": "123ms"}', "json_stdout", "latency", None)[0] == 123.0


def test_json_stdout_without_key_needs_a_single_number():
    assert parse_value('{"score": 3, "name": "x"}', "json_stdout", None, None)[0] == 3.0
    with pytest.raises(MetricError, match="set the metric key"):
        parse_value('{"a": 1, "b": 2}', "json_stdout", None, None)


@pytest.mark.parametrize(
    "output,message",
    [
        ("no json here\n", "no JSON object"),
        ('{"other": 1}\n', "has the key 'val_loss'"),
        ('{"val_loss": "n/a"}\n', "no number"),
        ('{"val_loss": [1, 2]}\n', "not a number"),
        ('{"val_loss": 1.0,}\n', "no JSON object"),
    ],
)
def test_json_stdout_failures(output, message):
    with pytest.raises(MetricError, match=message):
        parse_value(output, "json_stdout", "val_loss", None)


# --- json_file ---


def test_json_file_relative_to_cwd(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "metrics.json").write_text('{"summary": {"f1": 0.82}}')
    value, raw, _, _ = parse_value(
        "ignored stdout", "json_file:results/metrics.json", "summary.f1", tmp_path
    )
    assert value == 0.82
    assert raw == {"summary": {"f1": 0.82}}


def test_json_file_missing_or_bad(tmp_path):
    with pytest.raises(MetricError, match="did not write"):
        parse_value("", "json_file:out.json", "x", tmp_path)
    (tmp_path / "out.json").write_text("garbage")
    with pytest.raises(MetricError, match="no JSON object in json_file out.json"):
        parse_value("", "json_file:out.json", "x", tmp_path)


# --- metric lines ---


def test_metric_lines_choose_by_name_or_last():
    out = "warming up\nMETRIC p50_ms=12.5\nMETRIC p99_ms=40ms\nnoise\nMETRIC p50_ms=11\n"
    value, raw, _, _ = parse_value(out, "metric", "p50_ms", None)
    assert value == 11.0
    assert raw == {"p50_ms": "11", "p99_ms": "40ms"}
    assert parse_value(out, "metric", None, None)[0] == 11.0
    assert parse_value(out, "metric", "p99_ms", None)[0] == 40.0


def test_metric_lines_missing():
    with pytest.raises(MetricError, match="no `METRIC name=value` line"):
        parse_value("nothing\n", "metric", None, None)
    with pytest.raises(MetricError, match="found: a"):
        parse_value("METRIC a=1\n", "metric", "b", None)


# --- regex ---


def test_regex_takes_first_group_of_last_match():
    out = "coverage: 71.0% of statements\ncoverage: 80.5% of statements\n"
    value, raw, _, _ = parse_value(out, r"regex:coverage: ([\d.]+)%", None, None)
    assert (value, raw) == (80.5, "80.5")


def test_regex_without_group_uses_whole_match_and_pattern_may_hold_colons():
    assert parse_value("took 3.5s\n", r"regex:\d+\.\d+", None, None)[0] == 3.5
    assert parse_value("time: 7 ms\n", r"regex:time: (\d+)", None, None)[0] == 7.0


def test_regex_no_match_and_bad_pattern():
    with pytest.raises(MetricError, match="does not match"):
        parse_value("nothing\n", r"regex:score=(\d+)", None, None)
    with pytest.raises(MetricError, match="bad regular expression"):
        parse_value("x", "regex:(unclosed", None, None)


# --- evaluator (seed 003) ---


def test_evaluator_with_score_and_notes():
    out = 'evaluating...\n{"pass": false, "score": 0.73, "notes": "missing security cases"}\n'
    value, raw, passed, notes = parse_value(out, "evaluator", None, None)
    assert (value, passed, notes) == (0.73, False, "missing security cases")
    assert raw["score"] == 0.73


def test_evaluator_without_score_maps_pass_to_one_or_zero():
    assert parse_value('{"pass": true}', "evaluator", None, None)[:3] == (1.0, {"pass": True}, True)
    assert parse_value('{"pass": false}', "evaluator", None, None)[0] == 0.0


@pytest.mark.parametrize(
    "output,message",
    [
        ('{"score": 1}', "has the key 'pass'"),
        ('{"pass": "yes"}', "must be true or false"),
        ('{"pass": true, "score": "high"}', "must be a number"),
        ("PASS\n", "no JSON object"),
    ],
)
def test_evaluator_contract_violations(output, message):
    with pytest.raises(MetricError, match=message):
        parse_value(output, "evaluator", None, None)


# --- formats ---


@pytest.mark.parametrize(
    "fmt", ["last_line", "json_stdout", "json_file:a.json", "metric", "regex:x", "evaluator"]
)
def test_check_format_accepts_known_formats(fmt):
    check_format(fmt)


@pytest.mark.parametrize("fmt", ["csv", "json_file:", "regex:", "last_line:x", "regex:("])
def test_check_format_rejects_others(fmt):
    with pytest.raises(ValueError):
        check_format(fmt)


# --- measure: running the command ---


def test_measure_parses_stdout_only(tmp_path):
    # Progress on stderr must not be taken for the value.
    m = measure("echo 42; echo 'progress 99%' >&2", tmp_path)
    assert isinstance(m, Measurement)
    assert (m.value, m.samples, m.raw) == (42.0, [42.0], "42")


def test_measure_repeats_takes_the_median_of_all_samples(tmp_path):
    counter = tmp_path / "n"
    counter.write_text("0")
    # Prints 10, 30, 20, 50, 40 on successive runs.
    script = tmp_path / "bench.sh"
    script.write_text(
        "n=$(cat n); n=$((n+1)); echo $n > n\n"
        "case $n in 1) echo 10;; 2) echo 30ms;; 3) echo 20;; 4) echo 50;; *) echo 40;; esac\n"
    )
    m = measure("sh bench.sh", tmp_path, repeats=5)
    assert m.samples == [10.0, 30.0, 20.0, 50.0, 40.0]
    assert m.value == 30.0
    assert counter.read_text().strip() == "5"


def test_measure_json_file_written_by_the_command(tmp_path):
    m = measure(
        """echo '{"size": 2048}' > out.json""", tmp_path, fmt="json_file:out.json", key="size"
    )
    assert m.value == 2048.0


def test_measure_evaluator_keeps_pass_and_notes_even_on_nonzero_exit(tmp_path):
    cmd = """echo '{"pass": false, "score": 0.4, "notes": "2 of 5 cases"}'; exit 1"""
    m = measure(cmd, tmp_path, fmt="evaluator")
    assert (m.value, m.passed, m.notes) == (0.4, False, "2 of 5 cases")


def test_measure_evaluator_repeats_pass_only_if_every_run_passed(tmp_path):
    (tmp_path / "n").write_text("0")
    cmd = (
        "n=$(cat n); n=$((n+1)); echo $n > n; "
        """if [ $n = 2 ]; then echo '{"pass": false}'; else echo '{"pass": true}'; fi"""
    )
    m = measure(cmd, tmp_path, fmt="evaluator", repeats=3)
    assert m.samples == [1.0, 0.0, 1.0]
    assert m.passed is False


def test_measure_failing_command_names_it_and_quotes_the_tail(tmp_path):
    cmd = "for i in $(seq 1 30); do echo line$i; done; echo 'boom: db unreachable' >&2; exit 3"
    with pytest.raises(MetricError) as excinfo:
        measure(cmd, tmp_path)
    message = str(excinfo.value)
    assert cmd in message
    assert "exit code 3" in message
    assert "line30" in message and "line11" in message
    assert "line10\n" not in message  # only the last 20 lines
    assert "boom: db unreachable" in message  # stderr is kept for the diagnosis


def test_measure_nonzero_exit_fails_even_if_a_number_was_printed(tmp_path):
    with pytest.raises(MetricError, match="exit code 1"):
        measure("echo 12; exit 1", tmp_path)


def test_measure_timeout(tmp_path):
    with pytest.raises(MetricError, match=r"`echo started; sleep 5` .*timed out after 0.5s") as e:
        measure("echo started; sleep 5", tmp_path, timeout_s=0.5)
    assert "started" in str(e.value)


def test_measure_no_number(tmp_path):
    with pytest.raises(MetricError, match="printed no parsable value") as e:
        measure("echo all done", tmp_path)
    assert "all done" in str(e.value)
    assert "`echo all done`" in str(e.value)


def test_measure_bad_json(tmp_path):
    with pytest.raises(MetricError, match="no JSON object"):
        measure("echo '{oops'", tmp_path, fmt="json_stdout", key="x")


def test_measure_command_ending_in_a_comment_still_runs(tmp_path):
    assert measure("echo 7 # the answer", tmp_path).value == 7.0


def test_measure_hides_secrets_from_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "s3cret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    m = measure(
        '[ -z "$MY_TOKEN" ] && [ -z "$ANTHROPIC_API_KEY" ] && echo 1 || echo 0',
        tmp_path,
        secrets=["MY_TOKEN"],
    )
    assert m.value == 1.0


def test_measure_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        measure("echo 1", tmp_path, repeats=0)
    with pytest.raises(MetricError, match="unknown metric format"):
        measure("echo 1", tmp_path, fmt="yaml")


# --- targets ---


@pytest.mark.parametrize(
    "text,comparator,value,units",
    [
        ("<= 100ms", "<=", 100.0, "ms"),
        ("≤100ms", "<=", 100.0, "ms"),
        ("≥80%", ">=", 80.0, "%"),
        (">= 0.9", ">=", 0.9, ""),
        ("=0", "=", 0.0, ""),
        ("== 0 warnings", "=", 0.0, "warnings"),
        ("<200000 (bytes)", "<", 200000.0, "(bytes)"),
        ("> -1.5", ">", -1.5, ""),
        ("<= 1,000 req", "<=", 1000.0, "req"),
    ],
)
def test_parse_target(text, comparator, value, units):
    assert parse_target(text) == Target(comparator, value, units)


@pytest.mark.parametrize("text", ["100", "<=", "fast", "~ 5", "<= abc", ""])
def test_parse_target_rejects_malformed(text):
    with pytest.raises(ValueError, match="comparator and a number"):
        parse_target(text)


def test_target_met():
    assert parse_target("<= 100").met(100) and not parse_target("<= 100").met(100.1)
    assert parse_target("< 100").met(99.9) and not parse_target("< 100").met(100)
    assert parse_target(">= 80%").met(80) and not parse_target(">= 80%").met(79.99)
    assert parse_target("> 80").met(80.01) and not parse_target("> 80").met(80)
    assert parse_target("= 0").met(0.0) and not parse_target("= 0").met(1)
    assert parse_target("= 0.3").met(0.1 + 0.2)


def test_target_str():
    assert str(parse_target("≤100ms")) == "<= 100ms"


def test_direction_of():
    assert direction_of(parse_target("<= 1")) == "minimize"
    assert direction_of(parse_target("< 1")) == "minimize"
    assert direction_of(parse_target(">= 1")) == "maximize"
    assert direction_of(parse_target("> 1")) == "maximize"
    assert direction_of(parse_target("= 1")) is None


def test_is_better_is_strict_and_respects_min_effect():
    assert is_better(9, 10, "minimize")
    assert not is_better(10, 10, "minimize")
    assert not is_better(11, 10, "minimize")
    assert is_better(11, 10, "maximize")
    assert not is_better(10, 10, "maximize")
    assert not is_better(10.4, 10, "maximize", min_effect=0.5)
    assert not is_better(10.5, 10, "maximize", min_effect=0.5)
    assert is_better(10.6, 10, "maximize", min_effect=0.5)
    assert is_better(9.4, 10, "minimize", min_effect=0.5)
    with pytest.raises(ValueError):
        is_better(1, 2, "sideways")


def test_is_closer_handles_equality_targets():
    zero = parse_target("= 0")
    assert is_closer(2, 5, zero)
    assert is_closer(-1, 3, zero)
    assert not is_closer(3, -3, zero)
    assert is_closer(9, 10, parse_target("<= 5"))


# --- noise ---


def test_median():
    assert median([3, 1, 2]) == 2.0
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_rank_test_separates_clearly_different_samples():
    p = mann_whitney_u_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    # Normal approximation with continuity correction: z = 12 / sqrt(22.9167).
    assert p == pytest.approx(math.erfc(12 / math.sqrt(25 * 11 / 12) / math.sqrt(2)))
    assert p < 0.05
    assert mann_whitney_u_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == pytest.approx(p)


def test_rank_test_finds_no_difference_in_overlapping_or_identical_samples():
    assert mann_whitney_u_p([1, 3, 5, 7, 9], [2, 4, 6, 8, 10]) > 0.5
    assert mann_whitney_u_p([5, 5, 5], [5, 5, 5]) == 1.0
    assert mann_whitney_u_p([1.0], [2.0]) == 1.0


def test_rank_test_tie_correction():
    # Ties shrink the variance, so the same separation is more significant than without them.
    with_ties = mann_whitney_u_p([1, 1, 1, 2, 2], [3, 3, 4, 4, 4])
    without = mann_whitney_u_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert with_ties < without
    # Hand-computed: tie groups of 3, 2, 2, 3 -> variance 25/12 * (11 - 60/90).
    variance = 25 / 12 * (11 - 60 / 90)
    assert with_ties == pytest.approx(math.erfc(12 / math.sqrt(variance) / math.sqrt(2)))


def test_rank_test_needs_samples():
    with pytest.raises(ValueError):
        mann_whitney_u_p([], [1.0])


def test_a_measurement_failing_on_a_src_layout_gets_the_hint_setup_gives(tmp_path):
    import sys

    (tmp_path / "src" / "calc").mkdir(parents=True)
    (tmp_path / "src" / "calc" / "__init__.py").write_text("X = 1\n")
    command = f"{sys.executable} -c 'import calc; print(calc.X)'"
    with pytest.raises(MetricError) as caught:
        measure(command, tmp_path)
    first = str(caught.value).splitlines()[0]
    assert "failed with exit code 1; likely fix: module 'calc' is under src/" in first
    assert "PYTHONPATH=src" in first


def test_a_plain_key_value_line_where_json_was_expected_names_both_ways_out():
    with pytest.raises(MetricError) as err:
        parse_value("warming up\nms: 945.93\n", "json_stdout", "ms")
    message = str(err.value)
    assert message.startswith("no JSON object in stdout; it printed 'ms: 945.93'")
    assert 'print {"ms": 945.93} instead' in message
    # The format it proposes reads that very output.
    proposed = message.split("format to '", 1)[1].split("'", 1)[0]
    assert parse_value("warming up\nms: 945.93\n", proposed)[0] == 945.93


def test_no_hint_when_the_output_has_no_line_of_the_key():
    with pytest.raises(MetricError, match=r"^no JSON object in stdout$"):
        parse_value("elapsed: 3\n", "json_stdout", "ms")


def session_worktree(tmp_path):
    from conftest import make_repo

    from autoresearch.safety import git as ar_git

    repo = make_repo(tmp_path / "repo", {"lint.py": "x = 1\n"})
    ar_git.add_detached_worktree(repo, tmp_path / "wt", "HEAD")
    return tmp_path / "wt"


def test_a_measurement_that_rewrites_a_tracked_file_is_refused_with_the_file_named(tmp_path):
    # humanize sets ruff's `fix = true`: a goal of `ruff check … | count` fixed in place what
    # it could and counted the rest, so the goal read 3 before and after three kept fixes.
    import sys

    worktree = session_worktree(tmp_path)
    command = f"{sys.executable} -c \"open('lint.py', 'w').write('x = 2\\n'); print(1)\""
    with pytest.raises(MetricError) as caught:
        measure(command, worktree)
    first = str(caught.value).splitlines()[0]
    assert "changed a file the repository tracks (lint.py)" in first
    assert "`--no-fix`" in first


def test_a_measurement_may_write_files_the_repository_does_not_track(tmp_path):
    import sys

    worktree = session_worktree(tmp_path)
    command = f"{sys.executable} -c \"open('out.txt', 'w').write('x'); print(7)\""
    assert measure(command, worktree, repeats=2).samples == [7.0, 7.0]
