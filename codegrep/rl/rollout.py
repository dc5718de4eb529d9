"""Multi-turn rollouts for TRL's ``rollout_func``: the agent protocol at the token level.

Each completion is the concatenation ``turn_1 obs_1 turn_2 obs_2 ... turn_k``: model tokens (``env_mask`` 1,
trained) and observation tokens rendered by the chat template (``env_mask`` 0, never trained). Turns
are generated with TRL's own single-turn generator, so transformers and vLLM (colocate or server)
share this code. The protocol (prompt, ``<tool_call>`` parsing, observation text, caps) is
``codegrep.agent.protocol``; the environment is one pooled worktree checkout per task, shared by the
task's whole group.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Sequence

from codegrep.agent.protocol import AgentConfig, apply_turn, listed_files, relevance_of
from codegrep.data.tasks import Task
from codegrep.rl.rewards import EpisodeScore, score_episode


@dataclass
class Episode:
    """Token-level state of one rollout."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    rounds: int = 0
    tool_calls: int = 0
    generated: int = 0
    parse_errors: int = 0
    submitted: list[str] | None = None
    shown: list[str] = field(default_factory=list)
    done: bool = False
    restrictions: list[list] = field(default_factory=list)
    """Where a turn control restricted the sampled token: ``[completion position, allowed, ids]``
    (``codegrep.rl.constrained``; recorded only with ``constrained_loss``)."""

    def add(self, ids: Sequence[int], trained: bool, logprobs: Sequence[float] | None = None) -> None:
        self.completion_ids += list(ids)
        self.env_mask += [int(trained)] * len(ids)
        if self.logprobs is not None:
            self.logprobs = None if (trained and logprobs is None) else self.logprobs + list(
                logprobs if logprobs is not None else [0.0] * len(ids))


def observation_ids(tokenizer: Any, text: str, after_eos: bool) -> list[int]:
    """Tokens that close the assistant turn, carry ``text`` as a user message and open the next turn.

    Computed from the chat template by difference (prefix trimmed at the turn's EOS, as TRL does for
    tool messages); when the turn was cut before its EOS, the EOS is prepended.
    """
    base = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    prefix = tokenizer.apply_chat_template(base, tokenize=True, return_dict=False)
    full = tokenizer.apply_chat_template(base + [{"role": "user", "content": text}], tokenize=True,
                                         return_dict=False, add_generation_prompt=True)
    eos = tokenizer.eos_token_id
    cut = max(i for i, t in enumerate(prefix) if t == eos) + 1
    if full[:cut] != prefix[:cut]:
        raise ValueError("chat template is not prefix-preserving; cannot append observations token-exactly")
    return ([] if after_eos else [eos]) + list(full[cut:])


class RolloutRunner:
    """``rollout_func(prompts, trainer)``: runs every row of the batch as an episode in its task's checkout."""

    def __init__(self, tasks: Sequence[Task], resolver: Any, pool: Any, agent: AgentConfig, *,
                 env_mode: str = "worktree", tool_config: Any = None, fbeta: float = 0.5,
                 cost_weights: Sequence[float] = (1, 0, 0), cost_scales: Sequence[float] = (4, 32, 1024),
                 reward: str = "f_beta", seen_credit: float = 0.25) -> None:
        self.tasks = {t.instance_id: t for t in tasks}
        self.resolver, self.pool, self.agent = resolver, pool, agent
        self.env_mode, self.tool_config = env_mode, tool_config
        self.fbeta, self.cost_weights, self.cost_scales = fbeta, tuple(cost_weights), tuple(cost_scales)
        self.reward, self.seen_credit = reward, seen_credit

    def __call__(self, prompts: list[list[dict[str, str]]], trainer: Any) -> dict[str, Any]:
        from codegrep.env.tools import open_environment

        rows = trainer.current_rows
        if len(rows) != len(prompts):
            raise RuntimeError(f"rollout got {len(prompts)} prompts but {len(rows)} rows")
        tasks = [self.tasks[r["instance_id"]] for r in rows]
        tok = trainer.processing_class
        episodes = [Episode(tok.apply_chat_template(p, tokenize=True, return_dict=False, add_generation_prompt=True))
                    for p in prompts]
        with ExitStack() as stack:
            envs = {}
            for task in tasks:  # one checkout per task, shared by its whole group
                if task.instance_id not in envs:
                    envs[task.instance_id] = stack.enter_context(open_environment(
                        task, self.resolver, self.pool, self.env_mode, self.tool_config))
            for turn in range(1, self.agent.max_turns + 1):
                active = [i for i, e in enumerate(episodes) if not e.done]
                if not active:
                    break
                self._turn(trainer, tok, [episodes[i] for i in active], [envs[tasks[i].instance_id] for i in active],
                           turn, [tasks[i].problem_statement for i in active])
        scores = [self._score(e, t) for e, t in zip(episodes, tasks)]
        trainer.last_scores = scores
        if any(e.restrictions for e in episodes):  # the loss renormalises over what the controls allowed
            trainer.row_restrictions = [e.restrictions for e in episodes]
        out: dict[str, Any] = {"prompt_ids": [e.prompt_ids for e in episodes],
                               "completion_ids": [e.completion_ids for e in episodes],
                               "env_mask": [e.env_mask for e in episodes],
                               "logprobs": None if any(e.logprobs is None for e in episodes)
                               else [e.logprobs for e in episodes]}
        for name in ("retrieval", "format", "efficiency_cost"):
            out[name] = [getattr(s, name) for s in scores]
        return out

    def _turn(self, trainer: Any, tok: Any, episodes: list[Episode], envs: list[Any], turn: int,
              issues: Sequence[str]) -> None:
        """Generate one assistant turn for every active episode, then answer it from the environment (``issues``:
        each episode's task text, as evaluation passes it, for the ranked line's mention boost)."""
        contexts = [e.prompt_ids + e.completion_ids for e in episodes]
        trainer.turn_restrictions = None
        new_ids, new_logprobs = trainer._generate_single_turn(contexts, None, {}, num_generations=1)
        restricted = getattr(trainer, "turn_restrictions", None)
        eos = set(trainer.eos_token_ids)
        for k, (episode, env) in enumerate(zip(episodes, envs)):
            ids = list(new_ids[k])
            if restricted is not None:
                start = len(episode.completion_ids)
                episode.restrictions += [[start + t, allowed, banned] for t, allowed, banned in restricted[k]]
            episode.add(ids, trained=True, logprobs=None if new_logprobs is None else new_logprobs[k])
            episode.rounds += 1
            episode.generated += len(ids)
            # the same turn as evaluation (codegrep.agent.loop): one function applies it
            outcome = apply_turn(tok.decode(ids, skip_special_tokens=True), turn, self.agent, env.run_turn,
                                 issues[k], relevance_of(env))
            episode.parse_errors += bool(outcome.errors)
            episode.tool_calls += len(outcome.calls)
            if outcome.submit is not None:
                episode.submitted = outcome.submit
            if outcome.done:
                episode.done = True
                continue
            episode.shown += listed_files(outcome.observation)
            episode.add(observation_ids(tok, outcome.observation, after_eos=bool(ids) and ids[-1] in eos),
                        trained=False)

    def _score(self, episode: Episode, task: Task) -> EpisodeScore:
        return score_episode(episode.submitted, task.gold_files, rounds=episode.rounds,
                             tool_calls=episode.tool_calls, tokens=episode.generated,
                             parse_errors=episode.parse_errors, beta=self.fbeta,
                             cost_weights=self.cost_weights, cost_scales=self.cost_scales, reward=self.reward,
                             shown=episode.shown, seen=self.seen_credit)
