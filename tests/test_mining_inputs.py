"""Mining inputs: instance ids taken from content and file names, and every bad input -> one line, exit 2."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from codegrep.cli import main
from codegrep.data.shipped import trajectory_dirs
from codegrep.data.tasks import Task
from codegrep.mining.runner import MineOptions, NothingParsed, mine_files

PATCH = ("diff --git a/django/core/validators.py b/django/core/validators.py\n"
         "--- a/django/core/validators.py\n+++ b/django/core/validators.py\n")
ISSUE = "UsernameValidator allows trailing newline in usernames because the regex uses $ instead of \\Z anchors"


def _stream(workspace: str, first_message: str = "Fix the validators") -> list[dict]:
    """An OpenHands event stream (the documented schema) that names no instance id in a field."""
    return [{"id": 0, "source": "user", "action": "message", "args": {"content": first_message}},
            {"id": 1, "source": "agent", "action": "run",
             "args": {"command": f"grep -rn UsernameValidator {workspace}/django"}},
            {"id": 2, "source": "agent", "action": "read", "args": {"path": f"{workspace}/django/core/validators.py"}},
            {"id": 3, "source": "agent", "action": "edit",
             "args": {"path": f"{workspace}/django/core/validators.py", "command": "str_replace"}}]


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_openhands_stream_id_from_file_name_without_suffixes(tmp_path, capsys):
    d = tmp_path / "runs"
    d.mkdir()
    (d / "django__django-11099.events.json").write_text(json.dumps(_stream("/workspace/django__django__3.0")))
    out = tmp_path / "r.jsonl"
    rc, stdout, _ = _run(capsys, "mine", str(d), "--out", str(out), "--workers", "1")
    assert rc == 0
    [rec] = _records(out)
    assert rec["instance_id"] == "django__django-11099" and rec["repo"] == "django/django"
    assert rec["source_format"] == "openhands" and rec["viewed_files"] == ["django/core/validators.py"]


def test_harness_report_beside_an_events_file_is_read(tmp_path, capsys):
    """``<id>.events.json`` with the harness's ``<id>.report.json`` beside it: the report was looked up as
    ``<id>.events.report.json`` only, so the run's verdict was unknown and its record not useful."""
    d = tmp_path / "runs"
    d.mkdir()
    (d / "django__django-11099.events.json").write_text(json.dumps(_stream("/workspace/django__django__3.0")))
    (d / "django__django-11099.report.json").write_text(json.dumps({"django__django-11099": {"resolved": True}}))
    out = tmp_path / "r.jsonl"
    rc, stdout, _ = _run(capsys, "mine", str(d), "--out", str(out), "--workers", "1")
    assert rc == 0
    [rec] = _records(out)
    assert rec["resolved"] is True and rec["useful"] is True


def test_a_report_written_beside_a_run_after_a_first_look_is_seen(tmp_path):
    """report_beside was cached per process by the trajectory's path: a report the harness wrote after a first look
    (a notebook kernel reading the runs before and after evaluating them) stayed unknown, a rewritten one stale."""
    from codegrep.mining.inputs import report_beside

    traj = tmp_path / "a__b-1.traj.json"
    traj.write_text("{}")
    assert report_beside(str(traj)) is None
    rep = tmp_path / "a__b-1.report.json"
    rep.write_text(json.dumps({"a__b-1": {"resolved": False}}))
    assert report_beside(str(traj)) == {"a__b-1": {"resolved": False}}
    rep.write_text(json.dumps({"a__b-1": {"resolved": True}}) + "\n")
    assert report_beside(str(traj)) == {"a__b-1": {"resolved": True}}


