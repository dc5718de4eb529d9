"""Expert iteration: the comparison arm beside GRPO (issue 27). Sample, keep successes, SFT again.

From the warm start (the policy GRPO starts from), on the GRPO prompt pool of the main run (TRAIN tasks only; the
manifest's ``grpo_prompts``, never an evaluation instance):

1. **sample** ``expert_iteration_samples`` episodes per task at ``expert_iteration_temperature`` through the agent's
   own loop and turn controls (the decoding evaluation uses, :func:`codegrep.rl.policy_rows.agent_rows`), one
   seeded pass per sample;
2. **keep** an episode when its first submitted file is gold, was shown by an observation, and every pattern is in
   the visible issue (the demonstrations' rejection rule, :func:`codegrep.rl.demos.rejection_reason`), distinct
   episodes only, at most ``expert_iteration_per_task`` per task (:func:`kept_episodes`);
3. **SFT again**: fine-tune the warm start on the kept episodes (assistant tokens only, TRL ``SFTTrainer``,
   :func:`codegrep.rl.sft.warm_start`).

With the smoke settings the arm samples as many episodes as GRPO's run does (16 tasks x 2 = 32, GRPO 4 steps x 2
prompts x 4), so the two arms compare at the same rollout budget. The result is a policy directory evaluated on the
eval split like the others (label ``expert iteration``). When no episode is kept the arm IS the warm start (its rows
are the warm start's, and the summary says so).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

ARM = "expert iteration"
"""The label the arm's policy carries in notebook 03's evaluation."""


def kept_episodes(episodes: Sequence[dict[str, Any]], gold: dict[str, Sequence[str]], visible: dict[str, str],
                  per_task: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    r"""The episodes expert iteration learns from, and a count per outcome (``kept`` or the rejection reason, or
    ``duplicate`` / ``over per_task``). ``episodes`` are saved agent episodes (``instance_id``, ``messages``, and
    ``files``: the submitted files, best first); ``gold`` and ``visible`` map an instance to its gold files and
    its visible issue text.

    >>> sys, issue = {"role": "system", "content": "s"}, {"role": "user", "content": "Issue: foo breaks"}
    >>> call = '<tool_call>{"name": "grep", "arguments": {"pattern": "\\\\bfoo\\\\b"}}</tool_call>'
    >>> ep = lambda sub, obs="a.py (2 hits)": {"instance_id": "t", "files": [sub], "messages": [sys, issue,
    ...     {"role": "assistant", "content": call}, {"role": "user", "content": obs},
    ...     {"role": "assistant", "content": "submit " + sub}]}
    >>> kept, counts = kept_episodes([ep("a.py"), ep("a.py"), ep("b.py"), ep("a.py", "c.py (1 hit)")],
    ...                              {"t": ["a.py"]}, {"t": "foo breaks"}, per_task=2)
    >>> len(kept), counts
    (1, {'kept': 1, 'duplicate': 1, 'first submitted file is not gold': 1, 'first submitted file not shown in an observation': 1})
    """
    from codegrep.agent.protocol import parse_tool_calls
    from codegrep.rl.demos import rejection_reason

    kept: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    seen: set[str] = set()
    per: dict[str, int] = {}
    for ep in episodes:
        iid, messages = ep["instance_id"], ep.get("messages") or []
        turns = [m["content"] for m in messages[2:] if m["role"] == "assistant"]
        observations = [m["content"] for m in messages[2:] if m["role"] == "user"]
        calls = [c for text in turns for c in parse_tool_calls(text).calls if c.name in ("grep", "glob")]
        reason = rejection_reason(calls, "\n".join(observations), ep.get("files") or [], gold.get(iid, []),
                                  visible.get(iid, ""))
        key = json.dumps([iid, turns])
        if reason is None and key in seen:
            reason = "duplicate"
        elif reason is None and per.get(iid, 0) >= per_task:
            reason = "over per_task"
        counts[reason or "kept"] = counts.get(reason or "kept", 0) + 1
        if reason is None:
            seen.add(key)
            per[iid] = per.get(iid, 0) + 1
            kept.append(ep)
    return kept, counts


def prompt_pool(cfg: dict[str, Any], run_dir: str | Path) -> tuple[list[Any], Any]:
    """(tasks, resolver): the main run's GRPO prompt pool (its manifest's ``grpo_prompts``), in that order; an
    evaluation instance there is an error (it never should be)."""
    from codegrep.data.tasks import profile_tasks
    from codegrep.rl.training_run import evaluation_ids_of

    run_dir = Path(run_dir)
    saved = json.loads((run_dir / "config.json").read_text())
    ids = json.loads((run_dir / "manifest.json").read_text()).get("grpo_prompts") or []
    tasks, resolver = profile_tasks(cfg, split="train", limit=saved["codegrep"].get("train_tasks"))
    by_id = {t.instance_id: t for t in tasks}
    leaked = set(ids) & evaluation_ids_of(cfg)
    if leaked:
        raise ValueError(f"{run_dir}/manifest.json: evaluation instances among the GRPO prompts: {sorted(leaked)[:3]}")
    return [by_id[i] for i in ids if i in by_id], resolver


def expert_iteration(cfg: dict[str, Any], run_dir: str | Path, artifacts: str | Path,
                     play: Callable[..., list[dict[str, Any]]]) -> tuple[Path, dict[str, Any]]:
    """Run the arm (module docstring) for the main run in ``run_dir``: (policy directory, summary). ``play`` runs a
    policy on tasks and returns harness rows, ``play(cfg, model, tasks, resolver, out_path)`` (notebook 03 passes
    :func:`codegrep.rl.policy_rows.agent_rows`, the evaluation's own loop). Every part is
    cached under ``artifacts/train/expert_iteration/<key>``: sample passes by rows, the SFT by its directory; the
    summary is also written there (``summary.json``, with the kept episodes' instance ids)."""
    import copy

    import torch

    from codegrep.agent.loop import load_episode
    from codegrep.agent.protocol import AgentConfig, visible_issue
    from codegrep.data.tasks import seeded_sample
    from codegrep.files import write_atomic
    from codegrep.rl import sft
    from codegrep.rl.training_run import sft_bf16, train_arguments

    cg, grpo = train_arguments(cfg)
    run_dir = Path(run_dir)
    saved = json.loads((run_dir / "config.json").read_text())
    warm = Path(saved["initial_policy"])
    tasks, resolver = prompt_pool(cfg, run_dir)
    tasks = seeded_sample(tasks, cg.expert_iteration_tasks, int(grpo.seed))
    temperature = float(cg.expert_iteration_temperature)
    bf16 = sft_bf16(cg, grpo)
    settings = {"warm_start": warm.name, "tasks": [t.instance_id for t in tasks], "agent": cfg.get("agent"),
                "env": cfg.get("env"),
                "samples": cg.expert_iteration_samples, "temperature": temperature, "seed": grpo.seed,
                "per_task": cg.expert_iteration_per_task, "epochs": cg.expert_iteration_epochs,
                "lr": cg.expert_iteration_learning_rate, "bs": cg.sft_batch_size, "bf16": bf16, "sft": sft.SFT_RECIPE}
    root = Path(artifacts) / "train" / "expert_iteration" / sft.demos_key([], settings)
    sample_cfg = copy.deepcopy(cfg)
    sample_cfg.setdefault("agent", {}).update(temperature=temperature, top_p=1.0)
    episodes = []
    for j in range(int(cg.expert_iteration_samples)):
        torch.manual_seed(int(grpo.seed) * 1000 + j)  # one seeded pass per sample
        rows = play(sample_cfg, warm, tasks, resolver, root / f"sample-{j}.jsonl")
        episodes += [load_episode(r["extra"]["episode_path"]) for r in rows]
    agent = AgentConfig.from_dict(cfg.get("agent"), "agent")
    gold = {t.instance_id: list(t.gold_files) for t in tasks}
    kept, counts = kept_episodes(episodes, gold,
                                 {t.instance_id: visible_issue(t.problem_statement, agent) for t in tasks},
                                 int(cg.expert_iteration_per_task))
    summary = {"tasks": len(tasks), "samples_per_task": int(cg.expert_iteration_samples), "episodes": len(episodes),
               "successes": sum(bool(e.get("files")) and e["files"][0] in gold[e["instance_id"]] for e in episodes),
               "kept": len(kept), "outcomes": counts, "temperature": temperature}
    if not kept:
        model, summary["policy"] = warm, "the warm start (no episode kept, nothing to fine-tune on)"
    else:
        model, summary["policy"] = fine_tune(warm, kept, root / "model", cg, grpo), \
            "the warm start fine-tuned on its kept episodes"
    write_atomic(root / "summary.json", json.dumps({**summary, "kept_ids": [e["instance_id"] for e in kept]}, indent=1))
    return model, summary


def fine_tune(warm: str | Path, kept: Sequence[dict[str, Any]], out_dir: Path, cg: Any, grpo: Any) -> Path:
    """Step 3, SFT again: the warm start fine-tuned on the kept episodes' chats (assistant tokens only; reused
    when ``out_dir`` holds it), with ``expert_iteration_epochs`` / ``_learning_rate`` and the warm start's batch
    size and precision."""
    from codegrep.rl import sft
    from codegrep.rl.training_run import sft_bf16

    return sft.warm_start(Path(warm), [e["messages"] for e in kept], Path(out_dir),
                          epochs=cg.expert_iteration_epochs, learning_rate=cg.expert_iteration_learning_rate,
                          batch_size=cg.sft_batch_size, seed=int(grpo.seed), use_cpu=bool(grpo.use_cpu),
                          bf16=sft_bf16(cg, grpo))
