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
import os
import platform
import re
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from codegrep.claims import Results, markdown_table, summary_rows
from codegrep.paper import PAPER_REFERENCE
from codegrep.report_tables import CAPTIONS, agent_vs_bm25_figure, downstream_table, precision_table
from codegrep.errors import UserError
from codegrep.files import read_json_object, read_text, write_atomic

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


CLAIMS = (
    Claim("CATM mining", "real trajectories mined", "mining.n_trajectories", "01_mining", "trajectories", "{:,.0f}",
          note="real mini-swe-agent runs shipped in data/ (ci: a few); paper: 67K from public datasets"),
    Claim("CATM mining", "useful supervision records (resolved, with targets)", None, "01_mining",
          "useful_records", "{:,.0f}", n_key="trajectories"),
    Claim("CATM mining", "mined targets vs gold files: precision", None, "01_mining", "gold_precision",
          n_key="gold_n", note="resolved runs vs SWE-bench Verified gold files"),
    Claim("CATM mining", "mined targets vs gold files: recall", None, "01_mining", "gold_recall", n_key="gold_n"),
    Claim("Environment", "acquisition per rollout, clone-per-rollout / default mode (x)", None, "02_environment",
          "clone_per_rollout_vs_default", "{:.1f}", n_key="n_cold_samples",
          note="profile's bench repository (see its file count below), counting the first rollout's wait; "
               "n = cold samples per mode"),
    Claim("Environment", "files in the bench repository", None, "02_environment", "bench_repo_files", "{:,.0f}"),
    Claim("Environment", "tool call p50 latency (ms)", None, "02_environment", "tool_p50_ms", "{:.1f}"),
    Claim("Environment", "leaked worktrees after the benchmark", None, "02_environment", "leaked_worktrees", "{:.0f}"),
    Claim("Training", "trained agent P@1 (= Acc@1) on real Verified", "precision.codegrep", "03_training",
          "p_at_1_agent", n_key="n_eval_instances",
          note="paper value: CodeGrep's precision, definition not stated (see the precision table in section "
               "Precision threshold)"),
    Claim("Training", "BM25 P@1 (= Acc@1) on the same instances", "precision.bm25", "03_training", "p_at_1_bm25",
          n_key="n_eval_instances"),
    Claim("Training", "agent - BM25, P@1 (paired)", None, "03_training", "p_at_1_diff", "{:+.3f}",
          lo_key="p_at_1_diff_lo", hi_key="p_at_1_diff_hi", n_key="n_eval_instances",
          note="paired bootstrap 95% CI over the same instances"),
    Claim("Ablation", "probe KL, advantage layer / reward layer (paired log-ratio, as a ratio)",
          "ablation.kl_ratio_advantage_over_reward", "04_ablation", "kl_ratio", "{:.2f}", lo_key="kl_ratio_lo",
          hi_key="kl_ratio_hi", n_key="n_paired_seeds", note="90% t-interval over paired seeds"),
    Claim("Ablation", "verdict", None, "04_ablation", "verdict", "{}", n_key="n_paired_seeds"),
    Claim("Precision threshold", "threshold, replay model (lower bound)", None, "05_precision_threshold",
          "threshold_replay", lo_key="threshold_replay_lo", hi_key="threshold_replay_hi", kind="model",
          n_key="n_runs", note="replay cost model over real runs: a wrong file costs only its read"),
    Claim("Precision threshold", "threshold, observational fit (upper bound)", "precision.threshold_interval",
          "05_precision_threshold", "threshold_observational", lo_key="threshold_observational_lo",
          hi_key="threshold_observational_hi", kind="fit", n_key="n_runs",
          paper_text="({:.3f}, {:.3f}]".format(*PAPER_REFERENCE["precision.threshold_interval"]),
          note="fit on real runs with instance covariates; the paper places the threshold in (0.445, 0.677]"),
    Claim("Precision threshold", "threshold (rounds), observational fit", None, "05_precision_threshold",
          "threshold_observational_rounds", lo_key="threshold_observational_rounds_lo",
          hi_key="threshold_observational_rounds_hi", kind="fit", n_key="n_runs"),
    Claim("Precision threshold", "threshold (resolve), observational fit", None, "05_precision_threshold",
          "threshold_observational_resolve", lo_key="threshold_observational_resolve_lo",
          hi_key="threshold_observational_resolve_hi", kind="fit", n_key="n_runs"),
    Claim("Precision threshold", "held-out repositories: rounds-after MAE, fit", None,
          "05_precision_threshold", "validation.rounds_after.mae_model", "{:.2f}", kind="fit", n_key="n_runs",
          note="leave-one-repository-out; compare with the next row"),
    Claim("Precision threshold", "held-out repositories: rounds-after MAE, no-skill baseline", None,
          "05_precision_threshold", "validation.rounds_after.mae_no_skill", "{:.2f}", kind="run", n_key="n_runs"),
    Claim("Downstream", "instances replayed (real SWE-bench Verified runs)", "downstream.n_instances",
          "06_downstream_eval", "n_instances", "{:,.0f}", kind="run",
          note="paper: OpenHands on all 500 Verified instances; per-retriever rows in the table below"),
)
"""Every claim row; keys must match what the notebooks record (the notebook test checks they do)."""


