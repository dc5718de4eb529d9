"""``codegrep bench retrieve``: bm25 speed against a naive baseline, and the agent loop's overhead.

``real``: on the shipped real instances (``verified``: 86 snapshots), bm25's index build and query times and
its Acc@1/Acc@5/P@1 against the plain bm25s baseline (``bm25-plain``), measured in the same run.

Index build = file reading + code tokenisation + fitting bm25s's score matrix from per-file token counts
(``fit_counts``); bm25s's own ``index`` on expanded token lists is timed too, for reference.
Repository: the first ``n_files`` Python files of installed packages (transformers first), copied to a
temporary directory. Baseline: the rank_bm25 ``BM25Okapi`` algorithm in plain Python/NumPy (per-document
term dicts, one pass over all documents per query term) on the same tokens, measured in the same run.
Agent: scripted episodes (grep turn, read turn, submit) on that repository; the time outside the policy
(tools + parsing + bookkeeping) is reported per turn and, with ``--model-ref``, as a share of a rollout
whose turns are real generate calls of that model.
"""
from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from codegrep.data.bench_repos import python_files_dir
from codegrep.retrievers.corpus import list_files, read_text, tokenize

SOURCE_MODULES = ("transformers", "sympy", "pandas", "torch")
QUERIES = ("attention mask is ignored when padding side is left", "tokenizer fails to decode special tokens",
           "gradient checkpointing breaks with cache enabled", "config from_pretrained ignores revision",
           "beam search returns wrong scores with length penalty", "logits processor repetition penalty",
           "image processor resize keeps aspect ratio", "pipeline device map auto offload")


def make_bench_repo(n_files: int, dest: Path) -> Path:
    """Copy the first ``n_files`` ``.py`` files (sorted) of installed packages into ``dest``
    (``codegrep.data.bench_repos.python_files_dir`` over ``SOURCE_MODULES``)."""
    if python_files_dir(n_files, dest, SOURCE_MODULES) == 0:
        raise RuntimeError(f"bench retrieve: none of {SOURCE_MODULES} is installed to build a repository from")
    return dest


class NaiveBM25:
    """rank_bm25's BM25Okapi, reimplemented: the baseline bm25s is measured against."""

    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75, epsilon: float = 0.25):
        self.k1, self.b = k1, b
        self.doc_freqs = [Counter(d) for d in docs]
        self.doc_len = np.array([len(d) for d in docs], dtype=float)
        self.avgdl = float(self.doc_len.mean()) if docs else 0.0
        df = Counter(t for freqs in self.doc_freqs for t in freqs)
        idf = {t: math.log(len(docs) - n + 0.5) - math.log(n + 0.5) for t, n in df.items()}
        floor = epsilon * (sum(idf.values()) / max(len(idf), 1))
        self.idf = {t: (v if v > 0 else floor) for t, v in idf.items()}

    def get_scores(self, query: list[str]) -> np.ndarray:
        score = np.zeros(len(self.doc_freqs))
        norm = self.k1 * (1 - self.b + self.b * self.doc_len / self.avgdl)
        for q in query:
            tf = np.array([freqs.get(q, 0) for freqs in self.doc_freqs])
            score += self.idf.get(q, 0.0) * tf * (self.k1 + 1) / (tf + norm)
        return score


def _timed(fn, *args) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def bench_bm25(root: Path, n_queries: int) -> dict[str, Any]:
    """Index build and query times of bm25s vs the naive baseline (same files, same tokens, warm page cache)."""
    import bm25s

    from codegrep.retrievers.corpus import identifier_tokens
    from codegrep.retrievers.lexical import BM25Config, build_index, file_counts, fit_counts

    from codegrep.retrievers import lexical

    files = list_files(root)
    _timed(lambda: [read_text(root, f) for f in files])  # warm the page cache for both contenders
    identifier_tokens.cache_clear()
    lexical.clear_content_cache()  # a cold build: no per-file analysis from an earlier snapshot
    index, build_s = _timed(build_index, root, BM25Config())
    identifier_tokens.cache_clear()
    counts, tok_s = _timed(lambda: [file_counts(root, f, BM25Config().path_weight) or {} for f in files])
    _, fit_s = _timed(fit_counts, bm25s.BM25(k1=1.2, b=0.75), counts)
    docs = [list(Counter(c).elements()) for c in counts]
    _, lib_fit_s = _timed(lambda: bm25s.BM25(k1=1.2, b=0.75).index(docs, show_progress=False))
    naive, naive_fit_s = _timed(NaiveBM25, docs)
    queries = [QUERIES[i % len(QUERIES)] for i in range(n_queries)]
    q_s = [_timed(index.search, q, 20)[1] for q in queries]
    naive_q_s = [_timed(lambda q: np.argsort(-naive.get_scores(tokenize(q)))[:20], q)[1] for q in queries]
    return {"files": len(index.files), "tokens": sum(map(len, docs)), "index_build_s": round(build_s, 3),
            "tokenize_s": round(tok_s, 3), "fit_from_counts_s": round(fit_s, 3),
            "bm25s_index_from_tokens_s": round(lib_fit_s, 3), "baseline_fit_s": round(naive_fit_s, 3),
            "fit_speedup_vs_baseline": round(naive_fit_s / fit_s, 2),
            "query_ms_median": round(1000 * statistics.median(q_s), 3),
            "query_ms_p95": round(1000 * float(np.quantile(q_s, 0.95)), 3),
            "baseline_query_ms_median": round(1000 * statistics.median(naive_q_s), 3),
            "query_speedup": round(statistics.median(naive_q_s) / statistics.median(q_s), 1),
            "target_index_build_le_2s": build_s <= 2.0, "target_query_le_50ms": statistics.median(q_s) <= 0.05}


