"""Recorded SWE-agent runs (``<id>.traj``, as SWE-agent writes them) as ``DownstreamResult``s.

Read by mining's SWE-agent parser (``codegrep.mining.formats.sweagent``: events, instance id, submission) and its
``traj_usage``. Rounds = ``info.model_stats.api_calls`` (else the recorded steps); tokens = ``tokens_sent`` /
``tokens_received`` (SWE-agent's sums over every call; unknown when it recorded none). codegrep does not run
SWE-agent: these are recorded runs only (``codegrep downstream --from-output``).
"""
from __future__ import annotations

from typing import Any

from codegrep.data.swebench_report import infra_failure, resolved as report_resolved
from codegrep.downstream.agents import DownstreamResult

NAME = "swe-agent"


def result_from_traj(traj: dict[str, Any], report: dict[str, Any] | None = None,
                     path: str | None = None) -> DownstreamResult:
    """A ``DownstreamResult`` from one SWE-agent ``.traj`` mapping; the id is the file's (``instance_id``, the
    replay config's problem statement id), else its name's (``<id>.traj``)."""
    from codegrep.mining.events import viewed_files
    from codegrep.mining.formats import sweagent as parser
    from codegrep.mining.formats.base import loose_mapping

    parsed = parser.parse_traj(traj, source=path or "")
    info = traj.get("info") if isinstance(traj.get("info"), dict) else {}
    calls = loose_mapping(info.get("model_stats")).get("api_calls")
    steps = traj.get("trajectory") if isinstance(traj.get("trajectory"), list) else []
    usage = parser.traj_usage(info)
    iid = parsed.instance_id
    return DownstreamResult(instance_id=iid, agent=NAME, resolved=report_resolved(report, iid),
                            rounds=int(calls) if isinstance(calls, int) and calls > 0 else len(steps),
                            prompt_tokens=usage[0] if usage else None, completion_tokens=usage[1] if usage else None,
                            trajectory=path, infra_failure=infra_failure(report, iid),
                            extra={"exit_status": info.get("exit_status"), "actions": parsed.n_steps,
                                   "viewed_files": viewed_files(parsed.events),
                                   "patch": parsed.patch, "tokens_known": usage is not None})