def _git_commit(root: Path) -> str:
    from codegrep.data.gitcmd import checkout_commit

    return checkout_commit(root, "+dirty", timeout=10)


def provenance() -> dict[str, str]:
    """The code and date a bench result comes from (``git_commit`` as in ``run.json``, ``+dirty`` for uncommitted
    changes)."""
    from codegrep.config import project_root

    return {"git_commit": _git_commit(project_root()), "date": time.strftime("%Y-%m-%d", time.gmtime())}


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def write_run_record(artifacts: Path, cfg: dict[str, Any], seconds: dict[str, Any],
                     cpu: dict[str, Any] | None = None) -> Path:
    """``run.json``: versions, git commit, profile, seed, the resolved config, wall times and, per notebook, how the
    machine's CPU time went while it ran (``notebook_cpu``: busy/idle/steal shares, ``pipeline.cpu_shares``) and the
    peak memory its kernel recorded with its headline numbers (``notebook_peak_rss_mb``: the largest single process,
    ``codegrep.artifacts.peak_rss_mb``; notebooks whose headline has none are left out)."""
    from codegrep.config import project_root

    record = {
        "profile": cfg.get("profile"), "seed": cfg.get("seed"), "git_commit": _git_commit(project_root()),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(), "platform": platform.platform(),
        "versions": {p: _version(p) for p in ("codegrep", "torch", "transformers", "trl", "datasets",
                                              "bm25s", "sentence-transformers", "papermill", "mcp", "vllm")},
        "notebook_seconds": seconds, "notebook_cpu": cpu or {},
        "notebook_peak_rss_mb": _headline_peaks(Path(artifacts), seconds),
        "config": {k: v for k, v in cfg.items() if k != "_source"},
    }
    path = Path(artifacts) / "run.json"
    write_atomic(path, json.dumps(record, indent=2, sort_keys=True, default=str))
    return path


def _headline_peaks(artifacts: Path, notebooks: Any) -> dict[str, float]:
    """``{notebook: peak_rss_mb}`` from the headline records in ``artifacts/headlines`` (unreadable ones skipped)."""
    out = {}
    for name in notebooks:
        try:
            peak = json.loads((artifacts / "headlines" / f"{name}.json").read_text()).get("peak_rss_mb")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(peak, (int, float)):
            out[name] = peak
    return out