def scripted_outputs() -> list[str]:
    """A plausible three-turn episode: parallel greps, reads plus a glob, then submit."""
    def call(name: str, **args: Any) -> str:
        import json

        return f'<tool_call>{json.dumps({"name": name, "arguments": args})}</tool_call>'

    greps = [call("grep", pattern=p, include="*.py") for p in
             (r"def forward\(", r"class \w+Config\b", "attention_mask", "padding_side", "from_pretrained")]
    reads = [call("read", path="transformers/__init__.py", start_line=1, end_line=120),
             call("read", path="transformers/activations.py"), call("glob", pattern="**/*token*.py")]
    return ["\n".join(greps), "\n".join(reads), call("submit", files=["transformers/activations.py"])]


def bench_agent(root: Path, episodes: int, model: str | None) -> dict[str, Any]:
    """Seconds outside the policy per scripted episode (tools; parsing and bookkeeping), and, with a
    reference model, their share of a rollout whose three turns are generated by that model."""
    from codegrep.agent.loop import run_episode
    from codegrep.agent.policies import ScriptedPolicy
    from codegrep.env.workdir import RepoToolEnvironment

    timings = []
    with RepoToolEnvironment(root) as env:
        for _ in range(episodes):
            ep = run_episode("attention mask ignored with left padding", env, ScriptedPolicy(scripted_outputs()))
            timings.append(ep.timings())
    tool_s = statistics.mean(t["tool_s"] for t in timings)
    loop_s = statistics.mean(t["overhead_s"] + t["model_s"] for t in timings)  # a scripted "model" is bookkeeping
    out = {"episodes": episodes, "turns_per_episode": 3, "calls_per_episode": 8,
           "tool_s_per_episode": round(tool_s, 4), "parse_and_bookkeeping_s_per_episode": round(loop_s, 4),
           "non_model_ms_per_turn": round(1000 * (tool_s + loop_s) / 3, 2)}
    out.update(_model_reference(model, tool_s + loop_s) if model else
               {"target_overhead_le_10pct": None, "note": "pass --model-ref MODEL to time real model turns"})
    return out


def _model_reference(model: str, non_model_s: float, max_new_tokens: int = 32) -> dict[str, Any]:
    """Time three real generate calls (one per scripted turn) of ``model`` for the overhead ratio."""
    from codegrep.agent.policies import make_policy
    from codegrep.agent.protocol import build_messages

    try:
        policy = make_policy({"policy": "hf", "model": model, "max_new_tokens": max_new_tokens})
    except Exception as exc:  # e.g. a hub model offline: report why instead of a ratio
        return {"model_reference": model, "model_reference_error": f"{type(exc).__name__}: {exc}"}
    messages = build_messages("attention mask ignored with left padding")
    _, model_s = _timed(lambda: [policy.generate([messages]) for _ in range(3)])
    frac = non_model_s / (non_model_s + model_s)
    return {"model_reference": model, "model_reference_max_new_tokens": max_new_tokens,
            "model_s_per_episode": round(model_s, 3), "overhead_frac_of_rollout": round(frac, 4),
            "target_overhead_le_10pct": frac <= 0.10}


