"""The mechanism study's policy: a tiny, randomly initialised Llama that shares SmolLM2's tokenizer.

It is NOT SmolLM2 and not a truncation of it: same family (``LlamaForCausalLM``), same tokenizer and chat
template (49,152 tokens), but 3.2M weights in all (most of them the embedding), initialised from a fixed seed and
built locally, offline; ``format_pretrain`` then teaches it the one-turn answer. It exists so the efficiency-layer
ablation can run many paired seeds on 2 CPU cores through the same trainer, advantage functions and probe-KL
measure; what it can show is the optimiser-level mechanism (how each layer's advantages move a policy), not how
SmolLM2-135M behaves.
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
    return _save(model, base, describe(model, shape, seed), out)


def _save(model: Any, tokenizer_dir: Path, info: dict[str, Any], out: Path) -> Path:
    """Save ``model``, the tokenizer files of ``tokenizer_dir`` and ``TINY_POLICY.json`` to ``out`` whole (a
    temporary sibling renamed into place)."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copyfile(tokenizer_dir / name, tmp / name)
    (tmp / "TINY_POLICY.json").write_text(json.dumps(info, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def describe(model: Any, shape: dict[str, int], seed: int) -> dict[str, Any]:
    """What the tiny policy is, for the study's JSON and the notebook."""
    n = sum(p.numel() for p in model.parameters())
    return {"kind": "tiny randomly initialised LlamaForCausalLM, SmolLM2-135M tokenizer and chat template "
                    "(not SmolLM2 weights)", "shape": shape, "init_seed": seed, "parameters": int(n),
            "vocab_size": int(model.config.vocab_size)}


FORMAT_STEPS = 160
"""Steps of the tiny policy's format pre-training (``format_pretrain``), 8 examples each."""
FORMAT_LR = 3e-3


def format_pretrain(model_dir: Path, tasks: list[Any], agent: Any, out_root: str | Path, steps: int = FORMAT_STEPS,
                    lr: float = FORMAT_LR, batch: int = 8, seed: int = 0) -> Path:
    """Teach the tiny policy the one-turn answer: prompt (the agent's real prompt for a train-split task) ->
    ``<tool_call>{"name": "submit", "arguments": {"files": [gold files]}}</tool_call>`` + EOS, loss on the answer
    tokens only, the vocabulary projection computed only there (cheap on CPU). Cached by everything that shapes it.

    This is the mechanism study's warm start, in place of the 135M run's (``codegrep.rl.sft``: multi-turn scripted
    episodes, far too long for a 3M-weight model to learn in minutes); ``tasks`` must be train-split tasks.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codegrep.agent.protocol import build_messages, tool_call_text
    from codegrep.env.tools import ToolCall

    ids = sorted(t.instance_id for t in tasks)
    key = hashlib.sha1(json.dumps({"base": model_dir.name, "steps": steps, "lr": lr, "batch": batch, "seed": seed,
                                   "agent": agent.to_dict(), "tasks": ids}, sort_keys=True).encode()).hexdigest()[:10]
    out = Path(out_root) / f"{model_dir.name}-format-{key}"
    if (out / "model.safetensors").is_file():
        return out
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    examples = []
    for t in tasks:
        prompt = list(tok.apply_chat_template(build_messages(t.problem_statement, agent), tokenize=True,
                                              return_dict=False, add_generation_prompt=True))
        answer = tok.encode(tool_call_text([ToolCall("submit", {"files": list(t.gold_files)})]),
                            add_special_tokens=False) + [tok.eos_token_id]
        examples.append((prompt, answer))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        total = 0.0
        for i in torch.randint(len(examples), (batch,), generator=gen).tolist():
            prompt, answer = examples[i]
            seq = torch.tensor([prompt + answer[:-1]])
            hidden = model.model(input_ids=seq).last_hidden_state[0, len(prompt) - 1:]
            loss = torch.nn.functional.cross_entropy(model.lm_head(hidden), torch.tensor(answer)) / batch
            loss.backward()
            total += loss.item()
        opt.step()
        losses.append(total)
    info = json.loads((model_dir / "TINY_POLICY.json").read_text())
    info.update({"format_pretraining": {"what": "one-turn submit answers with the gold files of train-split tasks "
                                                "(loss on answer tokens only)", "tasks": len(ids), "steps": steps,
                                        "lr": lr, "batch": batch, "seed": seed, "first_loss": losses[0],
                                        "last_loss": sum(losses[-10:]) / min(len(losses), 10)}})
    return _save(model, model_dir, info, out)