def _fmt(fmt: str, value: Any) -> str:
    if value is None:
        return "—"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def read_headlines(artifacts: Path) -> dict[str, dict[str, Any]]:
    """Every headline record of a run, by notebook; its ``numbers``, ``reasons`` and ``sources`` are objects (a
    hand-edited ``"numbers": [1]`` is one line naming the file, not an ``AttributeError`` where it is read)."""
    heads = {}
    for p in sorted((Path(artifacts) / "headlines").glob("*.json")):
        head = read_json_object(p)
        for key in ("numbers", "reasons", "sources"):
            if head.get(key) is not None and not isinstance(head[key], dict):
                raise UserError(f"{p}: {key!r} must be a JSON object, got {type(head[key]).__name__}")
        numbers = head.get("numbers") or {}
        for claim in CLAIMS:  # a value the table prints must be a number (a hand-edited "0.9" was shown as given)
            numeric = claim.fmt != "{}"  # a verdict's words are printed as they are
            keys = ((claim.run_key,) * numeric + (claim.lo_key, claim.hi_key, claim.n_key)
                    if claim.notebook == p.stem else ())
            for key in filter(None, keys):
                value = numbers.get(key)
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                    raise UserError(f"{p}: numbers[{key!r}] must be a number (or null), got "
                                    f"{type(value).__name__} {json.dumps(value)[:40]}")
        heads[p.stem] = head
    return heads


def _reason(head: dict[str, Any] | None, key: str, notebook: str, run: dict[str, Any]) -> str:
    if head is None:
        return f"{notebook} did not run in this run" if run else "no run.json: the pipeline did not run"
    reasons = head.get("reasons") or {}
    if key in reasons:
        return reasons[key]
    if key in (head.get("numbers") or {}):
        return "undefined in this run (the notebook recorded no reason: a bug to report)"
    return f"{notebook} does not record {key!r} (a bug to report)"


def _rounds_caveat(nums: dict[str, Any]) -> str:
    """The rounds threshold is only evidence when its fit beats the no-skill baseline on held-out repositories."""
    m, b = nums.get("validation.rounds_after.mae_model"), nums.get("validation.rounds_after.mae_no_skill")
    if isinstance(m, (int, float)) and isinstance(b, (int, float)) and m >= b:
        return (f"CAVEAT: the rounds fit fails its held-out check (error {m:.2f} vs no-skill {b:.2f}), so this "
                "threshold is not evidence")
    return ""


CAVEATS = {"threshold_observational_rounds": _rounds_caveat}
"""Run-key -> a note computed from the run's numbers (said where the value is shown)."""


def claim_rows(artifacts: Path) -> list[dict[str, str]]:
    """One row per claim: section, claim, paper (reference), this run (with interval), n, kind, note, reason."""
    run_path = Path(artifacts) / "run.json"
    run = read_json_object(run_path) if run_path.is_file() else {}
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
        caveat = CAVEATS[c.run_key](nums) if c.run_key in CAVEATS and value is not None else ""
        rows.append({"section": c.section, "claim": c.claim, "paper (reference)": paper, "this run": text,
                     "n": "n/a" if n is None else f"{n:,.0f}" if isinstance(n, (int, float)) else str(n),
                     "kind": KINDS.get(kind, kind) if value is not None else "—", "notebook": c.notebook,
                     "note": "; ".join(x for x in (caveat, c.note) if x),
                     "why empty": "" if value is not None else _reason(head, c.run_key, c.notebook, run)})
    return rows


def _figures(figures_dir: Path, notebook: str) -> list[Path]:
    return sorted(Path(figures_dir).glob(f"{notebook[:2]}_*.png"))


def _figure_lines(fig: Path, artifacts: Path) -> list[str]:
    rel = Path("..") / fig.parent.name / fig.name if fig.parent.parent == artifacts.parent else fig
    caption = CAPTIONS.get(fig.stem, fig.stem.replace("_", " "))
    return [f"![{caption}]({rel.as_posix()})", ""]


def summary_lines(res: Results) -> list[str]:
    """The summary table at the top: every paper claim, this run's value, n, kind and a verdict."""
    return ["## Summary: every claim of the paper, one verdict each", "",
            "Verdicts follow one rule per claim (`codegrep/claims.py`, doctested): **supported**, **contradicted**, "
            "**inconclusive**, or **not measured here** (with the reason and the command that fills it). *from* "
            "says which run or committed study a value comes from.", "",
            *markdown_table(summary_rows(res)), ""]


