"""Supervised warm start (TRL ``SFTTrainer``, assistant tokens only) on demonstrations.

Three sources, all in the agent's tool-call format (chat ``messages``):

* ``recorded``: real mini-swe-agent runs (the shipped 400, or ``recorded_runs``) converted to this
  protocol by :mod:`codegrep.mining.explore`: the run's own greps/finds/reads grouped into parallel turns,
  observations from the recording cut as the live tools cut them, ending with the run's CATM target files.
  Runs on evaluation instances are excluded.
* ``catm``: demonstrations mined by the CATM stage (``codegrep.mining.catm``; observations replayed or
  placeholders).
* ``synthetic``: oracle-guided scripted episodes on the profile's TRAIN split. Not learned and
  not a model's output: turn 1 greps identifiers taken from the issue text (real ripgrep over the real
  checkout, preferring patterns whose hits include a target file), turn 2 submits the target files.
  They teach the format and the grep-then-submit pattern; they are labelled synthetic wherever used.

The untrained 135M model never emits a tool call, so without a warm start every GRPO reward is 0.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Sequence

from codegrep.agent.protocol import AgentConfig, build_messages, format_observation, turn_note
from codegrep.data.tasks import Task
from codegrep.env.tools import ToolCall

SOURCES = ("synthetic", "recorded", "catm")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_STOP = set("""this that with from into when then than there their which while where what will would should could
have been being also only each every other such some more most these those them they your about after before
above below under over between value values return returns given using used uses code file files function method
class object none true false default described removed source docstring find below""".split())


def issue_identifiers(text: str, limit: int = 8) -> list[str]:
    """Candidate grep patterns from an issue: code-like words first (snake_case, CamelCase), then long words.

    >>> issue_identifiers("The parse_known_args helper of ArgumentParser returns the remaining flags")
    ['parse_known_args', 'ArgumentParser', 'remaining', 'helper', 'flags']
    """
    seen: dict[str, None] = {}
    for w in _WORD.findall(text):
        if w.lower() not in _STOP:
            seen.setdefault(w, None)

    def rank(w: str) -> tuple[int, int]:
        code_like = "_" in w or (any(c.isupper() for c in w[1:]) and not w.isupper())
        return (0 if code_like else 1, -len(w))

    return sorted(seen, key=rank)[:limit]


def tool_call_text(calls: Sequence[ToolCall]) -> str:
    """Assistant text for a turn: one ``<tool_call>`` per line.

    >>> tool_call_text([ToolCall("submit", {"files": ["a.py"]})])
    '<tool_call>{"name": "submit", "arguments": {"files": ["a.py"]}}</tool_call>'
    """
    return "\n".join(f"<tool_call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</tool_call>"
                     for c in calls)


def scripted_episode(task: Task, env: Any, agent: AgentConfig, n_patterns: int = 2) -> list[dict[str, str]]:
    """One oracle-guided demonstration: grep issue identifiers (real results), then submit the targets."""
    candidates = [ToolCall("grep", {"pattern": re.escape(w), "include": "*.py"})
                  for w in issue_identifiers(task.problem_statement)] or [ToolCall("glob", {"pattern": "**/*.py"})]
    results = env.run_turn(candidates)
    gold = set(task.gold_files)

    def usefulness(k: int) -> tuple[int, int]:  # hits a target first, then fewest lines (most specific)
        out = results[k].output if results[k].ok else ""
        return (0 if any(g in out for g in gold) else 1, len(out.splitlines()) or 10**6)

    chosen = sorted(sorted(range(len(candidates)), key=usefulness)[:n_patterns])
    calls, answers = [candidates[k] for k in chosen], [results[k] for k in chosen]
    messages = build_messages(task.problem_statement, agent)
    observation = format_observation(answers, calls, max_tokens=agent.max_observation_tokens,
                                     note=turn_note(2, agent.max_turns))
    return messages + [{"role": "assistant", "content": tool_call_text(calls)},
                       {"role": "user", "content": observation},
                       {"role": "assistant", "content": tool_call_text(
                           [ToolCall("submit", {"files": list(task.gold_files)})])}]


def synthetic_demonstrations(tasks: Sequence[Task], resolver: Any, pool: Any, agent: AgentConfig,
                             env_mode: str = "worktree", tool_config: Any = None) -> list[list[dict[str, str]]]:
    """One scripted episode per task (see the module docstring), in the tasks' order."""
    from tqdm.auto import tqdm

    from codegrep.env.tools import open_environment

    demos = []
    for task in tqdm(tasks, desc="synthetic demonstrations", unit="task"):
        with open_environment(task, resolver, pool, env_mode, tool_config) as env:
            demos.append(scripted_episode(task, env, agent))
    return demos


