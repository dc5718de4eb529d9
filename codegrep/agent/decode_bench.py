"""``codegrep bench decode``: agent evaluation time, the decoding of issue 27 against the path before it.

Both arms run the same model on the same seeded real TRAIN tasks (never an evaluation instance) through the real
turn function, greedy, ``agent.batch_size`` episodes per batch, one after the other in one process:

* ``baseline``: tasks in their seeded order, rows decoded by ``model.generate`` with transformers' cache layers (a
  finished row stays in its batch until the last one ends; the cache is concatenated every step), no early stop; the
  profile's token constraint (``copy_greps``, ``min_greps``, ``distinct_greps``) as in the other arms, so all three
  should write the same episodes;
* ``rows_leave``: batches of similar issue length, rows leave the batch when they end (``prefix_cache.decode_rows``,
  a growing cache buffer), a row stops at its submit or its call cap (``stop_early``), no drafts;
* ``fast``: the profile's path: ``rows_leave`` plus the profile's ``agent.draft_tokens`` prompt-lookup drafts per
  step (speculative decoding; the arm is left out when the profile drafts nothing).

Both use the prefix cache and the profile's prefill precision. Before each arm the process's caches of snapshot work
(relevance indexes and scores, per-file analyses, tree listings) are emptied, so a later arm does not reuse the
first's (the relevance-score cache, added for notebook 03's passes, would otherwise hand the second arm ~1.5 s a
sympy snapshot). Printed: seconds per arm and per instance, the
speedups (``speedup`` fast against baseline, ``draft_speedup`` fast against rows_leave), generated tokens, tokens
written per row-step, P@1 of each arm (a check that speed did not change what the agent does: the stop drops only
text the turn function never reads; a smaller batch or a several-token step can round floats differently) and the
share of episodes whose turns are identical.

With ``batch_sizes`` (``--batch-sizes 8 16``) the arms are instead the profile's path (``fast``) at each batch size,
smallest first, each with a prefix cache of its own: ``batch_<n>`` with its seconds and ``peak_rss_mb``, the largest
resident set of the process sampled during the arm (its ripgrep/git children, small, are not counted: a child caught
before its ``exec`` would count the parent's pages twice). The process holds the model and what
earlier arms left resident, so the smallest batch's peak is its own and a larger batch's is at least its own need.
``identical_episodes_share_batches`` compares each arm's turns with the first arm's (a padded batch of another size
can round a greedy choice differently).

With ``decode_precisions`` (``--decode-precisions fp32 bf16``) the arms are the profile's path (``fast``) decoding in
each precision (``agent.decode_precision``; each with a prefix cache of its own), in the order given: ``decode_<p>``
with seconds and ``peak_rss_mb``; ``identical_episodes_share_precisions`` compares each arm's turns with the first
arm's and ``speedup_precisions`` its time with the first's.

With ``attentions`` (``--attention padded spans``) the arms are the profile's path (``fast``) with each decoding
attention, in the order given, each with a prefix cache of its own: ``attention_padded`` (every row reads the batch's
whole left-padded cache), ``attention_spans`` (each group of rows from its earliest non-padding slot,
``codegrep.agent.row_spans``; the default); ``identical_episodes_share_attentions`` compares each arm's turns with the
first arm's and ``speedup_attentions`` its time with the first's (the same slots and weights: only float rounding
can make turns differ).

With ``processes`` (``--processes 2``, :func:`bench_processes`) the arms are one whole evaluation through
``codegrep.rl.policy_rows.agent_rows`` (notebook 03's path) in one process at the profile's ``agent.cpu_threads``,
then the same with ``agent.eval_processes`` processes sharing its batches (the usable cores split evenly among
them): seconds, ``speedup``, ``peak_mb`` (the largest sum of the proportional set sizes of this process and its
children, sampled: each process's model and batch working set), P@1 and the share of rows whose files are
identical (one thread sums floats in another order than two, so a greedy choice at a near tie can differ).
"""
from __future__ import annotations

import copy
import time
from contextlib import ExitStack
from typing import Any


