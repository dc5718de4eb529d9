"""``codegrep downstream --from-output`` / ``--compare`` on recorded runs of the shapes real agents write:
mini-swe-agent trajectories of other versions and layouts (gzipped, batch mode's ``<id>/<id>.traj.json``, a single
file, no stored id), SWE-bench harness reports of both shapes, and OpenHands ``output.jsonl`` rows of other
versions. Each test runs the real command line in process on the real embedded trajectories (or rows in
OpenHands' documented event schema) and checks the numbers it prints and writes."""
from __future__ import annotations

import gzip
import json
from pathlib import Path


from codegrep import cli
from codegrep.mining.inputs import embedded_dir

ROOT = Path(__file__).resolve().parents[1]

EMBEDDED = embedded_dir() / "mini-swe-agent"
IID = "django__django-11433"


def _traj(iid: str = IID) -> dict:
    with gzip.open(EMBEDDED / f"{iid}.traj.json.gz", "rt") as fh:
        return json.load(fh)


def _report(iid: str = IID) -> dict:
    with gzip.open(EMBEDDED / f"{iid}.report.json.gz", "rt") as fh:
        return json.load(fh)


def _write(path: Path, value, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = value if isinstance(value, str) else json.dumps(value)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def _downstream(tmp_path: Path, capsys, src: Path, *extra: str, agent: str = "mini-swe-agent"):
    """(summary, rows) of ``codegrep downstream --from-output src``; fails on a non-zero exit."""
    out = tmp_path / "out.jsonl"
    rc = cli.main(["downstream", "--tasks", "none", "--candidates", "none", "--agent", agent, "--from-output",
                   str(src), "--out", str(out), *extra])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return _strict_json(captured.out.strip().splitlines()[-1]), rows


def _strict_json(text: str):
    """What the command printed, read as strict JSON: ``NaN``/``Infinity`` are not JSON (jq and JavaScript refuse)."""
    def refuse(constant: str):
        raise AssertionError(f"not strict JSON: {constant} in {text[:200]}")
    return json.loads(text, parse_constant=refuse)


def _error(capsys, argv: list[str]) -> str:
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def test_from_output_reads_one_trajectory_file_as_mini_swe_agent(tmp_path, capsys):
    """A single ``.traj.json`` was read as an OpenHands output.jsonl: agent 'openhands', 0 rounds, 0 tokens."""
    traj = _traj()
    path = _write(tmp_path / f"{IID}.traj.json", traj)
    summary, rows = _downstream(tmp_path, capsys, path)
    assert [r["agent"] for r in rows] == ["mini-swe-agent"]
    assert rows[0]["rounds"] == traj["info"]["model_stats"]["api_calls"] == summary["mean_rounds"] > 0
    assert rows[0]["prompt_tokens"] > 0


def test_from_output_reads_gzipped_nested_and_unnamed_trajectories(tmp_path, capsys):
    """Batch mode's ``<id>/<id>.traj.json``, a ``.traj.json.gz`` and a file whose id is only in its name (the
    single-run ``mini`` command stores none) are all runs; the .gz was not found and the unnamed one refused."""
    _write(tmp_path / "runs" / IID / f"{IID}.traj.json", _traj())
    _write(tmp_path / "runs" / "django__django-13023.traj.json.gz", _traj("django__django-13023"), gz=True)
    unnamed = _traj("psf__requests-5414")
    unnamed.pop("instance_id")
    _write(tmp_path / "runs" / "psf__requests-5414.traj.json", unnamed)
    summary, rows = _downstream(tmp_path, capsys, tmp_path / "runs")
    assert sorted(r["instance_id"] for r in rows) == ["django__django-11433", "django__django-13023",
                                                      "psf__requests-5414"]
    assert summary["n"] == 3 and all(r["rounds"] > 0 and r["prompt_tokens"] > 0 for r in rows)


def test_from_output_refuses_two_trajectories_of_one_instance(tmp_path, capsys):
    """Two runs' directories under one --from-output: which run counts is not knowable; one line names both."""
    for run in ("run1", "run2"):
        _write(tmp_path / "runs" / run / f"{IID}.traj.json", _traj())
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--agent", "mini-swe-agent",
                           "--from-output", str(tmp_path / "runs"), "--out", str(tmp_path / "o.jsonl")])
    assert "run1" in last and "run2" in last and IID in last


def _oh_row(iid: str, prompt: int, history: list | None = None, **extra) -> dict:
    history = history if history is not None else [
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"},
         "tool_call_metadata": {"model_response": {"id": "r1"}}},
        {"id": 2, "source": "agent", "observation": "run", "content": "a.py", "extras": {}}]
    return {"instance_id": iid, "history": history, "test_result": {"git_patch": "diff"},
            "metrics": {"accumulated_token_usage": {"prompt_tokens": prompt, "completion_tokens": 10}}, **extra}


def test_openhands_instance_with_several_rows_counts_once_by_its_last_row(tmp_path, capsys):
    """A resumed OpenHands run appends the retry of an instance: it counted twice (n=2, the mean of both)."""
    out = _write(tmp_path / "oh" / "output.jsonl", "".join(json.dumps(r) + "\n" for r in (
        _oh_row("a__b-1", 100, error="agent stuck"), _oh_row("a__b-2", 500), _oh_row("a__b-1", 300))))
    summary, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert summary["n"] == 2 and sorted((r["instance_id"], r["prompt_tokens"]) for r in rows) == [
        ("a__b-1", 300), ("a__b-2", 500)]
    summary, rows = _downstream(tmp_path, capsys, tmp_path / "oh", agent="openhands")  # the run's directory
    assert summary["n"] == 2


def _runs(tmp_path: Path, iids: list[str], beside: bool = False) -> Path:
    for iid in iids:
        _write(tmp_path / "runs" / f"{iid}.traj.json", _traj(iid))
        if beside:
            _write(tmp_path / "runs" / f"{iid}.report.json", _report(iid))
    return tmp_path / "runs"


RESOLVED, UNRESOLVED, OTHER = "django__django-13023", "django__django-15280", "psf__requests-5414"


