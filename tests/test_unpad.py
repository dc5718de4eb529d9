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


def _trainer(unpad: bool):
    from codegrep.rl.trainer import CodeGrepGRPOTrainer

    t = object.__new__(CodeGrepGRPOTrainer)  # only what the log-prob path reads
    t.cg = SimpleNamespace(unpad_loss_rows=unpad)
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
