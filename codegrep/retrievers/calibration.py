"""Calibration retrievers: ``oracle`` (the gold files: the ceiling) and ``random`` (k seeded files: the floor)."""
from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass
from pathlib import Path

from codegrep.data.tasks import Task
from codegrep.metrics import dedupe
from codegrep.retrievers.base import Retrieval
from codegrep.retrievers.corpus import DEFAULT_MAX_FILE_BYTES, list_files
from codegrep.retrievers.query import SOURCE_SUFFIXES, has_suffix


class OracleRetriever:
    """Returns the task's gold files: the best any retriever can do (checks the harness end to end)."""

    name = "oracle"
    needs_checkout = False  # the gold files come from the task

    def retrieve(self, task: Task, checkout: Path) -> Retrieval:
        files = dedupe(task.gold_files)
        return Retrieval(files=files, reasons={f: "gold file" for f in files})


@dataclass
class RandomConfig:
    """Settings of the ``random`` retriever (profile section ``retrievers.random``)."""

    k: int = 20
    """Files returned (a random ranking; the harness truncates to its own k)."""
    seed: int = 0
    """Combined with the instance id, so every task gets its own reproducible draw."""
    suffixes: tuple[str, ...] = (".py",)
    """Draw only among files with these suffixes (empty: any file); gold files are source files."""


def instance_seed(seed: int, instance_id: str) -> int:
    """A seed that depends on both the run seed and the task, stable across processes.

    >>> instance_seed(0, "a") == instance_seed(0, "a") != instance_seed(1, "a")
    True
    """
    return int(hashlib.sha256(f"{seed}:{instance_id}".encode()).hexdigest()[:12], 16)


class RandomRetriever:
    """k files drawn uniformly (seeded per instance) from the checkout's source files."""

    name = "random"
    fixed_size = True

    def __init__(self, config: RandomConfig | None = None):
        self.config = config or RandomConfig()

    def retrieve(self, task: Task, checkout: Path) -> Retrieval:
        start = time.perf_counter()
        files = list_files(Path(checkout), DEFAULT_MAX_FILE_BYTES)
        if self.config.suffixes:  # a repository mostly of other files (Go, JS, ...): its source files, as bm25
            chosen = [f for f in files if has_suffix(f, self.config.suffixes)]  # indexes (a Go repository's one
            source = [f for f in files if has_suffix(f, SOURCE_SUFFIXES)]       # helper .py script is not its code)
            files = chosen if chosen and 2 * len(chosen) >= len(source) else source or chosen or files
        rng = random.Random(instance_seed(self.config.seed, task.instance_id))
        picked = rng.sample(files, min(self.config.k, len(files)))
        return Retrieval(files=picked, seconds=time.perf_counter() - start,
                         reasons={f: "random draw" for f in picked})
