"""Policies: chat histories in, next assistant messages out (batched), behind ``codegrep.Policy``.

- :class:`HFPolicy`: a local transformers causal LM (CPU or GPU), batched with left padding.
- :class:`OpenAIPolicy`: any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, ``transformers serve``).
- :class:`ScriptedPolicy`: replays given outputs (tests, demonstrations, overhead benchmarks).

After each ``generate`` a policy sets ``last_usage``: one ``{"prompt_tokens", "completion_tokens"}`` per history
(measured by the tokenizer or reported by the server), which the episode loop records per turn.
"""
from __future__ import annotations

import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from codegrep import Policy
from codegrep.agent.models import SMOLLM2_ALIASES
from codegrep.agent.protocol import PolicyConfig, policy_config
from codegrep.agent.turn_controls import TurnControls

Messages = list[dict[str, Any]]


def estimate_tokens(text: str) -> int:
    """Tokenizer-free token estimate (4 characters per token), for policies that cannot count.

    >>> estimate_tokens("abcdefgh"), estimate_tokens("")
    (2, 0)
    """
    return (len(text) + 3) // 4


class HFPolicy:
    """A transformers causal LM; greedy when ``temperature == 0``."""

    def __init__(self, model: Any = "smollm2", tokenizer: Any = None, max_new_tokens: int = 256,
                 temperature: float = 0.0, top_p: float = 1.0, device: str = "auto", batch_size: int = 8,
                 stop_strings: Sequence[str] = (), cpu_threads: int | None = None,
                 prefix_cache_mb: int = 4096, cpu_precision: str = "fp32", stop_after_calls: int | None = 0,
                 leave_batch: bool = True, distinct_greps: bool = False,
                 copy_greps: bool = False, min_greps: int = 0, draft_tokens: int = 0,
                 argument_keys: bool = False, submit_ranked: bool = False, decode_precision: str = "fp32",
                 span_attention: bool = True) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from codegrep.agent.models import resolve_model

        self.cpu_threads = int(cpu_threads) if cpu_threads else None
        """torch CPU threads while this policy generates (1 avoids OpenMP spin-waits on a shared CPU); restored after
        each ``generate`` (``precision.torch_threads``), so a later training in the process keeps its own."""
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.model_name = model if isinstance(model, str) else getattr(model, "name_or_path", type(model).__name__)
        if isinstance(model, str):
            path = resolve_model(model)
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
            try:
                model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(self.device).eval()
                tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
            except Exception as exc:  # a truncated weights/config file (safetensors raises its own class)
                from codegrep.errors import damaged_file

                raise damaged_file(path, exc, f"delete {path} to rebuild it (the 'smollm2' conversion runs again on "
                                   "next use; a model of your own: copy it again)") from exc
        if tokenizer is None:
            raise ValueError("HFPolicy: pass the tokenizer together with a model object")
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.batch_size, self.stop_strings = max(1, batch_size), list(stop_strings)
        self.leave_batch = leave_batch
        self.span_attention = bool(span_attention)
        """Decoding steps attend each group of rows from its earliest non-padding slot (``codegrep.agent.row_spans``;
        False: the batch's whole padded width, what ``codegrep bench decode --attention padded`` times)."""
        self.draft_tokens = max(0, int(draft_tokens))
        """Prompt-lookup drafts verified per decoding step (``agent.draft_tokens``; ``prefix_cache.decode_rows``)."""
        self.controls = TurnControls(stop_after_calls, distinct_greps, copy_greps, min_greps, argument_keys,
                                     submit_ranked)
        """Where rows stop and which tokens they may write (``codegrep.agent.turn_controls``, each field documented
        there; GRPO's rollouts get the same from the profile's agent section)."""
        self.last_usage: list[dict[str, int]] = []
        from codegrep.agent.prefix_cache import PrefixCache, supports_prefix_cache

        self.prefix_cache = PrefixCache(int(prefix_cache_mb) << 20) \
            if prefix_cache_mb and supports_prefix_cache(self.model) else None
        from codegrep.agent.precision import resolve_precision

        self.cpu_precision = resolve_precision(cpu_precision) if self.device == "cpu" else "fp32"
        """Prefill arithmetic actually used (bf16 only with the prefix cache, on CPU)."""
        decode = resolve_precision(decode_precision, name="agent.decode_precision")  # a bad value fails anywhere
        self.decode_precision = decode if self.device == "cpu" and self.prefix_cache is not None \
            and self.leave_batch else "fp32"
        """Decoding arithmetic actually used (``agent.decode_precision``; bf16 only on the prefix cache's own decoding
        loop, on CPU: ``prefix_cache.generate_with_prefix_cache``)."""

    def describe(self) -> dict[str, Any]:
        import torch

        return {"kind": "hf", "model": str(self.model_name), "device": self.device,
                "max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "batch_size": self.batch_size, "cpu_threads": self.cpu_threads or torch.get_num_threads(),
                "prefix_cache_mb": self.prefix_cache.max_bytes >> 20 if self.prefix_cache else 0,
                "prefill_precision": self.cpu_precision if self.prefix_cache else "fp32",
                **({"decode_precision": self.decode_precision} if self.decode_precision != "fp32" else {}),
                **({} if self.span_attention else {"span_attention": False}),
                "draft_tokens": self.draft_tokens if self.prefix_cache and self.leave_batch else 0,
                **dataclasses.asdict(self.controls)}

    def generate(self, batch: Sequence[Messages]) -> list[str]:
        from codegrep.agent.precision import torch_threads

        out, self.last_usage = [], []
        with torch_threads(self.cpu_threads):
            for start in range(0, len(batch), self.batch_size):
                out += self._generate_chunk(batch[start:start + self.batch_size])
        return out

    def _generate_chunk(self, chunk: Sequence[Messages]) -> list[str]:
        import torch

        prompts = [self.tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in chunk]
        sampling = {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p} \
            if self.temperature > 0 else {"do_sample": False}
        extra = {"stop_strings": self.stop_strings, "tokenizer": self.tokenizer} if self.stop_strings else {}
        kwargs = {"max_new_tokens": self.max_new_tokens, **sampling, **extra, "pad_token_id": self.pad_id}
        if self.prefix_cache is not None:  # each history token prefilled once, across turns (prefix_cache.py)
            from codegrep.agent.prefix_cache import generate_with_prefix_cache

            rows = [torch.tensor(self.tokenizer(p, add_special_tokens=False)["input_ids"], dtype=torch.long)
                    for p in prompts]
            width = max(len(r) for r in rows)
            kwargs.update(self.controls.generate_kwargs(self.tokenizer, width))
            ids, width = generate_with_prefix_cache(self.model, rows, self.prefix_cache, self.pad_id,
                                                    prefill_precision=self.cpu_precision,
                                                    leave_batch=self.leave_batch, draft_tokens=self.draft_tokens,
                                                    decode_precision=self.decode_precision,
                                                    span_attention=self.span_attention, **kwargs)
            lengths = [len(r) for r in rows]
        else:
            side, self.tokenizer.padding_side = self.tokenizer.padding_side, "left"  # decoder-only: pad on the left
            try:
                enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            finally:
                self.tokenizer.padding_side = side  # the tokenizer may be shared with a trainer
            enc = enc.to(self.device)
            kwargs.update(self.controls.generate_kwargs(self.tokenizer, enc["input_ids"].shape[1]))
            with torch.inference_mode():
                ids = self.model.generate(**enc, **kwargs)
            width, lengths = enc["input_ids"].shape[1], [int(m.sum()) for m in enc["attention_mask"]]
        new = ids[:, width:]
        for row, n_prompt in zip(new, lengths):
            n_out = int((row != self.pad_id).sum())
            self.last_usage.append({"prompt_tokens": n_prompt, "completion_tokens": n_out})
        return self.tokenizer.batch_decode(new, skip_special_tokens=True)

    @property
    def pad_id(self) -> int:
        tok = self.tokenizer
        return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id