def test_openhands_stream_id_from_workspace_path_and_first_message(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    (d / "run-0001.events.json").write_text(json.dumps(_stream("/workspace/django__django-11099")))
    (d / "run-0002.events.json.gz").write_bytes(gzip.compress(json.dumps(_stream(
        "/workspace/django__django__3.0", "Please solve astropy__astropy-12907 in the repository")).encode()))
    mine_files([str(d)], tmp_path / "r.jsonl", None, progress=False)
    ids = sorted(r["instance_id"] for r in _records(tmp_path / "r.jsonl"))
    assert ids == ["astropy__astropy-12907", "django__django-11099"]


def test_openhands_stream_id_from_issue_text_when_tasks_are_given(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    prompt = f"<uploaded_files>/workspace/django__django__3.0</uploaded_files>\nI've uploaded a repository.\n{ISSUE}"
    (d / "episode.events.json").write_text(json.dumps(_stream("/workspace/django__django__3.0", prompt)))
    task = Task("django__django-11099", "django/django", "abc", ISSUE, patch=PATCH)
    stats = mine_files([str(d)], tmp_path / "r.jsonl", None, MineOptions(tasks={task.instance_id: task}),
                       progress=False)
    [rec] = _records(tmp_path / "r.jsonl")
    assert rec["instance_id"] == "django__django-11099" and rec["matched"] and stats["matched"] == 1
    assert rec["gold_files"] == ["django/core/validators.py"]


def test_row_without_any_id_is_a_listed_failure_not_a_blank_record(tmp_path, capsys):
    real = next(trajectory_dirs()[0].glob("*.traj.json.gz"))
    good = json.loads(gzip.decompress(real.read_bytes()))
    blank = dict(good, instance_id="")
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(good) + "\n" + json.dumps(blank) + "\n")
    out = tmp_path / "r.jsonl"
    rc, stdout, _ = _run(capsys, "mine", str(data), "--out", str(out), "--workers", "1")
    stats = json.loads(stdout.strip().splitlines()[-1])
    assert rc == 0 and stats["parsed"] == 1 and stats["failed"] == {"no-instance-id": 1}
    assert any(f.startswith(f"{data}:2: no-instance-id") for f in stats["failures"])
    assert [r["instance_id"] for r in _records(out)] == [good["instance_id"]]


def _one_line_error(err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("codegrep mine: error:"), err
    for n in needles:
        assert n in lines[0], (n, err)


def test_nothing_parsed_exits_2_naming_the_files(tmp_path, capsys):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "a.traj.json").write_text('{"messages": [')
    (d / "b.json").write_text(json.dumps({"hello": "world"}))
    rc, _, err = _run(capsys, "mine", str(d), "--out", str(tmp_path / "r.jsonl"), "--workers", "1")
    assert rc == 2
    _one_line_error(err, "0 of 2 trajectories parsed", "a.traj.json", "b.json")


def test_a_failed_run_leaves_no_output_directory_behind(tmp_path, capsys):
    """``--out newdir/x.jsonl`` made ``newdir/`` (and the demonstrations' sibling) before mining, and a run where
    nothing parsed left it there: nothing is left that was not there."""
    d = tmp_path / "bad"
    d.mkdir()
    (d / "a.traj.json").write_text('{"messages": [')
    rc, _, err = _run(capsys, "mine", str(d), "--out", str(tmp_path / "newdir" / "sub" / "r.jsonl"), "--workers", "1")
    assert rc == 2
    _one_line_error(err, "0 of 1 trajectories parsed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad"]


def test_empty_directory_exits_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    rc, _, err = _run(capsys, "mine", str(tmp_path / "empty"), "--out", str(tmp_path / "r.jsonl"))
    assert rc == 2
    _one_line_error(err, "0 of 0", "no trajectory files found")


@pytest.mark.parametrize("argv, needles", [
    (["--format", "nosuchformat"], ["--format 'nosuchformat'", "mini-swe-agent"]),
    (["--repos", "nosuchdir"], ["--repos nosuchdir", "not a directory"]),
    (["--workers", "0"], ["--workers 0"]),
])
def test_bad_arguments_exit_2_naming_the_argument(tmp_path, capsys, argv, needles):
    src = trajectory_dirs()[0]
    rc, _, err = _run(capsys, "mine", str(src), "--out", str(tmp_path / "r.jsonl"), *argv)
    assert rc == 2
    _one_line_error(err, *needles)
    assert not (tmp_path / "r.jsonl").exists()  # refused before any work


def test_output_path_that_is_a_directory(tmp_path, capsys):
    rc, _, err = _run(capsys, "mine", str(trajectory_dirs()[0]), "--out", str(tmp_path))
    assert rc == 2
    _one_line_error(err, f"--out {tmp_path}", "is a directory")


def test_half_trajectory_is_named_and_the_rest_is_mined(tmp_path):
    """A cut .gz and a cut .json are listed with their file names; the whole runs beside them are mined."""
    d = tmp_path / "runs"
    d.mkdir()
    reals = sorted(trajectory_dirs()[0].glob("*.traj.json.gz"))[:2]
    for p in reals:
        (d / p.name).write_bytes(p.read_bytes())
    data = reals[0].read_bytes()
    (d / "cut__gz-1.traj.json.gz").write_bytes(data[: len(data) // 2])
    (d / "cut__json-1.traj.json").write_bytes(gzip.decompress(data)[:5000])
    stats = mine_files([str(d)], tmp_path / "r.jsonl", None, progress=False)
    assert stats["parsed"] == 2 and stats["failed"] == {"invalid-json": 2}
    assert {f.split(": ")[0].rsplit("/", 1)[1] for f in stats["failures"]} == {
        "cut__gz-1.traj.json.gz", "cut__json-1.traj.json"}
    (d / reals[0].name).unlink()
    (d / reals[1].name).unlink()
    with pytest.raises(NothingParsed, match="cut__gz-1.traj.json.gz"):
        mine_files([str(d)], tmp_path / "r2.jsonl", None, progress=False)


def test_mine_profile_with_only_a_half_trajectory_names_the_file(tmp_path):
    """Notebook 01's stage: an error naming the file, not a KeyError deep in the tables."""
    from codegrep.artifacts import Outputs
    from codegrep.config import load_profile
    from codegrep.mining.catm import mine_profile

    d = tmp_path / "runs"
    d.mkdir()
    data = next(trajectory_dirs()[0].glob("*.traj.json.gz")).read_bytes()
    (d / "half__run-1.traj.json.gz").write_bytes(data[: len(data) // 3])
    cfg = load_profile("ci")
    cfg["mining"]["inputs"] = [str(d)]
    with pytest.raises(NothingParsed, match="half__run-1.traj.json.gz"):
        mine_profile(cfg, Outputs(tmp_path / "a", tmp_path / "f"))


def test_mine_profile_takes_one_input_given_as_a_string(tmp_path, monkeypatch):
    """``--set mining.inputs=runs`` gives a string: it was iterated per character ('r', 'u', ...: 'not found'; an
    absolute path began with '/', the whole file system)."""
    from codegrep.artifacts import Outputs
    from codegrep.config import load_profile
    from codegrep.mining.catm import mine_profile

    (tmp_path / "runs").mkdir()
    src = next(trajectory_dirs()[0].glob("*.traj.json.gz"))
    (tmp_path / "runs" / src.name).write_bytes(src.read_bytes())
    monkeypatch.chdir(tmp_path)
    cfg = load_profile("ci")
    cfg["mining"]["inputs"] = "runs"
    result = mine_profile(cfg, Outputs(tmp_path / "a", tmp_path / "f"))
    assert result.stats["files"] == 1 and result.stats["parsed"] == 1


def test_line_numbers_survive_byte_spans(tmp_path, monkeypatch):
    """A .jsonl is split into byte spans read by different workers; failures still name the file's own line."""
    from codegrep.mining import inputs

    monkeypatch.setattr(inputs, "SPAN_BYTES", 64)  # many spans, lines crossing span ends
    rows = [json.dumps({"messages": [], "trajectory_format": "mini-swe-agent-1", "instance_id": f"a__b-{i}",
                        "info": {"submission": ""}}) for i in range(12)]
    rows[4], rows[9] = '{"cut": ', "[1, 2"
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(rows[:7]) + "\n\n" + "\n".join(rows[7:]) + "\n")  # a blank line 8 shifts the rest
    for workers in (1, 2):
        stats = mine_files([str(data)], tmp_path / "r.jsonl", None, workers=workers, progress=False)
        assert stats["parsed"] == 10 and stats["failed"] == {"invalid-json": 2}
        assert sorted(f.split(": ")[0] for f in stats["failures"]) == [f"{data}:11", f"{data}:5"]
        sources = [r["source"] for r in _records(tmp_path / "r.jsonl")]
        assert sources == [f"{data}:{n}" for n in (1, 2, 3, 4, 6, 7, 9, 10, 12, 13)]


def test_mining_an_openhands_output_reads_the_verdicts_eval_infer_left_beside_it(tmp_path, capsys):
    """OpenHands' eval_infer leaves output.jsonl without verdicts and writes them to output.swebench_eval.jsonl:
    mining read none of them (every record's verdict unknown, --resolved-only wrote nothing) and mined the verdicts
    file's rows as runs of no known format. They are read through the one report reader, as downstream reads them."""
    run = tmp_path / "oh"
    run.mkdir()
    rows = [{"instance_id": iid, "instance": {"problem_statement": ISSUE}, "test_result": {"git_patch": PATCH},
             "history": _stream("/workspace/django__django__3.0")} for iid in ("django__django-11099",
                                                                            "django__django-11100")]
    (run / "output.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    verdicts = [{"instance_id": "django__django-11099", "test_result": {"git_patch": PATCH, "report": {
        "resolved": True, "empty_generation": False, "failed_apply_patch": False, "error_eval": False}}},
                {"instance_id": "django__django-11100", "test_result": {"git_patch": PATCH, "report": {
                    "resolved": False, "empty_generation": False, "failed_apply_patch": False, "error_eval": False}}}]
    (run / "output.swebench_eval.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    out = tmp_path / "r.jsonl"
    rc, stdout, err = _run(capsys, "mine", str(run), "--out", str(out), "--workers", "1", "--resolved-only")
    assert rc == 0, err
    stats = json.loads(stdout.strip().splitlines()[-1])
    assert stats["read"] == 2 and stats["parsed"] == 2 and stats["resolved"] == 1
    assert [(r["instance_id"], r["resolved"]) for r in _records(out)] == [("django__django-11099", True)]
    (run / "output.swebench_eval.jsonl").write_text('{"instance_id": "django__django-11099", "test_result": 1}\n')
    rc, stdout, err = _run(capsys, "mine", str(run), "--out", str(out), "--workers", "1")
    assert rc == 2 and "output.swebench_eval.jsonl" in err and "Traceback" not in err
