"""``codegrep report``: a report a reviewer reads alone (``report.md`` for GitHub, ``report.html`` for a browser).

Reads the headline numbers notebooks recorded (``<artifacts>/headlines/*.json``), the run record (``run.json``)
and the figures of the run, and writes per stage: the claim table (the paper's value, a labelled reference,
beside this run's value and what produced it), a reason for every empty cell, the stage's figures embedded,
and a link to the executed notebook. The profile's scale is stated up front. What produced a number is marked
the same way everywhere: **measured**, **MODEL**, **FIT**, **SIMULATION**, *paper (reference)*.
"""
from __future__ import annotations

import argparse
import base64
import html
import json
import platform
import re
import subprocess
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from codegrep.paper import PAPER_REFERENCE

KINDS = {"run": "measured", "measured": "measured", "model": "MODEL", "fit": "FIT", "simulation": "SIMULATION"}
"""How the report marks what produced a number (the same words as ``codegrep.plots.SOURCES``)."""

STAGES = {
    "01_mining": "CATM mining", "02_environment": "Environment", "03_training": "Training",
    "04_ablation": "Ablation", "05_precision_threshold": "Precision threshold", "06_downstream_eval": "Downstream",
}
"""Notebook -> the report section it fills, in pipeline order."""

SCALE = {
    "ci": "**ci is a plumbing check**: a handful of instances, a 135M model trained for a few steps on CPU. Zero "
          "rewards, zero KL and empty ratios are expected; no number here says anything about the paper's claims.",
    "smoke": "**smoke is a small real run on 2 CPU cores**: the 86 real SWE-bench Verified instances shipped with "
             "the bundle for retrieval and downstream, SmolLM2-135M trained for minutes. Numbers are measurements at "
             "that scale, not a reproduction of the paper's 14B results.",
    "paper": "**paper** is the paper's configuration (14B model, GPUs, 500 Verified instances).",
}
"""What each profile's numbers can and cannot say, stated at the top of the report."""


@dataclass(frozen=True)
class Claim:
    """One paper claim and where this run's counterpart is recorded."""

    section: str
    """Report section (one per notebook stage)."""
    claim: str
    """The claim in words."""
    paper_key: str | None
    """Key into ``PAPER_REFERENCE`` (None: no paper number for this row)."""
    notebook: str
    """Notebook whose headline holds this run's value."""
    run_key: str
    """Key in that notebook's headline numbers."""
    fmt: str = "{:.3f}"
    """How to print both values."""
    lo_key: str | None = None
    """Headline key of the interval's lower end (printed as ``value [lo, hi]``)."""
    hi_key: str | None = None
    """Headline key of the interval's upper end."""
    n_key: str | None = None
    """Headline key holding how many instances/runs/seeds the value stands on."""
    kind: str | None = None
    """What produced the value (run / model / fit / simulation) when it differs from the headline's source."""
    note: str = ""
    """What this run's value stands on, and how the paper's value is defined, so neither is misread."""
    paper_text: str | None = None
    """How to print the paper's value when it is not one number (e.g. an interval)."""


