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



def demos_key(demos: Sequence[list[dict[str, str]]], settings: dict[str, Any]) -> str:
    """Cache key of a warm start: its demonstrations and settings.

    >>> demo = [[{"role": "user", "content": "x"}]]
    >>> demos_key(demo, {"lr": 1}) == demos_key(demo, {"lr": 1}) != demos_key(demo, {"lr": 2})
    True
    """
    blob = json.dumps([list(demos), settings], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


SFT_RECIPE = ("assistant-only, constant lr, length-bucketed batches, right-padding masks dropped, "
              "LM head on labelled positions only")
"""What else shapes a warm start besides its demonstrations and the fields of ``settings``: part of the cache key,
changed whenever :func:`warm_start` changes how it trains. Its "constant lr" is the default schedule; another
schedule, or reshuffled buckets, add their own keys (:func:`recipe_settings`), so this string stays as it was."""

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


LR_SCHEDULES = ("constant", "linear", "cosine")
"""Warm-start learning-rate schedules (``sft_lr_scheduler``; transformers' names, no warmup)."""


class BucketOrder:
    """The warm start's sampler: :func:`length_buckets`' order, the same every epoch, or with ``reshuffle`` the
    batches drawn in a fresh seeded order each epoch (seed + epoch; epoch 0 is the fixed order's). The Trainer calls
    ``set_epoch`` before each epoch (accelerate forwards it to the sampler).

    >>> order = BucketOrder([5, 100, 7, 90, 6, 95], 2, seed=0, reshuffle=True)
    >>> list(order) == length_buckets([5, 100, 7, 90, 6, 95], 2, seed=0)
    True
    >>> order.set_epoch(1); list(order) == length_buckets([5, 100, 7, 90, 6, 95], 2, seed=1)
    True
    >>> fixed = BucketOrder([5, 100, 7, 90, 6, 95], 2, seed=0, reshuffle=False)
    >>> fixed.set_epoch(1); list(fixed) == list(BucketOrder([5, 100, 7, 90, 6, 95], 2, seed=0, reshuffle=False))
    True
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int, reshuffle: bool) -> None:
        self.lengths, self.batch_size, self.seed, self.reshuffle = list(lengths), batch_size, seed, reshuffle
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        return iter(length_buckets(self.lengths, self.batch_size,
                                   self.seed + (self.epoch if self.reshuffle else 0)))

    def __len__(self) -> int:
        return len(self.lengths)


def recipe_settings(lr_scheduler: str = "constant", reshuffle: bool = False) -> dict[str, Any]:
    """What a warm start's cache key adds for a recipe other than :data:`SFT_RECIPE`'s constant rate and fixed
    order: nothing for the defaults, so warm starts cached before these settings existed stay valid.

    >>> recipe_settings(), recipe_settings("linear", True)
    ({}, {'sft_lr_scheduler': 'linear', 'sft_reshuffle': True})
    """
    out: dict[str, Any] = {}
    if lr_scheduler != "constant":
        out["sft_lr_scheduler"] = lr_scheduler
    if reshuffle:
        out["sft_reshuffle"] = True
    return out


def sft_trainer(model_path: str | Path, demos: Sequence[list[dict[str, str]]], work_dir: str | Path, *,
                epochs: float, learning_rate: float, batch_size: int, seed: int, use_cpu: bool, bf16: bool,
                bucketed: bool = True, max_length: int = 2048, max_steps: int = -1,
                unmasked: bool = True, labelled_only: bool = True, lr_scheduler: str = "constant",
                reshuffle: bool = False) -> tuple[Any, Any, dict]:
    """TRL's ``SFTTrainer`` on the demonstrations that fit ``max_length``: (trainer, tokenizer, info).

    ``bucketed`` batches demonstrations of similar length together (:func:`length_buckets`, read in that order:
    each batch is padded to its own longest row, so little compute goes to padding; every row keeps its own
    attention mask and positions, nothing is packed across demonstrations; transformers' ``group_by_length``
    does not group datasets under 16 batches, the smoke warm start's size); ``reshuffle`` draws the batches in a
    fresh seeded order each epoch instead of repeating the first epoch's (:class:`BucketOrder`; unbucketed batches
    are drawn at random, afresh each epoch, with or without it). ``lr_scheduler`` is
    one of :data:`LR_SCHEDULES` (no warmup). ``bf16`` is autocast (weights stay
    fp32). ``unmasked`` drops the collator's right-padding attention masks from the training forwards (the
    causal rule already hides trailing pads; CPU attention then runs its causal kernel: ``codegrep.rl.unpad``).
    ``labelled_only`` runs the loss forward in ``codegrep.rl.unpad.labelled_positions_only``: TRL's fused LM head
    then projects only assistant positions on CPU too, instead of every position of the demonstration.
    ``info`` holds ``n_demos``, ``dropped_too_long``, ``tokens`` (demonstration tokens per epoch) and
    ``tokenize_s``; the trainer's chat template is the training one (restore it with ``info["template"]``).
    """
    import time

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import get_training_chat_template

    from codegrep.agent.precision import fresh_accelerator_state

    if not demos:
        raise ValueError("warm start requested but there are no demonstrations (check train.sft_sources)")
    if lr_scheduler not in LR_SCHEDULES:
        raise ValueError(f"lr_scheduler {lr_scheduler!r}: expected one of {list(LR_SCHEDULES)}")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    started = time.perf_counter()
    lengths = [len(demo_token_ids(tokenizer, m)) for m in demos]
    kept = [k for k, n in enumerate(lengths) if n <= max_length]
    if not kept:
        raise ValueError(f"no demonstration fits max_length={max_length} tokens")
    fits = [demos[k] for k in kept]
    info = {"n_demos": len(fits), "dropped_too_long": len(demos) - len(fits),  # a cut one would lose its submit
            "tokens": sum(n for n in lengths if n <= max_length), "template": tokenizer.chat_template}
    tokenizer.chat_template = get_training_chat_template(tokenizer)  # adds {% generation %} markers
    config = SFTConfig(output_dir=str(work_dir), assistant_only_loss=True, num_train_epochs=epochs,
                       max_steps=max_steps, learning_rate=learning_rate, per_device_train_batch_size=batch_size,
                       seed=seed, use_cpu=use_cpu, bf16=bf16, report_to="none", save_strategy="no", logging_steps=1,
                       max_length=max_length, gradient_checkpointing=False, lr_scheduler_type=lr_scheduler,
                       train_sampling_strategy="sequential" if bucketed else "random")
    model = AutoModelForCausalLM.from_pretrained(model_path)
    fresh_accelerator_state()  # the previous trainer in this process may have used another precision
    trainer = SFTTrainer(model=model, args=config, processing_class=tokenizer,
                         train_dataset=Dataset.from_list([{"messages": m} for m in fits]))  # tokenised once here
    if bucketed:  # the Trainer's hook for its sampler: the bucketed order, redrawn per epoch with reshuffle
        if not callable(getattr(trainer, "_get_train_sampler", None)):  # a private hook: refuse, never fall back
            import transformers

            raise RuntimeError(f"transformers {transformers.__version__}: Trainer._get_train_sampler is gone, so the "
                               "warm start's bucketed order cannot be installed")
        order = BucketOrder([lengths[k] for k in kept], batch_size, seed, reshuffle)
        trainer._get_train_sampler = lambda train_dataset=None: order
    if unmasked:
        from codegrep.rl.unpad import drop_right_padding_masks

        drop_right_padding_masks(trainer.model)  # the model is this trainer's alone (loaded above)
    if labelled_only:
        from codegrep.rl.unpad import score_labelled_only

        score_labelled_only(trainer)
    info["tokenize_s"] = time.perf_counter() - started
    return trainer, tokenizer, info


def warm_start(model_path: str | Path, demos: Sequence[list[dict[str, str]]], out_dir: Path, *, epochs: float,
               learning_rate: float, batch_size: int, seed: int, use_cpu: bool, bf16: bool,
               max_length: int = 2048, bucketed: bool = True, lr_scheduler: str = "constant",
               reshuffle: bool = False) -> Path:
    """Fine-tune on assistant tokens only and save to ``out_dir`` (reused when already there).

    ``bf16`` is bf16 autocast (on CPU: set by ``cpu_precision``, :mod:`codegrep.agent.precision`); ``bucketed``
    groups demonstrations of similar length (:func:`sft_trainer`); right-padding masks are dropped (``SFT_RECIPE``);
    ``lr_scheduler`` and ``reshuffle`` as in :func:`sft_trainer` (recorded in ``warm_start.json``).
    """
    if (out_dir / "config.json").is_file():
        return out_dir
    trainer, tokenizer, info = sft_trainer(model_path, demos, str(out_dir) + ".work", epochs=epochs,
                                           learning_rate=learning_rate, batch_size=batch_size, seed=seed,
                                           use_cpu=use_cpu, bf16=bf16, bucketed=bucketed,
                                           max_length=max_length, lr_scheduler=lr_scheduler, reshuffle=reshuffle)
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
                                                     "bucketed": bucketed, "recipe": SFT_RECIPE,
                                                     "lr_scheduler": lr_scheduler, "reshuffle": reshuffle,
                                                     "tokens": info["tokens"],
                                                     "log_history": trainer.state.log_history}, indent=1))
    tmp.rename(out_dir)
    return out_dir
