"""OpenHands (the paper's frozen agent) through its SWE-bench harness, ``run_infer.py``.

``write_openhands_run`` lays out one run: a dataset file whose ``problem_statement`` is
``hinted_problem_statement`` (so the hint enters OpenHands' first message inside its usual
instruction template), a ``config.toml`` with the LLM group, and ``run.sh`` with the commands
(``evaluation/benchmarks/swe_bench/run_infer.py`` of an OpenHands 0.x checkout, then the official
``swebench`` harness on the predictions). ``results_from_output`` reads ``output.jsonl`` back:
rounds = distinct LLM responses behind the agent's actions, tokens from ``metrics``, resolution
from the harness report.

What a run needs (none of it exists on the CI machine; the adapter was never run end to end): a Docker daemon the
user can reach (OpenHands starts one SWE-bench runtime container per instance; the harness grades in Docker too),
an OpenHands 0.x source checkout with its poetry environment (``openhands_dir`` or ``OPENHANDS_DIR``), an LLM
endpoint (``base_url``; the key in the variable ``api_key_env`` names), the ``swebench`` package, and full
SWE-bench rows (``version``, ``environment_setup_commit``, ...; ``REQUIRED_FIELDS``). ``OpenHandsAgent.run``
checks the checkout and Docker first and stops with one line naming what is missing.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

from codegrep.data.tasks import Task
from codegrep.errors import UserError
from codegrep.files import json_text, jsonl_objects, write_atomic
from codegrep.data.swebench_report import evaluation_beside, infra_failure, load_report, resolved as report_resolved
from codegrep.downstream.agents import DownstreamResult, config_from_section, hinted_problem_statement

RUN_INFER = "evaluation/benchmarks/swe_bench/run_infer.py"
# Fields OpenHands' run_infer and the swebench harness read from a dataset row.
REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "version", "FAIL_TO_PASS",
                   "PASS_TO_PASS", "environment_setup_commit", "test_patch")


@dataclass
class OpenHandsConfig:
    """Settings of an OpenHands SWE-bench run (the ``downstream.openhands`` block of a profile)."""

    openhands_dir: str | None = None
    """An OpenHands 0.x source checkout (holds ``evaluation/benchmarks/swe_bench/run_infer.py``)."""
    model: str = "openai/local-model"
    """litellm model name of the frozen agent's LLM."""
    base_url: str | None = None
    """OpenAI-compatible endpoint (``--endpoint`` overrides it)."""
    api_key_env: str = "LLM_API_KEY"
    """Environment variable holding the API key; its value is never written to disk."""
    temperature: float = 0.0
    """Sampling temperature."""
    agent_cls: str = "CodeActAgent"
    """OpenHands agent class."""
    max_iterations: int = 100
    """Most agent iterations per instance."""
    num_workers: int = 1
    """Instances run in parallel by run_infer."""
    llm_group: str = "codegrep_eval"
    """Name of the ``[llm.<group>]`` section written to config.toml."""
    dataset_name: str = "princeton-nlp/SWE-bench_Verified"
    """Dataset the swebench harness evaluates predictions against."""
    run_dir: str = "artifacts/downstream/openhands"
    """Where runs are laid out."""
    report: str | None = None
    """A swebench harness report to read resolution from (else the run's own, when present)."""


@dataclass
class OpenHandsRun:
    """The files and commands of one laid-out run."""

    run_dir: Path
    dataset_file: Path
    config_file: Path
    script: Path
    infer_command: list[str]
    eval_command: list[str]
    output_dir: Path


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def config_toml(cfg: OpenHandsConfig) -> str:
    """The OpenHands ``config.toml`` text (no secret in it: the key comes from ``api_key_env``)."""
    lines = ["[core]", f"max_iterations = {int(cfg.max_iterations)}", "", f"[llm.{cfg.llm_group}]",
             f"model = {_toml_str(cfg.model)}", f"temperature = {float(cfg.temperature)}"]
    if cfg.base_url:
        lines.append(f"base_url = {_toml_str(cfg.base_url)}")
    return "\n".join(lines) + "\n"