def catm_demonstrations(cfg: dict[str, Any], artifacts: Path) -> list[dict[str, Any]]:
    """Demonstrations mined by CATM for the profile (``codegrep.mining.catm.mine_profile``), with their ids."""
    from codegrep.artifacts import Outputs
    from codegrep.mining.catm import mine_profile

    result = mine_profile(cfg, Outputs(artifacts, artifacts / "figures"))
    path = Path(result.demonstrations_path)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{"source": "catm", "instance_id": r.get("instance_id", "") if isinstance(r, dict) else "",
             "messages": r["messages"] if isinstance(r, dict) else r} for r in rows]


def recorded_demonstrations(cg: Any, cfg: dict[str, Any], agent: AgentConfig,
                            exclude: set[str]) -> list[dict[str, Any]]:
    """Real recorded runs as demonstrations (``codegrep.mining.explore``); ``exclude`` runs are never read."""
    from codegrep.data.shipped import trajectory_dirs
    from codegrep.env.tools import ToolConfig
    from codegrep.mining.explore import ConvertConfig, recorded_demonstrations as convert

    demos, _ = convert(cg.recorded_runs or trajectory_dirs(), agent, exclude=exclude,
                       config=ConvertConfig(max_calls=cg.recorded_max_calls),
                       tools=ToolConfig.from_dict(cfg.get("env")))
    return [{"source": "recorded", "instance_id": d["instance_id"], "messages": d["messages"]} for d in demos]


def mix(groups: dict[str, list[dict[str, Any]]], limit: int | None) -> list[dict[str, Any]]:
    """All demonstrations, or ``limit`` of them taken from the sources in turn (equal shares while they last).

    >>> mix({"a": [1, 2, 3], "b": [9]}, 3), mix({"a": [1, 2]}, None)
    ([1, 9, 2], [1, 2])
    """
    lists = [list(v) for v in groups.values()]
    if not limit:
        return [d for v in lists for d in v]
    out: list[Any] = []
    for i in range(max((len(v) for v in lists), default=0)):
        out += [v[i] for v in lists if i < len(v)]
    return out[:limit]


