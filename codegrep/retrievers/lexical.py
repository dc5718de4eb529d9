"""``bm25``: BM25 (bm25s) over the source files of a checkout, one document per file, code-aware tokens.

What is indexed is the config's file policy (:mod:`codegrep.retrievers.query`: source suffixes, no doc folders,
tests and generated files down-weighted). The score of a file is its BM25 score times its policy weight, times
``1 + mention_boost`` when the issue points at it (path, traceback frame, dotted module), times
``1 + definition_boost * d`` when it defines identifiers the issue writes as code (``d`` sums ``1/n`` over those
names, ``n`` = files defining the name). The index of a snapshot is built once and cached under
``cache_dir()/indexes/bm25/<repo>@<commit>``.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from codegrep.data.tasks import Task
from codegrep.lru import LRU
from codegrep.retrievers.base import Retrieval
from codegrep.retrievers.corpus import (DEFAULT_MAX_FILE_BYTES, index_dir, list_files, prune_live_siblings,
                                        read_bytes, snapshot_key, tokenize, tokenize_counts)
from codegrep.retrievers.query import (DOC_DIRS, SOURCE_SUFFIXES, FilePolicy, code_identifiers, defining_files,
                                       definitions, mentioned_files, policy_from, python_rule)

INDEX_VERSION = "bm25-v7"  # bump when tokenisation or the definition rule changes, so stale caches are not reused


@dataclass
class BM25Config:
    """Settings of the ``bm25`` retriever (profile section ``retrievers.bm25``)."""

    k1: float = 1.2
    """BM25 term-frequency saturation."""
    b: float = 0.75
    """BM25 length normalisation."""
    path_weight: int = 2
    """How many times a file's path tokens are added to its document (paths are strong evidence)."""
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    """Files larger than this are not indexed."""
    suffixes: tuple[str, ...] = SOURCE_SUFFIXES
    """Suffixes of the files indexed (source code by default; empty = every text file)."""
    exclude_dirs: tuple[str, ...] = DOC_DIRS
    """Folder names (any depth) whose files are not indexed."""
    test_weight: float = 0.5
    """Score multiplier of test files (``tests/``, ``test_*.py``, ``*_test.go``...)."""
    generated_weight: float = 0.5
    """Score multiplier of files marked as generated in their first 2 KB."""
    mention_boost: float = 0.5
    """Extra weight of files the issue points at (paths, traceback frames, dotted module names); 0 = off."""
    definition_boost: float = 0.5
    """Extra weight of files defining identifiers the issue writes as code; 0 = off."""
    top_n: int = 20
    """Length of the returned ranking (the harness truncates to k for set metrics)."""
    memory_indexes: int = 8
    """Indexes kept loaded in memory (most recently used)."""


@dataclass
class BM25Index:
    """A bm25s model plus the file each document stands for."""

    files: list[str]
    model: "object"
    vocab: dict[str, int] = field(default_factory=dict)
    weights: list[float] = field(default_factory=list)
    """Policy weight of each file (tests, generated files); empty = all 1."""
    defs: dict[str, list[str]] = field(default_factory=dict)
    """Names each file defines (``def``/``class``...), for the definition boost."""

    def search(self, text: str, n: int, mention_boost: float = 0.0,
               definition_boost: float = 0.0) -> list[tuple[str, float]]:
        """Top-n ``(file, score)`` for a free-text query; files with score 0 are left out."""
        tokens = [t for t in tokenize(text) if t in self.vocab]
        if not tokens or not self.files:
            return []
        scores = self.model.get_scores(tokens)
        if self.weights:
            scores = scores * np.asarray(self.weights)
        position = {f: i for i, f in enumerate(self.files)}
        if mention_boost:
            for f, w in mentioned_files(text, self.files).items():
                scores[position[f]] *= 1.0 + mention_boost * w
        if definition_boost:
            for f, w in defining_files(code_identifiers(text), self.defs).items():
                scores[position[f]] *= 1.0 + definition_boost * w
        top = np.argsort(-scores, kind="stable")[:n]
        return [(self.files[i], float(scores[i])) for i in top if scores[i] > 0]