class OpenAIPolicy:
    """Any OpenAI-compatible chat endpoint over plain HTTP; a batch is sent as concurrent requests."""

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None,
                 max_new_tokens: int = 256, temperature: float = 0.0, top_p: float = 1.0,
                 timeout_s: float = 300.0, concurrency: int = 8) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.concurrency = max(1, concurrency)
        self.model = model or self._served_model()
        self.last_usage: list[dict[str, int]] = []

    def _request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        import httpx

        try:
            response = self.client.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise RuntimeError(f"endpoint {self.base_url}{path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise RuntimeError(f"endpoint {self.base_url}{path} answered {response.status_code}: {response.text[:300]}")
        return response.json()

    def _served_model(self) -> str:
        """The first model the server lists (vLLM serves exactly one)."""
        data = self._request("GET", "/models").get("data") or []
        if not data:
            raise RuntimeError(f"endpoint {self.base_url} lists no models; pass --model")
        return data[0]["id"]

    def describe(self) -> dict[str, Any]:
        return {"kind": "openai", "base_url": self.base_url, "model": self.model,
                "max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p}

    def complete(self, messages: Messages) -> tuple[str, dict[str, int]]:
        """One chat completion: the text (tool calls parsed by the server are put back as text) and usage."""
        body = {"model": self.model, "messages": messages, "max_tokens": self.max_new_tokens,
                "temperature": self.temperature, "top_p": self.top_p}
        reply = self._request("POST", "/chat/completions", json=body)
        message = reply["choices"][0]["message"]
        text = message.get("content") or ""
        for call in message.get("tool_calls") or []:  # servers with a tool parser strip the tags; restore them
            fn = call.get("function", call)
            args = fn.get("arguments", {})
            args = json.loads(args) if isinstance(args, str) and args.strip().startswith("{") else args
            text += "\n<tool_call>" + json.dumps({"name": fn.get("name"), "arguments": args}) + "</tool_call>"
        usage = reply.get("usage") or {}
        return text, {"prompt_tokens": int(usage.get("prompt_tokens", 0)),
                      "completion_tokens": int(usage.get("completion_tokens", 0))}

    def generate(self, batch: Sequence[Messages]) -> list[str]:
        with ThreadPoolExecutor(max_workers=min(self.concurrency, max(1, len(batch)))) as pool:
            results = list(pool.map(self.complete, batch))
        self.last_usage = [usage for _, usage in results]
        return [text for text, _ in results]


class ScriptedPolicy:
    """Replays outputs: one script for every episode, one per episode, or a function of the history.

    The turn index is the number of assistant messages already in the history; a script that runs out
    answers ``""`` (a format error, so the episode ends without files). With one script per episode,
    episodes are told apart by history object identity (the loop keeps one list per episode), in order
    of first appearance.

    >>> p = ScriptedPolicy(["a", "b"])
    >>> p.generate([[{"role": "user", "content": "x"}]]), p.generate([[{"role": "assistant", "content": "a"}]])
    (['a'], ['b'])
    """

    def __init__(self, outputs: Sequence[str] | Sequence[Sequence[str]] | Callable[[Messages], str]) -> None:
        self.fn = outputs if callable(outputs) else None
        per_episode = not callable(outputs) and len(outputs) > 0 and not isinstance(outputs[0], str)
        self.scripts = [list(s) for s in outputs] if per_episode else None
        self.shared = None if (self.fn or per_episode) else list(outputs)
        self._seen: list[Messages] = []  # histories in order of first appearance (kept alive: ids stay unique)
        self.last_usage: list[dict[str, int]] = []

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted", "mode": "function" if self.fn else "per-episode" if self.scripts else "shared"}

    def _one(self, history: Messages) -> str:
        if self.fn is not None:
            return self.fn(history)
        turn = sum(m.get("role") == "assistant" for m in history)
        script = self.shared
        if self.scripts is not None:
            index = next((i for i, h in enumerate(self._seen) if h is history), None)
            if index is None:
                self._seen.append(history)
                index = len(self._seen) - 1
            script = self.scripts[index] if index < len(self.scripts) else []
        return script[turn] if turn < len(script) else ""

    def generate(self, batch: Sequence[Messages]) -> list[str]:
        out = [self._one(h) for h in batch]
        self.last_usage = [{"prompt_tokens": sum(estimate_tokens(str(m.get("content", ""))) for m in h),
                            "completion_tokens": estimate_tokens(o)} for h, o in zip(batch, out)]
        return out


POLICY_KINDS = ("hf", "openai", "scripted")


def make_policy(spec: dict[str, Any] | str) -> Policy:
    """A policy from the ``agent:`` profile section, a model name/path, or an endpoint URL.

    Keys: ``policy`` (hf | openai | scripted; a set ``endpoint`` means openai), ``model``,
    ``endpoint``, ``api_key_env``, ``max_new_tokens``, ``temperature``, ``top_p``, ``device``, ``batch_size``,
    ``cpu_threads``, ``prefix_cache_mb``, ``cpu_precision`` (of the prefill), ``decode_precision``, ``stop_early``, ``distinct_greps``,
    ``copy_greps``, ``min_greps``, ``argument_keys``, ``submit_ranked``, ``draft_tokens``, ``outputs`` (scripted).

    >>> make_policy({"policy": "scripted", "outputs": ["x"]}).describe()
    {'kind': 'scripted', 'mode': 'shared'}
    """
    if isinstance(spec, str):
        spec = {"endpoint": spec} if spec.startswith(("http://", "https://")) else {"model": spec}
    policy_config(spec)  # an unknown key, or a precision outside PRECISIONS, is an error naming it
    controls = TurnControls.from_agent(spec)  # min_greps without copy_greps is an error naming both
    kind = spec.get("policy") or "hf"
    if kind not in POLICY_KINDS:  # the short form `policy: smollm2` names a local model
        kind, spec = "hf", {**spec, "model": spec.get("model") or kind}
    if spec.get("endpoint") and kind != "scripted":
        kind = "openai"  # an endpoint always wins over a local model (`--endpoint URL` on the command line)
    sampling = {k: spec[k] for k in ("max_new_tokens", "temperature", "top_p") if spec.get(k) is not None}
    if kind == "scripted":
        return ScriptedPolicy(spec.get("outputs") or [])
    if kind == "openai":
        if not spec.get("endpoint"):
            raise ValueError("agent.policy=openai needs agent.endpoint (e.g. http://127.0.0.1:8000/v1)")
        key = os.environ.get(spec.get("api_key_env") or "OPENAI_API_KEY")
        model = spec.get("model")
        model = None if str(model).lower() in SMOLLM2_ALIASES else model  # a local-only name: ask the server
        return OpenAIPolicy(spec["endpoint"], model=model, api_key=key, **sampling)
    return HFPolicy(spec.get("model") or "smollm2", device=spec.get("device") or "auto",
                    batch_size=int(spec.get("batch_size") or PolicyConfig.batch_size),
                    cpu_threads=spec.get("cpu_threads"),
                    prefix_cache_mb=int(spec["prefix_cache_mb"]) if spec.get("prefix_cache_mb") is not None
                    else PolicyConfig.prefix_cache_mb,
                    cpu_precision=spec.get("cpu_precision") or "fp32",
                    decode_precision=spec.get("decode_precision") or "fp32",
                    stop_after_calls=controls.stop_after_calls, distinct_greps=controls.distinct_greps,
                    copy_greps=controls.copy_greps, min_greps=controls.min_greps,
                    argument_keys=controls.argument_keys, submit_ranked=controls.submit_ranked,
                    draft_tokens=int(spec.get("draft_tokens") or 0), **sampling)