def bench_decode(cfg: dict[str, Any], model: str, n: int = 32, seed: int = 0,
                 batch_sizes: list[int] | None = None, decode_precisions: list[str] | None = None,
                 attentions: list[str] | None = None) -> dict[str, Any]:
    """The JSON object ``codegrep bench decode`` prints (module docstring); ``batch_sizes`` compares the profile's
    path at those batch sizes, ``decode_precisions`` in those decoding precisions, ``attentions`` with those decoding
    attentions (padded, spans), instead of against the baseline."""
    from codegrep.agent.loop import run_episodes
    from codegrep.agent.policies import HFPolicy, make_policy
    from codegrep.agent.precision import cpu_features
    from codegrep.agent.protocol import AgentConfig, visible_issue
    from codegrep.config import section
    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig, open_environment
    from codegrep.mining.bench import RssSampler
    from codegrep.rl.curve import real_train_split

    pool_tasks, dev, resolver = real_train_split(cfg, 1, seed)
    import random

    tasks = random.Random(seed).sample(pool_tasks + dev, min(n, len(pool_tasks) + len(dev)))
    spec = dict(cfg.get("agent") or {})
    config = AgentConfig.from_dict(spec, "agent")
    env = section(cfg, "env")
    pool, tools = WorktreePool.from_config(env), ToolConfig.from_dict(env)
    fast = make_policy({**spec, "model": model, "policy": "hf", "endpoint": None, "temperature": 0.0})
    size = fast.batch_size
    by_length = sorted(tasks, key=lambda t: len(visible_issue(t.problem_statement, config)))
    if batch_sizes:
        arms = {f"batch_{b}": (_at_batch_size(fast, b), by_length) for b in sorted(set(batch_sizes))}
    elif decode_precisions:
        from codegrep.agent.precision import resolve_precision

        arms = {}
        for setting in dict.fromkeys(decode_precisions):
            arm = _at_batch_size(fast, size)
            arm.decode_precision = resolve_precision(setting, name="--decode-precisions") \
                if fast.device == "cpu" and fast.prefix_cache is not None else "fp32"
            arms[f"decode_{setting}"] = (arm, by_length)
    elif attentions:
        arms = {}
        for setting in dict.fromkeys(attentions):
            arm = _at_batch_size(fast, size)
            arm.span_attention = setting == "spans"
            arms[f"attention_{setting}"] = (arm, by_length)
    else:
        base = HFPolicy(fast.model, fast.tokenizer, max_new_tokens=fast.max_new_tokens, device=fast.device,
                        batch_size=size, cpu_precision=fast.cpu_precision, stop_after_calls=0, leave_batch=False,
                        prefix_cache_mb=fast.prefix_cache.max_bytes >> 20 if fast.prefix_cache else 0,  # its own
                        distinct_greps=fast.controls.distinct_greps, copy_greps=fast.controls.copy_greps,
                        min_greps=fast.controls.min_greps,  # the same token constraint: which tokens may be written
                        argument_keys=fast.controls.argument_keys, submit_ranked=fast.controls.submit_ranked)
        plain = _at_batch_size(fast, size)  # the profile's policy without drafts, with a prefix cache of its own
        plain.draft_tokens = 0
        arms = {"baseline": (base, tasks), "rows_leave": (plain, by_length), "fast": (fast, by_length)}
        if not fast.draft_tokens:
            arms.pop("rows_leave")
    out: dict[str, Any] = {"bench": "decode", "model": str(model), "n_tasks": len(tasks), "batch_size": size,
                           "tasks": "seeded real TRAIN tasks (never an evaluation instance)", "arms": {}}
    turns: dict[str, dict[str, list[str]]] = {}
    gold = {t.instance_id: set(t.gold_files) for t in tasks}
    for name, (policy, order) in arms.items():
        _forget_snapshot_caches()  # each arm builds what it uses: a later arm would otherwise reuse the first's work
        started, episodes, rss = time.perf_counter(), [], RssSampler(0.1, children=False)
        rss.start()
        for i in range(0, len(order), policy.batch_size):
            batch = order[i:i + policy.batch_size]
            with ExitStack() as stack:
                envs = [stack.enter_context(open_environment(t, resolver, pool, env.get("mode", "objects"), tools))
                        for t in batch]
                episodes += run_episodes([(t.problem_statement, e) for t, e in zip(batch, envs)], policy, config,
                                         ids=[t.instance_id for t in batch])
        seconds = time.perf_counter() - started
        hits = [bool(ep.files) and ep.files[0] in gold[ep.instance_id] for ep in episodes]
        turns[name] = {ep.instance_id: [t.output for t in ep.turns] for ep in episodes}
        out["arms"][name] = {"seconds": round(seconds, 1), "s_per_instance": round(seconds / len(order), 2),
                             "generated_tokens": sum(t.completion_tokens for ep in episodes for t in ep.turns),
                             "p_at_1": round(sum(hits) / len(hits), 3), "draft_tokens": policy.draft_tokens,
                             "batch_size": policy.batch_size, "peak_rss_mb": rss.stop(),
                             "decode_precision": getattr(policy, "decode_precision", "fp32"),
                             "span_attention": bool(getattr(policy, "span_attention", False) and policy.leave_batch
                                                    and policy.prefix_cache is not None)}
        stats = policy.prefix_cache.stats if policy.prefix_cache else {}
        if stats.get("row_steps"):
            out["arms"][name]["tokens_per_row_step"] = round(stats["written_tokens"] / stats["row_steps"], 2)

    def share(x: str, y: str) -> float:
        same = [turns[x][i] == turns[y][i] for i in turns[x]]
        return round(sum(same) / len(same), 3)

    if batch_sizes or decode_precisions or attentions:
        first = next(iter(arms))
        kind = "batches" if batch_sizes else "precisions" if decode_precisions else "attentions"
        out[f"identical_episodes_share_{kind}"] = {name: share(first, name) for name in arms}
        out["fastest"] = min(out["arms"], key=lambda name: out["arms"][name]["seconds"])
        if decode_precisions or attentions:
            out[f"speedup_{kind}"] = {name: round(out["arms"][first]["seconds"] / max(arm["seconds"], 1e-9), 2)
                                      for name, arm in out["arms"].items()}
    else:
        a, b = out["arms"]["baseline"], out["arms"]["fast"]
        out["speedup"] = round(a["seconds"] / max(b["seconds"], 1e-9), 2)
        out["identical_episodes_share"] = share("baseline", "fast")
    if "rows_leave" in arms:
        fast_seconds = out["arms"]["fast"]["seconds"]
        out["draft_speedup"] = round(out["arms"]["rows_leave"]["seconds"] / max(fast_seconds, 1e-9), 2)
        out["identical_episodes_share_drafts"] = share("rows_leave", "fast")
    from codegrep.report import provenance

    out["cpu"] = cpu_features()
    return {**out, **provenance()}