_P3 = "paper reports one precision per retriever on Verified; shown beside P@1 here (definition: see docs/retrievers.md)"
CLAIMS = (
    Claim("CATM mining", "real trajectories mined", "mining.n_trajectories", "01_mining", "trajectories", "{:,.0f}",
          note="real mini-swe-agent runs shipped in data/ (ci: a few); paper: 67K from public datasets"),
    Claim("CATM mining", "useful supervision records (resolved, with targets)", None, "01_mining",
          "useful_records", "{:,.0f}"),
    Claim("CATM mining", "mined targets vs gold files: precision", None, "01_mining", "gold_precision",
          note="resolved runs vs SWE-bench Verified gold files"),
    Claim("CATM mining", "mined targets vs gold files: recall", None, "01_mining", "gold_recall"),
    Claim("Environment", "acquisition per rollout, clone-per-rollout / default mode (x)", None, "02_environment",
          "clone_per_rollout_vs_default", "{:.1f}", note="profile's bench repository, counting the first rollout's wait"),
    Claim("Environment", "tool call p50 latency (ms)", None, "02_environment", "tool_p50_ms", "{:.1f}"),
    Claim("Environment", "leaked worktrees after the benchmark", None, "02_environment", "leaked_worktrees", "{:.0f}"),
    Claim("Training", "trained agent P@1 on real Verified", "precision.codegrep", "03_training", "p_at_1_agent",
          n_key="n_eval_instances", note=_P3),
    Claim("Training", "BM25 P@1 on the same instances", "precision.bm25", "03_training", "p_at_1_bm25",
          n_key="n_eval_instances"),
    Claim("Training", "agent - BM25, P@1 (paired)", None, "03_training", "p_at_1_diff", "{:+.3f}",
          lo_key="p_at_1_diff_lo", hi_key="p_at_1_diff_hi", n_key="n_eval_instances",
          note="paired bootstrap 95% CI over the same instances"),
    Claim("Ablation", "probe KL, advantage layer / reward layer (paired log-ratio, as a ratio)",
          "ablation.kl_ratio_advantage_over_reward", "04_ablation", "kl_ratio", "{:.2f}", lo_key="kl_ratio_lo",
          hi_key="kl_ratio_hi", n_key="n_paired_seeds", note="90% t-interval over paired seeds"),
    Claim("Ablation", "verdict", None, "04_ablation", "verdict", "{}"),
    Claim("Precision threshold", "BM25 P@1", "precision.bm25", "05_precision_threshold", "p_at_1_bm25",
          lo_key="p_at_1_bm25_lo", hi_key="p_at_1_bm25_hi", n_key="n_instances", note=_P3),
    Claim("Precision threshold", "dense (paper: Jina) P@1", "precision.jina", "05_precision_threshold",
          "p_at_1_dense", lo_key="p_at_1_dense_lo", hi_key="p_at_1_dense_hi", n_key="n_instances"),
    Claim("Precision threshold", "grep-heuristic P@1", None, "05_precision_threshold", "p_at_1_grep_heuristic",
          lo_key="p_at_1_grep_heuristic_lo", hi_key="p_at_1_grep_heuristic_hi", n_key="n_instances"),
    Claim("Precision threshold", "CodeGrep agent precision at its own set size", "precision.codegrep",
          "05_precision_threshold", "precision_agent", lo_key="precision_agent_lo", hi_key="precision_agent_hi",
          n_key="n_instances"),
    Claim("Precision threshold", "threshold, replay model (lower bound)", None, "05_precision_threshold",
          "threshold_replay", lo_key="threshold_replay_lo", hi_key="threshold_replay_hi", kind="model",
          note="replay cost model over real runs: a wrong file costs only its read"),
    Claim("Precision threshold", "threshold, observational fit (upper bound)", "precision.threshold_interval",
          "05_precision_threshold", "threshold_observational", lo_key="threshold_observational_lo",
          hi_key="threshold_observational_hi", kind="fit",
          paper_text="({:.3f}, {:.3f}]".format(*PAPER_REFERENCE["precision.threshold_interval"]),
          note="fit on real runs with instance covariates; the paper places the threshold in (0.445, 0.677]"),
    Claim("Precision threshold", "threshold (rounds), observational fit", None, "05_precision_threshold",
          "threshold_observational_rounds", lo_key="threshold_observational_rounds_lo",
          hi_key="threshold_observational_rounds_hi", kind="fit"),
    Claim("Precision threshold", "threshold (resolve), observational fit", None, "05_precision_threshold",
          "threshold_observational_resolve", lo_key="threshold_observational_resolve_lo",
          hi_key="threshold_observational_resolve_hi", kind="fit"),
    Claim("Precision threshold", "held-out repositories: rounds-after MAE, fit / no-skill", None,
          "05_precision_threshold", "validation.rounds_after.mae_model", "{:.2f}", kind="fit",
          note="leave-one-repository-out; compare with the next row"),
    Claim("Precision threshold", "held-out repositories: rounds-after MAE, no-skill baseline", None,
          "05_precision_threshold", "validation.rounds_after.mae_no_skill", "{:.2f}", kind="run"),
    Claim("Downstream", "instances replayed (real SWE-bench Verified runs)", "downstream.n_instances",
          "06_downstream_eval", "n_instances", "{:,.0f}", kind="run",
          note="paper: OpenHands on all 500 Verified instances"),
    Claim("Downstream", "rounds change with CodeGrep's files, replay model", "downstream.rounds_change",
          "06_downstream_eval", "rounds_change", "{:+.1%}", lo_key="rounds_change_lo", hi_key="rounds_change_hi",
          n_key="n_instances", kind="model", note="replay cost model over the real recorded runs"),
    Claim("Downstream", "rounds change with CodeGrep's files, observational fit", "downstream.rounds_change",
          "06_downstream_eval", "rounds_change_observational", "{:+.1%}", lo_key="rounds_change_observational_lo",
          hi_key="rounds_change_observational_hi", n_key="n_instances", kind="fit"),
    Claim("Downstream", "tokens change on resolved instances, replay model", "downstream.tokens_resolved_change",
          "06_downstream_eval", "tokens_resolved_change", "{:+.1%}", lo_key="tokens_resolved_change_lo",
          hi_key="tokens_resolved_change_hi", n_key="n_instances", kind="model"),
    Claim("Downstream", "tokens change on resolved instances, observational fit", "downstream.tokens_resolved_change",
          "06_downstream_eval", "tokens_resolved_change_observational", "{:+.1%}",
          lo_key="tokens_resolved_change_observational_lo", hi_key="tokens_resolved_change_observational_hi",
          n_key="n_instances", kind="fit"),
    Claim("Downstream", "resolve rate without retrieval, fit", "downstream.resolve_without", "06_downstream_eval",
          "resolve_model_without", kind="fit",
          note="fitted on the recorded runs (Gemini 3 Pro, mini-swe-agent), not comparable with the paper's 0.258"),
    Claim("Downstream", "resolve rate with CodeGrep's files, fit", "downstream.resolve_with", "06_downstream_eval",
          "resolve_model_with", kind="fit", note="modelled from the fitted effect of the hint, never copied"),
)
"""Every claim row; keys must match what the notebooks record (the notebook test checks they do)."""


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


