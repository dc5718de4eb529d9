"""The warm start's recipe switches (train.sft_reshuffle, train.sft_lr_scheduler) reach TRL's training loop."""
from __future__ import annotations

import pytest


def _chats(n: int):
    """``n`` demonstrations of distinct lengths (the batch a row landed in is read back from its length)."""
    return [[{"role": "system", "content": "Find files."}, {"role": "user", "content": "issue text " * (10 + 7 * k)},
             {"role": "assistant", "content": f"<tool_call>{{\"name\": \"submit\", \"arguments\": "
                                              f"{{\"files\": [\"a{k}.py\"]}}}}</tool_call>"}] for k in range(n)]


def _trained_batches(tmp_path, name: str, **kw):
    """Train a tiny policy 2 epochs; the (epoch, sorted row lengths) of every batch, in order, and the log."""
    from codegrep.rl.sft import sft_trainer
    from codegrep.rl.tiny_policy import build_tiny_policy

    try:
        path = build_tiny_policy(tmp_path / "models")
    except FileNotFoundError as exc:
        pytest.skip(f"SmolLM2 tokenizer not available: {exc}")
    trainer, _, info = sft_trainer(path, _chats(8), tmp_path / name, epochs=2, learning_rate=1e-4, batch_size=2,
                                   seed=0, use_cpu=True, bf16=False, **kw)
    seen, compute = [], trainer.compute_loss

    def recording(model, inputs, *a, **k):
        seen.append((trainer.state.epoch, tuple(sorted(int(n) for n in inputs["attention_mask"].sum(1)))))
        return compute(model, inputs, *a, **k)

    trainer.compute_loss = recording
    trainer.train()
    lrs = [h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h]
    return [b for _, b in seen], lrs


def test_reshuffle_draws_a_new_batch_order_in_epoch_two_and_keeps_the_buckets(tmp_path):
    fixed, lr_fixed = _trained_batches(tmp_path, "fixed")
    fresh, lr_linear = _trained_batches(tmp_path, "fresh", reshuffle=True, lr_scheduler="linear")
    assert len(fixed) == len(fresh) == 8  # 8 demonstrations, batches of 2, 2 epochs
    assert fixed[:4] == fixed[4:]  # sft_reshuffle false repeats epoch 1's order
    # ... and that order is length_buckets' (what the dataset's own order gave before BucketOrder): the demonstrations'
    # lengths rise with their index, so a batch is read back as the ranks of its rows' lengths
    from codegrep.rl.sft import length_buckets

    rank = {n: k for k, n in enumerate(sorted({n for b in fixed for n in b}))}
    expected = length_buckets(list(range(8)), 2, seed=0)
    assert [tuple(rank[n] for n in b) for b in fixed[:4]] == [tuple(sorted(expected[i:i + 2])) for i in (0, 2, 4, 6)]
    assert fresh[:4] == fixed[:4]  # epoch 1 is the same order either way (seed + 0)
    assert fresh[4:] != fresh[:4] and sorted(fresh[4:]) == sorted(fixed[:4])  # a new order of the same buckets
    assert len(set(lr_fixed)) == 1  # constant
    assert lr_linear[0] > lr_linear[-1] and lr_linear == sorted(lr_linear, reverse=True)  # decays


def test_an_unknown_schedule_is_refused_before_training(tmp_path):
    from codegrep.rl.sft import sft_trainer

    with pytest.raises(ValueError, match="lr_scheduler 'steep'"):
        sft_trainer("unused", _chats(2), tmp_path / "w", epochs=1, learning_rate=1e-4, batch_size=2, seed=0,
                    use_cpu=True, bf16=False, lr_scheduler="steep")


def test_a_trainer_without_the_sampler_hook_is_refused_not_silently_unbucketed(tmp_path, monkeypatch):
    """The bucketed order goes in through the Trainer's private ``_get_train_sampler``: if a transformers release drops
    it, the warm start must stop with one clear error, never train on another batch order."""
    import transformers

    from codegrep.rl.sft import sft_trainer
    from codegrep.rl.tiny_policy import build_tiny_policy

    try:
        path = build_tiny_policy(tmp_path / "models")
    except FileNotFoundError as exc:
        pytest.skip(f"SmolLM2 tokenizer not available: {exc}")
    monkeypatch.delattr(transformers.Trainer, "_get_train_sampler")
    with pytest.raises(RuntimeError, match="_get_train_sampler is gone"):
        sft_trainer(path, _chats(4), tmp_path / "w", epochs=1, learning_rate=1e-4, batch_size=2, seed=0,
                    use_cpu=True, bf16=False)
