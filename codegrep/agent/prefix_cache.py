"""Prefix reuse for local (transformers) generation: each token of a history is prefilled once.

A multi-turn episode re-sends its whole history every turn. Without reuse, turn ``t`` prefills the system
prompt, the issue and every earlier turn again (on 2 CPU cores prefill runs at a few hundred tokens/s, so this
is about half of an evaluation's time). :class:`PrefixCache` keeps the key/value states of recently generated
sequences; a new prompt reuses the longest token prefix it shares with any of them (its own last turn, or the
system prompt another episode already computed), prefills only the rest, one row at a time (no padding to
compute), and then decodes the rows together, left-padded, through ``model.generate``.

Reuse is exact, not approximate: the key/value states of a position depend only on the tokens up to it
(causal attention; padding is masked), so a state is reused only for a token prefix equal to the new prompt's.
The cache is bounded in bytes (oldest entries dropped first) and used only with plain per-layer
``DynamicCache`` layers (decoder-only full attention); other cache types take the ordinary batched path.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Entry:
    """One cached sequence: its token ids and per-layer (keys, values) of shape [1, heads, len, dim]."""

    ids: Any
    kv: list[tuple[Any, Any]]

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.kv)


def common_prefix(a: Any, b: Any) -> int:
    """Length of the common prefix of two 1-D id tensors.

    >>> import torch
    >>> common_prefix(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4, 5])), common_prefix(torch.tensor([7]), torch.tensor([]))
    (2, 0)
    """
    n = min(len(a), len(b))
    if n == 0:
        return 0
    same = a[:n] == b[:n]
    return n if bool(same.all()) else int((~same).int().argmax())


class PrefixCache:
    """Recent sequences' key/value states, at most ``max_bytes`` in all (oldest dropped first)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: list[Entry] = []
        self.stats = {"prompt_tokens": 0, "reused_tokens": 0}

    def lookup(self, ids: Any) -> tuple[int, Entry | None]:
        """(reusable length, entry) for the longest cached prefix of ``ids``, keeping at least one token to feed."""
        best, found = 0, None
        for entry in self.entries:
            n = min(common_prefix(entry.ids, ids), len(ids) - 1, len(entry.ids))
            if n > best:
                best, found = n, entry
        return best, found

    def add(self, entry: Entry) -> None:
        """Adds ``entry``, dropping entries it extends (an episode's earlier turns) and the oldest over budget."""
        self.entries = [e for e in self.entries
                        if not (len(e.ids) <= len(entry.ids) and common_prefix(e.ids, entry.ids) == len(e.ids))]
        self.entries.append(entry)
        total = sum(e.nbytes for e in self.entries)
        while self.entries and total > self.max_bytes:
            total -= self.entries.pop(0).nbytes

    def clear(self) -> None:
        self.entries.clear()

    def check_weights(self, model: Any) -> None:
        """Empties the cache when the model's weights changed since the last call (a trainer step).

        Version counters alone miss updates that bypass autograd's bookkeeping (the fused AdamW kernel, writes
        through ``.data``), so the stamp also holds a checksum of every parameter: one reduction per call.
        """
        import torch

        params = list(model.parameters())
        with torch.no_grad():
            checksum = float(torch.stack([p.detach().sum(dtype=torch.float64) * (i + 1)
                                          for i, p in enumerate(params)]).sum()) if params else 0.0
        stamp = (id(model), len(params), tuple(p._version for p in params), checksum)
        if stamp != getattr(self, "_stamp", None):
            self.clear()
            self._stamp = stamp


def supports_prefix_cache(model: Any) -> bool:
    """True for decoder-only models whose transformers cache is made of plain ``DynamicLayer`` layers."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    if getattr(model.config, "is_encoder_decoder", False):
        return False
    try:
        cache = DynamicCache(config=model.config)
    except Exception:  # noqa: BLE001 - a config the cache cannot read: use the plain path
        return False
    return bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)


def _prefill(model: Any, ids: Any, store: PrefixCache, precision: str = "fp32") -> list[tuple[Any, Any]]:
    """Key/value states of ``ids[:-1]`` (the last token is fed by ``generate``), reusing the store.

    ``precision`` bf16 runs the forward under bf16 autocast (compute-bound on long prompts, where native bf16
    matmuls pay); the states are stored in the model's dtype, so decoding and reuse see one dtype."""
    import torch
    from transformers import DynamicCache

    from codegrep.agent.precision import autocast

    n, entry = store.lookup(ids)
    store.stats["prompt_tokens"] += len(ids)
    store.stats["reused_tokens"] += n
    cache = DynamicCache(config=model.config)
    if entry is not None and n > 0:
        for i, (k, v) in enumerate(entry.kv):
            cache.update(k[:, :, :n], v[:, :, :n], i)
    todo = ids[n:len(ids) - 1]
    if not len(todo):
        return [(layer.keys, layer.values) for layer in cache.layers] if n else []
    with torch.inference_mode(), autocast(precision, model.device.type):
        model(input_ids=todo[None], cache=cache, use_cache=True, logits_to_keep=1)
    dtype = model.dtype
    kv = [(layer.keys.to(dtype), layer.values.to(dtype)) for layer in cache.layers]
    store.add(Entry(ids=ids[:len(ids) - 1].clone(), kv=kv))  # later rows of this batch share the system prompt
    return kv


def generate_with_prefix_cache(model: Any, rows: list[Any], store: PrefixCache, pad_id: int,
                               prefill_precision: str = "fp32", **generate_kwargs: Any) -> tuple[Any, int]:
    """Generate for ``rows`` (1-D id tensors); returns (left-padded output ids, prompt width).

    Rows are prefilled one by one against ``store``, then decoded together; each finished sequence is added
    to ``store`` (its fed tokens and states), so the next turn of the same episode prefills only what is new.
    """
    import torch
    from transformers import DynamicCache

    device = model.device
    store.check_weights(model)
    rows = [r.to(device) for r in rows]
    states = [_prefill(model, r, store, prefill_precision) for r in rows]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, width - len(r):], mask[i, width - len(r):] = r, 1
    cache = None
    if width > 1:
        layers = []
        for layer in range(len(next(s for s in states if s))):
            k0, v0 = next(s[layer] for s in states if s)
            ks = torch.zeros((len(rows), k0.shape[1], width - 1, k0.shape[3]), dtype=k0.dtype, device=device)
            vs = torch.zeros((len(rows), v0.shape[1], width - 1, v0.shape[3]), dtype=v0.dtype, device=device)
            for i, r in enumerate(rows):
                if states[i]:  # left-padded like the ids; padded positions are masked
                    ks[i, :, width - len(r):], vs[i, :, width - len(r):] = states[i][layer][0][0], states[i][layer][1][0]
            layers.append((ks, vs))
        cache = DynamicCache(layers, config=model.config)
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, cache=cache, **generate_kwargs)
    if cache is None:
        return out, width
    fed = out.shape[1] - 1  # the last generated token was never fed, so it has no state
    if cache.get_seq_length() != fed:  # generate did not extend this cache object: store nothing
        return out, width
    for i, r in enumerate(rows):
        start = width - len(r)
        kv = [(layer.keys[i:i + 1, :, start:fed].clone(), layer.values[i:i + 1, :, start:fed].clone())
              for layer in cache.layers]
        store.add(Entry(ids=out[i, start:fed].clone(), kv=kv))
    return out, width