def read_headlines(artifacts: Path) -> dict[str, dict[str, Any]]:
    """Every headline record of a run, by notebook."""
    return {p.stem: json.loads(p.read_text()) for p in sorted((Path(artifacts) / "headlines").glob("*.json"))}


def _reason(head: dict[str, Any] | None, key: str, notebook: str, run: dict[str, Any]) -> str:
    if head is None:
        return f"{notebook} did not run in this run" if run else "no run.json: the pipeline did not run"
    reasons = head.get("reasons") or {}
    if key in reasons:
        return reasons[key]
    if key in (head.get("numbers") or {}):
        return "undefined in this run (the notebook recorded no reason: a bug to report)"
    return f"{notebook} does not record {key!r} (a bug to report)"


def claim_rows(artifacts: Path) -> list[dict[str, str]]:
    """One row per claim: section, claim, paper (reference), this run (with interval), n, kind, note, reason."""
    run_path = Path(artifacts) / "run.json"
    run = json.loads(run_path.read_text()) if run_path.is_file() else {}
    heads = read_headlines(artifacts)
    rows = []
    for c in CLAIMS:
        head = heads.get(c.notebook)
        nums = (head or {}).get("numbers") or {}
        value = nums.get(c.run_key)
        text = _fmt(c.fmt, value)
        if value is not None and c.lo_key and nums.get(c.lo_key) is not None and nums.get(c.hi_key) is not None:
            text += f" [{_fmt(c.fmt, nums[c.lo_key])}, {_fmt(c.fmt, nums[c.hi_key])}]"
        kind = c.kind or ((head or {}).get("sources") or {}).get(c.run_key) or (head or {}).get("source") or "run"
        paper = c.paper_text or _fmt(c.fmt, PAPER_REFERENCE.get(c.paper_key) if c.paper_key else None)
        n = nums.get(c.n_key) if c.n_key else None
        rows.append({"section": c.section, "claim": c.claim, "paper (reference)": paper, "this run": text,
                     "n": "—" if n is None else f"{n:,.0f}" if isinstance(n, (int, float)) else str(n),
                     "kind": KINDS.get(kind, kind) if value is not None else "—", "notebook": c.notebook,
                     "note": c.note, "why empty": "" if value is not None else _reason(head, c.run_key, c.notebook, run)})
    return rows


def _figures(figures_dir: Path, notebook: str) -> list[Path]:
    return sorted(Path(figures_dir).glob(f"{notebook[:2]}_*.png"))