def test_from_output_reads_the_report_beside_each_trajectory(tmp_path, capsys):
    """The layout codegrep ships (``<id>.traj.json`` + ``<id>.report.json``) had no verdicts without --report."""
    assert _report(RESOLVED)["resolved"] and not _report(UNRESOLVED)["resolved"]
    summary, rows = _downstream(tmp_path, capsys, _runs(tmp_path, [RESOLVED, UNRESOLVED], beside=True))
    assert {r["instance_id"]: r["resolved"] for r in rows} == {RESOLVED: True, UNRESOLVED: False}
    assert summary["n_judged"] == 2 and summary["resolve_rate"] == 0.5


def test_one_instance_report_record_is_refused_as_the_report_of_a_run(tmp_path, capsys):
    """The inner record of one instance names none: it became every run's verdict (resolve rate 1.0 for all)."""
    src = _runs(tmp_path, [RESOLVED, UNRESOLVED])
    rep = _write(tmp_path / "one.report.json", _report(RESOLVED))
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--agent", "mini-swe-agent",
                           "--from-output", str(src), "--report", str(rep), "--out", str(tmp_path / "o.jsonl")])
    assert "one.report.json" in last and "instance id" in last


def test_harness_reports_of_every_shape_and_an_instance_missing_from_them(tmp_path, capsys):
    """Per-instance report.json files in the harness's log layout (a directory), the run report, and the
    experiments repository's results.json give the same verdicts; an instance the report lacks is unknown."""
    src = _runs(tmp_path, [RESOLVED, UNRESOLVED, OTHER])
    logs = tmp_path / "logs" / "run_evaluation" / "r1" / "model"
    for iid in (RESOLVED, UNRESOLVED):
        _write(logs / iid / "report.json", {iid: _report(iid)})
    run_report = _write(tmp_path / "model.r1.json", {"resolved_ids": [RESOLVED], "unresolved_ids": [UNRESOLVED],
                                                     "error_ids": [], "submitted_ids": [RESOLVED, UNRESOLVED]})
    for report in (tmp_path / "logs", logs / RESOLVED / "report.json", run_report):
        summary, rows = _downstream(tmp_path, capsys, src, "--report", str(report))
        verdicts = {r["instance_id"]: r["resolved"] for r in rows}
        assert verdicts[RESOLVED] is True and verdicts[OTHER] is None
        assert verdicts[UNRESOLVED] is (None if report.name == "report.json" else False)
    results = _write(tmp_path / "results.json", {"resolved": [RESOLVED], "no_generation": []})
    summary, rows = _downstream(tmp_path, capsys, src, "--report", str(results))
    assert [r["resolved"] for r in rows] == [True, False, False] and summary["n_judged"] == 3
    not_a_report = _write(tmp_path / "preds.json", {RESOLVED: {"model_patch": "diff"}})
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--agent", "mini-swe-agent",
                           "--from-output", str(src), "--report", str(not_a_report), "--out", str(tmp_path / "o")])
    assert "preds.json" in last and "not a swebench harness report" in last


def test_an_empty_per_instance_report_is_the_harness_error_of_that_instance(tmp_path, capsys):
    """The harness's make_run_report counts an empty <id>/report.json as an error (evaluated, not resolved); a
    directory holding one stopped --report DIR with 'invalid JSON' instead."""
    src = _runs(tmp_path, [RESOLVED, UNRESOLVED, OTHER])
    logs = tmp_path / "logs" / "run_evaluation" / "r1" / "model"
    _write(logs / RESOLVED / "report.json", {RESOLVED: _report(RESOLVED)})
    _write(logs / UNRESOLVED / "report.json", " \n")
    summary, rows = _downstream(tmp_path, capsys, src, "--report", str(tmp_path / "logs"))
    assert {r["instance_id"]: r["resolved"] for r in rows} == {RESOLVED: True, UNRESOLVED: False, OTHER: None}
    assert summary["n_judged"] == 2 and summary["resolve_rate"] == 0.5


def test_a_broken_per_instance_report_is_the_harness_error_of_that_instance(tmp_path, capsys):
    """make_run_report counts an <id>/report.json that is not JSON, or lacks its own id's record, as that instance's
    error (unresolved): the first stopped --report DIR, the second was merged as given (its other id's verdict
    taken, its own unknown); only the record of <id> is read from <id>/report.json, as the harness reads it."""
    src = _runs(tmp_path, [RESOLVED, UNRESOLVED, OTHER])
    logs = tmp_path / "logs" / "run_evaluation" / "r1" / "model"
    _write(logs / RESOLVED / "report.json", {RESOLVED: _report(RESOLVED)})
    _write(logs / UNRESOLVED / "report.json", '{"django__django-15280": {"resolved": tr')
    _write(logs / OTHER / "report.json", {RESOLVED: {"resolved": False}})
    summary, rows = _downstream(tmp_path, capsys, src, "--report", str(tmp_path / "logs"))
    assert {r["instance_id"]: r["resolved"] for r in rows} == {RESOLVED: True, UNRESOLVED: False, OTHER: False}
    assert summary["n_judged"] == 3
    _write(logs / OTHER / "report.json", {"resolved_ids": [OTHER]})  # a run report among them: which to believe?
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--agent", "mini-swe-agent",
                           "--from-output", str(src), "--report", str(tmp_path / "logs"), "--out", str(tmp_path / "o")])
    assert f"{OTHER}/report.json" in last and "run report" in last


def _event(i: int, source: str, action: str | None = None, response: str | None = None, **args) -> dict:
    ev = {"id": i, "source": source, "timestamp": f"2024-06-01T10:00:{i:02d}"}
    if action:
        ev.update(action=action, args=args)
    else:
        ev.update(observation="run", content="out", extras={})
    if response:
        ev["tool_call_metadata"] = {"function_name": action, "model_response": {"id": response}}
    return ev