def _markdown(rows: list[dict[str, str]], run: dict[str, Any], figures_dir: Path, artifacts: Path,
              res: Results | None = None) -> str:
    res = res if res is not None else Results.load(artifacts)
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
             "scale than the paper's: the note says so. Each section links its executed notebook; each notebook "
             "links back here.", "", *summary_lines(res)]
    secs = run.get("notebook_seconds") or {}
    for notebook, section in STAGES.items():
        sec_rows = [r for r in rows if r["section"] == section]
        wall = secs.get(notebook)
        nb_link = f"notebooks/{notebook}.ipynb"
        lines += [f"## {section}", "",
                  f"Notebook [{notebook}]({nb_link})" + (f", {wall:.0f} s in this run." if wall is not None else
                                                         ", not run in this run (or served from an earlier one)."),
                  ""]
        if sec_rows:
            lines += ["| claim | paper (reference) | this run | n | kind | note |", "|---|---|---|---|---|---|"]
        for r in sec_rows:
            value = r["this run"] if r["why empty"] == "" else f"— ({r['why empty']})"
            lines.append(f"| {r['claim']} | {r['paper (reference)']} | {value} | {r['n']} | {r['kind']} | "
                         f"{r['note']} |")
        lines.append("")
        if notebook == "05_precision_threshold":
            lines += precision_table(res)
        if notebook == "06_downstream_eval":
            lines += downstream_table(res)
        for fig in _figures(figures_dir, notebook):
            lines += _figure_lines(fig, artifacts)
        if notebook == "03_training":
            own = agent_vs_bm25_figure(artifacts, figures_dir)
            if own is not None:
                lines += _figure_lines(own, artifacts)
    return "\n".join(lines)


def build_report(artifacts: Path, figures: Path | None = None) -> tuple[Path, Path]:
    """Write ``report.md`` (figures linked) and ``report.html`` (figures embedded) from the artifacts of a run."""
    artifacts = Path(artifacts)
    if not artifacts.is_dir():
        raise UserError(f"--artifacts {artifacts}: not a directory (a run's artifacts, e.g. artifacts/ after "
                        "`codegrep reproduce`)")
    figures = Path(figures) if figures is not None else artifacts.parent / "figures"
    run_path = artifacts / "run.json"
    if not run_path.is_file() and not any((artifacts / "headlines").glob("*.json")):
        # a wrong folder would give a report of "not measured" everywhere, exit 0
        raise UserError(f"--artifacts {artifacts}: holds no run (neither run.json nor headlines/*.json); give the "
                        "artifacts folder of a `codegrep reproduce` run (e.g. artifacts/)")
    run = read_json_object(run_path) if run_path.is_file() else {}
    md = _markdown(claim_rows(artifacts), run, figures, artifacts)
    md_path, html_path = artifacts / "report.md", artifacts / "report.html"
    write_atomic(md_path, md)
    write_atomic(html_path, _html(md, artifacts))
    return md_path, html_path


RESULTS_DIR = Path("docs") / "results"
"""Committed results: ``<profile>/run.json`` + ``<profile>/headlines/*.json`` (a run's artifacts, trimmed), and the
studies run outside the pipeline as single JSON files (``codegrep.claims.EXTERNAL``); see its README.md."""
COMMITTED_PROFILES = ("paper", "smoke", "ci")
"""Which committed run the README's headline table is generated from: the first of these present."""
README_BEGIN = "<!-- headline-table:begin: generated by `codegrep report --readme README.md`; do not edit by hand -->"
README_END = "<!-- headline-table:end -->"


def committed_run(root: Path | None = None) -> Path | None:
    """The committed run the README describes: ``docs/results/<profile>`` of the largest profile present."""
    from codegrep.config import project_root

    base = Path(root or project_root()) / RESULTS_DIR
    return next((base / p for p in COMMITTED_PROFILES if (base / p / "run.json").is_file()), None)


