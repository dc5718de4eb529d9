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

import functools
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator


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
        self.stats = {"prompt_tokens": 0, "reused_tokens": 0, "row_steps": 0, "written_tokens": 0}
        """Prefilled prompt tokens and those reused; ``decode_rows``' row-steps (a row fed in one forward) and tokens
        written (their ratio: tokens per row-step, 1 without drafts)."""
        self._decoder: Any = None  # the bf16 decoding copy (:meth:`decoder`), made on first use
        self._stamp: Any = None  # the weights the entries were computed with (:meth:`check_weights`)

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
        self._decoder = None

    def decoder(self, model: Any) -> Any:
        """A bf16 copy of ``model`` for decoding (:func:`generate_with_prefix_cache`'s ``decode_precision`` bf16), made
        once per weights: :meth:`check_weights` and :meth:`clear` (a trainer step) drop it. Its output head reads the
        fp32 weights of ``model`` itself (shared, not copied) on the fp32 upcast of the last hidden state, so greedy
        choices compare fp32 logits; everything else (weights, activations, key/value states) is bf16."""
        import copy

        import torch

        if self._decoder is None:
            twin = copy.deepcopy(model).to(torch.bfloat16).eval()
            head = model.get_output_embeddings()
            if head is not None and getattr(head, "bias", None) is None:
                twin.set_output_embeddings(_fp32_head(head.weight))
            self._decoder = twin
        return self._decoder

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
        if stamp != self._stamp:
            self.clear()
            self._stamp = stamp


def _fp32_head(weight: Any) -> Any:
    """A bias-free output head over shared fp32 ``weight``, on the fp32 upcast of its input (:meth:`PrefixCache.
    decoder`). The weight is not registered (a plain attribute), so the twin's ``to()`` leaves it alone."""
    import torch

    class Fp32Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            object.__setattr__(self, "shared_weight", weight)

        def forward(self, hidden: Any) -> Any:
            return torch.nn.functional.linear(hidden.float(), self.shared_weight)

    return Fp32Head()


def growing_layer_class() -> type:
    """A ``DynamicLayer`` that writes new states into a preallocated buffer instead of ``torch.cat``.

    transformers' ``DynamicLayer.update`` concatenates, so every decoding step allocates and copies the whole cache:
    on a batch of 16 rows x 2,000 positions that is ~1.5 GB per step for SmolLM2's 30 layers, and on 2 CPU cores the
    allocation (page faults) and copy, not the model, set the step time. This layer keeps a buffer with room for
    ``room`` more positions (``room`` more again when full) and hands attention a view of its filled part; values are
    the same tensors' values, so outputs are unchanged. Rows leaving the batch are selected in the buffer; repeating or
    cropping materialise the view first (plain ``DynamicLayer`` from then on). ``filled`` adopts ``keys``/``values``
    as the buffers themselves (their first ``filled`` positions hold states; no copy): :func:`generate_with_prefix_cache`
    lays the batch's prefilled rows out in them directly.
    """
    import torch
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        def __init__(self, keys: Any, values: Any, room: int, filled: int | None = None) -> None:
            super().__init__()
            self.device, self.is_initialized = keys.device, True
            self._k = self._v = None
            self._n, self._room = 0, max(1, room)
            if filled is None:
                self._grow(keys, values, keys.shape[-2] + self._room)
            else:
                self._k, self._v, self._n = keys, values, filled
                self.keys, self.values = keys[:, :, :filled], values[:, :, :filled]

        def _grow(self, keys: Any, values: Any, capacity: int) -> None:
            b, h, n, d = keys.shape
            self._k = torch.empty((b, h, capacity, d), dtype=keys.dtype, device=keys.device)
            self._v = torch.empty((b, h, capacity, values.shape[-1]), dtype=values.dtype, device=values.device)
            self._k[:, :, :n], self._v[:, :, :n] = keys, values
            self._n = n
            self.keys, self.values = self._k[:, :, :n], self._v[:, :, :n]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if self._k is not None and key_states.shape[0] != self._k.shape[0]:
                self._detach()  # not the batch this buffer holds: DynamicLayer's own code from here on
            if self._k is None:
                return super().update(key_states, value_states, *args, **kwargs)
            n, add = self._n, key_states.shape[-2]
            if n + add > self._k.shape[-2]:  # room again, not double: a long prompt's buffer is most of the memory
                self._grow(self.keys, self.values, n + add + self._room)
            self._k[:, :, n:n + add], self._v[:, :, n:n + add] = key_states, value_states
            self._n = n + add
            self.keys, self.values = self._k[:, :, :n + add], self._v[:, :, :n + add]
            return self.keys, self.values

        def _detach(self) -> None:  # later edits act on plain tensors (DynamicLayer's own code)
            self.keys, self.values = self.keys.contiguous(), self.values.contiguous()
            self._k = self._v = None

        def crop(self, tokens_to_remove: int) -> None:
            self._detach()
            super().crop(tokens_to_remove)

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._detach()
            super().batch_repeat_interleave(repeats)

        def batch_select_indices(self, indices: Any) -> None:  # rows leaving the batch (decode_rows)
            if self._k is None:
                return super().batch_select_indices(indices)
            self._k, self._v = self._k.index_select(0, indices), self._v.index_select(0, indices)
            self.keys, self.values = self._k[:, :, :self._n], self._v[:, :, :self._n]

    return GrowingLayer


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


