"""GRPO on the distribution the rollouts sampled from (codegrep.rl.constrained): the loss's log-probs at positions a
turn control restricted are the masked, renormalised ones, on both of the trainer's forward paths, in fp64."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_unpad import _grpo_batch, _tiny_llama, _trainer  # noqa: E402  (the same tiny model and TRL-padded batch)

# [completion position, allowed, ids]: an allow-list, a ban-list, a position past a row's completion (never scored)
RESTRICTIONS = [[[0, True, [5, 7, 11]], [3, False, [1, 2, 3]]],
                [[1, True, [9]], [2, False, list(range(100, 200))]],
                []]


def _masked_reference(model, ids, attention, keep, restrictions):
    """By hand: the model's full logits, the banned tokens at -inf, log-softmax, the sampled token's entry."""
    logits = model(input_ids=ids, attention_mask=attention).logits  # the original forward (no fused head)
    prompt = ids.size(1) - keep
    out = {}
    for r, row in enumerate(restrictions):
        for k, allowed, listed in row:
            z = logits[r, prompt + k - 1].clone()
            token = int(ids[r, prompt + k])
            keep_mask = torch.zeros_like(z, dtype=torch.bool)
            keep_mask[listed] = True
            keep_mask = keep_mask if allowed else ~keep_mask
            keep_mask[token] = True  # the sampled token is always one the sampler could draw
            out[(r, k)] = torch.log_softmax(z.masked_fill(~keep_mask, float("-inf")), -1)[token]
    return out


@pytest.mark.parametrize("unpad", [False, True])
def test_restricted_positions_read_the_masked_renormalised_log_probs(unpad):
    from trl.trainer.utils import add_fused_lm_head

    model = _tiny_llama()
    ids, attention, completion_mask = _grpo_batch()
    with torch.no_grad():
        expected = _masked_reference(model, ids, attention, 5, RESTRICTIONS)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    trainer = _trainer(unpad)
    free = trainer._get_per_token_logps_and_entropies(model, ids, attention, 5, 2)[0]
    trainer.row_restrictions = RESTRICTIONS
    masked = trainer._get_per_token_logps_and_entropies(model, ids, attention, 5, 2)[0]
    for (r, k), value in expected.items():
        assert masked[r, k].item() == pytest.approx(value.item(), abs=1e-6)  # TRL's fused head returns fp32
        assert masked[r, k] > free[r, k]  # renormalised over fewer tokens: more likely
    untouched = torch.ones_like(completion_mask, dtype=torch.bool)
    for r, k in expected:
        untouched[r, k] = False
    assert torch.allclose(masked[untouched], free[untouched], atol=1e-12)


def test_the_masked_loss_gives_banned_tokens_no_gradient():
    """The mechanism: with the mask in the loss, lowering a sampled token's log-prob (a negative advantage) cannot move
    mass onto tokens the control banned at that position; without it, it does."""
    from trl.trainer.utils import add_fused_lm_head

    model = _tiny_llama()
    add_fused_lm_head(model)
    ids, attention, _ = _grpo_batch()
    allowed = [5, 7, 11, int(ids[0, 6])]
    restrictions = [[[0, True, allowed]], [], []]
    grads = {}
    for masked in (False, True):
        model.zero_grad(set_to_none=True)
        trainer = _trainer(False)
        trainer.row_restrictions = restrictions if masked else None
        logps = trainer._get_per_token_logps_and_entropies(model, ids, attention, 5)[0]
        (-logps[0, 0]).backward()  # push the sampled token down
        grads[masked] = model.lm_head.weight.grad.clone()
    banned = torch.ones(grads[True].shape[0], dtype=torch.bool)
    banned[allowed] = False
    assert grads[True][banned].abs().max().item() == 0.0
    assert grads[False][banned].abs().max().item() > 0.0


def test_a_restriction_list_for_another_batch_is_a_clear_error():
    from trl.trainer.utils import add_fused_lm_head

    model = _tiny_llama()
    add_fused_lm_head(model)
    ids, attention, _ = _grpo_batch()
    trainer = _trainer(False)
    trainer.row_restrictions = RESTRICTIONS[:2]
    with pytest.raises(RuntimeError, match="restrictions for 2 rows"):
        trainer._get_per_token_logps_and_entropies(model, ids, attention, 5)


def test_recorder_keys_by_the_ids_so_far_through_the_real_decoder():
    """Through ``decode_rows`` (speculative drafts on), the recorder finds, for each row, exactly the new tokens whose
    choice a processor restricted, and each token decoded there is one it allowed."""
    from transformers import LogitsProcessor, LogitsProcessorList

    from codegrep.agent.prefix_cache import PrefixCache, generate_with_prefix_cache
    from codegrep.rl.constrained import RestrictionRecorder

    class EvenAfterOdd(LogitsProcessor):  # after an odd token, only even ones (an allow-list); else ban token 4
        def __call__(self, input_ids, scores):
            for row in range(input_ids.shape[0]):
                if int(input_ids[row, -1]) % 2:
                    scores[row, 1::2] = float("-inf")
                else:
                    scores[row, 4] = float("-inf")
            return scores

    model = _tiny_llama().to(torch.float32).eval()
    rows = [torch.tensor([3, 8, 9, 10, 11]), torch.tensor([12, 13])]
    recorder = RestrictionRecorder(LogitsProcessorList([EvenAfterOdd()]))
    out, width = generate_with_prefix_cache(model, rows, PrefixCache(1 << 26), 0, draft_tokens=2,
                                            logits_processor=LogitsProcessorList([recorder]), max_new_tokens=12,
                                            do_sample=True, temperature=1.0, top_k=0, eos_token_id=299)
    found = recorder.restrictions(out, width, [12, 12])
    for row, records in enumerate(found):
        assert [t for t, _, _ in records] == list(range(12))  # every step of this processor restricts
        for t, allowed, listed in records:
            before, token = int(out[row, width + t - 1]), int(out[row, width + t])
            assert allowed == bool(before % 2) and (token in listed) == allowed
