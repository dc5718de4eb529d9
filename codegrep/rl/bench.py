"""``codegrep bench train``: SFT, GRPO generation and loss throughput of the policy, beside the machine's limits.

Every rate is measured twice in one process, on the same model, data and seed: the **baseline** (every speed
setting off: fp32, random unbucketed SFT batches, one sequence at a time without the prefix cache) and the
**fast** path (the code the pipeline runs: length-bucketed SFT batches with bf16 autocast where ``cpu_precision``
resolves to it; generation of the whole group in one batched ``generate`` per turn through the prefix cache,
fp32). Generation under bf16 autocast is measured too, to show why it is not the default. The two limits are
measured on the same machine: FLOP/s from a matmul probe (training: 6 FLOPs per parameter per token plus
attention), and memory bandwidth from a streaming read (decode: every weight is read once per step, so
``bandwidth / weight bytes`` steps per second, times the group size, bounds tokens/s). The OpenMP wait policy
(``OMP_WAIT_POLICY``, set by ``codegrep/__init__.py``) is process-wide, so both arms run under it; the decode step
is also timed on one thread for comparison.

The SFT demonstrations are generated (real chat template and tokenizer; contents are the package's own source
text, lengths spread over a range), not the profile's: throughput does not depend on what the tokens say.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

SFT_TARGET, GENERATION_TARGET = 4.0, 3.0  # issue 25: speed-ups over the all-off baseline


def _best_seconds(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def matmul_flops(dtype: Any, m: int = 1024, k: int = 576, n: int = 1536, seconds: float = 0.5) -> float:
    """FLOP/s of a matmul shaped like the policy's MLP (tokens x hidden x intermediate), best of a few runs."""
    import torch

    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    a @ b  # warm-up (oneDNN picks its kernel)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t = _best_seconds(lambda: a @ b, 3)
        best = max(best, 2 * m * k * n / t)
    return best


def memory_bandwidth(mbytes: int = 256, repeats: int = 5) -> float:
    """Bytes/s of a streaming read (``sum`` over an fp32 tensor far larger than the caches), best of ``repeats``."""
    import torch

    x = torch.ones(mbytes << 18)  # mbytes MiB of float32
    x.sum()
    return x.numel() * 4 / _best_seconds(lambda: x.sum(), repeats)


def _source_ids(tokenizer: Any, n: int, offset: int = 0) -> list[int]:
    """``n`` token ids of real text (this package's own source), starting ``offset`` tokens in."""
    import codegrep

    root = Path(codegrep.__file__).parent
    text = "\n".join(p.read_text() for p in sorted(root.glob("*/*.py"))[:12])
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    while len(ids) < offset + n:
        ids = ids + ids
    return ids[offset:offset + n]


