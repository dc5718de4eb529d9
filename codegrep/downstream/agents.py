"""The downstream interface: a frozen coding agent run with or without candidate files.

Every agent (OpenHands, mini-swe-agent, the replay cost model) returns a ``DownstreamResult``.
Candidate files reach an agent in exactly one way, the same for every retriever: the issue text
is followed by a blank line and the block ``candidate_hint(files)`` renders
(``hinted_problem_statement``). Resolution of real runs comes from the official ``swebench``
harness report (``codegrep.data.swebench_report``, the one reader mining uses too).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from codegrep.metrics import dedupe

HINT_HEADER = "<candidate_files>"
HINT_FOOTER = "</candidate_files>"
HINT_INTRO = ("A file-retrieval tool suggests these files as likely relevant to the issue, most likely first. "
              "They may be incomplete or partly wrong; verify before relying on them.")


@dataclass
class DownstreamResult:
    """What one agent run on one task cost and achieved."""

    instance_id: str
    """The task's id."""
    agent: str
    """Which agent produced it: ``openhands``, ``mini-swe-agent``, or ``replay`` (the cost model)."""
    resolved: bool | None
    """Resolved by the official harness (None = not evaluated, e.g. no Docker, or an ``infra_failure``)."""
    rounds: int | None
    """LLM calls (agent turns) the rollout took (None = unknown: an OpenHands error row that recorded no history)."""
    prompt_tokens: int | None
    """Prompt tokens summed over all LLM calls (None = the run recorded no usage: unknown, not 0)."""
    completion_tokens: int | None
    """Completion tokens summed over all LLM calls (None = unknown)."""
    seconds: float = 0.0
    """Wall-clock time of the rollout (0 for the replay model)."""
    trajectory: str | None = None
    """Path of the saved trajectory / output row, when there is one."""
    candidate_files: list[str] | None = None
    """The files handed to the agent (None = run without retrieval)."""
    repo: str = ""
    """Source repository (``owner/name``), for per-repo breakdowns."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Agent-specific details (exit status, replay bookkeeping, ...)."""
    infra_failure: str | None = None
    """Why the harness could not evaluate the run (its report's ``infra_failure_ids`` / ``failure_reasons``: the
    environment broke); ``resolved`` is then None and the run is left out of every resolve rate."""

    @property
    def judged(self) -> bool:
        """Whether the harness evaluated the run (it counts in resolve rates)."""
        return self.resolved is not None and not self.infra_failure

    @property
    def tokens(self) -> int | None:
        """Prompt plus completion tokens; None when either is unknown."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return int(self.prompt_tokens) + int(self.completion_tokens)

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["tokens"] = self.tokens
        row["with_retrieval"] = self.candidate_files is not None
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "DownstreamResult":
        keys = cls.__dataclass_fields__.keys()
        return cls(**{k: v for k, v in row.items() if k in keys})


def candidate_hint(files: Sequence[str], excerpts: dict[str, str] | None = None, max_files: int = 20) -> str:
    """The one block candidate files are shown to an agent in (a numbered list, optional excerpts).

    >>> print(candidate_hint(["./pkg/a.py", "pkg/b.py"], {"pkg/a.py": "def f():"}))
    <candidate_files>
    A file-retrieval tool suggests these files as likely relevant to the issue, most likely first. They may be incomplete or partly wrong; verify before relying on them.
    1. pkg/a.py
       | def f():
    2. pkg/b.py
    </candidate_files>
    >>> candidate_hint([])
    ''
    """
    paths = dedupe(files)[:max_files]
    if not paths:
        return ""
    lines = [HINT_HEADER, HINT_INTRO]
    for i, path in enumerate(paths, start=1):
        lines.append(f"{i}. {path}")
        for text in ((excerpts or {}).get(path) or "").splitlines()[:8]:
            lines.append(f"   | {text[:160]}")
    lines.append(HINT_FOOTER)
    return "\n".join(lines)


def hinted_problem_statement(problem_statement: str, files: Sequence[str] | None,
                             excerpts: dict[str, str] | None = None) -> str:
    """The issue text an agent receives: unchanged without retrieval, else followed by the hint.

    >>> hinted_problem_statement("Bug.", None)
    'Bug.'
    >>> hinted_problem_statement("Bug.", ["a.py"]).splitlines()[:3]
    ['Bug.', '', '<candidate_files>']
    """
    hint = candidate_hint(files or [], excerpts)
    return problem_statement if not hint else f"{problem_statement.rstrip()}\n\n{hint}"


def config_from_section(section: dict[str, Any], key: str, config_cls: type, endpoint_field: str,
                        endpoint: str | None = None) -> Any:
    """``downstream.<key>`` as ``config_cls``; unknown keys are an error naming them; ``endpoint`` (the
    ``--endpoint`` flag) overrides ``endpoint_field``."""
    from codegrep.config import check_keys, config_fields

    values = dict(section.get(key) or {})
    check_keys(values, config_fields(config_cls), f"downstream.{key}")
    if endpoint:
        values[endpoint_field] = endpoint
    return config_cls(**values)
