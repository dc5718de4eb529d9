"""``codegrep report``: one table per paper claim, the paper's value beside this run's.

Reads the headline numbers notebooks recorded (``<artifacts>/headlines/*.json``) and the run record
(``run.json``), writes ``report.md`` and ``report.html``. Paper values are references, labelled so;
rows whose value comes from a model or a simulation say so in the "source" column.
"""
from __future__ import annotations

import argparse
import html
import json
import platform
import subprocess
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from codegrep.paper import PAPER_REFERENCE


@dataclass(frozen=True)
class Claim:
    """One paper claim and where this run's counterpart is recorded."""

    section: str
    """Paper section the claim belongs to."""
    claim: str
    """The claim in words."""
    paper_key: str | None
    """Key into ``PAPER_REFERENCE`` (None: qualitative claim)."""
    notebook: str
    """Notebook whose headline holds this run's value."""
    run_key: str
    """Key in that notebook's headline numbers."""
    fmt: str = "{:.3f}"
    """How to print both values."""
    source: str | None = None
    """What produced the value when it differs from the notebook's headline source (e.g. the harness
    numbers inside a notebook whose other numbers come from the replay model)."""
    note: str = ""
    """What this run's value stands on (data, model size), so it is not read as the paper's setting."""


_HARNESS = "run (evaluation harness)"
_EVAL = "default-set eval split"
CLAIMS = (
    Claim("CATM mining", "trajectories mined", "mining.n_trajectories", "01_mining", "trajectories", "{:,.0f}",
          note="real trajectories shipped in the package (ci/smoke); paper profile: the hub datasets"),
    Claim("CATM mining", "useful supervision records (resolved, with targets)", None, "01_mining",
          "useful_records", "{:,.0f}"),
    Claim("CATM mining", "mined targets vs gold: precision", None, "01_mining", "gold_precision",
          note="resolved mini-swe-agent runs vs SWE-bench Verified gold files"),
    Claim("CATM mining", "mined targets vs gold: recall", None, "01_mining", "gold_recall",
          note="resolved mini-swe-agent runs vs SWE-bench Verified gold files"),
    Claim("Environment", "acquisition per rollout: clone-per-rollout / pooled worktree (x)", None,
          "02_environment", "clone_vs_pool_acquisition_ratio", "{:.1f}",
          note="profile's bench repository; amortised over one group"),
    Claim("Environment", "tool call p50 latency (ms)", None, "02_environment", "tool_p50_ms", "{:.1f}"),
    Claim("Environment", "leaked worktrees after the benchmark", None, "02_environment", "leaked_worktrees",
          "{:.0f}"),
    Claim("Training", "held-out F0.5, untrained policy", None, "03_training", "heldout_f_untrained",
          note="profile's policy (ci/smoke: SmolLM2-135M on CPU), " + _EVAL),
    Claim("Training", "held-out F0.5, after SFT warm start", None, "03_training", "heldout_f_warm_start",
          note=_EVAL),
    Claim("Training", "held-out F0.5, after GRPO", None, "03_training", "heldout_f_grpo", note=_EVAL),
    Claim("Training", "format-valid rate after GRPO", None, "03_training", "format_valid_grpo", note=_EVAL),
    Claim("Ablation", "final KL, advantage layer / reward layer", "ablation.kl_ratio_advantage_over_reward",
          "04_ablation", "kl_ratio_advantage_over_reward",
          note="mean over seeds; empty when the reward layer's final KL is 0"),
    Claim("Precision threshold", "CodeGrep (agent) precision", "precision.codegrep", "05_precision_threshold",
          "precision_agent", source=_HARNESS, note="the policy trained by 03_training, " + _EVAL),
    Claim("Precision threshold", "BM25 precision", "precision.bm25", "05_precision_threshold", "precision_bm25",
          source=_HARNESS, note=_EVAL),
    Claim("Precision threshold", "dense (paper: Jina) precision", "precision.jina", "05_precision_threshold",
          "precision_dense", source=_HARNESS, note=_EVAL),
    Claim("Precision threshold", "grep-heuristic precision", None, "05_precision_threshold",
          "precision_grep_heuristic", source=_HARNESS, note=_EVAL),
    Claim("Precision threshold", "precision above which retrieval pays (tokens)", "precision.threshold",
          "05_precision_threshold", "threshold", note="replay cost model over real rollouts, controlled sweep"),
    Claim("Downstream", "resolve rate without retrieval", "downstream.resolve_without",
          "06_downstream_eval", "resolve_without", note="recorded verdicts of the replayed rollouts"),
    Claim("Downstream", "resolve rate with retrieval", "downstream.resolve_with",
          "06_downstream_eval", "resolve_with", note="replay model keeps recorded verdicts (stated parameter)"),
    Claim("Downstream", "rounds change with retrieval", "downstream.rounds_change",
          "06_downstream_eval", "rounds_change", "{:+.1%}", note="replay cost model; paper: OpenHands"),
    Claim("Downstream", "tokens change on resolved instances", "downstream.tokens_resolved_change",
          "06_downstream_eval", "tokens_resolved_change", "{:+.1%}", note="replay cost model; paper: OpenHands"),
)