def file_counts(root: Path, rel: str, path_weight: int) -> dict[str, int] | None:
    """The document of one file as token counts: content tokens plus path tokens ``path_weight`` times."""
    data = read_bytes(root, rel)
    if data is None:
        return None
    counts = tokenize_counts(data)
    for tok in tokenize(rel):
        counts[tok] = counts.get(tok, 0) + path_weight
    return counts


def fit_counts(model: "object", docs: list[dict[str, int]]) -> None:
    """Fill a ``bm25s.BM25`` from per-document token counts: the same matrix ``model.index`` builds from
    token lists (bm25s's own tf/idf formulas), without expanding millions of tokens in Python."""
    import scipy.sparse as sp
    from bm25s.scoring import _select_tfc_scorer

    vocab: dict[str, int] = {}
    cols = np.fromiter((vocab.setdefault(t, len(vocab)) for d in docs for t in d), dtype=np.int64)
    tf = np.fromiter((n for d in docs for n in d.values()), dtype=np.float64, count=len(cols))
    rows = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    doc_len = np.bincount(rows, weights=tf, minlength=len(docs))
    df = np.bincount(cols, minlength=len(vocab))
    idf = np.log(1 + (len(docs) - df + 0.5) / (df + 0.5))  # bm25s.scoring._score_idf_lucene, vectorised
    tfc = _select_tfc_scorer(model.method)(tf_array=tf, l_d=doc_len[rows], l_avg=doc_len.mean(), k1=model.k1,
                                           b=model.b, delta=model.delta)
    matrix = sp.csc_matrix((idf[cols] * tfc, (rows, cols)), shape=(len(docs), len(vocab) + 1), dtype=model.dtype)
    model.scores = {"data": matrix.data, "indices": matrix.indices.astype(model.int_dtype),
                    "indptr": matrix.indptr.astype(model.int_dtype), "num_docs": len(docs)}
    vocab[""] = len(vocab)  # bm25s's empty token, so saved indexes look like its own
    model.vocab_dict = vocab
    model.unique_token_ids_set = set(vocab.values())
    model.nonoccurrence_array = None


CONTENT_CACHE_FILES = 20_000
"""Per-file analyses (token counts, definitions) kept in memory, keyed by the file's content: the snapshots of one
repository at many commits (the 75 sympy instances) share most files, so each distinct content is tokenised once
per process. Bounded (least recently used out); the analysis is a pure function of the bytes, so a hit is exact."""

_CONTENT: "LRU[bytes, tuple[dict[str, int], list[str]]]" = LRU(CONTENT_CACHE_FILES)


def clear_content_cache() -> None:
    """Forget every cached per-file analysis (benchmarks time cold builds with it)."""
    _CONTENT.clear()


def analyse_content(data: bytes, path: str = "") -> tuple[dict[str, int], list[str]]:
    """``(tokenize_counts(data), definitions(data, path))``, cached by content and by whether ``path`` takes
    Python's definition rule (a fresh counts dict per call).

    >>> a, _ = analyse_content(b"def parse_expr(s): pass"); a["parse"] += 5
    >>> analyse_content(b"def parse_expr(s): pass")[0]["parse"], analyse_content(b"def parse_expr(s): pass")[1]
    (1, ['parse_expr'])
    """
    key = hashlib.blake2b(data, digest_size=16).digest() + (b"" if python_rule(path) else b"+")
    hit = _CONTENT.get(key)
    if hit is None:
        hit = (tokenize_counts(data), definitions(data, path))
        _CONTENT.put(key, hit)
    return dict(hit[0]), list(hit[1])


def build_index(root: Path, config: BM25Config) -> BM25Index:
    """Tokenise every file the policy keeps under ``root`` and fit bm25s (the index itself is cached by the
    caller; per-file analyses are shared across snapshots by content, :func:`analyse_content`)."""
    return index_files(list_files(root, config.max_file_bytes), lambda rel: read_bytes(root, rel), config)