def test_openhands_rounds_of_paired_history_and_of_a_condensed_run(tmp_path, capsys):
    """Older OpenHands rows store ``history`` as [action, observation] pairs: they had 0 rounds and 0 seconds.
    A condenser's ``condensation`` action is no response of the agent's LLM: it counted as a round."""
    pairs = [[_event(0, "user", "message", content="Fix the bug"), {}],
             [_event(1, "agent", "run", command="cat a.py"), _event(2, "agent")],
             [_event(3, "agent", "read", path="/workspace/x/b.py"), _event(4, "agent")],
             [_event(5, "agent", "finish"), {}]]
    flat = [_event(1, "agent", "run", "r1", command="ls"), _event(2, "agent"),
            _event(3, "agent", "read", "r1", path="/workspace/x/b.py"), _event(4, "agent"),
            _event(5, "agent", "condensation", forgotten_event_ids=[1, 2]),
            _event(6, "agent", "run", "r2", command="pytest"), _event(7, "agent")]
    out = _write(tmp_path / "output.jsonl", json.dumps(_oh_row("a__b-1", 10, pairs)) + "\n"
                 + json.dumps(_oh_row("a__b-2", 10, flat)) + "\n")
    _, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert [(r["rounds"], r["seconds"]) for r in rows] == [(3, 5.0), (2, 6.0)]
    assert rows[0]["extra"]["viewed_files"] == ["a.py", "b.py"]


def test_viewed_files_of_a_run_name_repository_files_only(tmp_path, capsys):
    """A run's viewed_files (the hint experiment's opened_gold reads them) listed 'pkg/*.py' and '/tmp/r.py' as
    viewed files; as in the supervision record, a wildcard or a path outside the repository names none."""
    history = [_event(1, "agent", "run", "r1", command="cat pkg/*.py; cat /tmp/r.py; cat pkg/a.py"), _event(2, "agent")]
    out = _write(tmp_path / "output.jsonl", json.dumps(_oh_row("a__b-1", 10, history)) + "\n")
    _, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert rows[0]["extra"]["viewed_files"] == ["pkg/a.py"]


def test_openhands_rounds_count_only_llm_responses(tmp_path, capsys):
    """Agent-sourced actions of OpenHands' ActionType that no LLM response produces (the controller's
    change_agent_state, null, loop_recovery) counted as rounds; an answer with no tool call (a message without
    tool_call_metadata) and one response's several tool calls are one round each, a think tool call is a round."""
    history = [_event(0, "agent", "system", content="You are..."), _event(1, "user", "message", content="Fix"),
               _event(2, "agent", "change_agent_state", agent_state="running"),
               _event(3, "agent", "run", "r1", command="ls"), _event(4, "agent", "read", "r1", path="/w/a.py"),
               _event(5, "agent", "think", "r2", thought="hm"), _event(6, "agent", "null"),
               _event(7, "agent", "loop_recovery"), _event(8, "agent", "message", content="Done?"),
               _event(9, "agent", "change_agent_state", agent_state="awaiting_user_input")]
    out = _write(tmp_path / "output.jsonl", json.dumps(_oh_row("a__b-1", 10, history)) + "\n")
    summary, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert rows[0]["rounds"] == 3 == summary["mean_rounds"]


def test_tokens_a_run_did_not_record_are_unknown_not_zero(tmp_path, capsys):
    """A mini-swe-agent file of a version that kept only ``model_stats`` (api_calls, instance_cost) and an
    OpenHands row with only ``accumulated_cost`` recorded no token usage: they entered the means as 0 tokens."""
    old = _traj(RESOLVED)
    for m in old["messages"]:
        m.pop("extra", None)
    old["info"]["model_stats"] = {"api_calls": 7, "instance_cost": 0.3}
    _write(tmp_path / "runs" / f"{RESOLVED}.traj.json", old)
    _write(tmp_path / "runs" / f"{UNRESOLVED}.traj.json", _traj(UNRESOLVED))
    summary, rows = _downstream(tmp_path, capsys, tmp_path / "runs")
    by_id = {r["instance_id"]: r for r in rows}
    assert by_id[RESOLVED]["rounds"] == 7 and by_id[RESOLVED]["tokens"] is None
    assert by_id[RESOLVED]["prompt_tokens"] is None and by_id[UNRESOLVED]["tokens"] > 0
    assert summary["n_tokens"] == 1 and summary["mean_tokens"] == by_id[UNRESOLVED]["tokens"]
    row = dict(_oh_row("a__b-1", 0), metrics={"accumulated_cost": 0.5, "costs": [{"cost": 0.5}]})
    out = _write(tmp_path / "output.jsonl", json.dumps(row) + "\n")
    summary, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert rows[0]["tokens"] is None and summary["n_tokens"] == 0 and summary["mean_tokens"] != 0


def test_hint_summary_leaves_runs_without_token_usage_out_of_the_token_numbers():
    from codegrep.downstream.hints import summarize_hint_experiment

    rows = [{"instance_id": i, "arm": a, "precision": p, "run": 0, "status": "ok", "resolved": None, "rounds": r,
             "prompt_tokens": t, "completion_tokens": 0 if t is not None else None, "tokens": t}
            for i, tok in (("a", (100, 50)), ("b", (None, None)))
            for (a, p, r), t in zip((("none", None, 10), ("p1.00", 1.0, 6)), tok)]
    s = summarize_hint_experiment(rows, n_boot=20)
    assert list(s["by_precision"]["mean_tokens"]) == [100.0, 50.0]
    assert s["paired"]["tokens_diff"][0] == -50.0 and s["crossing"]["n"] == 1


def test_compare_pairs_the_shared_instances_once_and_says_how_many_were_left_out(tmp_path, capsys):
    """``--compare`` on partly overlapping runs says how many instances each side alone had (it said nothing: the
    pairs silently covered the intersection); an instance listed twice (two runs appended to one file) counts once,
    by its last row (on the hinted side it made two pairs of one instance, its discordance counted twice)."""
    from codegrep.downstream.agent_runs import paired_compare
    from codegrep.downstream.agents import DownstreamResult

    res = lambda iid, ok: DownstreamResult(iid, "mini-swe-agent", ok, 30, 1000, 100)  # noqa: E731
    src = _runs(tmp_path, [RESOLVED, UNRESOLVED], beside=True)  # hinted: 13023 resolved, 15280 not
    base = _write(tmp_path / "base.jsonl", "".join(json.dumps(res(i, True).to_row()) + "\n"
                                                   for i in (RESOLVED, UNRESOLVED, OTHER, UNRESOLVED)))
    summary, _ = _downstream(tmp_path, capsys, src, "--compare", str(base))
    paired = summary["paired"]
    assert (paired["n_pairs"], paired["n_only_base"], paired["n_only_hint"]) == (2, 1, 0)
    assert paired["mcnemar"] == {"b_only": 1, "h_only": 0, "p_value": 1.0}
    assert (paired["resolve_base"], paired["resolve_hint"]) == (1.0, 0.5)
    paired = paired_compare([res("a", False), res("b", True)], [res("a", True), res("b", True), res("a", False)])
    assert paired["n_pairs"] == 2 and paired["mcnemar"]["h_only"] == 0 and paired["resolve_hint"] == 0.5