def bench_real(tasks_source: str = "verified", limit: int | None = None) -> dict[str, Any]:
    """bm25 against the plain 60-line bm25s baseline (:mod:`codegrep.retrievers.plain`) on real instances, in
    one run: index build and query time per snapshot (no index cache: both build from the checkout; bm25 reuses
    per-file analyses by content across snapshots, as it does in evaluation), and Acc@1/Acc@5/
    P@1 of both on the same instances (paired bootstrap of the difference)."""
    from codegrep.env.pool import WorktreePool
    from codegrep.metrics import acc_at_k, paired_bootstrap_diff
    from codegrep.retrievers.evaluate import precision_at
    from codegrep.retrievers.lexical import BM25Config, build_index
    from codegrep.retrievers.plain import PlainBM25Retriever
    from codegrep.retrievers.entrypoints import load_task_source

    from codegrep.retrievers import lexical

    tasks, resolver = load_task_source(tasks_source, limit=limit)
    config, plain = BM25Config(), PlainBM25Retriever()
    lexical.clear_content_cache()  # the first snapshot builds cold; later ones reuse files they share (by content)
    rows = []
    pool = WorktreePool()
    for task in sorted(tasks, key=lambda t: (t.repo, t.base_commit)):
        with pool.acquire(resolver.resolve(task.repo, task.base_commit), task.base_commit) as checkout:
            checkout = Path(checkout)
            index, build_s = _timed(build_index, checkout, config)
            (pfiles, pmodel), plain_build_s = _timed(plain.build, checkout)
        hits, query_s = _timed(index.search, task.problem_statement, 20, config.mention_boost,
                               config.definition_boost)
        plain_hits, plain_query_s = _timed(plain.search, pfiles, pmodel, task.problem_statement)
        ranked = [f for f, _ in hits]
        rows.append({"build_s": build_s, "query_s": query_s, "plain_build_s": plain_build_s,
                     "plain_query_s": plain_query_s, "files": len(index.files), "plain_files": len(pfiles),
                     **{f"{name}acc@{k}": acc_at_k(r, task.gold_files, k) for name, r in (("", ranked),
                        ("plain_", plain_hits)) for k in (1, 5)},
                     "p@1": precision_at(ranked, task.gold_files, 1),
                     "plain_p@1": precision_at(plain_hits, task.gold_files, 1)})

    def med(key: str) -> float:
        return round(statistics.median(r[key] for r in rows), 4)

    out: dict[str, Any] = {"tasks": tasks_source, "n": len(rows), "snapshots_indexed": len(rows),
                           "index_build_s_median": med("build_s"), "plain_index_build_s_median": med("plain_build_s"),
                           "index_build_s_first": round(rows[0]["build_s"], 4) if rows else None,
                           "index_build_s_total": round(sum(r["build_s"] for r in rows), 2),
                           "plain_index_build_s_total": round(sum(r["plain_build_s"] for r in rows), 2),
                           "index_build_note": "bm25 shares per-file analyses across the snapshots of a run by "
                                               "content (the first build is cold); the plain baseline has no cache",
                           "query_ms_median": round(1000 * med("query_s"), 2),
                           "plain_query_ms_median": round(1000 * med("plain_query_s"), 2),
                           "files_indexed_median": med("files"), "plain_files_indexed_median": med("plain_files")}
    for key in ("acc@1", "acc@5", "p@1"):
        d, lo, hi = paired_bootstrap_diff([r[f"plain_{key}"] for r in rows], [r[key] for r in rows])
        out.update({key: round(statistics.mean(r[key] for r in rows), 4),
                    f"plain_{key}": round(statistics.mean(r[f"plain_{key}"] for r in rows), 4),
                    f"{key}_diff": round(d, 4), f"{key}_diff_ci": [round(lo, 4), round(hi, 4)]})
    return out


def run_bench(n_files: int = 2000, queries: int = 50, episodes: int = 20, model: str | None = None,
              real_tasks: str | None = "verified", real_limit: int | None = None) -> dict:
    """Everything ``codegrep bench retrieve`` prints, as one JSON-able dict."""
    import os

    load_before = os.getloadavg()[0]  # recorded because other jobs on a shared box skew every timing
    with tempfile.TemporaryDirectory(prefix="codegrep-bench-") as tmp:
        root = make_bench_repo(n_files, Path(tmp))
        out = {"bench": "retrieve", "bm25": bench_bm25(root, queries),
               "agent": bench_agent(root, episodes, model) if episodes else {}}
    if real_tasks:
        out["real"] = bench_real(real_tasks, real_limit)
    out["load_avg_1m"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2),
                          "cpus": os.cpu_count()}
    return out