def _git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def write_run_record(artifacts: Path, cfg: dict[str, Any], seconds: dict[str, Any]) -> Path:
    """``run.json``: versions, git commit, profile, seed, the resolved config and wall times."""
    from codegrep.config import project_root

    record = {
        "profile": cfg.get("profile"), "seed": cfg.get("seed"), "git_commit": _git_commit(project_root()),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(), "platform": platform.platform(),
        "versions": {p: _version(p) for p in ("codegrep", "torch", "transformers", "trl", "datasets",
                                              "bm25s", "sentence-transformers", "papermill", "mcp", "vllm")},
        "notebook_seconds": seconds, "config": {k: v for k, v in cfg.items() if k != "_source"},
    }
    path = Path(artifacts) / "run.json"
    path.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
    return path


def _fmt(fmt: str, value: Any) -> str:
    if value is None:
        return "—"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def claim_rows(artifacts: Path) -> list[dict[str, str]]:
    """One row per claim: section, claim, paper (reference), this run, source."""
    heads: dict[str, dict[str, Any]] = {}
    for path in sorted((Path(artifacts) / "headlines").glob("*.json")):
        heads[path.stem] = json.loads(path.read_text())
    rows = []
    for c in CLAIMS:
        head = heads.get(c.notebook)
        value = (head or {}).get("numbers", {}).get(c.run_key)
        source = c.source or (head or {}).get("source", "not run") if head else "not run"
        paper = PAPER_REFERENCE.get(c.paper_key) if c.paper_key else None
        rows.append({"section": c.section, "claim": c.claim, "paper (reference)": _fmt(c.fmt, paper),
                     "this run": _fmt(c.fmt, value), "source": source if value is not None else
                     ("not recorded" if head else "not run"), "notebook": c.notebook, "note": c.note})
    return rows


def _markdown(rows: list[dict[str, str]], run: dict[str, Any]) -> str:
    lines = ["# CodeGrep reproduction report", "",
             f"Profile **{run.get('profile')}**, seed {run.get('seed')}, commit `{run.get('git_commit')}`, "
             f"finished {run.get('finished_at')}; torch {run.get('versions', {}).get('torch')}, "
             f"transformers {run.get('versions', {}).get('transformers')}, trl {run.get('versions', {}).get('trl')}.",
             "", "Paper values are the paper's reported numbers (reference only). 'source' says what produced "
             "this run's value: `run` (measured), `model` (the replay cost model), `simulation`.", ""]
    secs = run.get("notebook_seconds") or {}
    for section in dict.fromkeys(r["section"] for r in rows):
        lines += [f"## {section}", "",
                  "| claim | paper (reference) | this run | source | note | notebook | wall time |",
                  "|---|---|---|---|---|---|---|"]
        for r in (r for r in rows if r["section"] == section):
            wall = secs.get(r["notebook"])
            lines.append(f"| {r['claim']} | {r['paper (reference)']} | {r['this run']} | {r['source']} | "
                         f"{r['note']} | {r['notebook']} | {'—' if wall is None else f'{wall:.0f} s'} |")
        lines.append("")
    return "\n".join(lines)


def build_report(artifacts: Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` from the artifacts of a run."""
    artifacts = Path(artifacts)
    run_path = artifacts / "run.json"
    run = json.loads(run_path.read_text()) if run_path.is_file() else {}
    md = _markdown(claim_rows(artifacts), run)
    md_path, html_path = artifacts / "report.md", artifacts / "report.html"
    md_path.write_text(md)
    html_path.write_text(_html(md))
    return md_path, html_path


def _html(md: str) -> str:
    """A dependency-free rendering of the report's headings, paragraphs and tables."""
    out = ["<!doctype html><meta charset='utf-8'><title>CodeGrep report</title>",
           "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:.3em .6em}</style>"]
    in_table = False
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-"):
                continue
            tag = "th" if not in_table else "td"
            row = "".join(f"<{tag}>{c}</{tag}>" for c in cells)
            out.append(("<table>" if not in_table else "") + f"<tr>{row}</tr>")
            in_table = True
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{html.escape(line.lstrip('# '))}</h{level}>")
        elif line.strip():
            out.append(f"<p>{html.escape(line).replace('**', '')}</p>")
    return "\n".join(out + (["</table>"] if in_table else []))


def _cmd_report(args: argparse.Namespace) -> int:
    md, page = build_report(args.artifacts)
    print(md.read_text())
    print(f"wrote {md} and {page}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="build artifacts/report.md and report.html from a run's artifacts")
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"), help="artifacts directory of a run")
    p.set_defaults(func=_cmd_report)
