"""THE reader of SWE-bench harness reports (mining and downstream both use it).

Shapes accepted (``load_report`` reads a file or a directory of them; ``resolved`` answers for one instance):

- the **run report** ``python -m swebench.harness.run_evaluation`` writes (``<model>.<run_id>.json``):
  ``resolved_ids`` / ``unresolved_ids`` / ``error_ids`` / ``empty_patch_ids`` (an instance in none of them,
  e.g. ``incomplete_ids``, is unknown), and since schema 2 ``infra_failure_ids`` with ``failure_reasons``: the
  instances whose environment broke (the harness keeps them in ``unresolved_ids`` / ``error_ids``; here they are
  **not evaluated**: ``resolved`` None, ``infra_failure`` their reason; ``ambiguous_failure_ids``, which a bad
  patch can cause too, stay unresolved);
- the **per-instance** ``report.json`` (``{instance_id: {"resolved": bool, "tests_status": ...}}``), or a
  directory of them (the harness's ``logs/run_evaluation/<run>/<model>/<id>/report.json``, which OpenHands'
  ``eval_infer.sh`` moves to ``eval_outputs/<id>/report.json``): the record of ``<id>`` is read from
  ``<id>/report.json``, and one that is empty, not JSON, or has no ``<id>`` record with a ``resolved`` flag is the
  harness's error, an unresolved ``<id>``, as its ``make_run_report`` counts it (``report_error`` says which);
  a report found beside one run and named for its instance (``<id>.report.json``, ``<id>/report.json``:
  ``mining.inputs.report_beside``) is read by the same rule (``harness_error``, ``named_report``);
- OpenHands' ``eval_infer.py`` verdicts, ``output.swebench_eval.jsonl`` (one ``EvalOutput`` row per instance, the
  verdict in ``test_result.report``: ``resolved``, ``empty_generation``, ``failed_apply_patch``, ``error_eval``,
  ...), read as ``{instance_id: test_result.report}`` (a row without a ``resolved`` flag there, or with
  ``error_eval``, says nothing; an instance's last row counts);
- the **inner record** of one instance alone (``{"resolved": bool, ...}``: the report stored beside one trajectory,
  an OpenHands row's ``test_result.report``); it names no instance, so it is refused where a whole run's report is
  expected (``whole_run``);
- SWE-bench experiments' ``results.json`` (``{"resolved": [ids], ...}``; it lists no unresolved instance: every
  other instance was not resolved).

Where per-test results are present (``tests_status``), the verdict is recomputed by the harness's rule
(``fully_resolved``, the FULL case of ``swebench.harness.grading.get_resolution_status``; a test holds the two to the
same answers) and must agree with the ``resolved`` flag.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from codegrep.errors import UserError

FAILED_KEYS = ("unresolved_ids", "error_ids", "empty_patch_ids")
"""Run-report lists whose instances were evaluated and not resolved (``infra_failure_ids`` excepted)."""


def _listed(report: dict[str, Any], key: str, instance_id: str) -> bool:
    ids = report.get(key)
    return isinstance(ids, list) and instance_id in ids


def _record(report: dict[str, Any], instance_id: str) -> dict[str, Any] | None:
    """The inner record of ``instance_id``: ``report[instance_id]``, or the report itself when it is one."""
    if isinstance(report.get(instance_id), dict):
        return report[instance_id]
    return report if isinstance(report.get("resolved"), bool) else None


def infra_failure(report: Any, instance_id: str) -> str | None:
    """Why the harness could not evaluate ``instance_id`` (a run report's ``infra_failure_ids``, with its
    ``failure_reasons`` entry), else None.

    >>> infra_failure({"resolved_ids": [], "error_ids": ["a"], "infra_failure_ids": ["a"],
    ...                "failure_reasons": {"a": "container_unavailable"}}, "a")
    'container_unavailable'
    >>> infra_failure({"resolved_ids": [], "unresolved_ids": ["a"]}, "a") is None
    True
    """
    if not isinstance(report, dict) or not _listed(report, "infra_failure_ids", instance_id) \
            or _listed(report, "resolved_ids", instance_id):
        return None
    reasons = report.get("failure_reasons")
    return str((reasons.get(instance_id) if isinstance(reasons, dict) else None) or "infrastructure failure")


def resolved(report: Any, instance_id: str) -> bool | None:
    """Whether the harness resolved ``instance_id``; None when the report does not say (it does not name the
    instance, or the instance is an infrastructure failure: not evaluated).

    >>> resolved({"resolved_ids": ["a"], "unresolved_ids": ["b"]}, "b")
    False
    >>> resolved({"resolved_ids": [], "error_ids": ["b"], "infra_failure_ids": ["b"]}, "b") is None
    True
    >>> resolved({"a": {"patch_exists": True, "resolved": True}}, "a"), resolved({"resolved": False}, "x")
    (True, False)
    >>> resolved({"resolved_ids": []}, "zzz") is None, resolved({"resolved": ["a"], "no_generation": ["c"]}, "b")
    (True, False)
    """
    if not isinstance(report, dict):
        return None
    if isinstance(report.get("resolved_ids"), list):
        if instance_id in report["resolved_ids"]:
            return True
        if infra_failure(report, instance_id):
            return None
        return False if any(_listed(report, k, instance_id) for k in FAILED_KEYS) else None
    if isinstance(report.get("resolved"), list):
        return instance_id in report["resolved"]
    record = _record(report, instance_id)
    if record is None or not isinstance(record.get("resolved"), bool):
        return None
    flag = record["resolved"]
    if isinstance(record.get("tests_status"), dict) and record["tests_status"]:
        if fully_resolved(record["tests_status"]) != flag:
            raise ValueError(f"swebench report for {instance_id}: 'resolved'={flag} disagrees with its tests_status")
    return flag


def fully_resolved(tests_status: dict[str, Any]) -> bool:
    """The harness's FULL verdict: every FAIL_TO_PASS and every PASS_TO_PASS test passed (an empty category counts as
    passed). Written out here because importing ``swebench.harness`` costs about a second of CPU (it loads the whole
    harness), once per mining worker and per command, for a rule of four lengths.

    >>> fully_resolved({"FAIL_TO_PASS": {"success": ["t1"], "failure": []}, "PASS_TO_PASS": {"success": [], "failure": []}})
    True
    >>> fully_resolved({"FAIL_TO_PASS": {"success": ["t1"], "failure": ["t2"]}, "PASS_TO_PASS": {"success": ["t3"]}})
    False
    """
    def all_passed(category: str) -> bool:
        tests = tests_status.get(category) or {}
        return not (tests.get("failure") if isinstance(tests, dict) else None)
    return all_passed("FAIL_TO_PASS") and all_passed("PASS_TO_PASS")


def harness_error(source: str | Path, why: str) -> dict[str, Any]:
    """The record of an instance whose ``<id>/report.json`` the harness could not read (empty, not JSON, no record of
    ``<id>``): its ``make_run_report`` counts the instance as an error, evaluated and not resolved.

    >>> resolved(harness_error("x/report.json", "empty"), "a__b-1")
    False
    """
    return {"resolved": False, "report_error": f"{source}: {why}"}


def named_report(report: Any, instance_id: str, source: str | Path) -> Any:
    """A report file named for one instance (the harness's ``<id>/report.json``, ``<id>.report.json`` beside a run),
    read as ``make_run_report`` reads ``report[<id>]["resolved"]``: a run report, ``results.json`` or an inner record
    (``{"resolved": bool}``) is kept as it is; anything else without a record of ``instance_id`` holding ``resolved``
    is that instance's error (``harness_error``).

    >>> named_report({"a__b-2": {"resolved": True}}, "a__b-1", "a__b-1.report.json")["report_error"]
    "a__b-1.report.json: no 'a__b-1' record with 'resolved' in it"
    >>> named_report({"resolved_ids": []}, "a__b-1", "r.json"), named_report({"a__b-1": {"resolved": 1}}, "a__b-1", "")
    ({'resolved_ids': []}, {'a__b-1': {'resolved': 1}})
    """
    if isinstance(report, dict) and (isinstance(report.get("resolved_ids"), list)
                                     or isinstance(report.get("resolved"), (list, bool))):
        return report
    record = report.get(instance_id) if isinstance(report, dict) else None
    if isinstance(record, dict) and "resolved" in record:
        return report
    return harness_error(source, f"no {instance_id!r} record with 'resolved' in it")


def _instance_record(path: Path, instance_id: str) -> dict[str, Any]:
    """The record of ``instance_id`` in the harness's ``<instance_id>/report.json``, read as its ``make_run_report``
    reads it: empty, not JSON, or without a record of ``instance_id`` holding ``resolved`` is that instance's error
    (unresolved; ``report_error`` says why). Not UTF-8 is a ``UserError`` naming the file."""
    import json

    from codegrep.files import json_loads, read_text

    text = read_text(path, "swebench report")
    if not text.strip():
        return harness_error(path, "empty")
    try:
        report = json_loads(text, str(path))
    except json.JSONDecodeError as exc:
        return harness_error(f"{path}:{exc.lineno}", f"invalid JSON: {exc.msg}")
    if isinstance(report, dict) and isinstance(report.get("resolved_ids"), list):
        raise UserError(f"{path}: a run report (resolved_ids) among per-instance <id>/report.json files; give it "
                        "alone")
    record = report.get(instance_id) if isinstance(report, dict) else None
    if isinstance(record, dict) and "resolved" in record:
        return record
    return harness_error(path, f"no {instance_id!r} record with 'resolved' in it")


def _eval_rows(path: Path) -> dict[str, Any]:
    """``{instance_id: test_result.report}`` of OpenHands' ``output.swebench_eval.jsonl``; a row whose report has no
    ``resolved`` flag, or whose evaluation itself failed (``error_eval``: its ``resolved`` False is eval_infer's
    default, as ``mining.formats.openhands.parse`` reads it), is left out; an instance's last row counts. A row
    without ``instance_id`` is a ``UserError``."""
    from codegrep.files import jsonl_objects

    out: dict[str, Any] = {}
    for n, row in jsonl_objects(path, "swebench report"):
        iid = row.get("instance_id")
        if not isinstance(iid, str) or not iid:
            raise UserError(f"{path}:{n}: no instance_id (not a row of OpenHands' output.swebench_eval.jsonl)")
        record = (row.get("test_result") or {}).get("report") if isinstance(row.get("test_result"), dict) else None
        if isinstance(record, dict) and isinstance(record.get("resolved"), bool) and not record.get("error_eval"):
            out.pop(iid, None)
            out[iid] = record
    return out


EVAL_SUFFIX = ".swebench_eval.jsonl"
"""OpenHands' ``eval_infer.py`` writes its verdicts of ``<name>.jsonl`` to ``<name>.swebench_eval.jsonl``."""


def is_evaluation(path: str | Path) -> bool:
    """A file of OpenHands eval_infer's verdicts (by its name, gzipped or not), not a run.

    >>> is_evaluation("out/output.swebench_eval.jsonl.gz"), is_evaluation("out/output.jsonl")
    (True, False)
    """
    return Path(path).name.removesuffix(".gz").endswith(EVAL_SUFFIX)


def evaluation_beside(path: str | Path) -> Path | None:
    """The evaluation OpenHands leaves beside its ``<name>.jsonl`` (gzipped or not), the first there of:
    ``<name>.swebench_eval.jsonl`` (``eval_infer.py``'s verdicts, one row per instance), ``report.json`` (the
    harness's run report ``eval_infer.sh`` moves there) and ``eval_outputs/`` (its per-instance
    ``<id>/report.json``); None when there is none. Without ``update_output_with_eval`` the rows carry no verdict."""
    p = Path(path)
    stem = p.name.removesuffix(".gz").removesuffix(".jsonl")
    for name in (f"{stem}{EVAL_SUFFIX}", f"{stem}{EVAL_SUFFIX}.gz", "report.json"):
        if (p.parent / name).is_file():
            return p.parent / name
    evals = p.parent / "eval_outputs"
    return evals if evals.is_dir() and any(evals.glob("*/report.json")) else None


def load_report(path: str | Path, whole_run: bool = False) -> dict[str, Any]:
    """A harness report file, or a directory of per-instance ``report.json`` files (merged). Missing, not UTF-8,
    not JSON, or of no known shape is a ``UserError`` naming the file; so is an inner record when ``whole_run``
    (the report of a run, ``--report``: a record that names no instance would become every run's verdict)."""
    from codegrep.files import read_json

    p = Path(path)
    if p.is_dir():
        files = sorted(p.rglob("report.json"))
        if not files:
            raise UserError(f"swebench report {p}: a directory without any report.json under it")
        merged: dict[str, Any] = {}
        for f in files:
            if f.parent == p:
                merged.update(load_report(f, whole_run=True))
            else:  # the harness's <id>/report.json
                merged[f.parent.name] = _instance_record(f, f.parent.name)
        return merged
    if not p.is_file():
        raise FileNotFoundError(f"swebench report not found: {p}")
    if p.name.endswith((".jsonl", ".jsonl.gz")):
        rows = _eval_rows(p)
        if not rows:
            raise UserError(f"{p}: no row with a verdict (test_result.report.resolved); not OpenHands' "
                            "output.swebench_eval.jsonl")
        return rows
    report = read_json(p, "swebench report")
    if not isinstance(report, dict):
        raise UserError(f"{p}: a swebench report is a JSON object, got {type(report).__name__}")
    if isinstance(report.get("resolved_ids"), list) or isinstance(report.get("resolved"), list):
        return report
    if isinstance(report.get("resolved"), bool):
        if not whole_run:
            return report
        raise UserError(f"{p}: one instance's report record, without its instance id; give the harness's run report "
                        "(resolved_ids, ...) or a per-instance report.json ({instance_id: {...}})")
    if report and not all(isinstance(v, dict) and "resolved" in v for v in report.values()):
        raise UserError(f"{p}: not a swebench harness report (no resolved_ids, and not {{instance_id: {{\"resolved\": "
                        "...}}}})")
    return report