def test_openhands_rows_carrying_their_own_verdict(tmp_path, capsys):
    """OpenHands' eval_infer writes the harness verdict into ``test_result.report``: it was read only from a
    top-level ``report``, so such rows had no verdict without --report."""
    rows = [_oh_row("a__b-1", 10, test_result={"git_patch": "diff", "report": {"resolved": True, "empty_generation":
                                                                               False, "failed_apply_patch": False}}),
            _oh_row("a__b-2", 10, report={"resolved": False}), _oh_row("a__b-3", 10)]
    out = _write(tmp_path / "output.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    summary, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert [r["resolved"] for r in rows] == [True, False, None] and summary["n_judged"] == 2


def _eval_row(iid: str, **report) -> dict:
    """A row of OpenHands' output.swebench_eval.jsonl as eval_infer.py writes it (an EvalOutput, the verdict in
    test_result.report)."""
    flags = {"empty_generation": False, "resolved": False, "failed_apply_patch": False, "error_eval": False,
             "test_timeout": False, **report}
    return {"instance_id": iid, "test_result": {"git_patch": "diff", "report": flags}, "metadata": {}, "history": []}


def test_openhands_verdicts_eval_infer_writes_beside_the_output(tmp_path, capsys):
    """eval_infer.py writes its verdicts to output.swebench_eval.jsonl (eval_infer.sh: report.json and
    eval_outputs/<id>/report.json) and leaves output.jsonl without them: --from-output judged no instance."""
    ids = ("a__b-1", "a__b-2", "a__b-3", "a__b-4")
    run = tmp_path / "oh"
    out = _write(run / "output.jsonl", "".join(json.dumps(_oh_row(i, 10)) + "\n" for i in ids))
    evals = [_eval_row("a__b-1", resolved=True), _eval_row("a__b-2"), _eval_row("a__b-3", error_eval=True)]
    eval_file = _write(run / "output.swebench_eval.jsonl", "".join(json.dumps(r) + "\n" for r in evals))
    expected = {"a__b-1": True, "a__b-2": False, "a__b-3": None, "a__b-4": None}
    for src in (out, run):
        summary, rows = _downstream(tmp_path, capsys, src, agent="openhands")
        assert {r["instance_id"]: r["resolved"] for r in rows} == expected and summary["n_judged"] == 2
    moved = eval_file.rename(tmp_path / "verdicts.jsonl")  # given with --report
    summary, rows = _downstream(tmp_path, capsys, out, "--report", str(moved), agent="openhands")
    assert {r["instance_id"]: r["resolved"] for r in rows} == expected
    for iid, ok in (("a__b-1", True), ("a__b-2", False)):  # eval_infer.sh: the harness's per-instance reports
        _write(run / "eval_outputs" / iid / "report.json", {iid: {"patch_exists": True, "resolved": ok}})
    summary, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert {r["instance_id"]: r["resolved"] for r in rows} == {**expected, "a__b-3": None}
    _write(run / "report.json", {"resolved_ids": ["a__b-1"], "unresolved_ids": ["a__b-2"], "error_ids": ["a__b-3"]})
    summary, rows = _downstream(tmp_path, capsys, out, agent="openhands")  # its run report, beside
    assert [r["resolved"] for r in rows] == [True, False, False, None] and summary["n_judged"] == 3
    bad = _write(tmp_path / "bad.jsonl", json.dumps({"test_result": {"report": {"resolved": True}}}) + "\n")
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--agent", "openhands",
                           "--from-output", str(out), "--report", str(bad), "--out", str(tmp_path / "o")])
    assert "bad.jsonl:1" in last and "instance_id" in last