def dataset_rows(tasks: Sequence[Task], candidates: dict[str, list[str]] | None) -> list[dict[str, Any]]:
    """Dataset rows with the hint appended to ``problem_statement`` (raises when a field is missing)."""
    rows = []
    for task in tasks:
        row = task.to_dict()
        missing = [k for k in REQUIRED_FIELDS if row.get(k) in (None, "")]
        if missing:
            raise ValueError(f"task {task.instance_id}: OpenHands needs the full SWE-bench row; missing {missing} "
                             "(load tasks from the HF dataset, e.g. princeton-nlp/SWE-bench_Verified)")
        files = None if candidates is None else candidates.get(task.instance_id, [])
        row["problem_statement"] = hinted_problem_statement(task.problem_statement, files)
        row["codegrep_candidates"] = files
        rows.append({k: v for k, v in row.items() if k != "gold_files"})
    return rows


def write_openhands_run(tasks: Sequence[Task], candidates: dict[str, list[str]] | None,
                        cfg: OpenHandsConfig, label: str) -> OpenHandsRun:
    """Lay out one run under ``cfg.run_dir/<label>``: dataset, config.toml, run.sh."""
    run_dir = Path(cfg.run_dir).resolve() / label
    (run_dir / "dataset").mkdir(parents=True, exist_ok=True)
    dataset_file = run_dir / "dataset" / "test.jsonl"  # load_dataset(dir, split="test") finds it by name
    write_atomic(dataset_file, "".join(json.dumps(r) + "\n" for r in dataset_rows(tasks, candidates)))
    config_file = run_dir / "config.toml"
    write_atomic(config_file, config_toml(cfg))
    output_dir = run_dir / "infer"
    infer = ["poetry", "run", "python", RUN_INFER, "--agent-cls", cfg.agent_cls, "--llm-config",
             f"llm.{cfg.llm_group}", "--max-iterations", str(cfg.max_iterations), "--eval-num-workers",
             str(cfg.num_workers), "--dataset", str(dataset_file.parent), "--split", "test",
             "--eval-note", f"codegrep-{label}", "--eval-output-dir", str(output_dir), "--config-file", str(config_file)]
    evaluate = ["python", "-m", "swebench.harness.run_evaluation", "--dataset_name", cfg.dataset_name,
                "--predictions_path", str(run_dir / "predictions.jsonl"), "--run_id", f"codegrep-{label}",
                "--max_workers", str(cfg.num_workers), "--report_dir", str(run_dir)]
    script = run_dir / "run.sh"
    oh_dir = shlex.quote(cfg.openhands_dir) if cfg.openhands_dir else '"${OPENHANDS_DIR:?set OPENHANDS_DIR}"'
    write_atomic(script, "#!/usr/bin/env bash\n# Generated by codegrep.downstream.openhands: needs Docker + an LLM endpoint.\n"
                      f"set -euo pipefail\nexport LLM_API_KEY=\"${{{cfg.api_key_env}:-EMPTY}}\"\n"
                      f"cd {oh_dir}\n{shlex.join(infer)}\n"
                      f"cd {shlex.quote(str(run_dir))}\n"
                      f"python -m codegrep.downstream.openhands predictions {shlex.quote(str(output_dir))} "
                      f"> predictions.jsonl\n{shlex.join(evaluate)}\n")
    script.chmod(0o755)
    return OpenHandsRun(run_dir, dataset_file, config_file, script, infer, evaluate, output_dir)


_NOT_LLM = ("system", "recall", "condensation", "change_agent_state", "null", "pause", "resume", "stop",
            "loop_recovery")
"""Agent-side action kinds (OpenHands' ``ActionType``) no response of the agent's LLM produces: the system prompt,
memory recall, a condenser's summary, the controller's state changes and loop recovery."""


def _llm_response_ids(history: Iterable[dict[str, Any]]) -> list[str]:
    """Ids of the LLM responses behind the agent's actions, in order (one per agent round): an action whose
    ``tool_call_metadata`` names its model response is that response's (one response's several tool calls are one
    round); one without (an answer with no tool call, versions before function calling) is its own, unless its kind
    is one no LLM response produces (``_NOT_LLM``)."""
    ids: dict[str, None] = {}
    for i, ev in enumerate(history):
        if ev.get("source") != "agent" or "action" not in ev:
            continue
        meta = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else {}
        response = meta.get("model_response") if isinstance(meta.get("model_response"), dict) else {}
        if not response.get("id") and ev.get("action") in _NOT_LLM:
            continue
        ids.setdefault(str(response.get("id") or f"event-{ev.get('id', i)}"), None)
    return list(ids)