def index_files(paths: Iterable[str], read: Callable[[str], bytes | None], config: BM25Config,
                policy: FilePolicy | None = None) -> BM25Index:
    """:func:`build_index` over any snapshot: ``paths`` (repository-relative, within ``max_file_bytes``) and
    ``read`` (a path's bytes; None skips it), so a checkout-free tool environment indexes its own files
    (:func:`environment_index`) as the ``bm25`` retriever indexes a checkout. ``policy``: ``policy_from(config)``,
    given where the caller already built it."""
    import bm25s

    policy = policy or policy_from(config)
    files, docs, weights, defs = [], [], [], {}
    for rel in paths:
        if not policy.keeps(rel):
            continue
        data = read(rel)
        if data is None:
            continue
        counts, names = analyse_content(data, rel)
        for tok in tokenize(rel):
            counts[tok] = counts.get(tok, 0) + config.path_weight
        files.append(rel)
        docs.append(counts)
        weights.append(policy.weight(rel, data[:2048]))
        if names:
            defs[rel] = names
    model = bm25s.BM25(k1=config.k1, b=config.b, method="lucene")
    if docs:
        fit_counts(model, docs)
    return BM25Index(files, model, dict(getattr(model, "vocab_dict", {}) or {}), weights, defs)


def save_index(index: BM25Index, path: Path) -> None:
    """Write atomically: a half-written index must never be loaded by a concurrent run."""
    tmp = path.with_name(path.name + f".tmp{time.time_ns()}")
    tmp.mkdir(parents=True)
    index.model.save(str(tmp / "bm25"), show_progress=False)
    (tmp / "files.json").write_text(json.dumps({"version": INDEX_VERSION, "files": index.files,
                                                "weights": index.weights, "defs": index.defs}))
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    try:
        tmp.rename(path)
    except OSError:  # another process won the race; its index is equivalent
        shutil.rmtree(tmp, ignore_errors=True)


def load_index(path: Path) -> BM25Index | None:
    """The cached index at ``path``, or None when absent or from another index version."""
    import bm25s

    meta = path / "files.json"
    if not meta.is_file():
        return None
    try:
        info = json.loads(meta.read_text())
        if info.get("version") != INDEX_VERSION:
            return None
        model = bm25s.BM25.load(str(path / "bm25"), show_progress=False, verbosity=0)
        return BM25Index(info["files"], model, dict(model.vocab_dict), info.get("weights") or [],
                         info.get("defs") or {})
    except Exception as exc:  # a truncated or damaged cache file (any library's error): rebuild, say so
        import sys

        print(f"codegrep: bm25 index {path} is damaged ({type(exc).__name__}: {str(exc)[:120]}): rebuilding it",
              file=sys.stderr)
        shutil.rmtree(path, ignore_errors=True)
        return None


class BM25Retriever:
    """Ranks files by BM25 score of the issue text against each file's tokens."""

    name = "bm25"
    fixed_size = True  # returns a ranking; the harness cuts it at k

    def __init__(self, config: BM25Config | None = None):
        self.config = config or BM25Config()
        self._loaded: LRU[str, BM25Index] = LRU(self.config.memory_indexes)
        self._lock = threading.Lock()  # harness workers share one retriever; build each index once

    def config_tag(self) -> str:
        """Short hash of everything that changes the index, so different settings never share a cache."""
        c = self.config
        raw = f"{INDEX_VERSION}|{c.k1}|{c.b}|{c.path_weight}|{c.max_file_bytes}|{policy_from(c).tag()}"
        return hashlib.sha1(raw.encode()).hexdigest()[:8]

    def index_for(self, task: Task, checkout: Path) -> BM25Index:
        """The index of this snapshot: from memory, from the disk cache, or built now (and cached)."""
        key = snapshot_key(task.repo, task.base_commit or None, checkout, self.config.max_file_bytes)
        with self._lock:
            return self._index_locked(key, checkout)

    def _index_locked(self, key: str, checkout: Path) -> BM25Index:
        loaded = self._loaded.get(key)
        if loaded is not None:
            return loaded
        path = index_dir("bm25", f"{key}-{self.config_tag()}")
        index = load_index(path)
        if index is None:
            index = build_index(checkout, self.config)
            if index.files:
                save_index(index, path)
                prune_live_siblings(path)
        self._loaded.put(key, index)
        return index

    def retrieve(self, task: Task, checkout: Path) -> Retrieval:
        start = time.perf_counter()
        index = self.index_for(task, Path(checkout))
        hits = index.search(task.problem_statement, self.config.top_n, self.config.mention_boost,
                            self.config.definition_boost)
        return Retrieval(files=[f for f, _ in hits], seconds=time.perf_counter() - start,
                         reasons={f: f"bm25 score {s:.2f}" for f, s in hits},
                         extra={"scores": [round(s, 4) for _, s in hits], "n_indexed": len(index.files)})