def cache_keyword(model: Any) -> str:
    """The keyword ``model``'s forward takes its key/value cache by: ``cache`` in recent transformers 5.x,
    ``past_key_values`` in earlier 5.x releases (5.17 among them), whose forward swallows an unknown ``cache`` in its
    ``**kwargs`` and leaves the cache empty (found on a GPU machine with transformers 5.17: every prefill failed).
    A forward that names neither (a wrapper's ``**kwargs``) gets the installed transformers' own keyword.

    >>> class New:
    ...     def forward(self, input_ids=None, cache=None, **kwargs): ...
    >>> class Old:
    ...     def forward(self, input_ids=None, past_key_values=None, **kwargs): ...
    >>> cache_keyword(New()), cache_keyword(Old())
    ('cache', 'past_key_values')
    """
    return _cache_keyword(type(model))


@functools.lru_cache(maxsize=None)
def _cache_keyword(model_class: type) -> str:
    """:func:`cache_keyword` per model class (a signature read once, not on every prefill)."""
    import inspect

    params = inspect.signature(model_class.forward).parameters
    if "cache" in params or "past_key_values" in params:
        return "cache" if "cache" in params else "past_key_values"
    from transformers import LlamaModel

    return "cache" if "cache" in inspect.signature(LlamaModel.forward).parameters else "past_key_values"


def _prefill(model: Any, ids: Any, store: PrefixCache, precision: str = "fp32",
             kv_dtype: Any = None) -> list[tuple[Any, Any]]:
    """Key/value states of ``ids[:-1]`` (the last token is fed by ``generate``), reusing the store.

    ``precision`` bf16 runs the forward under bf16 autocast (compute-bound on long prompts, where native bf16
    matmuls pay); the states are stored in ``kv_dtype`` (default: the model's dtype; the decoding's dtype), so
    decoding and reuse see one dtype."""
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
    # no_grad, not inference_mode: under inference_mode autocast casts every weight again on every forward (its cache
    # of casts is off there), which was half of a 300-token bf16 prefill on 2 cores
    with torch.no_grad(), autocast(precision, model.device.type):
        model(input_ids=todo[None], **{cache_keyword(model): cache}, use_cache=True, logits_to_keep=1)
    dtype = model.dtype if kv_dtype is None else kv_dtype
    kv = [(layer.keys.to(dtype), layer.values.to(dtype)) for layer in cache.layers]
    store.add(Entry(ids=ids[:len(ids) - 1].clone(), kv=kv))  # later rows of this batch share the system prompt
    return kv