def _seconds(history: Sequence[dict[str, Any]]) -> float:
    stamps = [ev["timestamp"] for ev in history if isinstance(ev.get("timestamp"), str)]
    try:
        return (datetime.fromisoformat(stamps[-1]) - datetime.fromisoformat(stamps[0])).total_seconds()
    except (IndexError, ValueError, TypeError):  # none, not ISO 8601, or naive and zoned mixed
        return 0.0


def result_from_output_row(row: dict[str, Any], report: dict[str, Any] | None = None,
                           source: str = "") -> DownstreamResult:
    """A ``DownstreamResult`` from one ``output.jsonl`` row (``EvalOutput``: history, metrics, test_result)."""
    from codegrep.mining.events import viewed_files
    from codegrep.mining.formats import openhands as parser

    history = parser.flatten_history(row.get("history"))  # events, or older versions' [action, observation] pairs
    parsed = parser.parse(row, source=source)
    usage = parser.token_usage(row.get("metrics"))  # the one reader of OpenHands metrics
    prompt, completion = usage if usage else (None, None)
    iid = parsed.instance_id
    resolved, infra = report_resolved(report, iid), infra_failure(report, iid)
    if resolved is None and infra is None:  # the row's own verdict: eval_infer's test_result.report, or the
        resolved = parsed.resolved  # top-level report its update_output_with_eval script adds
    instance = row.get("instance") or {}
    hint = instance.get("codegrep_candidates")
    viewed = viewed_files(parsed.events)
    return DownstreamResult(instance_id=iid, agent="openhands", resolved=resolved,
                            rounds=len(_llm_response_ids(history)) if history else None, prompt_tokens=prompt,
                            completion_tokens=completion, seconds=_seconds(history), trajectory=source or None,
                            candidate_files=hint, repo=str(instance.get("repo") or ""), infra_failure=infra,
                            extra={"tokens_known": usage is not None, "error": row.get("error"), "actions": parsed.n_steps,
                                   "viewed_files": viewed, "patch": (row.get("test_result") or {}).get("git_patch")})


EVAL_OUTPUT_KEYS = ("history", "metrics", "test_result", "instruction", "metadata")
"""Fields of OpenHands' ``EvalOutput`` beside ``instance_id``: a row with none of them is no run of the agent."""


