"""What a decoder is given for one agent turn: where each row stops (``codegrep.agent.stopping``) and which tokens it
may write (``codegrep.agent.constraints``).

One builder serves both decoders of a turn: the evaluation/serving policy (``HFPolicy``) and GRPO's rollouts
(``CodeGrepGRPOTrainer._generate_single_turn``), so the episodes training samples are decoded under the same rules as
the ones evaluation scores. Like an inference server's stop sequences and guided decoding, the controls change
where a row ends and which tokens may be chosen, never the tools, their output or the parser. In GRPO the loss reads
the model's own (unconstrained) log-probabilities of the sampled tokens, as with TRL's vLLM guided decoding, unless
``constrained_loss`` is on: then the masked, renormalised ones (``codegrep.rl.constrained``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def stop_after_calls(spec: dict[str, Any]) -> int | None:
    """Where an hf policy's rows stop (``HFPolicy.stop_after_calls``): ``stop_early: true`` (the default) stops at
    the episode's ``max_calls_per_turn`` (or a submit); ``false`` never stops early.

    >>> stop_after_calls({"max_calls_per_turn": 8}), stop_after_calls({"stop_early": False}), stop_after_calls({})
    (8, 0, 8)
    """
    from codegrep.agent.protocol import AgentConfig

    if spec.get("stop_early") is False:
        return 0
    return spec.get("max_calls_per_turn") or AgentConfig.max_calls_per_turn


@dataclass(frozen=True)
class TurnControls:
    """The decoding controls of one agent turn (the ``agent:`` keys of the same names, docs/agent.md).

    >>> TurnControls.from_agent({"max_calls_per_turn": 8, "copy_greps": True, "min_greps": 6})
    TurnControls(stop_after_calls=8, distinct_greps=False, copy_greps=True, min_greps=6, argument_keys=False, submit_ranked=False)
    """

    stop_after_calls: int | None = 0
    """A row stops at its closed submit call or its ``stop_after_calls``-th closed call (None: at a submit only;
    0: never early)."""
    distinct_greps: bool = False
    """A grep may not start as an earlier grep of the turn did."""
    copy_greps: bool = False
    """Searches copy the issue's terms, submits name files the observations listed, each once."""
    min_greps: int = 0
    """With ``copy_greps``: a turn of greps may not end before this many greps while issue terms are left."""
    argument_keys: bool = False
    """A call's first argument key is one of its tool's argument names (no nested ``"arguments"``)."""
    submit_ranked: bool = False
    """With ``copy_greps``: a submit's first file is the first file of the last ranked line shown, where one was."""

    @classmethod
    def from_agent(cls, spec: dict[str, Any]) -> TurnControls:
        """From an ``agent:`` section (its ``stop_early``, ``max_calls_per_turn``, ``distinct_greps``, ``copy_greps``,
        ``min_greps``, ``argument_keys``, ``submit_ranked``); ``min_greps`` or ``submit_ranked`` without
        ``copy_greps`` is an error naming both.

        >>> TurnControls.from_agent({"submit_ranked": True})
        Traceback (most recent call last):
        ...
        ValueError: agent.submit_ranked needs agent.copy_greps: true (it is part of that constraint)
        """
        for key in ("min_greps", "submit_ranked"):
            if spec.get(key) and not spec.get("copy_greps"):
                raise ValueError(f"agent.{key} needs agent.copy_greps: true (it is part of that constraint)")
        return cls(stop_after_calls(spec), bool(spec.get("distinct_greps")), bool(spec.get("copy_greps")),
                   int(spec.get("min_greps") or 0), bool(spec.get("argument_keys")), bool(spec.get("submit_ranked")))

    def generate_kwargs(self, tokenizer: Any, prompt_width: int) -> dict[str, Any]:
        """``stopping_criteria`` / ``logits_processor`` for one batched decode whose new tokens start at column
        ``prompt_width`` (left-padded prompts); only the controls that are on."""
        from transformers import LogitsProcessorList, StoppingCriteriaList

        from codegrep.agent.constraints import ArgumentKeys, CopiedGrepPatterns, DistinctGrepStarts
        from codegrep.agent.stopping import TurnStop

        out: dict[str, Any] = {}
        if self.stop_after_calls != 0:
            out["stopping_criteria"] = StoppingCriteriaList([TurnStop(tokenizer, prompt_width, self.stop_after_calls)])
        processors = [DistinctGrepStarts(tokenizer, prompt_width)] * self.distinct_greps \
            + [CopiedGrepPatterns(tokenizer, prompt_width, self.min_greps, self.submit_ranked)] * self.copy_greps \
            + [ArgumentKeys(tokenizer, prompt_width)] * self.argument_keys
        if processors:
            out["logits_processor"] = LogitsProcessorList(processors)
        return out
