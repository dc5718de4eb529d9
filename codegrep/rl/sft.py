"""Supervised warm start (TRL ``SFTTrainer``, assistant tokens only) on demonstrations.

The demonstrations themselves (scripted-expert episodes, converted recorded runs, CATM) are built by
:mod:`codegrep.rl.demos`. The untrained 135M model never emits a tool call, so without a warm start every GRPO
reward is 0.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

from codegrep.rl.demos import SOURCES, catm_demonstrations, mix, recorded_demonstrations  # noqa: F401  (moved)


def demos_key(demos: Sequence[list[dict[str, str]]], settings: dict[str, Any]) -> str:
    """Cache key of a warm start: its demonstrations and settings.

    >>> demo = [[{"role": "user", "content": "x"}]]
    >>> demos_key(demo, {"lr": 1}) == demos_key(demo, {"lr": 1}) != demos_key(demo, {"lr": 2})
    True
    """
    blob = json.dumps([list(demos), settings], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


SFT_RECIPE = "assistant-only, constant lr, random batches"
"""What else shapes a warm start besides its demonstrations and the fields of ``settings``: part of the cache key,
changed whenever :func:`warm_start` changes how it trains."""


def demo_token_ids(tokenizer: Any, messages: Sequence[dict[str, str]]) -> list[int]:
    """The token ids of one demonstration under the chat template (a flat list: transformers 5 returns a
    mapping from ``apply_chat_template(tokenize=True)`` unless ``return_dict=False``, whose ``len`` is 2)."""
    return list(tokenizer.apply_chat_template(list(messages), tokenize=True, return_dict=False))


def warm_start(model_path: str | Path, demos: Sequence[list[dict[str, str]]], out_dir: Path, *, epochs: float,
               learning_rate: float, batch_size: int, seed: int, use_cpu: bool, bf16: bool,
               max_length: int = 2048) -> Path:
    """Fine-tune on assistant tokens only and save to ``out_dir`` (reused when already there)."""
    if (out_dir / "config.json").is_file():
        return out_dir
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import get_training_chat_template

    if not demos:
        raise ValueError("warm start requested but there are no demonstrations (check train.sft_sources)")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    fits = [m for m in demos if len(demo_token_ids(tokenizer, m)) <= max_length]
    if not fits:
        raise ValueError(f"no demonstration fits max_length={max_length} tokens")
    dropped, demos = len(demos) - len(fits), fits  # a cut demonstration would lose its submit call
    template = tokenizer.chat_template
    tokenizer.chat_template = get_training_chat_template(tokenizer)  # adds {% generation %} markers
    config = SFTConfig(output_dir=str(out_dir) + ".work", assistant_only_loss=True, num_train_epochs=epochs,
                       learning_rate=learning_rate, per_device_train_batch_size=batch_size, seed=seed,
                       use_cpu=use_cpu, bf16=bf16, report_to="none", save_strategy="no", logging_steps=1,
                       max_length=max_length, gradient_checkpointing=False, lr_scheduler_type="constant")
    # train_sampling_strategy="group_by_length" was measured SLOWER on smoke (6 SFT steps: about 12 min, against
    # 9 min 6 s with random batches, same demonstrations and machine), so batches stay random
    model = AutoModelForCausalLM.from_pretrained(model_path)
    trainer = SFTTrainer(model=model, args=config, processing_class=tokenizer,
                         train_dataset=Dataset.from_list([{"messages": m} for m in demos]))
    from codegrep.rl.progress import SFT_FIELDS, plain_progress

    plain_progress(trainer, "SFT", SFT_FIELDS)  # one line per step instead of raw log dicts
    result = trainer.train()
    tokenizer.chat_template = template
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    trainer.save_model(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / "warm_start.json").write_text(json.dumps({"n_demos": len(demos), "dropped_too_long": dropped,
                                                     "max_length": max_length, "train_loss": result.training_loss,
                                                     "log_history": trainer.state.log_history}, indent=1))
    tmp.rename(out_dir)
    return out_dir