def test_an_openhands_report_with_error_eval_is_not_a_verdict(tmp_path, capsys):
    """eval_infer writes resolved False with error_eval True when the evaluation itself failed (its default, not
    a verdict): it counted as unresolved; test_timeout (the harness's error too) stays unresolved."""
    base = {"resolved": False, "empty_generation": False, "failed_apply_patch": False, "test_timeout": False}
    rows = [_oh_row("a__b-1", 10, test_result={"git_patch": "diff", "report": {**base, "error_eval": True}}),
            _oh_row("a__b-2", 10, report={**base, "error_eval": True}),
            _oh_row("a__b-3", 10, test_result={"git_patch": "diff", "report": {**base, "error_eval": False,
                                                                               "test_timeout": True}})]
    out = _write(tmp_path / "output.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    summary, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert [r["resolved"] for r in rows] == [None, None, False] and summary["n_judged"] == 1


def test_replay_skips_a_recorded_run_without_token_usage(tmp_path, capsys):
    """One old-version run (no per-call usage) in --set downstream.replay.trajectories=DIR stopped the whole replay
    ("no model call recorded token usage"); it is skipped and counted like a run without a verdict."""
    src = _runs(tmp_path, [RESOLVED, UNRESOLVED], beside=True)
    old = _traj(UNRESOLVED)
    for m in old["messages"]:
        m.pop("extra", None)
    _write(src / f"{UNRESOLVED}.traj.json", old)
    out = tmp_path / "replay.jsonl"
    rc = cli.main(["downstream", "--tasks", "mined", "--candidates", "none", "--agent", "replay", "--out", str(out),
                   "--set", f"downstream.replay.trajectories={src}", "--set", "downstream.replay.gold_tasks=verified"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert f"1 trajectories that recorded no token usage, or only on some calls: ['{UNRESOLVED}']" in captured.err
    assert [json.loads(line)["instance_id"] for line in out.read_text().splitlines()] == [RESOLVED]


def test_mining_and_downstream_read_every_report_shape_alike(tmp_path, capsys):
    """One reader of harness reports: mining's own copy said a run report that does not name the instance resolved
    it not (False, not unknown) and ignored experiments' results.json; downstream's ignored an inner record without
    ``patch_exists`` (an OpenHands ``test_result.report``) beside a trajectory."""
    from codegrep.mining.formats.minisweagent import parse

    traj = _traj(RESOLVED)
    shapes = [({"resolved_ids": [OTHER], "unresolved_ids": [], "error_ids": []}, None),
              ({"resolved": [RESOLVED], "no_generation": []}, True),
              ({"resolved": True, "failed_apply_patch": False, "error_eval": False}, True),
              ({RESOLVED: _report(RESOLVED)}, True)]
    for n, (report, expected) in enumerate(shapes):
        src = tmp_path / str(n)
        _write(src / f"{RESOLVED}.traj.json", traj)
        _write(src / f"{RESOLVED}.report.json", report)
        assert parse(traj, report=report).resolved is expected, report
        _, rows = _downstream(tmp_path, capsys, src)
        assert rows[0]["resolved"] is expected, report


def test_infrastructure_failures_are_reported_apart_and_left_out_of_resolve_rates(tmp_path, capsys):
    """The harness's run report (schema 2) names instances whose environment broke (``infra_failure_ids``, kept in
    its ``error_ids``): they counted as unresolved, lowering the resolve rate and making discordant pairs."""
    from codegrep.downstream.agents import DownstreamResult

    src = _runs(tmp_path, [RESOLVED, UNRESOLVED, OTHER])
    report = _write(tmp_path / "model.r1.json", {
        "schema_version": 2, "resolved_ids": [RESOLVED], "unresolved_ids": [UNRESOLVED], "error_ids": [OTHER],
        "empty_patch_ids": [], "infra_failure_ids": [OTHER], "ambiguous_failure_ids": [],
        "failure_reasons": {OTHER: "container_unavailable"}})
    base = _write(tmp_path / "base.jsonl", "".join(
        json.dumps(DownstreamResult(i, "mini-swe-agent", True, 30, 1000, 100).to_row()) + "\n"
        for i in (RESOLVED, UNRESOLVED, OTHER)))
    summary, rows = _downstream(tmp_path, capsys, src, "--report", str(report), "--compare", str(base))
    by_id = {r["instance_id"]: r for r in rows}
    assert by_id[OTHER]["resolved"] is None and by_id[OTHER]["infra_failure"] == "container_unavailable"
    assert (summary["n_judged"], summary["resolve_rate"]) == (2, 0.5)
    assert (summary["n_infra_failure"], summary["infra_failure_ids"]) == (1, [OTHER])
    assert "infrastructure failures" in summary["resolve_rate_over"] == summary["paired"]["resolve_rate_over"]
    paired = summary["paired"]
    assert (paired["n_pairs"], paired["n_judged"], paired["n_infra_failure"]) == (3, 2, 1)
    assert paired["mcnemar"]["b_only"] == 1 and paired["resolve_hint"] == 0.5
    # an OpenHands row's own verdict does not overrule the run report's infrastructure failure
    out = _write(tmp_path / "output.jsonl", json.dumps(_oh_row(OTHER, 10, report={"resolved": False})) + "\n")
    summary, rows = _downstream(tmp_path, capsys, out, "--report", str(report), agent="openhands")
    assert rows[0]["resolved"] is None and summary["n_judged"] == 0 and summary["n_infra_failure"] == 1


def _tasks_file(path: Path, iids: list[str]) -> Path:
    """A task JSONL of ``iids``: the shipped Verified rows where there is one, else a made-up row."""
    from codegrep.data.shipped import verified_rows_path

    with gzip.open(verified_rows_path(), "rt") as fh:
        rows = {r["instance_id"]: r for r in map(json.loads, fh)}
    made = lambda i: {"instance_id": i, "repo": "o/r", "base_commit": "c" * 40,  # noqa: E731
                      "problem_statement": "bug", "patch": "diff --git a/x.py b/x.py\n"}
    return _write(path, "".join(json.dumps(rows.get(i) or made(i)) + "\n" for i in iids))


def test_from_output_honours_tasks_limit_and_agent(tmp_path, capsys):
    """--from-output ignored --tasks, --limit and --agent (every recorded run was read, whatever was asked)."""
    src = _runs(tmp_path, [RESOLVED, UNRESOLVED, OTHER], beside=True)
    tasks = _tasks_file(tmp_path / "tasks.jsonl", [UNRESOLVED, "o__r-404", RESOLVED])
    out = tmp_path / "o.jsonl"
    rc = cli.main(["downstream", "--tasks", str(tasks), "--candidates", "none", "--from-output", str(src),
                   "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert [json.loads(line)["instance_id"] for line in out.read_text().splitlines()] == [UNRESOLVED, RESOLVED]
    assert (summary["n"], summary["n_skipped"], summary["skipped_ids"]) == (2, 1, ["o__r-404"])
    assert "1 selected task(s) have no recorded run" in captured.err
    summary, rows = _downstream(tmp_path, capsys, src, "--limit", "2")
    assert summary["n"] == len(rows) == 2 and summary["n_skipped"] == 0
    for argv, words in ((["--agent", "openhands"], "holds mini-swe-agent runs"),
                        (["--agent", "replay"], "holds mini-swe-agent runs"),
                        (["--tasks", "mined"], "--tasks mined"),
                        (["--endpoint", "http://localhost:1/v1"], "--endpoint runs an agent")):
        base = ["downstream", "--tasks", "none", "--candidates", "none", "--from-output", str(src), "--out", str(out)]
        last = _error(capsys, [*base, *argv] if argv[0] != "--tasks" else [*base[:1], *argv, *base[3:]])
        assert words in last, last


def test_replay_says_which_selected_tasks_have_no_recorded_run(tmp_path, capsys):
    """The replay model skips a selected task that has no recorded run; only a smaller ``n`` showed it."""
    src = _runs(tmp_path, [RESOLVED, UNRESOLVED], beside=True)
    tasks = _tasks_file(tmp_path / "tasks.jsonl", [RESOLVED, OTHER, UNRESOLVED])
    out = tmp_path / "replay.jsonl"
    rc = cli.main(["downstream", "--tasks", str(tasks), "--candidates", "none", "--out", str(out),
                   "--set", f"downstream.replay.trajectories={src}", "--set", "downstream.replay.gold_tasks=verified"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert (summary["n"], summary["n_skipped"], summary["skipped_ids"]) == (2, 1, [OTHER])
    assert summary["source"] == "model" and f"(e.g. {OTHER};" in captured.err


def test_a_run_with_token_usage_on_only_some_calls_has_unknown_tokens(tmp_path, capsys):
    """A run whose usage is missing on some calls (a provider that omitted it, a 2.x format error without it) was
    summed over the rest: an undercount entering every token mean as if it were whole."""
    from codegrep.mining.formats.minisweagent import parse

    part = _traj(RESOLVED)
    calls = [m for m in part["messages"] if m["role"] == "assistant"]
    for m in calls[1::2]:
        m.pop("extra", None)
    src = _runs(tmp_path, [UNRESOLVED, RESOLVED], beside=True)
    _write(src / f"{RESOLVED}.traj.json", part)
    summary, rows = _downstream(tmp_path, capsys, src)
    by_id = {r["instance_id"]: r for r in rows}
    assert by_id[RESOLVED]["tokens"] is None and by_id[RESOLVED]["extra"]["tokens_partial"] is True
    assert 0 < by_id[RESOLVED]["extra"]["tokens_recorded"] and by_id[RESOLVED]["rounds"] == len(calls)
    assert (summary["n_tokens"], summary["n_tokens_partial"]) == (1, 1)
    assert summary["mean_tokens"] == by_id[UNRESOLVED]["tokens"]
    assert parse(part).n_tokens is None and parse(_traj(UNRESOLVED)).n_tokens == by_id[UNRESOLVED]["tokens"]
    rc = cli.main(["downstream", "--tasks", "mined", "--candidates", "none", "--out", str(tmp_path / "r.jsonl"),
                   "--set", f"downstream.replay.trajectories={src}",
                   "--set", "downstream.replay.gold_tasks=verified"])
    err = capsys.readouterr().err
    assert rc == 0 and f"only on some calls: ['{RESOLVED}']" in err, err


def test_openhands_token_usage_has_one_reader_that_survives_odd_metrics(tmp_path, capsys):
    """Mining and downstream each read OpenHands ``metrics``: mining's copy crashed on a null count (traceback) and
    ignored per-call ``token_usages``; downstream's crashed on a null entry among them."""
    from codegrep.mining.formats.openhands import parse

    rows = [dict(_oh_row("a__b-1", 0), metrics={"accumulated_token_usage": {"prompt_tokens": 40,
                                                                            "completion_tokens": None}}),
            dict(_oh_row("a__b-2", 0), metrics={"token_usages": [{"prompt_tokens": 7, "completion_tokens": 2},
                                                                 {"prompt_tokens": 9, "completion_tokens": 3}]}),
            dict(_oh_row("a__b-3", 0), metrics={"token_usages": [None, {"prompt_tokens": 3}]})]
    out = _write(tmp_path / "output.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    summary, got = _downstream(tmp_path, capsys, out, agent="openhands")
    assert [r["tokens"] for r in got] == [40, 21, None] and summary["n_tokens"] == 2
    assert [parse(r).n_tokens for r in rows] == [40, 21, None]


def test_a_summary_with_undefined_means_prints_strict_json(tmp_path, capsys):
    """With no run's token usage known, the token means are undefined: the summary printed ``NaN``, which is not
    JSON (jq, JavaScript and most parsers refuse the whole line); it is ``null`` now."""
    row = dict(_oh_row("a__b-3", 0), metrics={"token_usages": [None]})
    out = _write(tmp_path / "output.jsonl", json.dumps(row) + "\n")
    summary, _ = _downstream(tmp_path, capsys, out, agent="openhands")
    assert summary["n_tokens"] == 0 and summary["mean_tokens"] is None


def test_an_openhands_error_row_without_history_has_unknown_rounds(tmp_path, capsys):
    """run_infer's row for an instance whose runs all failed has an error and no history: it counted 0 rounds in
    mean_rounds (and in paired rounds changes), as its unknown tokens are not counted 0."""
    from codegrep.downstream.agent_runs import paired_compare
    from codegrep.downstream.openhands import results_from_output

    error_rows = [{"instance_id": "a__b-2", "test_result": {}, "error": "Maximum retries exceeded", "history": h}
                  for h in (None, [])]
    for error in error_rows:
        out = _write(tmp_path / "output.jsonl", json.dumps(_oh_row("a__b-1", 10)) + "\n" + json.dumps(error) + "\n")
        summary, rows = _downstream(tmp_path, capsys, out, agent="openhands")
        assert [r["rounds"] for r in rows] == [1, None] and (summary["mean_rounds"], summary["n_rounds"]) == (1.0, 1)
    base = results_from_output(out)
    hinted = results_from_output(_write(tmp_path / "h.jsonl", "".join(json.dumps(_oh_row(i, 10, [
        _event(1, "agent", "run", "r1", command="ls"), _event(2, "agent", "run", "r2", command="ls")])) + "\n"
        for i in ("a__b-1", "a__b-2"))))
    assert paired_compare(base, hinted)["rounds"]["change"] == 1.0  # 1 -> 2 on the one pair whose rounds are known


SWE_AGENT = embedded_dir() / "format-samples"


def test_from_output_reads_recorded_swe_agent_runs(tmp_path, capsys):
    """A SWE-agent ``.traj`` (the real embedded runs) was read as an OpenHands output.jsonl: 'file:1: not JSON'; a
    directory of them had 'no trajectory'. Rounds are its api_calls, tokens its tokens_sent / tokens_received
    (unknown when it recorded 0, as the function-calling demo runs did), the verdict the report beside it."""
    src = tmp_path / "swa"
    raw = {}
    for f in sorted(SWE_AGENT.glob("sweagent_*.traj.gz")):
        with gzip.open(f, "rt") as fh:
            raw[f.name] = json.load(fh)
    pydicom = raw["sweagent_pydicom-1458_default.traj.gz"]
    _write(src / "pydicom__pydicom-1458" / "pydicom__pydicom-1458.traj", pydicom)
    _write(src / "pydicom__pydicom-1458" / "pydicom__pydicom-1458.report.json", {"resolved": True})
    _write(src / "m" / "marshmallow-code__marshmallow-1867.traj.gz",
           raw["sweagent_marshmallow-1867_function_calling.traj.gz"], gz=True)
    summary, rows = _downstream(tmp_path, capsys, src, agent="swe-agent")
    by_id = {r["instance_id"]: r for r in rows}
    stats = pydicom["info"]["model_stats"]
    assert set(by_id) == {"pydicom__pydicom-1458", "marshmallow-code__marshmallow-1867"}
    one = by_id["pydicom__pydicom-1458"]
    assert (one["agent"], one["rounds"], one["prompt_tokens"], one["completion_tokens"], one["resolved"]) == (
        "swe-agent", stats["api_calls"], stats["tokens_sent"], stats["tokens_received"], True)
    assert one["extra"]["patch"] == pydicom["info"]["submission"] and one["extra"]["viewed_files"]
    assert by_id["marshmallow-code__marshmallow-1867"]["tokens"] is None and summary["n_tokens"] == 1
    single, rows = _downstream(tmp_path, capsys, src / "pydicom__pydicom-1458" / "pydicom__pydicom-1458.traj",
                               agent="swe-agent")
    assert rows[0]["rounds"] == one["rounds"]
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--agent", "swe-agent",
                           "--out", str(tmp_path / "o.jsonl")])
    assert "does not run SWE-agent" in last
    _write(src / f"{RESOLVED}.traj.json", _traj(RESOLVED))  # one mini-swe-agent run among them: two agents
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--from-output", str(src),
                           "--out", str(tmp_path / "o.jsonl")])
    assert "runs of 2 agents (mini-swe-agent:" in last and "swe-agent:" in last
    _write(tmp_path / "bad" / "x.traj", {"foo": 1})
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--from-output",
                           str(tmp_path / "bad"), "--out", str(tmp_path / "o.jsonl")])
    assert "x.traj: neither a mini-swe-agent trajectory" in last


def test_a_gzipped_swe_agent_run_without_a_stored_id_takes_its_file_name(tmp_path, capsys):
    """SWE-agent's default ``.traj`` stores no instance id (the file name is it); gzipped, the id kept '.traj.gz'
    (mining's parser), so the run matched no task and no report."""
    with gzip.open(SWE_AGENT / "sweagent_pydicom-1458_default.traj.gz", "rt") as fh:
        traj = json.load(fh)
    assert "instance_id" not in traj and "replay_config" not in traj
    _write(tmp_path / "runs" / "pydicom__pydicom-1458.traj.gz", traj, gz=True)
    _write(tmp_path / "runs" / "pydicom__pydicom-1458.report.json", {"resolved": False})
    _, rows = _downstream(tmp_path, capsys, tmp_path / "runs", agent="swe-agent")
    assert (rows[0]["instance_id"], rows[0]["resolved"]) == ("pydicom__pydicom-1458", False)


def test_a_directory_holding_a_gzipped_openhands_output_is_read(tmp_path, capsys):
    """A run directory whose output.jsonl was gzipped for sharing: read as a file, refused as a directory."""
    _write(tmp_path / "oh" / "output.jsonl.gz", json.dumps(_oh_row("a__b-1", 100)) + "\n", gz=True)
    summary, rows = _downstream(tmp_path, capsys, tmp_path / "oh", agent="openhands")
    assert [r["instance_id"] for r in rows] == ["a__b-1"] and rows[0]["prompt_tokens"] == 100


def test_a_directory_holding_openhands_output_and_trajectories_is_refused(tmp_path, capsys):
    """An OpenHands output.jsonl beside trajectories was ignored without a word (the trajectories were read):
    runs of two agents, refused as --from-output refuses two trajectory formats."""
    _write(tmp_path / "runs" / "oh" / "output.jsonl", json.dumps(_oh_row("a__b-1", 100)) + "\n")
    _write(tmp_path / "runs" / IID / f"{IID}.traj.json", _traj())
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--from-output",
                           str(tmp_path / "runs"), "--out", str(tmp_path / "o.jsonl")])
    assert "output.jsonl" in last and f"{IID}.traj.json" in last and "one agent" in last