def generate_with_prefix_cache(model: Any, rows: list[Any], store: PrefixCache, pad_id: int,
                               prefill_precision: str = "fp32", leave_batch: bool = True, draft_tokens: int = 0,
                               decode_precision: str = "fp32", span_attention: bool = True,
                               **generate_kwargs: Any) -> tuple[Any, int]:
    """Generate for ``rows`` (1-D id tensors); returns (left-padded output ids, prompt width).

    Rows are prefilled one by one against ``store``, then decoded together; each finished sequence is added
    to ``store`` (its fed tokens and states), so the next turn of the same episode prefills only what is new.
    ``leave_batch`` False decodes through ``model.generate`` with transformers' own cache layers (the path before
    :func:`decode_rows`; ``codegrep bench decode``'s baseline). ``draft_tokens``: :func:`decode_rows`' speculative
    drafts per step (0 = off; not on the ``generate`` path). ``decode_precision`` bf16 decodes an fp32 model through
    its bf16 copy (:meth:`PrefixCache.decoder`: weights, activations and key/value states in bf16, logits in fp32;
    :func:`decode_rows` only): a decoding step reads every weight and cached state once, so on 2 CPU cores it is
    bound by memory traffic, which bf16 halves. The states are then kept (and reused by the next turn's prefill) in
    bf16. fp32 (the default) decodes with ``model`` itself. ``span_attention``: :func:`decode_rows`' (True: each
    group of rows attends from its earliest non-padding slot).
    """
    import torch
    from transformers import DynamicCache

    device = model.device
    store.check_weights(model)
    rows = [r.to(device) for r in rows]
    settings = decode_settings(model, generate_kwargs) if leave_batch else None
    decoder = store.decoder(model) if decode_precision == "bf16" and settings is not None \
        and model.dtype == torch.float32 else model
    from codegrep.agent.precision import autocast

    with autocast(prefill_precision, device.type):  # one context: each weight cast to bf16 once for all the rows
        states = [_prefill(model, r, store, prefill_precision, decoder.dtype) for r in rows]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, width - len(r):], mask[i, width - len(r):] = r, 1
    room = int(generate_kwargs.get("max_new_tokens") or 256) if settings is not None else 0
    cache = None
    if width > 1:
        layers = []
        for layer in range(len(next(s for s in states if s))):
            k0, v0 = next(s[layer] for s in states if s)
            # the decoding buffer itself (room for the new tokens after the prompt): one copy of the batch's states
            ks = torch.empty((len(rows), k0.shape[1], width - 1 + room, k0.shape[3]), dtype=k0.dtype, device=device)
            vs = torch.empty((len(rows), v0.shape[1], width - 1 + room, v0.shape[3]), dtype=v0.dtype, device=device)
            ks[:, :, :width - 1], vs[:, :, :width - 1] = 0, 0  # padding: masked, but finite
            for i, r in enumerate(rows):
                if states[i]:  # left-padded like the ids; padded positions are masked
                    ks[i, :, width - len(r):width - 1] = states[i][layer][0][0]
                    vs[i, :, width - len(r):width - 1] = states[i][layer][1][0]
            layers.append((ks, vs))
        del states  # the rows' own states live on in the store (or were views of it)
        if settings is None:
            cache = DynamicCache(layers, config=model.config)
        else:  # no torch.cat per decoding step (the states are the same), and no second copy of the batch
            growing = growing_layer_class()
            cache = DynamicCache(config=model.config)
            cache.layers = [growing(ks, vs, room, filled=width - 1) for ks, vs in layers]
        del layers
    if cache is not None and settings is not None:
        settings["pad_token_id"] = pad_id if settings["pad_token_id"] is None else settings["pad_token_id"]
        return decode_rows(decoder, ids, mask, cache, store, rows, width, draft_tokens=draft_tokens,
                           span_attention=span_attention, **settings), width
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, **{cache_keyword(model): cache}, **generate_kwargs)
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


