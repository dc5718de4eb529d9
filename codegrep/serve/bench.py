"""``codegrep bench mcp``: find_relevant_files latency through a real stdio MCP session.

The benchmark repository is the Python standard library of the running interpreter (real code, on every
machine, ~2.3K text files) committed into a git repository under ``cache_dir()/bench``. Queries are
synthetic: each names a function defined in a sampled file ("<name> returns the wrong value ..."), so
the defining file is a known answer (hit rate is a sanity check, not a quality claim).
Baselines measured in the same run: one ripgrep pass over the repository (the floor of any grep-based
answer), a naive Python scan of every file per query, and a cold BM25 index build.
"""
from __future__ import annotations

import asyncio
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from codegrep.data.bench_repos import stdlib_repository as bench_repository
from codegrep.data.gitcmd import run as run_git
from codegrep.serve.mcp_server import TOOL_NAME, FileFinder, ServeConfig

BUDGET_SECONDS = 1.0  # the latency budget for grep-heuristic on a 2K-file repository
_DEF = re.compile(r"^\s*def ([A-Za-z][A-Za-z0-9_]{9,40})\(", re.MULTILINE)
PASSED_ENV = ("CODEGREP_CACHE", "CODEGREP_RG", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME", "PYTHONPATH")


def server_parameters(repo: Path | None, retriever: str = "grep-heuristic", *extra: str):
    """How an MCP client launches ``codegrep mcp`` with this interpreter (env: the caches it must share)."""
    from mcp import StdioServerParameters

    args = ["-m", "codegrep", "mcp", "--retriever", retriever, *extra]
    if repo is not None:
        args += ["--repo", str(repo)]
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    return StdioServerParameters(command=sys.executable, args=args, env=env)


def synthetic_queries(repo: Path, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``(query, defining file)`` pairs for functions with distinctive names defined in one file only."""
    defs: dict[str, list[str]] = {}
    for path in sorted(repo.rglob("*.py")):
        if ".git" in path.parts:
            continue
        rel = path.relative_to(repo).as_posix()
        for name in set(_DEF.findall(path.read_text(errors="replace"))):
            if not name.startswith("test"):
                defs.setdefault(name, []).append(rel)
    unique = sorted((name, files[0]) for name, files in defs.items() if len(files) == 1)
    picked = random.Random(seed).sample(unique, min(n, len(unique)))
    return [(f"{name}() returns the wrong value when it is called with an empty argument; "
             f"it should handle that case instead of failing.", rel) for name, rel in picked]


def _percentiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return {"n": len(xs), "p50": round(statistics.median(xs), 4), "p95": round(p95, 4), "max": round(xs[-1], 4)}


async def _stdio_session(repo: Path, retriever: str, queries: list[tuple[str, str]], max_files: int) -> dict:
    """Launch the server, time the handshake and every tool call; count calls whose answer has the file."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    t0 = time.perf_counter()
    transport = stdio_client(server_parameters(repo, retriever), errlog=_errlog())
    async with Client(transport, mode="legacy") as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        startup = time.perf_counter() - t0
        latencies, hits, errors = [], 0, 0
        for query, target in tqdm(queries, desc="stdio calls", file=sys.stderr):
            t = time.perf_counter()
            result = await client.call_tool(TOOL_NAME, {"query": query, "max_files": max_files})
            latencies.append(time.perf_counter() - t)
            errors += bool(result.is_error)
            files = [f["path"] for f in (result.structured_content or {}).get("files", [])]
            hits += target in files
    return {"tools": tools, "startup_s": round(startup, 3), "latency": latencies, "hits": hits, "errors": errors}


def _errlog():
    """Where the server's stderr goes: ours, or the process's real one when ours is not a file (captured)."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__


def _naive_scan(repo: Path, query: str) -> float:
    """Seconds to read every file and count the query's words: the no-index, no-ripgrep baseline."""
    words = set(re.findall(r"[A-Za-z_]{4,}", query))
    t = time.perf_counter()
    for path in repo.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            text = path.read_text(errors="replace")
            sum(text.count(w) for w in words)
    return time.perf_counter() - t


def _rg_pass(repo: Path, query: str) -> float:
    """Seconds for one ``rg -l`` of the query's function name: the floor of any grep-based answer."""
    from codegrep.env.procs import find_rg

    rg = find_rg()
    t = time.perf_counter()
    subprocess.run([rg, "-l", "--fixed-strings", query.split("(")[0], str(repo)], capture_output=True)
    return time.perf_counter() - t


def _bm25_cold_build(repo: Path) -> float | None:
    """Seconds to build a BM25 index of the repository from scratch (None when bm25 is not available)."""
    try:
        from codegrep.retrievers.lexical import BM25Config, build_index
    except ImportError:
        return None
    t = time.perf_counter()
    build_index(repo, BM25Config())
    return time.perf_counter() - t


def bench_mcp(n_files: int = 2000, n_queries: int = 20, retriever: str = "grep-heuristic",
              repo: Path | None = None, seed: int = 0, max_files: int = 10) -> dict[str, Any]:
    """Run the benchmark and return one JSON-able dict (latencies in seconds, ratios, budget verdict)."""
    load_start = os.getloadavg()[0]
    repo = Path(repo).resolve() if repo else bench_repository(n_files)
    n_repo_files = int(run_git("ls-files", cwd=repo, text=True, check=False).stdout.count("\n"))
    queries = synthetic_queries(repo, n_queries, seed)
    if not queries:
        raise RuntimeError(f"no function definitions found under {repo} to build queries from")
    # The stdio session runs first so its first call pays every cold cost (imports, indexes) itself.
    session = asyncio.run(_stdio_session(repo, retriever, queries, max_files))
    finder = FileFinder(ServeConfig(repo=repo, retriever=retriever))
    in_process = [finder.find(q, max_files=max_files)["cost"]["retriever_seconds"]
                  for q, _ in tqdm(queries, desc="in-process", file=sys.stderr)]
    warm = session["latency"][1:] or session["latency"]
    stdio, inproc = _percentiles(warm), _percentiles(in_process[1:] or in_process)
    naive = _percentiles([_naive_scan(repo, q) for q, _ in queries[:5]])
    rg = _percentiles([_rg_pass(repo, q) for q, _ in queries])
    bm25 = _bm25_cold_build(repo)
    return {
        "benchmark": "mcp", "retriever": retriever, "repo": str(repo), "repo_files": n_repo_files,
        "queries": len(queries), "query_kind": "synthetic (function name + generic bug text)",
        "stdio_startup_s": session["startup_s"], "stdio_first_call_s": round(session["latency"][0], 4),
        "stdio_call_s": stdio, "in_process_retriever_s": inproc,
        "baseline_naive_python_scan_s": naive, "baseline_rg_single_pass_s": rg,
        "baseline_bm25_cold_index_build_s": None if bm25 is None else round(bm25, 3),
        "ratios": {
            "stdio_p50_over_naive_scan_p50": round(stdio["p50"] / naive["p50"], 3),
            "stdio_p50_over_rg_single_pass_p50": round(stdio["p50"] / rg["p50"], 2),
            "stdio_p50_over_in_process_p50": round(stdio["p50"] / max(inproc["p50"], 1e-6), 2),
            "bm25_cold_build_over_stdio_p50": None if bm25 is None else round(bm25 / stdio["p50"], 1),
            "stdio_p95_over_budget": round(stdio["p95"] / BUDGET_SECONDS, 3),
        },
        "budget_s": BUDGET_SECONDS, "within_budget": stdio["p95"] < BUDGET_SECONDS,
        "hit_at_max_files": round(session["hits"] / len(queries), 3), "max_files": max_files,
        "tool_errors": session["errors"], "tools": session["tools"],
        "machine": {"cpus": os.cpu_count(), "load_avg_1m_start": round(load_start, 2),
                    "load_avg_1m_end": round(os.getloadavg()[0], 2)},
    }
