"""Unmasked training forwards (codegrep.rl.unpad): the same numbers as the padded, masked forwards, in fp64."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, attn_implementation="sdpa")
    return LlamaForCausalLM(config).to(torch.float64).train()


def _grpo_batch():
    """Three rows as TRL pads a generation batch: prompts on the left (0, 2, 4 pads), completions on the right
    (5, 3 and 0 real tokens: a row whose completion is empty still gets one scored position)."""
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(3, 300, (3, 6), generator=g)
    completion = torch.randint(3, 300, (3, 5), generator=g)
    prompt_mask = torch.ones_like(prompt)
    prompt_mask[1, :2] = 0
    prompt_mask[2, :4] = 0
    completion_mask = torch.zeros_like(completion)
    completion_mask[0, :] = 1
    completion_mask[1, :3] = 1
    prompt = prompt.masked_fill(prompt_mask == 0, 0)
    completion = completion.masked_fill(completion_mask == 0, 0)
    return torch.cat([prompt, completion], 1), torch.cat([prompt_mask, completion_mask], 1), completion_mask


def _trainer(unpad: bool, labelled_only: bool = True):
    from codegrep.rl.trainer import CodeGrepGRPOTrainer

    t = object.__new__(CodeGrepGRPOTrainer)  # only what the log-prob path reads
    t.cg = SimpleNamespace(unpad_loss_rows=unpad, loss_labelled_only=labelled_only)
    t.accelerator = SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True)
    return t


@pytest.mark.parametrize("batch_size, flushed_calls", [
    (2, [((2, 11), 1), ((1, 3), 1)]),  # rows of 11 and 7 real tokens share a chunk (18% pads); the third alone
    (3, [((1, 11), 1), ((1, 7), 1), ((1, 3), 1)]),  # 11, 7 and 3 in one chunk would be 36% pads: rows alone
])
def test_grpo_flushed_rows_give_the_padded_batchs_log_probs_entropies_and_gradients(batch_size, flushed_calls):
    from trl.trainer.utils import add_fused_lm_head

    model = _tiny_llama()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids, attention, completion_mask = _grpo_batch()
    seen = []
    model.register_forward_pre_hook(lambda m, a, kw: seen.append((tuple(kw["input_ids"].shape),
                                                                  int(kw["attention_mask"].min()))), with_kwargs=True)
    results = {}
    for unpad in (False, True):
        model.zero_grad(set_to_none=True)
        trainer = _trainer(unpad)
        logps, ent, _ = trainer._get_per_token_logps_and_entropies(model, ids, attention, 5, batch_size,
                                                                   compute_entropy=True)
        assert logps.shape == ent.shape == (3, 5)
        (logps * completion_mask).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        assert torch.equal(trainer._loss_policy_logps, logps.detach())  # the KL probe reads the loss's log-probs
        results[unpad] = (logps * completion_mask, ent * completion_mask, grads)
    (lp0, e0, g0), (lp1, e1, g1) = results[False], results[True]
    assert torch.allclose(lp0, lp1, atol=1e-10) and torch.allclose(e0, e1, atol=1e-10)
    # gradients: fp32 round-off only (TRL's fused head accumulates the LM head's gradient in fp32 tiles)
    assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-6) for a, b in zip(g0, g1))
    # padded: chunks of batch_size rows at the batch's width with their masks; flushed: each chunk as wide as its
    # longest real row (the third row: its 2 prompt tokens and one scored pad), no zero in any mask
    padded_calls = -(-3 // batch_size)
    assert all(shape[1] == 11 and low == 0 for shape, low in seen[:padded_calls])
    assert seen[padded_calls:] == flushed_calls


def test_grpo_row_with_a_hole_in_its_mask_keeps_the_masked_forward():
    from trl.trainer.utils import add_fused_lm_head

    model = _tiny_llama()
    add_fused_lm_head(model)
    ids, attention, completion_mask = _grpo_batch()
    attention[0, 3] = 0  # not one run of ones: cutting would change what the row attends to
    padded = _trainer(False)._get_per_token_logps_and_entropies(model, ids, attention, 5)[0]
    rows = _trainer(True)._get_per_token_logps_and_entropies(model, ids, attention, 5)[0]
    assert torch.allclose(padded * completion_mask, rows * completion_mask, atol=1e-10)


def test_sft_right_padding_mask_is_dropped_without_changing_the_loss():
    from codegrep.rl.unpad import drop_right_padding_masks

    model = _tiny_llama()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(3, 300, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    seen = []  # what the decoder under the LM head receives
    model.model.register_forward_pre_hook(lambda m, a, kw: seen.append(kw.get("attention_mask")), with_kwargs=True)
    with_mask = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    handle = drop_right_padding_masks(model)
    without = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    assert seen[1] is None and torch.allclose(with_mask, without, atol=1e-12)
    left = torch.ones_like(ids)
    left[1, :3] = 0  # left padding: the mask matters and stays
    model(input_ids=ids, attention_mask=left, labels=ids.masked_fill(left == 0, -100))
    model.eval()
    model(input_ids=ids, attention_mask=mask)  # evaluation forwards keep theirs
    assert seen[2] is left and seen[3] is mask
    handle.remove()
    model.train()
    model(input_ids=ids, attention_mask=mask, labels=labels)
    assert seen[4] is mask


@contextlib.contextmanager
def _head_rows(monkeypatch):
    """The number of hidden-state rows each call of TRL's fused LM head projects."""
    import trl.trainer.utils as tu

    rows, real = [], tu._ChunkedLogProbFunction

    class Counting:
        @staticmethod
        def apply(hidden, *args):
            rows.append(hidden.shape[0])
            return real.apply(hidden, *args)

    monkeypatch.setattr(tu, "_ChunkedLogProbFunction", Counting)
    yield rows


