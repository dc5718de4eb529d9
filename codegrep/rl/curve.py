"""``codegrep bench demos``: the warm start's P@1 against the number of real training tasks it learns from.

Issue 27 asks what bounds the trained agent. This measures one candidate, the number of real issues: a seeded
``dev`` set of the profile's REAL train tasks (the Lite sympy pool; never an evaluation instance) is held out;
for each size ``n`` the base model is warm-started on the rejection-sampled scripted-expert demonstrations
(:mod:`codegrep.rl.demos`) of ``n`` other real train tasks, with the train YAML's SFT settings, and evaluated
greedily on the dev tasks through the real turn function. Beside each point: the scripted expert's own P@1 on
the same dev tasks (what exact imitation reaches), a Wilson 95% interval, format errors and times. The dev set is
small (15 by default): the intervals are wide, and the output says so.

Every point is cached under ``--out`` in a folder keyed by its demonstrations, SFT settings, agent and env sections
and dev tasks, so a re-run reuses a point only when all of them are the same.

``codegrep bench policies`` (:func:`unused_train_check`) is the train-side check of a finished run: its warm start
and its GRPO policy on the real train tasks the run never used, paired, and which one the check would keep.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from codegrep.errors import UserError


def real_train_split(cfg: dict[str, Any], dev: int, seed: int) -> tuple[list[Any], list[Any], Any]:
    """(pool, dev tasks, resolver): the profile's whole train split, real-issue tasks only, evaluation instances
    dropped; ``dev`` of them (seeded) held out, the rest in a seeded order (a size-``n`` point takes the first n)."""
    import random

    from codegrep.data.default_set import task_kind
    from codegrep.data.tasks import whole_split_tasks
    from codegrep.rl.training_run import evaluation_ids_of

    tasks, resolver = whole_split_tasks(cfg)
    banned = evaluation_ids_of(cfg)
    real = sorted((t for t in tasks if task_kind(t.repo) == "real" and t.instance_id not in banned),
                  key=lambda t: t.instance_id)
    if dev and len(real) <= dev:  # dev 0 (bench policies): every real task, none held out; possibly none at all
        raise ValueError(f"profile {cfg.get('profile')}: {len(real)} real train tasks, need more than --dev {dev}")
    rng = random.Random(seed)
    held = set(t.instance_id for t in rng.sample(real, dev))
    pool = [t for t in real if t.instance_id not in held]
    rng.shuffle(pool)
    return pool, [t for t in real if t.instance_id in held], resolver


def expert_p_at_1(tasks: Sequence[Any], resolver: Any, cfg: dict[str, Any], terms: int = 6) -> list[float]:
    """Per task, 1.0 when the scripted expert (``first-listed``, ``terms`` terms) submits a gold file first."""
    from codegrep.agent.protocol import AgentConfig
    from codegrep.config import section
    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig, open_environment
    from codegrep.retrievers.scripted import play

    env = section(cfg, "env")
    pool, tools = WorktreePool.from_config(env), ToolConfig.from_dict(env)
    agent = AgentConfig.from_dict(cfg.get("agent"), "agent")
    hits = []
    for task in tasks:
        with open_environment(task, resolver, pool, env.get("mode", "objects"), tools) as e:
            ep = play("first-listed", task, e, agent, terms=terms, size=1)
        hits.append(float(bool(ep.submitted) and ep.submitted[0] in set(task.gold_files)))
    return hits


def demos_curve(cfg: dict[str, Any], train_config: str | Path | None, sizes: Sequence[int], dev: int,
                out: str | Path, seed: int = 0, progress: bool = True,
                first_turn: int | None = None, choice: str | None = None) -> dict[str, Any]:
    """The JSON object ``codegrep bench demos`` prints (module docstring); ``train_config`` None = the profile's
    train YAML with its ``train.*`` keys (:func:`codegrep.rl.training_run.train_arguments`). ``first_turn``
    overrides the YAML's ``first_turn_demos`` (turn-1-only demonstrations from other repositories, added to every
    point alike; :func:`codegrep.rl.training_run.first_turn`)."""
    from codegrep.agent.models import resolve_model
    from codegrep.agent.precision import cpu_features
    from codegrep.agent.protocol import AgentConfig
    from codegrep.claims import wilson
    from codegrep.config import section
    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig
    from codegrep.rl import demos as build
    from codegrep.rl import sft
    from codegrep.rl.training_run import evaluation_ids_of, first_turn as first_turn_demos, sft_bf16
    from codegrep.rl.training_run import train_arguments
    from codegrep.report import provenance
    from codegrep.rl.policy_rows import agent_rows, ranked_line_numbers

    out = Path(out)
    cg, grpo = train_arguments(cfg, config=train_config)
    if first_turn is not None:
        cg.first_turn_demos = first_turn
    if choice is not None:
        cg.demo_choice = choice
    pool_tasks, dev_tasks, resolver = real_train_split(cfg, dev, seed)
    beyond = sorted({int(n) for n in sizes if int(n) > len(pool_tasks)})
    if beyond:  # a point larger than the pool is the whole pool: said, not a silent relabelling
        print(f"--tasks {','.join(map(str, beyond))}: only {len(pool_tasks)} real train tasks outside the --dev "
              f"{dev}; {'that point uses' if len(beyond) == 1 else 'those points use'} {len(pool_tasks)}",
              file=sys.stderr)
    sizes = sorted({min(int(n), len(pool_tasks)) for n in sizes})
    env = section(cfg, "env")
    pool, tools = WorktreePool.from_config(env), ToolConfig.from_dict(env)
    agent = AgentConfig.from_dict(cfg.get("agent"), "agent")
    bf16 = sft_bf16(cg, grpo)
    expert = expert_p_at_1(dev_tasks, resolver, cfg)
    extra = first_turn_demos(cg, cfg, agent, evaluation_ids_of(cfg))
    points = []
    recipe = sft.recipe_settings(cg.sft_lr_scheduler, cg.sft_reshuffle)
    for n in sizes:
        started = time.perf_counter()
        demos = build.expert_demonstrations(pool_tasks[:n], resolver, pool, agent, seed=seed,
                                            env_mode=env.get("mode", "objects"), tool_config=tools,
                                            choice=cg.demo_choice)
        n_expert = len(demos)
        if not demos:
            points.append({"n_tasks": n, "n_demos": 0, "note": "no demonstration kept"})
            continue
        demos += extra
        settings = {"sft": [cg.model, cg.sft_epochs, cg.sft_learning_rate, cg.sft_batch_size, bf16, sft.SFT_RECIPE]
                    + ([cg.sft_seed] if cg.sft_seed else [])  # defaults key a point as before the fields existed
                    + ([recipe] if recipe else []),
                    "agent": cfg.get("agent"), "env": cfg.get("env"), "dev": [t.instance_id for t in dev_tasks]}
        point_dir = out / f"tasks-{n}-{sft.demos_key([d['messages'] for d in demos], settings)}"  # reused only as is
        point_dir.mkdir(parents=True, exist_ok=True)
        model = sft.warm_start(resolve_model(cg.model), [d["messages"] for d in demos], point_dir / "model",
                               epochs=cg.sft_epochs, learning_rate=cg.sft_learning_rate,
                               batch_size=cg.sft_batch_size, seed=cg.sft_seed, use_cpu=bool(grpo.use_cpu), bf16=bf16,
                               lr_scheduler=cg.sft_lr_scheduler, reshuffle=cg.sft_reshuffle)
        sft_s = time.perf_counter() - started
        record = json.loads((Path(model) / "warm_start.json").read_text())
        started = time.perf_counter()
        rows = agent_rows(cfg, model, dev_tasks, resolver, point_dir / "dev.jsonl", progress=progress)
        hits = [float(r["p@1"]) for r in rows]
        k = int(sum(hits))
        points.append({"n_tasks": n, "n_demos": n_expert, "n_first_turn_demos": len(extra),
                       "demo_tasks": len({d["instance_id"] for d in demos[:n_expert]}),
                       "gold_ranked_listed": ranked_line_numbers({"dev": rows}, ("dev",)).get("ranked_gold_listed_dev"),
                       "sft_tokens_per_epoch": record["tokens"], "sft_s": round(sft_s, 1),
                       "sft_train_loss": round(record["train_loss"], 4),
                       "p_at_1": k / len(hits), "p_at_1_ci95": [round(x, 3) + 0.0 for x in wilson(k, len(hits))],
                       "format_error_episodes": sum(bool(r["extra"].get("format_errors")) for r in rows),
                       "eval_s": round(time.perf_counter() - started, 1), "per_task": hits})
    return {"what": "warm-start P@1 on held-out REAL train tasks against the number of real train tasks "
                    "demonstrated (scripted-expert episodes, rejection sampled); SMALL dev sample",
            "profile": cfg.get("profile"), "train_config": str(train_config or cfg.get("train", {}).get("config")),
            "seed": seed, "demo_choice": cg.demo_choice,
            "dev_ids": [t.instance_id for t in dev_tasks], "n_pool": len(pool_tasks),
            "sft": {"epochs": cg.sft_epochs, "learning_rate": cg.sft_learning_rate, "batch_size": cg.sft_batch_size,
                    "precision": "bf16" if bf16 else "fp32", "first_turn_demos": len(extra), "seed": cg.sft_seed,
                    "lr_scheduler": cg.sft_lr_scheduler, "reshuffle": cg.sft_reshuffle},
            "expert_p_at_1": sum(expert) / len(expert), "expert_per_task": expert,
            "points": points, "cpu": cpu_features(), **provenance()}


def demos_figure(doc: dict[str, Any]) -> Any:
    """P@1 on the dev tasks against the number of real train tasks demonstrated (Wilson 95% bars), the scripted
    expert's P@1 on the same tasks as a dashed line with its band: the figure ``bench demos --result X.json`` saves
    beside ``X.json`` as ``X.png``."""
    from codegrep import plots
    from codegrep.claims import wilson

    fig, ax = plots.subplots(width=5.4)
    pts = [p for p in doc["points"] if p.get("n_demos")]
    n_dev = len(doc["dev_ids"])
    if pts:
        x = [p["n_tasks"] for p in pts]
        y = [p["p_at_1"] for p in pts]
        lo = [p["p_at_1"] - p["p_at_1_ci95"][0] for p in pts]
        hi = [p["p_at_1_ci95"][1] - p["p_at_1"] for p in pts]
        ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=3, label="warm start (SFT on expert demos)")
        for p in pts:
            ax.annotate(f"{p['n_demos']} demos", (p["n_tasks"], p["p_at_1"]), textcoords="offset points",
                        xytext=(4, 6), fontsize=7, color="0.35")
        k = round(doc["expert_p_at_1"] * n_dev)
        e_lo, e_hi = wilson(k, n_dev)
        ax.axhline(doc["expert_p_at_1"], ls="--", color="0.3", label="scripted expert (what imitation reaches)")
        ax.axhspan(e_lo, e_hi, color="0.85", alpha=0.5, lw=0)
        ax.set_xticks(x)
    ax.set_ylim(0, 1)
    ax.set_xlabel("real train tasks demonstrated")
    ax.set_ylabel(f"P@1 on {n_dev} held-out train tasks")
    plots.title(ax, "Does the number of real issues bound the warm start?",
                f"real TRAIN tasks only (SMALL: {n_dev} dev tasks), {plots.interval_label('Wilson')}")
    ax.legend(loc="upper left", fontsize=7)
    sets = "".join(f" --set {k}={v}" for k, v in (doc.get("overrides") or {}).items())
    plots.mark_source(fig, f"profile {doc.get('profile')}{sets}, seed {doc.get('seed')}")
    plots.place_notes(fig)
    return fig


# --- the run's own policies on the real train tasks it never used ----------------------------------------------------
def paired_choice(warm: Sequence[float], grpo: Sequence[float]) -> dict[str, Any]:
    """Per-task hits of the warm start and the GRPO policy on the same tasks: wins, losses, an exact sign test, and
    which policy the check would keep (the higher P@1; a tie keeps the warm start: GRPO showed no gain).

    >>> c = paired_choice([1, 1, 0, 0, 1], [1, 0, 0, 1, 0])
    >>> c["grpo_won"], c["grpo_lost"], c["keep"], round(c["sign_test_p"], 3)
    (1, 2, 'warm start', 1.0)
    >>> paired_choice([0, 0], [0, 1])["keep"], paired_choice([1, 0], [0, 1])["keep"]
    ('GRPO', 'warm start')
    """
    from codegrep.replicates import sign_test_p

    if len(warm) != len(grpo) or not warm:
        raise ValueError(f"paired_choice needs two equal, non-empty lists (got {len(warm)} and {len(grpo)})")
    won = sum(1 for a, b in zip(warm, grpo) if b > a)
    lost = sum(1 for a, b in zip(warm, grpo) if b < a)
    return {"grpo_won": won, "grpo_lost": lost, "sign_test_p": sign_test_p(won, lost),
            "keep": "GRPO" if sum(grpo) > sum(warm) else "warm start"}


def run_record(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any], Path, Path]:
    """(config.json, manifest.json, warm-start dir, GRPO final dir) of a finished run; a missing part is a
    ``UserError`` naming it (one line at the CLI)."""
    from codegrep.files import read_json_object
    from codegrep.rl.policy_rows import initial_policy_dir

    for name in ("config.json", "manifest.json", "final"):
        if not (run_dir / name).exists():
            raise UserError(f"--run {run_dir}: no {name} (a finished `codegrep train` run with save_final_model)")
    config, manifest = read_json_object(run_dir / "config.json"), read_json_object(run_dir / "manifest.json")
    warm = initial_policy_dir(config)
    if warm is None or not warm.is_dir():
        raise UserError(f"--run {run_dir}: its warm start {config.get('initial_policy')!r} (config.json "
                        "initial_policy) is not a directory here; the check compares the run's two policies")
    return config, manifest, warm, run_dir / "final"


class NoUnusedTask(UserError):
    """Every real train task of the profile was used by the run (a demonstration or a GRPO prompt): nothing is
    left for the training-task check. The one refusal notebook 03 records as "skipped"; any other error (a bad task
    file, a missing model) still stops the notebook."""


def unused_train_check(cfg: dict[str, Any], run_dir: str | Path, out: str | Path, limit: int | None = None,
                       progress: bool = True) -> dict[str, Any]:
    """The JSON object ``codegrep bench policies`` prints: a finished run's warm start and GRPO policy, greedy
    through the real turn function, on the profile's REAL train tasks the run never used (no demonstration of
    them, no GRPO prompt; never an evaluation instance), beside the scripted expert; paired wins and losses and
    which policy this train-side check would keep. These tasks lean hard: the demonstrations are rejection
    sampled, so most unused tasks are ones where the expert's first file was not gold. Rows are cached under
    ``out`` in a folder keyed by the run, its two policies, the tasks and what notebook 03's evaluation cache keys on
    (``policy_rows.evaluation_stamp``: the agent, env and tasks sections and the seed, so a ``--set`` of any of
    them evaluates again)."""
    from codegrep.agent.precision import cpu_features
    from codegrep.claims import wilson
    from codegrep.report import provenance
    from codegrep.rl import sft
    from codegrep.rl.policy_rows import agent_rows, evaluation_stamp

    run_dir = Path(run_dir)
    config, manifest, warm, final = run_record(run_dir)
    used = {d["instance_id"] for d in manifest.get("sft_demonstrations", []) if isinstance(d, dict)}
    used |= set(manifest.get("grpo_prompts", []))
    pool, _, resolver = real_train_split(cfg, 0, 0)
    tasks = sorted((t for t in pool if t.instance_id not in used), key=lambda t: t.instance_id)[:limit]
    if not tasks:
        raise NoUnusedTask(f"--run {run_dir}: every real train task of profile {cfg.get('profile')} was a "
                        "demonstration or a GRPO prompt; none is left to check on")
    # what the rows depend on, as notebook 03's evaluation cache reads it (the run, agent, env, tasks, seed)
    key = sft.demos_key([], {"run": str(run_dir.resolve()), "warm": str(warm.resolve()),
                             "stamp": evaluation_stamp(cfg, run_dir), "tasks": [t.instance_id for t in tasks]})
    folder = Path(out) / f"{run_dir.name}-{key}"
    arms = {}
    for name, model in (("warm_start", warm), ("grpo", final)):
        started = time.perf_counter()
        rows = agent_rows(cfg, model, tasks, resolver, folder / f"{name}.jsonl", progress=progress)
        hits = [float(r["p@1"]) for r in rows]
        k = int(sum(hits))
        arms[name] = {"p_at_1": k / len(hits), "p_at_1_ci95": [round(x, 3) + 0.0 for x in wilson(k, len(hits))],
                      "format_error_episodes": sum(bool(r["extra"].get("format_errors")) for r in rows),
                      "eval_s": round(time.perf_counter() - started, 1), "per_task": hits}
    expert = expert_p_at_1(tasks, resolver, cfg)
    return {"what": "a run's warm start and GRPO policy on the REAL train tasks it never used (no demonstration, "
                    "no GRPO prompt, never an evaluation instance): the train-side check of which policy to keep. "
                    "SMALL sample; the tasks lean hard (rejection-sampled demonstrations leave the expert's misses)",
            "profile": cfg.get("profile"), "run": run_dir.name, "run_profile": config.get("codegrep", {}).get("profile"),
            "n_tasks": len(tasks), "task_ids": [t.instance_id for t in tasks], "n_used_tasks": len(used),
            **arms, "expert_p_at_1": sum(expert) / len(expert), "expert_per_task": expert,
            **paired_choice(arms["warm_start"]["per_task"], arms["grpo"]["per_task"]),
            "cpu": cpu_features(), **provenance()}
