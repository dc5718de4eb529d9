"""The mechanism study's policy: a tiny, randomly initialised Llama that shares SmolLM2's tokenizer.

It is NOT SmolLM2 and not a truncation of it: same architecture family (``LlamaForCausalLM``), same tokenizer
and chat template (49,152 tokens), but a few hundred thousand weights per layer instead of 135M in total,
initialised from a fixed seed and built locally, offline. It exists so the efficiency-layer ablation can run
many paired seeds on 2 CPU cores through the same trainer, advantage functions and probe-KL measure; what it
can show is the optimiser-level mechanism (how each layer's advantages move a policy), not how SmolLM2-135M
behaves.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

TINY_SHAPE = {"hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16}
"""Shape of the tiny policy (everything else, the vocabulary included, is SmolLM2's config)."""

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json",
                   "special_tokens_map.json")


def tiny_policy_key(shape: dict[str, int], seed: int) -> str:
    """Content key of a tiny policy (shape + init seed).

    >>> tiny_policy_key({"hidden_size": 64}, 0) == tiny_policy_key({"hidden_size": 64}, 0)
    True
    """
    return hashlib.sha1(json.dumps({"shape": shape, "seed": seed}, sort_keys=True).encode()).hexdigest()[:10]


def build_tiny_policy(out_root: str | Path, shape: dict[str, int] | None = None, seed: int = 0) -> Path:
    """Write (once; cached by shape and seed) a randomly initialised tiny Llama with SmolLM2's tokenizer
    under ``out_root`` and return its directory (a plain HF model dir any ``model:`` setting accepts)."""
    import torch
    from transformers import AutoConfig, LlamaForCausalLM

    from codegrep.agent.models import smollm2_dir

    shape = dict(TINY_SHAPE if shape is None else shape)
    out = Path(out_root) / f"tiny-llama-{tiny_policy_key(shape, seed)}"  # out_root: e.g. cache_dir() / "models"
    if (out / "model.safetensors").is_file():
        return out
    base = smollm2_dir()
    config = AutoConfig.from_pretrained(base)
    for k, v in shape.items():
        setattr(config, k, v)
    config.tie_word_embeddings = True
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    for name in TOKENIZER_FILES:
        if (base / name).is_file():
            shutil.copyfile(base / name, tmp / name)
    (tmp / "TINY_POLICY.json").write_text(json.dumps(describe(model, shape, seed), indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def describe(model: Any, shape: dict[str, int], seed: int) -> dict[str, Any]:
    """What the tiny policy is, for the study's JSON and the notebook."""
    n = sum(p.numel() for p in model.parameters())
    return {"kind": "tiny randomly initialised LlamaForCausalLM, SmolLM2-135M tokenizer and chat template "
                    "(not SmolLM2 weights)", "shape": shape, "init_seed": seed, "parameters": int(n),
            "vocab_size": int(model.config.vocab_size)}