def test_openhands_rows_of_odd_shapes_are_read_or_refused_in_one_line(tmp_path, capsys):
    """Tracebacks on OpenHands rows of shapes other exporters write: a ``tool_call_metadata`` that is not an
    object, timestamps mixing naive and zoned ISO forms (read: the row's other numbers stand), and an ``instance`` /
    ``test_result`` serialised as a string (refused, naming the file and line)."""
    odd = [dict(_event(1, "agent", "run", command="ls"), tool_call_metadata="r1"), _event(2, "agent"),
           dict(_event(3, "agent", "run", "r2", command="pwd"), timestamp="2024-06-01T10:00:09+00:00")]
    out = _write(tmp_path / "output.jsonl", json.dumps(_oh_row("a__b-1", 10, odd)) + "\n")
    _, rows = _downstream(tmp_path, capsys, out, agent="openhands")
    assert rows[0]["rounds"] == 2 and rows[0]["prompt_tokens"] == 10
    for key in ("instance", "test_result"):
        bad = _write(tmp_path / key / "output.jsonl", json.dumps(_oh_row("a__b-1", 10)) + "\n"
                     + json.dumps(_oh_row("a__b-2", 10, **{key: json.dumps({"repo": "a/b"})})) + "\n")
        last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--from-output", str(bad),
                               "--out", str(tmp_path / "o.jsonl")])
        assert f"output.jsonl:2: '{key}' is a str, not a JSON object" in last, last