def read_output(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an OpenHands ``output.jsonl`` (a row that is not a JSON object, has no ``instance_id``, or whose
    ``instance`` / ``test_result`` / ``metrics`` is not an object or ``history`` not a list, is a ``UserError`` naming
    the file and line)."""
    p = Path(path)
    if not p.is_file() and not p.is_dir():
        raise FileNotFoundError(f"OpenHands output not found: {p}")
    rows = []
    for n, row in jsonl_objects(p, "OpenHands output"):
        for key, kind in (("instance", dict), ("test_result", dict), ("metrics", dict), ("history", list)):
            if row.get(key) is not None and not isinstance(row[key], kind):
                raise UserError(f"{p}:{n}: '{key}' is a {type(row[key]).__name__}, not a JSON "
                                f"{'object' if kind is dict else 'list'} (not an OpenHands output.jsonl row)")
        if not any(k in row for k in EVAL_OUTPUT_KEYS):
            raise UserError(f"{p}:{n}: no {'/'.join(EVAL_OUTPUT_KEYS)} (keys: {sorted(row)[:6]}): not an OpenHands "
                            "output.jsonl row (a predictions file holds patches, not runs)")
        if not (row.get("instance_id") or (row.get("instance") or {}).get("instance_id")):
            raise UserError(f"{p}:{n}: no instance_id (not an OpenHands output.jsonl row)")
        rows.append(row)
    if rows and all(_verdict_only(row) for row in rows):
        raise UserError(f"{p}: {VERDICTS_NOT_RUNS}")
    return rows


VERDICTS_NOT_RUNS = ("OpenHands eval_infer's verdicts (output.swebench_eval.jsonl: a test_result.report per instance, "
                     "no history), not the agent's runs; pass the run's output.jsonl or its directory (the verdicts "
                     "beside it are read), or give this file as --report")


def _verdict_only(row: dict[str, Any]) -> bool:
    """A row of eval_infer's verdicts: a ``test_result.report`` and no run (history, metrics, instruction)."""
    report = (row.get("test_result") or {}).get("report")
    return isinstance(report, dict) and not any(row.get(k) for k in ("history", "metrics", "instruction"))


def results_from_output(path: str | Path, report: dict[str, Any] | None = None) -> list[DownstreamResult]:
    """Every instance of ``output.jsonl`` as a ``DownstreamResult``; an instance with several rows (a resumed run
    appends its retry) counts once, by its last row. Without ``report``, the evaluation beside the file
    (``evaluation_beside``) is read; an instance it does not judge keeps its row's own verdict."""
    if report is None and (beside := evaluation_beside(path)) is not None:
        report = load_report(beside, whole_run=True)
    results = {}
    for i, row in enumerate(read_output(path), start=1):
        res = result_from_output_row(row, report, f"{path}:{i}")
        results.pop(res.instance_id, None)  # the last row of an instance, in the order of last rows
        results[res.instance_id] = res
    return list(results.values())


def predictions(rows: Iterable[dict[str, Any]], model_name: str = "OpenHands") -> list[dict[str, Any]]:
    """swebench predictions (``instance_id``, ``model_name_or_path``, ``model_patch``) from output rows.

    >>> predictions([{"instance_id": "a__b-1", "test_result": {"git_patch": "diff"}}])
    [{'instance_id': 'a__b-1', 'model_name_or_path': 'OpenHands', 'model_patch': 'diff'}]
    """
    return [{"instance_id": r["instance_id"], "model_name_or_path": model_name,
             "model_patch": (r.get("test_result") or {}).get("git_patch") or ""} for r in rows]


class OpenHandsAgent:
    """Lays out and runs one OpenHands instance per call; implements ``DownstreamAgent``."""

    name = "openhands"

    def __init__(self, config: OpenHandsConfig | None = None):
        self.config = config or OpenHandsConfig()

    @classmethod
    def from_config(cls, section: dict[str, Any], endpoint: str | None = None) -> "OpenHandsAgent":
        return cls(config_from_section(section, "openhands", OpenHandsConfig, "base_url", endpoint))

    def run(self, task: Task, candidate_files: Sequence[str] | None) -> DownstreamResult:
        cfg = self.config
        if not cfg.openhands_dir or not (Path(cfg.openhands_dir) / RUN_INFER).is_file():
            raise RuntimeError("downstream.openhands.openhands_dir must point at an OpenHands 0.x checkout "
                               f"containing {RUN_INFER} (got {cfg.openhands_dir!r})")
        if shutil.which("docker") is None:
            raise RuntimeError("OpenHands' SWE-bench runtime needs Docker, which is not installed here")
        label = f"{task.instance_id}-{'hint' if candidate_files is not None else 'base'}"
        hints = None if candidate_files is None else {task.instance_id: list(candidate_files)}
        run = write_openhands_run([task], hints, cfg, label)
        subprocess.run(["bash", str(run.script)], check=True, env=os.environ.copy())
        outputs = sorted(run.output_dir.rglob("output.jsonl"))
        if not outputs:
            raise RuntimeError(f"OpenHands wrote no output.jsonl under {run.output_dir}")
        reports = sorted(run.run_dir.glob(f"*.codegrep-{label}.json"))
        report = load_report(cfg.report or reports[-1], whole_run=True) if (cfg.report or reports) else None
        return results_from_output(outputs[-1], report)[0]


if __name__ == "__main__":  # ``python -m codegrep.downstream.openhands predictions OUT_DIR`` (used by run.sh)
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "predictions":
        sys.exit("usage: python -m codegrep.downstream.openhands predictions OPENHANDS_OUTPUT_DIR")
    for out in sorted(Path(sys.argv[2]).rglob("output.jsonl")):
        for pred in predictions(read_output(out)):
            print(json_text(pred))