def _forget_snapshot_caches() -> None:
    """Empty the process's caches of snapshot work (relevance indexes and scores, per-file analyses, tree listings),
    so every arm pays the same environment-side costs."""
    from codegrep.env.gitobjects import forget_trees
    from codegrep.retrievers import lexical

    lexical.clear_content_cache()
    lexical.clear_environment_caches()
    forget_trees()


def _at_batch_size(policy: Any, size: int) -> Any:
    """The profile's policy at another batch size, sharing its weights, with an empty prefix cache of its own."""
    from codegrep.agent.prefix_cache import PrefixCache

    other = copy.copy(policy)
    other.batch_size = max(1, int(size))
    other.prefix_cache = PrefixCache(policy.prefix_cache.max_bytes) if policy.prefix_cache else None
    return other


def bench_processes(cfg: dict[str, Any], model: str, n: int = 32, seed: int = 0, processes: int = 2) -> dict[str, Any]:
    """The JSON object ``codegrep bench decode --processes`` prints (module docstring)."""
    import random
    import tempfile
    from pathlib import Path

    from codegrep.agent.precision import cpu_features
    from codegrep.mining.bench import RssSampler
    from codegrep.report import provenance
    from codegrep.rl.curve import real_train_split
    from codegrep.rl.policy_rows import agent_rows

    pool_tasks, dev, resolver = real_train_split(cfg, 1, seed)
    tasks = random.Random(seed).sample(pool_tasks + dev, min(n, len(pool_tasks) + len(dev)))
    arms = {"one_process": 1, f"processes_{processes}": processes}
    out: dict[str, Any] = {"bench": "decode --processes", "model": str(model), "n_tasks": len(tasks),
                           "batch_size": int((cfg.get("agent") or {}).get("batch_size") or 8),
                           "cpu_threads_one_process": (cfg.get("agent") or {}).get("cpu_threads"),
                           "tasks": "seeded real TRAIN tasks (never an evaluation instance)", "arms": {}}
    files: dict[str, dict[str, list[str]]] = {}
    with tempfile.TemporaryDirectory(prefix="codegrep-bench-processes-") as tmp:
        for name, k in arms.items():
            arm_cfg = copy.deepcopy(cfg)
            arm_cfg.setdefault("agent", {})["eval_processes"] = k
            rss = RssSampler(0.2, children=True)
            rss.start()
            started = time.perf_counter()
            rows = agent_rows(arm_cfg, model, tasks, resolver, Path(tmp) / name / "rows.jsonl", progress=True)
            seconds = time.perf_counter() - started
            gold = {t.instance_id: set(t.gold_files) for t in tasks}
            files[name] = {r["instance_id"]: list(r.get("files") or []) for r in rows}
            hits = [bool(f) and f[0] in gold[i] for i, f in files[name].items()]
            out["arms"][name] = {"processes": k, "seconds": round(seconds, 1),
                                 "s_per_instance": round(seconds / max(len(rows), 1), 2),
                                 "p_at_1": round(sum(hits) / max(len(hits), 1), 3), "peak_mb": rss.stop()}
    one, many = out["arms"]["one_process"], out["arms"][f"processes_{processes}"]
    out["speedup"] = round(one["seconds"] / max(many["seconds"], 1e-9), 2)
    same = [files["one_process"][i] == files[f"processes_{processes}"][i] for i in files["one_process"]]
    out["identical_rows_share"] = round(sum(same) / max(len(same), 1), 3)
    out["cpu"] = cpu_features()
    return {**out, **provenance()}