def test_limit_is_the_same_sample_for_mined_and_for_a_task_file(tmp_path, capsys):
    """``--limit N`` took the first N of ``--tasks mined`` but a seeded sample of a task file (the rule of every
    task limit): the same instances gave different selections depending on how they were named."""
    iids = sorted([RESOLVED, UNRESOLVED, OTHER, "django__django-11433"])
    src = _runs(tmp_path, iids, beside=True)
    tasks = _tasks_file(tmp_path / "tasks.jsonl", iids)
    chosen = {}
    for name in ("mined", str(tasks)):
        out = tmp_path / "r.jsonl"
        rc = cli.main(["downstream", "--tasks", name, "--candidates", "none", "--limit", "2", "--out", str(out),
                       "--set", f"downstream.replay.trajectories={src}", "--set", "downstream.replay.gold_tasks=verified"])
        assert rc == 0, capsys.readouterr().err
        chosen[name] = [json.loads(line)["instance_id"] for line in out.read_text().splitlines()]
    assert chosen["mined"] == chosen[str(tasks)] and len(chosen["mined"]) == 2


def test_a_hinted_mini_swe_agent_run_read_back_keeps_its_hint(tmp_path, capsys):
    """``MiniSweAgent.run`` saves the files it handed the agent (``codegrep.candidate_files``); read back with
    --from-output the run had none (``with_retrieval`` false), so a hinted run looked like a no-hint one."""
    hinted = dict(_traj(RESOLVED), codegrep={"config": {}, "candidate_files": ["django/db/models/a.py"]})
    plain = dict(_traj(UNRESOLVED), codegrep={"config": {}, "candidate_files": None})
    _write(tmp_path / "hint" / f"{RESOLVED}.traj.json", hinted)
    _write(tmp_path / "base" / f"{UNRESOLVED}.traj.json", plain)
    summary, rows = _downstream(tmp_path, capsys, tmp_path / "hint")
    assert rows[0]["candidate_files"] == ["django/db/models/a.py"] and summary["with_retrieval"] is True
    summary, rows = _downstream(tmp_path, capsys, tmp_path / "base")
    assert rows[0]["candidate_files"] is None and summary["with_retrieval"] is False


