"""Recorded mini-swe-agent rollouts -> replay ``Trace``s (per-step measured tokens, views, observations).

Files are read by THE mini-swe-agent reader (``codegrep.mining.formats.minisweagent.read``: commands,
observations, per-call usage); commands are parsed into file events by the CATM shell parser
(``codegrep.mining.shell``). Gold files come, in this order, from a task
file naming the instance (its reference patch), from the CATM record's patch files, or, for a
resolved rollout only, from the files its own accepted patch touches.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

from codegrep.data.swebench_report import resolved as report_resolved
from codegrep.data.tasks import patch_files
from codegrep.downstream.replay import Trace, observed_paths, steps_from_usage
from codegrep.errors import UserError
from codegrep.metrics import dedupe

_SEARCH_KINDS = ("search", "find", "list")


def _step_views(commands: Sequence[str], step: int, root: str) -> tuple[tuple[str, ...], bool, bool, set[str]]:
    from codegrep.mining.events import in_repo
    from codegrep.mining.shell import parse_shell

    events = [e for c in commands for e in parse_shell(c, step, root)]
    views = tuple(dict.fromkeys(e.path for e in events if e.kind == "view" and in_repo(e.path)))
    created = {e.path for e in events if e.kind == "create" and e.path}
    acted = any(e.kind in ("run", "edit", "create", "delete") for e in events)
    return views, any(e.kind in _SEARCH_KINDS for e in events), acted, created


class NoUsage(ValueError):
    """A rollout with no recorded token usage (mini-swe-agent versions that kept only ``info.model_stats``), or
    usage on only some calls (its prompts could not be replayed step by step): nothing to replay."""


def trace_from_minisweagent(traj: dict[str, Any], gold: Sequence[str], resolved: bool, repo: str = "") -> Trace:
    """A ``Trace`` from a mini-swe-agent ``.traj.json`` mapping, read by THE mini-swe-agent reader
    (``codegrep.mining.formats.minisweagent.read``); raises ``NoUsage`` when not every call recorded its usage."""
    from codegrep.mining.formats.minisweagent import read

    run = read(traj, str(traj.get("instance_id") or ""))
    if run.usage_partial:
        raise NoUsage(f"trajectory {run.instance_id}: only {len(run.usage)} of {run.rounds} model calls recorded "
                      "token usage")
    usage, views, searched, acted, paths, created = [], [], [], [], [], set()
    for s in run.steps:
        if not s.has_usage:
            continue
        v, srch, a, made = _step_views(s.commands, len(usage), run.root)
        created |= made
        acted.append(a)
        usage.append((int(s.prompt_tokens or 0), int(s.completion_tokens or 0)))
        views.append(v)
        searched.append(srch)
        paths += observed_paths(s.observation)  # listings, grep hits and tracebacks name real repo files
    iid = run.instance_id
    if not usage:
        raise NoUsage(f"trajectory {iid}: no model call recorded token usage")
    first_chars = len(run.system) + len(run.task)
    return Trace(instance_id=iid, repo=repo or repo_of(iid), resolved=bool(resolved), gold=dedupe(gold),
                 steps=steps_from_usage(usage, views, searched, acted), observed_paths=paths, created=sorted(created),
                 chars_per_token=first_chars / usage[0][0] if usage[0][0] else None,
                 issue_chars=len(run.problem_statement))


def repo_of(instance_id: str) -> str:
    """``django__django-11433`` -> ``django/django``.

    >>> repo_of("scikit-learn__scikit-learn-13124")
    'scikit-learn/scikit-learn'
    """
    owner, _, rest = instance_id.partition("__")
    return f"{owner}/{rest.rsplit('-', 1)[0]}" if rest else ""


def _source_dirs(src: str) -> list[Path]:
    from codegrep.data.shipped import trajectory_dirs
    from codegrep.mining.inputs import embedded_dir

    named = {"embedded": [embedded_dir() / "mini-swe-agent"], "shipped": trajectory_dirs()}
    return named.get(src, [Path(src).expanduser()])


def trajectory_files(sources: Iterable[str]) -> list[Path]:
    """mini-swe-agent ``*.traj.json[.gz]`` files of the sources (``shipped``: the 400 real runs in ``data/``;
    ``embedded``: the 15 inside the package; dirs, files); missing sources are skipped, and a file named twice (one
    source inside another) counts once (a copy of one run in two sources: ``load_traces``)."""
    files: list[Path] = []
    for src in sources:
        for root in _source_dirs(str(src)):
            if root.is_file():
                files.append(root)
            elif root.is_dir():
                files += sorted(p for p in root.rglob("*") if p.name.endswith((".traj.json", ".traj.json.gz")))
    return list({p.resolve(): p for p in files}.values())


def gold_index(task_files: Iterable[str]) -> dict[str, list[str]]:
    """instance_id -> files of the reference patch, from task JSONL files that exist (``embedded``: the
    tasks shipped beside the embedded trajectories; ``verified``: the 500 SWE-bench Verified rows in ``data/``)."""
    from codegrep.data.shipped import verified_rows_path
    from codegrep.mining.inputs import embedded_dir, open_text

    named = {"embedded": embedded_dir() / "swebench_verified.tasks.jsonl", "verified": verified_rows_path()}
    out: dict[str, list[str]] = {}
    for f in task_files:
        p = Path(named.get(str(f), f)).expanduser()
        p = p if p.is_file() else Path(f"{p}.gz")
        if not p.is_file():
            continue
        with open_text(p) as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    out[row["instance_id"]] = row.get("gold_files") or patch_files(row.get("patch", ""))
    return out


def _sources(value: Any) -> list[str]:
    """A source list as configured: one name or path (``--set downstream.replay.trajectories=/my/runs`` gives a
    string, which must not be iterated character by character: ``/`` would walk the whole file system) or a list.

    >>> _sources("/my/runs"), _sources(["shipped", "embedded"]), _sources(None)
    (['/my/runs'], ['shipped', 'embedded'], ['embedded'])
    """
    if not value:
        return ["embedded"]
    return [str(value)] if isinstance(value, (str, Path)) else [str(v) for v in value]


def load_traces(replay_cfg: dict[str, Any]) -> list[Trace]:
    """Traces for every configured trajectory with a known verdict and known gold files. One run per instance: a
    copy of one run in two sources (the same trajectory) counts once; two different runs of one instance are a
    ``UserError`` naming both (which one the replay should measure is not knowable from the files)."""
    from codegrep.mining.formats.minisweagent import load
    from codegrep.mining.inputs import report_beside

    gold = gold_index(_sources(replay_cfg.get("gold_tasks")))
    traces, skipped, no_usage, first = [], [], [], {}
    for path in trajectory_files(_sources(replay_cfg.get("trajectories"))):
        traj = load(path)
        iid = str(traj.get("instance_id") or path.name.split(".traj")[0])
        traj["instance_id"] = iid
        if iid in first:
            if {**load(first[iid]), "instance_id": iid} == traj:  # the same run copied into two sources
                continue
            raise UserError(f"replay: two recorded runs of {iid} ({first[iid]}, {path}); a replay source holds one "
                            "run per instance: give the directory of one run")
        first[iid] = path
        report = report_beside(str(path))
        resolved = report_resolved(report, iid)
        files = gold.get(iid) or (patch_files((traj.get("info") or {}).get("submission", "")) if resolved else [])
        if resolved is None or not files:
            skipped.append(iid)
            continue
        try:
            traces.append(trace_from_minisweagent(traj, files, resolved))
        except NoUsage:
            no_usage.append(iid)
    if skipped:
        print(f"replay: skipped {len(skipped)} trajectories without a verdict or gold files: {skipped}",
              file=sys.stderr)
    if no_usage:
        print(f"replay: skipped {len(no_usage)} trajectories that recorded no token usage, or only on some calls: "
              f"{no_usage}",
              file=sys.stderr)
    if not traces:
        raise FileNotFoundError(f"replay: no usable trajectory in {replay_cfg.get('trajectories') or ['embedded']}")
    return traces