def _markdown(rows: list[dict[str, str]], run: dict[str, Any], figures_dir: Path, artifacts: Path) -> str:
    versions = run.get("versions") or {}
    profile = run.get("profile")
    lines = ["# CodeGrep reproduction report", "",
             f"Profile **{profile}**, seed {run.get('seed')}, commit {run.get('git_commit')}, finished "
             f"{run.get('finished_at')}; torch {versions.get('torch')}, transformers {versions.get('transformers')}, "
             f"trl {versions.get('trl')}.", "",
             SCALE.get(str(profile), f"Custom profile {profile!r}: see its YAML for its scale."), "",
             "How to read it: *paper (reference)* is the paper's reported value, shown for comparison only. "
             "**kind** says what produced this run's value: measured (a run of the real code on real or stated data), "
             "MODEL (the replay cost model), FIT (an observational estimate fitted on real runs), SIMULATION. "
             "Intervals are in brackets; n is what the value stands on. A value may be on a different definition or "
             "scale than the paper's: the note says so.", ""]
    secs = run.get("notebook_seconds") or {}
    for notebook, section in STAGES.items():
        sec_rows = [r for r in rows if r["section"] == section]
        wall = secs.get(notebook)
        nb_link = f"notebooks/{notebook}.ipynb"
        lines += [f"## {section}", "",
                  f"Notebook [{notebook}]({nb_link})" + (f", {wall:.0f} s in this run." if wall is not None else
                                                         ", not run in this run (or served from an earlier one)."),
                  "", "| claim | paper (reference) | this run | n | kind | note |", "|---|---|---|---|---|---|"]
        for r in sec_rows:
            value = r["this run"] if r["why empty"] == "" else f"— ({r['why empty']})"
            lines.append(f"| {r['claim']} | {r['paper (reference)']} | {value} | {r['n']} | {r['kind']} | "
                         f"{r['note']} |")
        lines.append("")
        for fig in _figures(figures_dir, notebook):
            rel = Path("..") / fig.parent.name / fig.name if fig.parent.parent == artifacts.parent else fig
            lines += [f"![{fig.stem}]({rel.as_posix()})", ""]
    return "\n".join(lines)


def build_report(artifacts: Path, figures: Path | None = None) -> tuple[Path, Path]:
    """Write ``report.md`` (figures linked) and ``report.html`` (figures embedded) from the artifacts of a run."""
    artifacts = Path(artifacts)
    figures = Path(figures) if figures is not None else artifacts.parent / "figures"
    run_path = artifacts / "run.json"
    run = json.loads(run_path.read_text()) if run_path.is_file() else {}
    md = _markdown(claim_rows(artifacts), run, figures, artifacts)
    md_path, html_path = artifacts / "report.md", artifacts / "report.html"
    md_path.write_text(md)
    html_path.write_text(_html(md, artifacts))
    return md_path, html_path


_INLINE = [(re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"), (re.compile(r"\*(.+?)\*"), r"<em>\1</em>"),
           (re.compile(r"\[([^\]]+)\]\(([^)]+)\)"), r"<a href='\2'>\1</a>")]


def _inline(text: str) -> str:
    """Markdown emphasis and links to HTML (escaped first).

    >>> _inline("a **b** [c](d.ipynb) *e*")
    "a <strong>b</strong> <a href='d.ipynb'>c</a> <em>e</em>"
    """
    out = html.escape(text, quote=False)
    for pattern, repl in _INLINE:
        out = pattern.sub(repl, out)
    return out


def _img(alt: str, src: str, base: Path) -> str:
    path = (base / src).resolve() if not Path(src).is_absolute() else Path(src)
    if path.is_file():
        data = base64.b64encode(path.read_bytes()).decode()
        src = f"data:image/png;base64,{data}"
    return f"<figure><img alt='{html.escape(alt)}' src='{src}'><figcaption>{html.escape(alt)}</figcaption></figure>"


def _html(md: str, base: Path) -> str:
    """A dependency-free HTML rendering of the report (headings, paragraphs, tables, figures embedded)."""
    out = ["<!doctype html><html lang='en'><meta charset='utf-8'><title>CodeGrep reproduction report</title>",
           "<style>body{font-family:system-ui,sans-serif;max-width:72em;margin:2em auto;padding:0 1em;color:#222}"
           "table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.3em .6em;"
           "vertical-align:top}th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}"
           "figure{margin:1em 0}figcaption{font-size:.8em;color:#666}</style><body>"]
    in_table = False
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= set("-"):
                continue
            tag = "th" if not in_table else "td"
            out.append(("<table>" if not in_table else "") +
                       "<tr>" + "".join(f"<{tag}>{_inline(c)}</{tag}>" for c in cells) + "</tr>")
            in_table = True
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        m = re.match(r"!\[([^\]]*)\]\(([^)]+)\)", line)
        if m:
            out.append(_img(m.group(1), m.group(2), base))
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line.lstrip('# '))}</h{level}>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    return "\n".join(out + (["</table>"] if in_table else []) + ["</body></html>"])


def _cmd_report(args: argparse.Namespace) -> int:
    md, page = build_report(args.artifacts, args.figures)
    print(md.read_text())
    print(f"wrote {md} and {page}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="build artifacts/report.md and report.html from a run's artifacts",
                       description="Build the reviewer's report of a run: per stage the paper claim table "
                                   "(paper values as labelled references), the stage's figures and a link to the "
                                   "executed notebook. report.md links the figures; report.html embeds them.")
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"), help="artifacts directory of a run")
    p.add_argument("--figures", type=Path, default=None,
                   help="figures directory of the run (default: the artifacts directory's sibling 'figures')")
    p.set_defaults(func=_cmd_report)