_PLAIN = {"repetition_penalty": (None, 1.0), "min_p": (None, 0.0), "no_repeat_ngram_size": (None, 0),
          "suppress_tokens": (None, []), "bad_words_ids": (None,), "num_beams": (None, 1),
          "num_return_sequences": (None, 1), "stop_strings": (None, [], ()), "min_new_tokens": (None, 0),
          "length_penalty": (None, 1.0), "typical_p": (None, 1.0), "epsilon_cutoff": (None, 0.0),
          "eta_cutoff": (None, 0.0), "forced_bos_token_id": (None,), "forced_eos_token_id": (None,),
          "begin_suppress_tokens": (None, [])}


def decode_settings(model: Any, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The ``generate`` arguments (or a ``generation_config``) as :func:`decode_rows` settings; None when they ask
    for something it does not do (a repetition penalty, beams, stop strings, ...): ``generate`` runs then."""
    config = kwargs.get("generation_config") or model.generation_config  # as generate: the model's config fills in

    def get(key: str, default: Any = None) -> Any:
        return kwargs[key] if key in kwargs else getattr(config, key, default)

    for key, plain in _PLAIN.items():
        value = get(key)
        if value not in plain:
            return None
    eos = get("eos_token_id")
    return {"max_new_tokens": int(get("max_new_tokens") or 256), "do_sample": bool(get("do_sample", False)),
            "temperature": float(get("temperature") or 1.0), "top_p": float(get("top_p") or 1.0),
            "top_k": 50 if get("top_k") is None else int(get("top_k")),  # generate's default when unset
            "pad_token_id": get("pad_token_id"),
            "eos_token_id": eos, "stopping_criteria": kwargs.get("stopping_criteria"),
            "logits_processor": kwargs.get("logits_processor")}


def _probs(logits: Any, temperature: float, top_p: float, top_k: int = 0) -> Any:
    """Sampling probabilities at ``temperature`` over the ``top_k`` / ``top_p`` nucleus (the warpers, in the order
    ``generate`` applies them), for a [rows, vocab] logits tensor."""
    import torch

    logits = logits.float() / max(temperature, 1e-6)
    if 0 < top_k < logits.shape[-1]:
        kth = logits.topk(top_k, -1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, -1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > top_p  # keep the smallest prefix holding top_p
        sorted_p[drop] = 0.0
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    return probs


def _next_tokens(logits: Any, do_sample: bool, temperature: float, top_p: float, top_k: int = 0) -> Any:
    """Greedy argmax, or a sample from :func:`_probs`."""
    import torch

    if not do_sample:
        return logits.argmax(-1)
    return torch.multinomial(_probs(logits, temperature, top_p, top_k), 1)[:, 0]


class LookupDrafter:
    """Prompt-lookup drafting for one row: up to ``k`` tokens that followed the latest earlier occurrence of the last
    ``n`` tokens of the sequence (the longest ``n`` from ``max_ngram`` down to 1 that occurred). An agent's turn copies
    a lot: the call syntax it wrote one call earlier, the issue's terms, the paths the observations listed. An index
    of every n-gram's latest continuation makes a draft and an appended token O(``max_ngram``).

    >>> d = LookupDrafter([5, 1, 2, 3, 9, 8, 1, 2], 3)
    >>> d.draft(), LookupDrafter([1, 2, 3], 2).draft(), LookupDrafter([], 2).draft()
    ([3, 9, 8], [], [])
    >>> d.extend([4]); d.draft()  # (1, 2, 4) and (2, 4) never occurred before; 4 neither
    []
    >>> LookupDrafter([7, 4, 7, 5, 6, 7], 2).draft()  # the latest occurrence of the last token
    [5, 6]
    """

    def __init__(self, seq: list[int], k: int, max_ngram: int = 3) -> None:
        self.seq, self.k, self.max_ngram = [], k, max_ngram
        self.after: dict[tuple[int, ...], int] = {}
        self.extend(list(seq))

    def extend(self, tokens: list[int]) -> None:
        for token in tokens:
            p = len(self.seq)  # the n-grams ending just before ``token`` continue with it
            for n in range(1, min(self.max_ngram, p) + 1):
                self.after[tuple(self.seq[p - n:p])] = p
            self.seq.append(token)

    def draft(self) -> list[int]:
        for n in range(min(self.max_ngram, len(self.seq)), 0, -1):
            at = self.after.get(tuple(self.seq[-n:]))
            if at is not None:
                return self.seq[at:at + self.k]
        return []


@contextmanager
def _grouped_query_attention(on: bool) -> Iterator[None]:
    """transformers' own switch for SDPA's grouped-query mode where a padding mask is given. Without it a forward
    of several new tokens per row copies every key/value head to each of its query heads (``repeat_kv``): a 5-token
    step of a 16-row batch over 1,100 cached positions took 3.2x a 1-token step without it, 1.75x with it (SmolLM2,
    2 cores of an Intel Xeon, fp32; a 3-token step 6.3x and 1.5x). The same attention (the CPU flash kernel takes the
    mask and the head groups). On CUDA a masked grouped-query SDPA falls back to the math kernel: CPU only."""
    key = "TRANSFORMERS_SDPA_FORCE_GQA"
    before = os.environ.get(key)
    if on:
        os.environ[key] = "1"
    try:
        yield
    finally:
        if on:
            if before is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = before


def decode_rows(model: Any, ids: Any, mask: Any, cache: Any, store: PrefixCache, rows: list[Any], width: int, *,
                max_new_tokens: int = 256, pad_token_id: int = 0, do_sample: bool = False, temperature: float = 1.0,
                top_p: float = 1.0, top_k: int = 0, eos_token_id: Any = None, stopping_criteria: Any = None,
                logits_processor: Any = None, draft_tokens: int = 0, span_attention: bool = True) -> Any:
    """Decode a left-padded, prefilled batch; a row that ends (EOS, or ``stopping_criteria``) LEAVES the batch.

    ``model.generate`` keeps finished rows in the batch until the last one ends, so on 2 CPU cores one long row
    held 15 finished ones for hundreds of steps. Here each step feeds only the unfinished rows (their cache rows
    selected, ``GrowingLayer``); a finished row's states go to ``store`` at once. Returns the ids ``generate``
    returns: prompt columns, then each row's tokens, ``pad_token_id`` after its end. Greedy text is the same as
    ``generate``'s up to float rounding of a smaller batch (tested).

    ``draft_tokens`` k > 0: speculative decoding with prompt-lookup drafts (:class:`LookupDrafter`). A step feeds each
    row its last token and up to k drafted ones, in one forward, and keeps the drafts the model's own choice
    confirms: greedy, a draft is kept when it is the argmax; sampling, with the probability the (processed, warped)
    distribution gives it, a rejected one replaced by a sample from the rest of that distribution (speculative
    sampling with a one-token proposal: the tokens have the distribution of plain sampling). Then one more token
    comes from the last kept position, so a step writes 1 to k + 1 tokens. Rows advance at their own pace: the
    cache slots of a rejected draft stay, masked out of attention (holes, as left padding is). Logits processors
    and stopping criteria see each row alone, one token at a time, as in plain decoding. ``codegrep bench decode``
    measures it against k = 0.

    ``span_attention``: each step's attention reads each group of rows from its earliest non-padding slot
    (:mod:`codegrep.agent.row_spans`) instead of the whole padded width; False: plain SDPA over the padded cache.
    """
    import torch

    from codegrep.agent.row_spans import spans, step_spans

    eos = model.generation_config.eos_token_id if eos_token_id is None else eos_token_id
    eos = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
    n, device, keyword = ids.shape[0], ids.device, cache_keyword(model)
    seqs = torch.full((n, width + max_new_tokens), pad_token_id, dtype=torch.long, device=device)
    seqs[:, :width] = ids
    made = [0] * n  # tokens written per row
    active = list(range(n))
    last = ids[:, -1].tolist()  # each row's next token to feed
    attn = mask[:, :-1].clone()  # one column per cache slot (the prefilled prompt)
    pos = (mask.sum(1) - 1).tolist()  # position of each row's next fed token (left padding)
    k = max(0, int(draft_tokens))
    drafters = [LookupDrafter(rows[i].tolist(), k) for i in range(n)] if k else []
    gqa = k > 0 and device.type == "cpu"

    def seen(i: int) -> Any:  # row i so far, as processors and stopping criteria see it (a batch of one)
        return seqs[i:i + 1, :width + made[i]]

    def choose(i: int, logits: Any, draft: int | None) -> tuple[int, bool]:
        """Row i's next token from one position's logits, and whether it is the drafted token (kept)."""
        if logits_processor is not None:  # as generate: before the warpers (codegrep.agent.constraints)
            logits = logits_processor(seen(i), logits[None].clone())[0]
        if not do_sample:
            token = int(logits.argmax())
            return token, token == draft
        probs = _probs(logits[None], temperature, top_p, top_k)[0]
        if draft is not None:
            if float(torch.rand((), device=device)) < float(probs[draft]):
                return draft, True
            probs[draft] = 0.0
            if float(probs.sum()) <= 0:  # the draft held all the mass (rounding): keep it
                return draft, True
        return int(torch.multinomial(probs, 1)), False

    def ends(i: int, token: int) -> bool:
        """Writes ``token`` to row i; True when the row ends with it."""
        seqs[i, width + made[i]] = token
        made[i] += 1
        store.stats["written_tokens"] += 1
        if k:
            drafters[i].extend([token])
        if token in eos or made[i] >= max_new_tokens:
            return True
        return stopping_criteria is not None and bool(stopping_criteria(seen(i), None)[0])

    with torch.inference_mode(), spans(model, span_attention) as spanned:
        while active:
            drafts = [drafters[i].draft()[:max_new_tokens - made[i] - 1] if k else [] for i in active]
            q = 1 + max(map(len, drafts))
            feed = torch.full((len(active), q), pad_token_id, dtype=torch.long, device=device)
            for j, i in enumerate(active):
                feed[j, 0] = last[i]
                feed[j, 1:1 + len(drafts[j])] = torch.tensor(drafts[j], dtype=torch.long)
            attn = torch.cat([attn, attn.new_ones((len(active), q))], 1)
            position = torch.tensor([pos[i] for i in active], device=device)[:, None] + torch.arange(q, device=device)
            extra = {"row_spans": step_spans(attn)} if spanned else {}
            with _grouped_query_attention(gqa and q > 1):
                logits = model(input_ids=feed, attention_mask=attn, position_ids=position, **{keyword: cache},
                               use_cache=True, **extra).logits
            keep, finished = [], []
            store.stats["row_steps"] += len(active)
            for j, i in enumerate(active):
                fed, ended = 1, False  # cache slots of this step that hold row i's tokens (its last token's first)
                for t in range(len(drafts[j]) + 1):
                    draft = drafts[j][t] if t < len(drafts[j]) else None
                    token, kept = choose(i, logits[j, t], draft)
                    ended = ends(i, token)
                    if not kept or ended:
                        break
                    fed += 1
                attn[j, attn.shape[1] - q + fed:] = 0  # rejected drafts and padding: holes
                if ended:
                    finished.append(j)
                else:
                    keep.append(j)
                    last[i], pos[i] = int(seqs[i, width + made[i] - 1]), pos[i] + fed
            for j in finished:  # stored: its prompt and every written token but the last (never fed, so no state)
                i = active[j]
                start = width - len(rows[i])
                tokens = seqs[i, start:width + made[i] - 1].clone()
                slots = attn[j].nonzero()[:len(tokens), 0]
                kv = [(layer.keys[j:j + 1, :, slots], layer.values[j:j + 1, :, slots])  # index: copies
                      for layer in cache.layers]
                store.add(Entry(ids=tokens, kv=kv))
            if len(keep) < len(active) and keep:
                index = torch.tensor(keep, device=device)
                for layer in cache.layers:
                    layer.batch_select_indices(index)
                attn = attn[index]
            active = [active[j] for j in keep]
    return seqs[:, :width + max(made, default=0)]