def synthetic_chats(tokenizer: Any, n: int, min_tokens: int, max_tokens: int, seed: int = 0) -> list[list[dict]]:
    """``n`` chat demonstrations (system, user, assistant tool call, observation, assistant submit) whose
    lengths are spread evenly over [min_tokens, max_tokens] in a seeded order."""
    import random

    rng = random.Random(seed)
    targets = [min_tokens + (max_tokens - min_tokens) * i // max(n - 1, 1) for i in range(n)]
    rng.shuffle(targets)
    chats = []
    for i, target in enumerate(targets):
        body = max(target - 90, 16)  # the template and the fixed turns take about 90 tokens
        issue = tokenizer.decode(_source_ids(tokenizer, body // 2, offset=1000 * i))
        obs = tokenizer.decode(_source_ids(tokenizer, body - body // 2, offset=1000 * i + 500))
        chats.append([{"role": "system", "content": "You find the files to edit."},
                      {"role": "user", "content": issue},
                      {"role": "assistant", "content": '<tool_call>{"name": "grep", "arguments": '
                                                       '{"pattern": "def main"}}</tool_call>'},
                      {"role": "user", "content": obs},
                      {"role": "assistant", "content": '<tool_call>{"name": "submit", "arguments": '
                                                       '{"files": ["codegrep/cli.py"]}}</tool_call>'}])
    return chats


def _padding(trainer: Any) -> dict[str, float]:
    """Collation time and padding share of one pass over the trainer's batches (its own sampler and collator)."""
    started, real, padded = time.perf_counter(), 0, 0
    for batch in trainer.get_train_dataloader():
        mask = batch["attention_mask"]
        real, padded = real + int(mask.sum()), padded + mask.numel()
    return {"collate_s": time.perf_counter() - started, "padding_share": 1 - real / max(padded, 1)}


def bench_sft(model_path: Any, chats: list, batch_size: int, bf16: bool, bucketed: bool,
              unmasked: bool, labelled_only: bool = True) -> dict[str, Any]:
    """One epoch of the warm start's real ``SFTTrainer`` on ``chats``: tokens/s and where the time went."""
    from codegrep.rl.sft import sft_trainer

    with tempfile.TemporaryDirectory(prefix="codegrep-bench-sft-") as work:
        trainer, _, info = sft_trainer(model_path, chats, work, epochs=1, learning_rate=1e-5, batch_size=batch_size,
                                       seed=0, use_cpu=True, bf16=bf16, bucketed=bucketed, unmasked=unmasked,
                                       labelled_only=labelled_only)
        pad = _padding(trainer)
        started = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):  # the trainer's log lines: stdout holds only the JSON
            trainer.train()
        seconds = time.perf_counter() - started
    return {"bf16": bf16, "bucketed": bucketed, "unmasked": unmasked, "labelled_only": labelled_only,
            "batch_size": batch_size,
            "tokens": info["tokens"],
            "seconds": round(seconds, 2), "tokens_per_s": info["tokens"] / seconds,
            "tokenize_s": round(info["tokenize_s"], 3), **{k: round(v, 4) for k, v in pad.items()}}


def bench_loss(model: Any, batch: int, seq: int, repeats: int, padded_precision: str | None = None) -> dict[str, float]:
    """Forward + backward tokens/s on one fixed batch, fp32 and bf16 autocast, alternated (contention hits both).

    With ``padded_precision`` two more rates at that precision, as a GRPO loss batch meets them: ``padded`` = the
    batch with rows after the first left-padded (a quarter of the row, spread over the rows) and an attention mask,
    so attention runs its masked kernel over every position; ``per_row`` = the same real tokens one row at a time,
    no padding and no mask, so attention runs the causal kernel; ``flushed`` = the batch with every row's real
    tokens moved left (trailing pads only) and no mask, as the GRPO trainer runs it (``codegrep.rl.unpad``). All
    count real (unpadded) tokens only.
    """
    import torch

    from codegrep.agent.precision import autocast

    ids = torch.randint(100, model.config.vocab_size - 100, (batch, seq), generator=torch.Generator().manual_seed(0))

    def run(precision: str, x: Any, mask: Any = None) -> None:
        with autocast(precision):
            labels = x if mask is None else x.masked_fill(mask == 0, -100)
            loss = model(input_ids=x, attention_mask=mask, labels=labels).loss
        loss.backward()
        model.zero_grad(set_to_none=True)

    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    run("fp32", ids), run("bf16", ids)  # warm-up
    for _ in range(repeats):
        for p in times:
            times[p].append(_best_seconds(lambda: run(p, ids), 1))
    out = {f"{p}_tokens_per_s": batch * seq / statistics.median(t) for p, t in times.items()}
    if padded_precision:
        pads = [round(i * seq / (4 * max(batch - 1, 1))) for i in range(batch)]  # 0 .. seq/4
        mask = torch.ones_like(ids)
        for row, n in enumerate(pads):
            mask[row, :n] = 0
        real = int(mask.sum())
        padded = _best_seconds(lambda: run(padded_precision, ids, mask), repeats)
        per_row = _best_seconds(lambda: [run(padded_precision, ids[r:r + 1, n:]) for r, n in enumerate(pads)],
                                repeats)
        flushed_ids = torch.zeros_like(ids)
        flushed_labels = torch.full_like(ids, -100)
        for row, n in enumerate(pads):
            flushed_ids[row, :seq - n] = flushed_labels[row, :seq - n] = ids[row, n:]

        def run_flushed() -> None:
            with autocast(padded_precision):
                loss = model(input_ids=flushed_ids, labels=flushed_labels).loss
            loss.backward()
            model.zero_grad(set_to_none=True)

        flushed = _best_seconds(run_flushed, repeats)
        out.update(padded_tokens_per_s=real / padded, per_row_tokens_per_s=real / per_row,
                   flushed_tokens_per_s=real / flushed)
    return out


def bench_head(model: Any, rows: int, seq: int, scored_share: float, repeats: int, precision: str) -> dict[str, Any]:
    """Forward + backward through TRL's fused LM head on loss rows shaped like GRPO's or SFT's: each row's first
    ``1 - scored_share`` positions unlabelled (a prompt), the rest labelled (a completion); TRL's CPU rule (every
    position through the head) against :func:`codegrep.rl.unpad.labelled_positions_only`, alternated ``repeats``
    times (median), at ``precision``. Tokens/s count every position of the rows. ``model`` gets TRL's fused head for
    the call and loses it after (generation later in the bench runs the plain forward)."""
    import torch
    from trl.trainer.utils import add_fused_lm_head

    from codegrep.agent.precision import autocast
    from codegrep.rl.unpad import labelled_positions_only

    ids = torch.randint(100, model.config.vocab_size - 100, (rows, seq), generator=torch.Generator().manual_seed(1))
    labels = ids.clone()
    labels[:, :seq - max(1, round(seq * scored_share))] = -100
    add_fused_lm_head(model)

    def run(labelled: bool) -> None:
        with labelled_positions_only(labelled), autocast(precision):
            loss = model(input_ids=ids, labels=labels, fused_lm_head=True).loss
        loss.backward()
        model.zero_grad(set_to_none=True)

    try:
        run(False), run(True)  # warm-up
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(repeats):
            for labelled in times:
                times[labelled].append(_best_seconds(lambda: run(labelled), 1))
    finally:
        del model.forward  # add_fused_lm_head set an instance attribute over the class's forward
    every, only = (rows * seq / statistics.median(times[k]) for k in (False, True))
    return {"rows": rows, "tokens_per_row": seq, "scored_share": round(float((labels != -100).float().mean()), 3),
            "every_position_tokens_per_s": round(every, 1), "labelled_only_tokens_per_s": round(only, 1),
            "labelled_only_speedup": round(only / every, 2), "precision": precision}


def optimizer_seconds(model: Any) -> float:
    """One AdamW step over every parameter (gradients of ones), as the trainers take it."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    saved = [p.detach().clone() for p in params]
    for p in params:
        p.grad = torch.ones_like(p)
    opt = torch.optim.AdamW(params, lr=0.0)
    opt.step()
    seconds = _best_seconds(opt.step, 2)
    with torch.no_grad():
        for p, s in zip(params, saved):
            p.copy_(s)
            p.grad = None
    return seconds


def bench_generation(model: Any, tokenizer: Any, group: int, prompt_tokens: int, new_tokens: int, turns: int,
                     obs_tokens: int, precision: str, seed: int) -> dict[str, Any]:
    """A GRPO group's multi-turn rollout at the token level: one shared prompt (the task), ``turns`` turns of
    ``new_tokens`` sampled tokens (EOS suppressed, so every arm generates the same count), an observation of
    ``obs_tokens`` after each. Arms: baseline (one sequence at a time, every turn prefilled from scratch, fp32),
    fast (the group together, one batched ``generate`` per turn through the prefix cache, fp32: the trainer's
    path) and, where bf16 is native, fast_bf16 (fast under one bf16 autocast context per turn)."""
    import torch

    from codegrep.agent.precision import autocast
    from codegrep.agent.prefix_cache import PrefixCache, generate_with_prefix_cache

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    prompt = _source_ids(tokenizer, prompt_tokens)
    obs = [_source_ids(tokenizer, obs_tokens, offset=3000 + 100 * t) for t in range(turns)]
    kw = {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": new_tokens,
          "min_new_tokens": new_tokens, "pad_token_id": pad}

    def one_at_a_time() -> None:
        histories = [list(prompt) for _ in range(group)]
        for t in range(turns):
            for h in histories:
                x = torch.tensor([h])
                with torch.inference_mode():
                    out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), **kw)
                h += out[0, x.shape[1]:].tolist() + obs[t]

    def together(arm_precision: str) -> Callable[[], None]:
        def run() -> None:
            cache, histories = PrefixCache(4096 << 20), [list(prompt) for _ in range(group)]
            for t in range(turns):
                rows = [torch.tensor(h) for h in histories]
                with autocast(arm_precision):
                    out, width = generate_with_prefix_cache(model, rows, cache, pad, **kw)
                for i, h in enumerate(histories):
                    h += [int(v) for v in out[i, width:] if v != pad][:new_tokens] + obs[t]
        return run

    arms = {"baseline": one_at_a_time, "fast": together("fp32"), "fast_bf16": together("bf16")}
    if precision != "bf16":
        arms.pop("fast_bf16")  # emulated bf16: not worth the time
    tokens = group * turns * new_tokens
    seconds: dict[str, float] = {}
    for name, fn in arms.items():
        torch.manual_seed(seed)
        seconds[name] = _best_seconds(fn, 1)
    return {"tokens": tokens, **{f"{k}_seconds": round(v, 2) for k, v in seconds.items()},
            **{f"{k}_tokens_per_s": tokens / v for k, v in seconds.items()}}


def decode_step(model: Any, group: int, context: int, precision: str, steps: int = 6) -> float:
    """Seconds of one bare decode forward (``group`` new tokens against a ``context``-token KV cache): what a
    generated token costs without ``generate``'s per-token Python (sampling, stopping criteria, bookkeeping)."""
    import torch
    from transformers import DynamicCache

    from codegrep.agent.precision import autocast
    from codegrep.agent.prefix_cache import cache_keyword

    ids = torch.randint(100, 1000, (group, context), generator=torch.Generator().manual_seed(0))
    keyword = cache_keyword(model)
    with torch.inference_mode(), autocast(precision):
        cache = DynamicCache(config=model.config)
        model(input_ids=ids, **{keyword: cache}, use_cache=True, logits_to_keep=1)
        nxt = ids[:, -1:]
        times = []
        for _ in range(steps):
            started = time.perf_counter()
            model(input_ids=nxt, **{keyword: cache}, use_cache=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def bench_train(*, sft_demos: int = 8, sft_min_tokens: int = 160, sft_max_tokens: int = 640, sft_batch: int = 4,
                group: int = 4, prompt_tokens: int = 384, new_tokens: int = 24, turns: int = 2, obs_tokens: int = 48,
                loss_tokens: int = 256, repeats: int = 2, cpu_precision: str = "auto", skip_sft: bool = False,
                seed: int = 0, scored_share: float = 0.5) -> dict[str, Any]:
    """The JSON object ``codegrep bench train`` prints (module docstring; keys say what they hold)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codegrep.agent.models import resolve_model
    from codegrep.agent.precision import cpu_features, resolve_precision

    precision = resolve_precision(cpu_precision)
    started = time.perf_counter()
    out: dict[str, Any] = {"model": "smollm2 (SmolLM2-135M-Instruct)", "cpu": cpu_features(),
                           "cpu_precision": cpu_precision, "precision": precision,
                           "contention_note": "wall-clock rates; on a shared machine every arm is slowed, so the "
                                              "speed-ups (same process, same data) are what to compare"}
    limit_flops = {"fp32": matmul_flops(torch.float32)}
    limit_flops["bf16"] = matmul_flops(torch.bfloat16)
    bandwidth = memory_bandwidth()
    out["limit_flops"] = {k: round(v / 1e9, 1) for k, v in limit_flops.items()}
    out["limit_flops_unit"] = "GFLOP/s (matmul probe, 1024x576 @ 576x1536)"
    out["limit_bandwidth"] = {"bytes_per_s_gb": round(bandwidth / 1e9, 2)}
    path = resolve_model("smollm2")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    n_params = sum(p.numel() for p in model.parameters())  # tied embedding counted once: read once per step
    cfgm = model.config
    out["n_params"] = n_params

    def train_flops_per_token(seq: int) -> float:  # 6N for the weights (the tied LM head included) + attention
        return 6 * n_params + 12 * cfgm.num_hidden_layers * seq * cfgm.hidden_size

    # loss (forward + backward) on a GRPO-sized batch
    model.train()
    loss = bench_loss(model, group, loss_tokens, repeats, padded_precision=precision)
    fast_loss = loss[f"{precision}_tokens_per_s"]
    limit_loss = limit_flops[precision] / train_flops_per_token(loss_tokens)
    out["loss"] = {**{k: round(v, 1) for k, v in loss.items()}, "batch": [group, loss_tokens],
                   "limit_tokens_per_s": round(limit_loss, 1), "ratio_to_limit": round(fast_loss / limit_loss, 3),
                   "speedup": round(fast_loss / loss["fp32_tokens_per_s"], 2),
                   "per_row_speedup_over_padded": round(loss["per_row_tokens_per_s"] / loss["padded_tokens_per_s"], 2),
                   "flushed_speedup_over_padded": round(loss["flushed_tokens_per_s"] / loss["padded_tokens_per_s"], 2)}
    out["optimizer_step_s"] = round(optimizer_seconds(model), 3)
    out["head"] = bench_head(model, group, loss_tokens, scored_share, repeats, precision)
    model.eval()

    # generation
    gen = bench_generation(model, tokenizer, group, prompt_tokens, new_tokens, turns, obs_tokens, precision, seed)
    weight_bytes = n_params * 4  # generation runs fp32 (the fast arm): every fp32 weight read once per step
    limit_gen = bandwidth / weight_bytes * group
    context = prompt_tokens + turns * (new_tokens + obs_tokens) // 2
    step_fp32 = decode_step(model, group, context, "fp32")
    step_double = decode_step(model, 2 * group, context, "fp32")  # what more rows per step cost
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    step_1thread = decode_step(model, group, context, "fp32")
    torch.set_num_threads(threads)
    step_bf16 = decode_step(model, group, context, "bf16") if precision == "bf16" else None
    per_step_fast = gen["fast_seconds"] / (turns * new_tokens)  # seconds per decode step, prefill included
    out["generation"] = {**{k: (round(v, 1) if isinstance(v, float) else v) for k, v in gen.items()},
                         "precision": "fp32", "group": group, "prompt_tokens": prompt_tokens,
                         "new_tokens_per_turn": new_tokens, "turns": turns, "observation_tokens": obs_tokens}
    out["limit_bandwidth"].update({
        "weight_bytes_per_decode_step": weight_bytes, "weight_dtype": "fp32",
        "decode_steps_per_s": round(bandwidth / weight_bytes, 1), "tokens_per_s": round(limit_gen, 1),
        "note": f"group of {group} decoded together: each step reads every weight once"})
    out["generation"]["ratio_to_limit"] = round(gen["fast_tokens_per_s"] / limit_gen, 3)
    out["generation"]["decode_step_ms"] = {
        "fast_generate_all_in": round(per_step_fast * 1e3, 1), "bare_forward_fp32": round(step_fp32 * 1e3, 1),
        "bare_forward_fp32_1_thread": round(step_1thread * 1e3, 1),
        "bare_forward_fp32_twice_the_rows": round(step_double * 1e3, 1),
        **({"bare_forward_bf16": round(step_bf16 * 1e3, 1)} if step_bf16 is not None else {}),
        "bandwidth_floor": round(weight_bytes / bandwidth * 1e3, 1),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}
    out["generation_speedup"] = round(gen["fast_tokens_per_s"] / gen["baseline_tokens_per_s"], 2)

    # SFT through the real SFTTrainer (the warm start's code), which loads its own copy of the model
    del model
    import gc

    gc.collect()
    if not skip_sft:
        chats = synthetic_chats(tokenizer, sft_demos, sft_min_tokens, sft_max_tokens, seed)
        base = bench_sft(path, chats, sft_batch, bf16=False, bucketed=False, unmasked=False, labelled_only=False)
        masked = bench_sft(path, chats, sft_batch, bf16=precision == "bf16", bucketed=True, unmasked=False)
        every = bench_sft(path, chats, sft_batch, bf16=precision == "bf16", bucketed=True, unmasked=True,
                          labelled_only=False)
        fast = bench_sft(path, chats, sft_batch, bf16=precision == "bf16", bucketed=True, unmasked=True)
        mean_len = base["tokens"] / sft_demos
        limit_sft = limit_flops[precision] / train_flops_per_token(int(mean_len))
        out["sft"] = {"baseline": _rounded(base), "fast_masked": _rounded(masked),
                      "fast_every_position": _rounded(every), "fast": _rounded(fast),
                      "unmasked_speedup": round(fast["tokens_per_s"] / masked["tokens_per_s"], 2),
                      "labelled_only_speedup": round(fast["tokens_per_s"] / every["tokens_per_s"], 2),
                      "demos": sft_demos,
                      "lengths": [sft_min_tokens, sft_max_tokens], "limit_tokens_per_s": round(limit_sft, 1),
                      "ratio_to_limit": round(fast["tokens_per_s"] / limit_sft, 3),
                      "baseline_ratio_to_limit": round(base["tokens_per_s"] / (limit_flops["fp32"] /
                                                                               train_flops_per_token(int(mean_len))), 3)}
        out["sft_speedup"] = round(fast["tokens_per_s"] / base["tokens_per_s"], 2)
        sft_step = fast["seconds"] / max(1, -(-sft_demos // sft_batch))
        out["sft_step_breakdown_s"] = {
            "tokenize_all": fast["tokenize_s"], "collate_all": fast["collate_s"],
            "forward_backward_est": round(sft_step - out["optimizer_step_s"], 2),
            "optimizer": out["optimizer_step_s"], "step": round(sft_step, 2)}
    out["gaps"] = _gaps(out)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def _rounded(d: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 1) if isinstance(v, float) and k == "tokens_per_s" else v for k, v in d.items()}


def _gaps(out: dict[str, Any]) -> list[str]:
    """For each target not reached: the gap and what bounds it, in the run's own numbers."""
    gaps = []
    sft = out.get("sft")
    if sft and out["sft_speedup"] < SFT_TARGET:
        flops = out["limit_flops"]
        gaps.append(f"sft_speedup {out['sft_speedup']} < {SFT_TARGET}: the fast path runs at "
                    f"{sft['ratio_to_limit']:.0%} of the {out['precision']} matmul limit (the baseline at "
                    f"{sft['baseline_ratio_to_limit']:.0%} of fp32's); the matmul probe is "
                    f"{flops['bf16'] / flops['fp32']:.1f}x faster in bf16 but a forward + backward only "
                    f"{out['loss']['speedup']}x, so the rest of the step (not matmuls) bounds it; padding "
                    f"{sft['fast']['padding_share']:.0%} of the fast batches (baseline "
                    f"{sft['baseline']['padding_share']:.0%}), tokenising and collating "
                    f"{out['sft_step_breakdown_s']['tokenize_all'] + out['sft_step_breakdown_s']['collate_all']:.2f} "
                    f"s in all, the optimizer {out['optimizer_step_s']} s per step")
    g = out["generation"]
    if out["generation_speedup"] < GENERATION_TARGET:
        step = g["decode_step_ms"]
        gaps.append(f"generation_speedup {out['generation_speedup']} < {GENERATION_TARGET}: a fast decode step "
                    f"costs {step['fast_generate_all_in']} ms all in (prefill and generate's per-token Python "
                    f"included), {step['bare_forward_fp32']} ms of it the bare forward, "
                    f"{step['bare_forward_fp32'] / step['bandwidth_floor']:.1f}x the {step['bandwidth_floor']} ms "
                    f"bandwidth floor, so memory traffic does not bound a step; twice the rows cost "
                    f"{step['bare_forward_fp32_twice_the_rows']} ms a step")
    return gaps