def demos_key(demos: Sequence[list[dict[str, str]]], settings: dict[str, Any]) -> str:
    """Cache key of a warm start: its demonstrations and settings.

    >>> demo = [[{"role": "user", "content": "x"}]]
    >>> demos_key(demo, {"lr": 1}) == demos_key(demo, {"lr": 1}) != demos_key(demo, {"lr": 2})
    True
    """
    blob = json.dumps([list(demos), settings], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


SFT_RECIPE = "assistant-only, constant lr, length-bucketed batches"
"""What else shapes a warm start besides its demonstrations and the fields of ``settings``: part of the cache key,
changed whenever :func:`warm_start` changes how it trains."""

def demo_token_ids(tokenizer: Any, messages: Sequence[dict[str, str]]) -> list[int]:
    """The token ids of one demonstration under the chat template (a flat list: transformers 5 returns a
    mapping from ``apply_chat_template(tokenize=True)`` unless ``return_dict=False``, whose ``len`` is 2)."""
    return list(tokenizer.apply_chat_template(list(messages), tokenize=True, return_dict=False))


def length_buckets(lengths: Sequence[int], batch_size: int, seed: int) -> list[int]:
    """Demonstration order for bucketed batches: sorted by length, cut into batches of ``batch_size``, batches
    in a seeded random order (so training does not run from shortest to longest).

    >>> length_buckets([5, 100, 7, 90, 6, 95], 2, seed=0)
    [4, 0, 1, 5, 3, 2]
    """
    import random

    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    random.Random(seed).shuffle(batches)
    return [i for b in batches for i in sorted(b, key=lambda i: -lengths[i])]


def sft_trainer(model_path: str | Path, demos: Sequence[list[dict[str, str]]], work_dir: str | Path, *,
                epochs: float, learning_rate: float, batch_size: int, seed: int, use_cpu: bool, bf16: bool,
                bucketed: bool = True, max_length: int = 2048, max_steps: int = -1) -> tuple[Any, Any, dict]:
    """TRL's ``SFTTrainer`` on the demonstrations that fit ``max_length``: (trainer, tokenizer, info).

    ``bucketed`` batches demonstrations of similar length together (:func:`length_buckets`, read in that order:
    each batch is padded to its own longest row, so little compute goes to padding; every row keeps its own
    attention mask and positions, nothing is packed across demonstrations; transformers' ``group_by_length``
    does not group datasets under 16 batches, the smoke warm start's size). ``bf16`` is autocast (weights stay
    fp32).
    ``info`` holds ``n_demos``, ``dropped_too_long``, ``tokens`` (demonstration tokens per epoch) and
    ``tokenize_s``; the trainer's chat template is the training one (restore it with ``info["template"]``).
    """
    import time

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import get_training_chat_template

    if not demos:
        raise ValueError("warm start requested but there are no demonstrations (check train.sft_sources)")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    started = time.perf_counter()
    lengths = [len(demo_token_ids(tokenizer, m)) for m in demos]
    kept = [k for k, n in enumerate(lengths) if n <= max_length]
    if not kept:
        raise ValueError(f"no demonstration fits max_length={max_length} tokens")
    if bucketed:
        kept = [kept[k] for k in length_buckets([lengths[k] for k in kept], batch_size, seed)]
    fits = [demos[k] for k in kept]
    info = {"n_demos": len(fits), "dropped_too_long": len(demos) - len(fits),  # a cut one would lose its submit
            "tokens": sum(n for n in lengths if n <= max_length), "template": tokenizer.chat_template}
    tokenizer.chat_template = get_training_chat_template(tokenizer)  # adds {% generation %} markers
    config = SFTConfig(output_dir=str(work_dir), assistant_only_loss=True, num_train_epochs=epochs,
                       max_steps=max_steps, learning_rate=learning_rate, per_device_train_batch_size=batch_size,
                       seed=seed, use_cpu=use_cpu, bf16=bf16, report_to="none", save_strategy="no", logging_steps=1,
                       max_length=max_length, gradient_checkpointing=False, lr_scheduler_type="constant",
                       train_sampling_strategy="sequential" if bucketed else "random")
    model = AutoModelForCausalLM.from_pretrained(model_path)
    trainer = SFTTrainer(model=model, args=config, processing_class=tokenizer,
                         train_dataset=Dataset.from_list([{"messages": m} for m in fits]))  # tokenised once here
    info["tokenize_s"] = time.perf_counter() - started
    return trainer, tokenizer, info


def warm_start(model_path: str | Path, demos: Sequence[list[dict[str, str]]], out_dir: Path, *, epochs: float,
               learning_rate: float, batch_size: int, seed: int, use_cpu: bool, bf16: bool,
               max_length: int = 2048, bucketed: bool = True) -> Path:
    """Fine-tune on assistant tokens only and save to ``out_dir`` (reused when already there).

    ``bf16`` is bf16 autocast (on CPU: set by ``cpu_precision``, :mod:`codegrep.agent.precision`); ``bucketed``
    groups demonstrations of similar length (:func:`sft_trainer`).
    """
    if (out_dir / "config.json").is_file():
        return out_dir
    trainer, tokenizer, info = sft_trainer(model_path, demos, str(out_dir) + ".work", epochs=epochs,
                                           learning_rate=learning_rate, batch_size=batch_size, seed=seed,
                                           use_cpu=use_cpu, bf16=bf16, bucketed=bucketed,
                                           max_length=max_length)
    from codegrep.rl.progress import SFT_FIELDS, plain_progress

    plain_progress(trainer, "SFT", SFT_FIELDS)  # one line per step instead of raw log dicts
    result = trainer.train()
    tokenizer.chat_template = info.pop("template")
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    trainer.save_model(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / "warm_start.json").write_text(json.dumps({"n_demos": info["n_demos"],
                                                     "dropped_too_long": info["dropped_too_long"],
                                                     "max_length": max_length, "train_loss": result.training_loss,
                                                     "precision": "bf16" if bf16 else "fp32",
                                                     "bucketed": bucketed, "tokens": info["tokens"],
                                                     "log_history": trainer.state.log_history}, indent=1))
    tmp.rename(out_dir)
    return out_dir