@pytest.mark.parametrize("unpad, every, scored_rows", [
    (False, 3 * 10, 5 + 3),  # TRL's padded batch: 3 rows x 10 predicting positions; the real completion tokens
    (True, 10 + 6 + 2, 5 + 3 + 1),  # flushed, rows alone (36% pads): each row's window, the empty one's pad too
])
def test_grpo_head_scores_completion_positions_only_with_the_same_log_probs_and_gradients(unpad, every, scored_rows,
                                                                                          monkeypatch):
    """loss_labelled_only: TRL's fused head projects only the scored positions on CPU (it projects every position
    otherwise), with the same log-probs, entropies and gradients (fp64; gradients to fp32 round-off)."""
    from trl.trainer.utils import add_fused_lm_head

    model = _tiny_llama()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids, attention, completion_mask = _grpo_batch()
    results = {}
    for labelled in (False, True):
        model.zero_grad(set_to_none=True)
        with _head_rows(monkeypatch) as rows:
            logps, ent, _ = _trainer(unpad, labelled)._get_per_token_logps_and_entropies(
                model, ids, attention, 5, 3, compute_entropy=True)
        (logps * completion_mask).sum().backward()
        results[labelled] = (logps * completion_mask, ent * completion_mask,
                             [p.grad.clone() for p in model.parameters()], sum(rows))
    (lp0, e0, g0, all_rows), (lp1, e1, g1, scored) = results[False], results[True]
    assert torch.allclose(lp0, lp1, atol=1e-10) and torch.allclose(e0, e1, atol=1e-10)
    assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-6) for a, b in zip(g0, g1))
    assert (all_rows, scored) == (every, scored_rows)


def test_labelled_positions_only_restores_trls_rule_after_an_error_and_nests():
    import trl.trainer.utils as tu

    from codegrep.rl.unpad import labelled_positions_only

    rule, cpu = tu._use_triton, torch.device("cpu")
    with pytest.raises(ZeroDivisionError):
        with labelled_positions_only():
            with labelled_positions_only():
                assert tu._use_triton(cpu)
            assert tu._use_triton(cpu)
            1 / 0
    assert tu._use_triton is rule and not tu._use_triton(cpu)
    with labelled_positions_only(False):
        assert tu._use_triton is rule