def save_results(artifacts: Path, root: Path | None = None) -> Path:
    """Copy a run's ``run.json`` and ``headlines/`` to ``docs/results/<profile>/`` (replacing what was there)."""
    import shutil

    from codegrep.config import project_root
    from codegrep.errors import UserError

    artifacts = Path(artifacts)
    run_path = artifacts / "run.json"
    if not run_path.is_file() or not (artifacts / "headlines").is_dir():
        raise UserError(f"--save-results: {artifacts} holds no run.json and headlines/ (run `codegrep reproduce` first)")
    run = read_json_object(run_path)
    profile = run.get("profile")
    if profile not in COMMITTED_PROFILES:
        raise UserError(f"--save-results: {run_path}: profile {profile!r} is not one of {COMMITTED_PROFILES}")
    heads = read_headlines(artifacts)  # every input read (and refused if corrupt) before the committed copy goes
    from codegrep.replicates import HABITS_FILE, habits, per_instance

    table = per_instance(artifacts)
    kept_habits = habits(artifacts)
    dest = Path(root or project_root()) / RESULTS_DIR / str(profile)
    if not heads:  # a run no notebook finished would replace the committed results by a run.json alone
        raise UserError(f"--save-results: {artifacts / 'headlines'} holds no headline (no notebook finished); "
                        f"{dest} was left as it is")
    # Built beside the committed copy and swapped in by renames: a failure part-way (a full disk, an unreadable
    # headline) leaves the committed results as they were, never a half-written mix.
    new, old = dest.with_name(f".{dest.name}.new-{os.getpid()}"), dest.with_name(f".{dest.name}.old-{os.getpid()}")
    try:
        (new / "headlines").mkdir(parents=True)
        shutil.copy2(run_path, new / "run.json")
        for name in heads:
            shutil.copy2(artifacts / "headlines" / f"{name}.json", new / "headlines" / f"{name}.json")
        if table:
            write_atomic(new / "per_instance.json", json.dumps(
                {"what": "P@1 per evaluation instance of each policy notebook 03 evaluated (artifacts/train/eval/) "
                         "and each retriever notebook 05 evaluated (artifacts/eval/), kept so a later run can be "
                         "compared with this one instance by instance",
                 "run_commit": run.get("git_commit"), "p_at_1": table}, indent=1, sort_keys=True))
        if kept_habits:
            write_atomic(new / HABITS_FILE, json.dumps(
                {"what": "each policy's call habits on the evaluation split, counted from the episodes notebook 03 "
                         "saved (codegrep.replicates.call_habits): a diagnostic of why runs differ, not a result",
                 "run_commit": run.get("git_commit"), "habits": kept_habits}, indent=1, sort_keys=True))
        if dest.exists():
            dest.rename(old)
        new.rename(dest)
    except OSError as exc:
        if old.exists() and not dest.exists():
            old.rename(dest)
        raise UserError(f"--save-results: cannot write {dest} ({exc.strerror or exc}); the committed results were "
                        "left as they were") from None
    finally:
        shutil.rmtree(new, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return dest


def run_machine(run: dict[str, Any]) -> str:
    """The machine a run's ``run.json`` records, in words: threads, CPU model and the precision it trained in
    (``cpu_precision``; the platform string for runs written before it).

    >>> run_machine({"cpu_precision": {"cpu": {"cpu_model": "AMD EPYC", "torch_threads": 2}, "precision": "bf16"}})
    '2 CPU threads, AMD EPYC, bf16'
    >>> run_machine({"platform": "Linux-x86_64"})
    'Linux-x86_64'
    """
    cpu = (run.get("cpu_precision") or {}).get("cpu") or {}
    if not isinstance(cpu, dict) or not cpu:
        return str(run.get("platform", "?"))
    return (f"{cpu.get('torch_threads', '?')} CPU threads, {cpu.get('cpu_model', '?')}, "
            f"{(run.get('cpu_precision') or {}).get('precision', '?')}")


def readme_block(res: Results, where: str) -> str:
    """The README's generated headline table (between the markers), from a committed run."""
    secs = [v for v in (res.run.get("notebook_seconds") or {}).values() if isinstance(v, (int, float))]
    ran = [n[:2] for n, v in (res.run.get("notebook_seconds") or {}).items() if isinstance(v, (int, float))]
    took = f", notebooks {sum(secs) / 60:.1f} min in all on {run_machine(res.run)} (run.json)" if secs else ""
    if ran and len(ran) < len(STAGES):
        took += f"; only notebooks {', '.join(ran)} ran in it"
    return "\n".join([README_BEGIN,
                      f"**Headline numbers**, generated from the committed {res.run_label()}{took} (`{where}`) and the "
                      f"studies in `{res.external_dir}/`; paper values are references only; each row says which run "
                      "or study it comes from and what produced it. Verdict rules: `codegrep/claims.py`.", "",
                      SCALE.get(res.profile, f"Profile {res.profile!r}."), "",
                      *markdown_table(summary_rows(res)), "", README_END])


def update_readme(readme: Path, run_dir: Path | None = None, check: bool = False) -> bool:
    """Rewrite the block between the markers of ``readme`` from ``run_dir`` (default: :func:`committed_run`).
    Returns whether it changed; ``check`` only compares."""
    from codegrep.config import project_root
    from codegrep.errors import UserError

    readme = Path(readme)
    if not readme.is_file():
        raise UserError(f"--readme: {readme}: no such file")
    run_dir = Path(run_dir) if run_dir is not None else committed_run()
    if run_dir is not None and not (Path(run_dir) / "run.json").is_file():
        raise UserError(f"--results: {run_dir}: no run.json there (a committed run holds run.json and headlines/)")
    if run_dir is None:
        raise UserError(f"--readme: no committed run under {RESULTS_DIR}/<{'|'.join(COMMITTED_PROFILES)}>/run.json "
                        "(save one with `codegrep report --artifacts DIR --save-results`)")
    read_json_object(run_dir / "run.json")  # a corrupt run record or headline is one line naming it (file:line),
    read_headlines(run_dir)  # not a table of "not measured" that replaces a good one
    text = read_text(readme, "--readme")
    if text.count(README_BEGIN) != 1 or text.count(README_END) != 1:
        raise UserError(f"{readme}: needs exactly one pair of markers {README_BEGIN!r} ... {README_END!r}")
    try:
        where = run_dir.resolve().relative_to(project_root().resolve()).as_posix()
    except ValueError:
        where = str(run_dir)
    head, rest = text.split(README_BEGIN, 1)
    tail = rest.split(README_END, 1)[1]
    new = head + readme_block(Results.load(run_dir), where) + tail
    if new != text and not check:
        write_atomic(readme, new)
    return new != text


_INLINE = [(re.compile(r"`([^`]+)`"), r"<code>\1</code>"), (re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"), (re.compile(r"\*(.+?)\*"), r"<em>\1</em>"),
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
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
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
        elif line.startswith("- "):
            out.append(f"<ul><li>{_inline(line[2:])}</li></ul>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    return "\n".join(out + (["</table>"] if in_table else []) + ["</body></html>"])


def _report_seeds(args: argparse.Namespace) -> None:
    """``report --seeds``: every input and output checked before anything is written, then the summary (JSON, figure,
    lines)."""
    from codegrep.files import output_file, refuse_overwriting_inputs
    from codegrep.replicates import seed_figure, seed_spread, seed_spread_text

    inputs, seen = {}, {}
    for flag, dirs in (("--seeds", args.seeds), ("--seeds-against", args.seeds_against or [])):
        for d in dirs:
            key = Path(d).resolve()
            if key in seen:  # one run counted twice: a spread of 0 for free
                raise UserError(f"{flag} {d}: the same run as {seen[key]}; each seed's run is given once, in one list")
            seen[key] = f"{flag} {d}"
            found = [Path(d)] if Path(d).is_file() else [  # a file: a bench demos --result (read_run checks it)
                Path(d) / f for f in ("per_instance.json", "run.json") if (Path(d) / f).is_file()]
            if not found:
                raise UserError(f"{flag} {d}: neither a per_instance.json (a run saved by report --save-results) "
                                "nor a run.json (a run's artifacts directory) there, nor a bench demos --result file")
            inputs[str(found[0])] = found[0]
    outputs = {k: v for k, v in (("--seeds-out", args.seeds_out), ("--seeds-plot", args.seeds_plot),
                                 ("--against-plot", args.against_plot)) if v}
    for flag, path in outputs.items():  # every output checked before anything is written
        output_file(path, flag)
    for flag, path in (("--seeds-plot", args.seeds_plot), ("--against-plot", args.against_plot)):
        if path is not None and Path(path).suffix.lower() not in (".png", ".svg"):
            raise UserError(f"{flag} {path}: a figure is saved as .png or .svg")
    if args.against_plot is not None and not args.seeds_against:
        raise UserError("--against-plot needs --seeds-against (the other recipe's runs)")
    refuse_overwriting_inputs(outputs, inputs)
    doc = seed_spread(args.seeds)
    if args.seeds_against:
        from codegrep.replicates import recipe_comparison

        doc["against"] = recipe_comparison(args.seeds, args.seeds_against)
    if args.seeds_out is not None:
        write_atomic(args.seeds_out, json.dumps(doc, indent=1) + "\n")
    if args.seeds_plot is not None:
        seed_figure(doc, args.seeds_plot)
    if args.against_plot is not None:
        from codegrep.replicates import from_demos, recipe_figure

        lines = {"BM25": "GRPO vs bm25", "grep heuristic": "GRPO vs grep-heuristic",
                 "scripted expert": "warm_start vs scripted-expert"}
        note = ("one bench demos point per seed and recipe, held-out TRAIN tasks; SMALL: a few seeds"
                if from_demos(doc["pairs"]) else
                "one smoke run per seed and recipe; SMALL: a few seeds, one evaluation split")
        recipe_figure(doc["against"], args.against_plot, (args.seeds_label, args.against_label),
                      {name: doc["pairs"][key]["p_at_1_against"] for name, key in lines.items() if key in doc["pairs"]},
                      note)
    print(seed_spread_text(doc))
    if "against" in doc:
        from codegrep.replicates import recipe_comparison_text

        print(recipe_comparison_text(doc["against"]))


def _cmd_report(args: argparse.Namespace) -> int:
    if args.seeds is None:  # the options that only shape --seeds' output would be dropped without a word
        given = [f for f, v in (("--seeds-against", args.seeds_against), ("--seeds-out", args.seeds_out),
                                ("--seeds-plot", args.seeds_plot), ("--against-plot", args.against_plot))
                 if v is not None]
        if given:
            raise UserError(f"{given[0]} needs --seeds (the runs of the recipe it summarises)")
    if args.seeds is not None:
        _report_seeds(args)
        return 0
    if args.replicates is not None:
        from codegrep.config import project_root
        from codegrep.files import output_file
        from codegrep.replicates import replicate_pairs, replicates_text, run_dirs

        output_file(args.replicates, "--replicates")
        results = Path(args.results) if args.results is not None else project_root() / RESULTS_DIR
        dirs = run_dirs(results)
        if not dirs:
            raise UserError(f"--results {results}: no committed run with a per_instance.json")
        from codegrep.files import refuse_overwriting_inputs

        refuse_overwriting_inputs({"--replicates": args.replicates},  # a committed run's record, read here
                                  {str(d / "per_instance.json"): d / "per_instance.json" for d in dirs})
        doc = replicate_pairs(dirs)
        write_atomic(args.replicates, json.dumps(doc, indent=1) + "\n")
        print(replicates_text(doc))
        return 0
    if args.save_results:
        print(f"saved {save_results(args.artifacts)}")
    if args.readme is not None:
        changed = update_readme(args.readme, args.results, check=args.check)
        if args.check:
            print(f"{args.readme}: headline table {'differs from' if changed else 'matches'} the committed results")
            return 1 if changed else 0
        print(f"{args.readme}: headline table {'rewritten' if changed else 'unchanged'}")
        return 0
    if args.figures is not None and not Path(args.figures).is_dir():  # every figure would be reported missing
        raise UserError(f"--figures {args.figures}: not a directory (the run's figures/, beside its artifacts/)")
    md, page = build_report(args.artifacts, args.figures)
    print(f"wrote {md} and {page}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="build artifacts/report.md and report.html from a run's artifacts",
                       description="Build the reviewer's report of a run: a summary table (every paper claim, this "
                                   "run's value, n, kind, verdict), then per stage the claim table (paper values as "
                                   "labelled references), the stage's figures with captions and a link to the "
                                   "executed notebook. report.md links the figures; report.html embeds them. "
                                   "--save-results commits a run's headlines; --readme regenerates the README's "
                                   "headline table from the committed results.")
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"), help="artifacts directory of a run")
    p.add_argument("--figures", type=Path, default=None,
                   help="figures directory of the run (default: the artifacts directory's sibling 'figures')")
    p.add_argument("--save-results", action="store_true",
                   help=f"copy the run's run.json and headlines/ to {RESULTS_DIR}/<profile>/ (to commit)")
    p.add_argument("--readme", type=Path, default=None,
                   help="rewrite the headline table between the markers of this README from the committed results")
    p.add_argument("--results", type=Path, default=None,
                   help=f"with --readme: the committed run directory (default: the first of "
                        f"{RESULTS_DIR}/{{{','.join(COMMITTED_PROFILES)}}} present); with --replicates: the results "
                        f"folder (default {RESULTS_DIR})")
    p.add_argument("--check", action="store_true", help="with --readme: exit 1 if the table would change, write nothing")
    p.add_argument("--replicates", type=Path, default=None, metavar="OUT.json",
                   help="compare the committed runs instance by instance (each run's per_instance.json under --results, "
                        f"default {RESULTS_DIR}): GRPO vs warm start, warm start vs grep heuristic ... won/lost per run "
                        "and pooled with a sign test; writes OUT.json and prints the lines")
    p.add_argument("--seeds", type=Path, nargs="+", default=None, metavar="RUN_DIR",
                   help="one recipe at several training seeds (committed runs holding a per_instance.json, e.g. "
                        f"{RESULTS_DIR}/smoke and its seed replicates, or runs' artifacts directories, e.g. "
                        "runs/seed1/artifacts from `reproduce --out runs/seed1 --set train.sft_seed=1 --set "
                        "train.seed=1`; or, on held-out TRAIN tasks, `bench demos --result` files, one --tasks size "
                        "and one train.sft_seed each): per run P@1 and won/lost of the agent against "
                        "BM25 and the grep heuristic (of a warm start against the scripted expert), the mean and "
                        "range over seeds and the seed-averaged paired difference with an interval over instances; "
                        "prints the lines")
    p.add_argument("--seeds-against", type=Path, nargs="+", default=None, metavar="RUN_DIR",
                   help="with --seeds: another recipe's runs at several seeds (same instances); adds each recipe's "
                        "mean, range and seed disagreement and this minus the other, paired over instances")
    p.add_argument("--against-plot", type=Path, default=None, metavar="OUT.png",
                   help="with --seeds-against: also draw both recipes' P@1 per seed and their paired differences")
    p.add_argument("--seeds-label", default="this recipe", metavar="NAME",
                   help="with --against-plot: the name of --seeds' recipe on the figure")
    p.add_argument("--against-label", default="other recipe", metavar="NAME",
                   help="with --against-plot: the name of --seeds-against's recipe on the figure")
    p.add_argument("--seeds-out", type=Path, default=None, metavar="OUT.json", help="with --seeds: also write the JSON")
    p.add_argument("--seeds-plot", type=Path, default=None, metavar="OUT.png",
                   help="with --seeds: also draw each seed's warm start and GRPO P@1 against BM25 and the heuristic")
    p.set_defaults(func=_cmd_report)
