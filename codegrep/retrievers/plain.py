"""``bm25-plain``: the plain reference BM25 a newcomer writes in 60 lines, kept as a baseline.

bm25s over every ``.py`` file of the checkout, one document per file: the file's identifiers split on
snake_case and camelCase (the whole identifier kept too) plus its path's tokens; the issue text tokenised the
same way. No stopwords beyond bm25s's English list, no priors, no query analysis, no cache. ``codegrep bench
retrieve`` and the harness measure the bundle's ``bm25`` against it in the same run.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np

from codegrep.data.tasks import Task
from codegrep.env.textops import display_path
from codegrep.retrievers.base import Retrieval
from codegrep.retrievers.corpus import fs_path, regular_size

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def plain_tokens(text: str) -> list[str]:
    """Identifiers, lowercased, plus their snake/camel parts.

    >>> plain_tokens("getHTTP_code x")
    ['gethttp_code', 'get', 'http', 'code', 'x']
    """
    out: list[str] = []
    for ident in _IDENT.findall(text):
        parts = [p.lower() for p in _PARTS.findall(ident)]
        out.append(ident.lower())
        if len(parts) > 1:
            out.extend(parts)
    return out


def python_files(root: Path) -> list[str]:
    """Repository-relative paths of every ``.py`` file (hidden directories skipped), named as the tools name them
    (:func:`codegrep.env.textops.display_path`: ``caf\\xe9.py``). Only regular files
    (:func:`codegrep.retrievers.corpus.regular_size`), as every other retriever and the tools: a symlink may point
    outside the checkout, dangle or loop; a FIFO blocks."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = os.path.relpath(dirpath, root)
        out += [display_path(os.fsencode(f if rel == "." else f"{rel}/{f}".replace(os.sep, "/")))
                for f in sorted(filenames) if f.endswith(".py") and regular_size(os.path.join(dirpath, f)) is not None]
    return out


class PlainBM25Retriever:
    """bm25s over ``.py`` files with split identifiers and path tokens; rebuilt for every call."""

    name = "bm25-plain"
    fixed_size = True

    def __init__(self, top_n: int = 20):
        self.top_n = top_n

    def build(self, root: Path) -> tuple[list[str], object | None]:
        """``(files, fitted bm25s model)`` of one checkout; the model is ``None`` when it has no ``.py`` file
        (bm25s cannot index an empty corpus)."""
        import bm25s

        files = python_files(root)
        if not files:
            return files, None
        docs = [plain_tokens(fs_path(root, f).read_bytes().decode("utf-8", "replace")) + plain_tokens(f.replace("/", " ")) * 2
                for f in files]
        model = bm25s.BM25()
        model.index(bm25s.tokenization.Tokenized(*_vocab_ids(docs)), show_progress=False)
        return files, model

    def search(self, files: list[str], model: object | None, query: str) -> list[str]:
        """Top ``top_n`` files for a query (score > 0); none without a model."""
        if model is None:
            return []
        vocab = model.vocab_dict  # type: ignore[attr-defined]
        tokens = [vocab[t] for t in plain_tokens(query) if t in vocab]
        if not tokens:
            return []
        scores = model.get_scores(tokens)  # type: ignore[attr-defined]
        top = np.argsort(-scores, kind="stable")[: self.top_n]
        return [files[i] for i in top if scores[i] > 0]

    def retrieve(self, task: Task, checkout: Path) -> Retrieval:
        start = time.perf_counter()
        files, model = self.build(Path(checkout))
        return Retrieval(files=self.search(files, model, task.problem_statement),
                         seconds=time.perf_counter() - start, extra={"n_indexed": len(files)})


def _vocab_ids(docs: list[list[str]]) -> tuple[list[list[int]], dict[str, int]]:
    vocab: dict[str, int] = {}
    return [[vocab.setdefault(t, len(vocab)) for t in d] for d in docs], vocab