def test_labelled_positions_only_refuses_a_trl_without_the_hook(monkeypatch):
    import trl.trainer.utils as tu

    from codegrep.rl.unpad import labelled_positions_only

    monkeypatch.delattr(tu, "_use_triton")
    with pytest.raises(RuntimeError, match="trl.trainer.utils has no _use_triton"):
        with labelled_positions_only():
            pass


def test_a_batch_with_no_labelled_position_gives_a_zero_loss_and_zero_gradients():
    """Compacted to no row at all, the head still returns a differentiable zero (TRL's masked_scatter)."""
    from trl.trainer.utils import add_fused_lm_head

    from codegrep.rl.unpad import labelled_positions_only

    model = _tiny_llama()
    add_fused_lm_head(model)
    ids = torch.randint(3, 300, (2, 6), generator=torch.Generator().manual_seed(3))
    with labelled_positions_only():
        out = model(input_ids=ids, labels=torch.full_like(ids, -100), fused_lm_head=True)
    out.loss.backward()
    assert float(out.loss.detach()) == 0.0 and out.log_probs.shape == (2, 5)
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def test_sft_trainer_scores_assistant_positions_only_with_the_same_loss(tmp_path, monkeypatch):
    """The warm start's SFTTrainer (labelled_only, the default) projects only assistant positions through the
    head and gets the loss of TRL's CPU forward, which projects every position."""
    from codegrep.rl.sft import sft_trainer
    from codegrep.rl.tiny_policy import build_tiny_policy

    try:
        path = build_tiny_policy(tmp_path / "models")
    except FileNotFoundError as exc:
        pytest.skip(f"SmolLM2 tokenizer not available: {exc}")
    chats = [[{"role": "system", "content": "Find files."}, {"role": "user", "content": "issue text " * (40 + k)},
              {"role": "assistant", "content": f"<tool_call>{{\"name\": \"submit\", \"arguments\": "
                                               f"{{\"files\": [\"a{k}.py\"]}}}}</tool_call>"}] for k in range(3)]
    seen = {}
    for labelled in (False, True):
        trainer, _, _ = sft_trainer(path, chats, tmp_path / f"w{labelled}", epochs=1, learning_rate=1e-5,
                                    batch_size=3, seed=0, use_cpu=True, bf16=False, labelled_only=labelled)
        batch = next(iter(trainer.get_train_dataloader()))
        trainer.model.train()
        with _head_rows(monkeypatch) as rows:
            loss = trainer.compute_loss(trainer.model, dict(batch))
        seen[labelled] = (float(loss), sum(rows), int((batch["labels"][:, 1:] != -100).sum()),
                          batch["input_ids"].numel() - batch["input_ids"].size(0))
    (loss0, all_rows, _, positions), (loss1, scored, labelled_n, _) = seen[False], seen[True]
    assert all_rows == positions and scored == labelled_n < positions / 2
    assert abs(loss0 - loss1) < 1e-5 * max(1.0, abs(loss0))


def test_bench_head_arm_measures_both_rules_and_leaves_the_model_plain(monkeypatch):
    """`codegrep bench train`'s head arm: both rules on the same rows (the head fed every predicting position, then
    the labelled ones), rates and a speed-up, and the model's own forward back afterwards."""
    from codegrep.rl.bench import bench_head

    model = _tiny_llama()
    with _head_rows(monkeypatch) as rows:
        out = bench_head(model, rows=2, seq=10, scored_share=0.3, repeats=1, precision="fp32")
    assert rows == [18, 6] * 2  # a warm-up, then one repeat per rule: 2 rows x 9 positions, 2 x 3 labelled
    assert out["scored_share"] == 0.3 and out["labelled_only_speedup"] > 0
    assert out["every_position_tokens_per_s"] > 0 and out["labelled_only_tokens_per_s"] > 0
    assert "forward" not in vars(model)  # TRL's fused forward removed: later forwards are the model's own