def test_a_predictions_file_is_not_taken_for_openhands_runs(tmp_path, capsys):
    """A swebench predictions file (instance_id, model_patch) given as --from-output became runs of 0 rounds and
    unknown tokens, one per patch."""
    preds = _write(tmp_path / "all_preds.jsonl", "".join(json.dumps(
        {"instance_id": i, "model_name_or_path": "m", "model_patch": "diff"}) + "\n" for i in (RESOLVED, UNRESOLVED)))
    last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--from-output", str(preds),
                           "--out", str(tmp_path / "o.jsonl")])
    assert "all_preds.jsonl:1:" in last and "not an OpenHands output.jsonl row" in last


def test_the_harness_rule_written_out_gives_the_harness_verdict():
    """``swebench_report.fully_resolved`` avoids importing the harness (about a second of CPU per mining worker); it
    must answer as ``swebench.harness.grading.get_resolution_status`` does (FULL or not) on every shipped report
    and on the edge cases (empty categories, partial fail-to-pass, a broken pass-to-pass test)."""
    import itertools

    from swebench.harness.constants import ResolvedStatus
    from swebench.harness.grading import get_resolution_status

    from codegrep.data.swebench_report import fully_resolved

    statuses = []
    for path in sorted((ROOT / "data" / "trajectories").rglob("*.report.json")):
        report = json.loads(path.read_text())  # the record beside each run, or {instance_id: record}
        for record in [report] if "tests_status" in report else report.values():
            if isinstance(record, dict) and record.get("tests_status"):
                statuses.append(record["tests_status"])
    assert len(statuses) >= 300
    lists = ([], ["a"], ["a", "b"])
    for f2p_s, f2p_f, p2p_s, p2p_f in itertools.product(lists, repeat=4):
        statuses.append({"FAIL_TO_PASS": {"success": f2p_s, "failure": f2p_f},
                         "PASS_TO_PASS": {"success": p2p_s, "failure": p2p_f}})
    for status in statuses:
        assert fully_resolved(status) == (get_resolution_status(status) == ResolvedStatus.FULL.value), status


def test_openhands_verdicts_given_as_the_run_are_refused(tmp_path, capsys):
    """eval_infer's output.swebench_eval.jsonl (its verdicts: EvalOutput rows with a test_result.report, no history)
    given to --from-output was read as the agent's runs: every instance 0 actions, no rounds or tokens. It is refused
    in one line naming the file and what to pass instead, by its name or, renamed, by its rows."""
    run = tmp_path / "oh"
    _write(run / "output.jsonl", "".join(json.dumps(_oh_row(i, 10)) + "\n" for i in ("a__b-1", "a__b-2")))
    verdicts = "".join(json.dumps(r) + "\n" for r in (_eval_row("a__b-1", resolved=True), _eval_row("a__b-2")))
    named = _write(run / "output.swebench_eval.jsonl", verdicts)
    renamed = _write(tmp_path / "verdicts.jsonl", verdicts)
    for src in (named, renamed):
        last = _error(capsys, ["downstream", "--tasks", "none", "--candidates", "none", "--agent", "openhands",
                               "--from-output", str(src), "--out", str(tmp_path / "o.jsonl")])
        assert str(src) in last and "verdicts" in last and "output.jsonl" in last and "--report" in last
    summary, rows = _downstream(tmp_path, capsys, run, agent="openhands")  # its directory: the run, judged by it
    assert {r["instance_id"]: r["resolved"] for r in rows} == {"a__b-1": True, "a__b-2": False}


def test_a_broken_report_beside_a_run_is_the_harness_error_of_its_instance(tmp_path, capsys):
    """A report named for one instance beside its run (``<id>.report.json``, the harness's ``<id>/report.json``)
    that is not JSON, or holds no record of ``<id>``, is that instance's error, as make_run_report counts it and
    --report DIR reads it: --from-output and mining said unknown (left out of the resolve rate). A report.json a
    directory of runs shares says nothing when it cannot be read."""
    from codegrep.mining.inputs import report_beside
    from codegrep.mining.runner import mine_files

    src = tmp_path / "runs"
    _write(src / f"{RESOLVED}.traj.json", _traj(RESOLVED))
    _write(src / f"{RESOLVED}.report.json", _report(RESOLVED))
    _write(src / f"{UNRESOLVED}.traj.json", _traj(UNRESOLVED))
    _write(src / f"{UNRESOLVED}.report.json", '{"django__django-15280": {"resolved": tr')
    _write(src / OTHER / f"{OTHER}.traj.json", _traj(OTHER))
    _write(src / OTHER / "report.json", {RESOLVED: {"resolved": True}})
    expected = {RESOLVED: True, UNRESOLVED: False, OTHER: False}
    summary, rows = _downstream(tmp_path, capsys, src)
    assert {r["instance_id"]: r["resolved"] for r in rows} == expected and summary["n_judged"] == 3
    mine_files([str(src)], tmp_path / "r.jsonl", None, progress=False)
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert {r["instance_id"]: r["resolved"] for r in records} == expected
    shared = _write(tmp_path / "shared" / f"{UNRESOLVED}.traj.json", _traj(UNRESOLVED))
    _write(tmp_path / "shared" / "report.json", "")
    assert report_beside(str(shared)) is None