ENVIRONMENT_INDEXES = 16
"""Indexes of tool environments' snapshots kept in memory (most recently used), for ``agent.rank_relevance``."""

RELEVANCE_SCORES = 256
""":func:`environment_relevance` results kept in memory per (snapshot, text), most recently used. An evaluation pass
over the 86 visits more snapshots than ``ENVIRONMENT_INDEXES`` holds, and notebook 03 makes several passes with the
same issue texts (warm start, GRPO policy, grep heuristic, training-task check): a hit skips building the snapshot's
index again (0.8-1.2 s a sympy snapshot on 2 cores, ``docs/agent.md``). The scores are a pure function of the
snapshot and the text, so a hit is exact; ~0.25 MB an entry."""

_ENV_INDEXES: "LRU[tuple, BM25Index]" = LRU(ENVIRONMENT_INDEXES)
_SCORES: "LRU[tuple, dict[str, float]]" = LRU(RELEVANCE_SCORES)


def clear_environment_caches() -> None:
    """Forget every snapshot index and relevance score kept in memory (benchmarks give each arm a cold start)."""
    _ENV_INDEXES.clear()
    _SCORES.clear()


def _snapshot(env: "object") -> tuple | None:
    """What an environment's index depends on: its snapshot (``env.snapshot_id()``; None: not shared) and the size
    above which its tools refuse to read a file (such a file is left out of the index)."""
    key = env.snapshot_id()
    if key is None:
        return None
    return key, getattr(getattr(env, "config", None), "max_file_bytes", None)


def environment_index(env: "object") -> BM25Index:
    """The ``bm25`` retriever's default index (:class:`BM25Config`) of a tool environment's snapshot, built from
    the files its tools list and read (``env.file_contents``, :func:`index_files`), so checkout-free mode needs no
    checkout. Kept per snapshot (:func:`_snapshot`) for the episodes and rollouts sharing it."""
    key = _snapshot(env)
    hit = None if key is None else _ENV_INDEXES.get(key)
    if hit is not None:
        return hit
    config = BM25Config()
    policy = policy_from(config)
    # files the index's policy drops (docs, other suffixes: ~28% of a sympy snapshot's) are not read at all
    contents = dict(env.file_contents(config.max_file_bytes, policy.keeps))
    index = index_files(list(contents), contents.get, config, policy)
    if key is not None:
        _ENV_INDEXES.put(key, index)
    return index


def environment_relevance(env: "object", text: str) -> dict[str, float]:
    """BM25 score of each file of a tool environment's snapshot against ``text`` (:func:`environment_index`,
    the retriever's default mention and definition boosts): the prior ``agent.rank_relevance`` weighs the agent's
    ranked line by and ``retrievers.grep-heuristic.relevance_weight`` the heuristic's ranking. Files sharing no
    token with ``text`` are absent. Not a tool the agent calls: the environment's side of the ranked line. Kept per
    environment and per (snapshot, text) (``RELEVANCE_SCORES``); callers must not change the dict."""
    cached = getattr(env, "_codegrep_relevance", None)
    if cached is not None and cached[0] == text:
        return cached[1]
    snapshot = _snapshot(env)
    key = None if snapshot is None else \
        (snapshot, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
    scores = None if key is None else _SCORES.get(key)
    if scores is None:
        config = BM25Config()
        index = environment_index(env)
        scores = dict(index.search(text, len(index.files), config.mention_boost, config.definition_boost))
        if key is not None:
            _SCORES.put(key, scores)
    env._codegrep_relevance = (text, scores)
    return scores
