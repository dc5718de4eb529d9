"""``codegrep export RUN``: the trained policy as a plain Hugging Face model directory with a model card."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from codegrep.rl.trainer import read_metrics
from codegrep.errors import UserError
from codegrep.files import output_dir, read_json_object, write_atomic

CARD = """---
library_name: transformers
base_model: {base}
tags: [codegrep, grpo, trl, code-retrieval, tool-calling]
---
# CodeGrep retrieval policy: `{name}`

A file-localisation agent trained with GRPO (TRL {trl}) to issue rounds of parallel `grep`/`glob`/`read`
tool calls over a repository and `submit` a ranked list of files (protocol: `codegrep.agent.protocol`).

## Training
- Base model: `{base}`; initial policy: `{initial}`.
- Warm start: {warm}.
- Data: {n_tasks} train-split tasks of profile `{profile}` (its `tasks.splits.train`: e.g. the offline docstring
  task set and the SWE-bench Lite sympy instances not in Verified).
- Episode limits (the profile's `agent:` section{overrides}): {episode}.
- Efficiency signal: layer `{layer}`, λ = {lam}, cost mix (rounds, calls, tokens) = {weights}.
- Reward: F-beta (β = {fbeta}) of submitted vs target files + {fw} × format term.
- GRPO: {steps} steps, group size {G}, β_KL = {beta}, lr = {lr}.

## Metrics (last logged step{note})
{metrics}

Full per-step metrics: `metrics.jsonl`; full configuration: `training_config.json`.
"""


def _card_metrics(rows: list[dict[str, Any]]) -> tuple[str, str]:
    if not rows:
        return "(no steps logged)", ""
    last = rows[-1]
    keys = ("reward_mean", "f_beta", "precision", "recall", "format", "rounds", "tool_calls", "tokens", "kl")
    lines = [f"| {k} | {last[k]:.4g} |" for k in keys if isinstance(last.get(k), (int, float))]
    return "| metric | value |\n|---|---|\n" + "\n".join(lines), f" = {last['step']}"


def export_run(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Copy ``RUN/final`` to ``out_dir`` (default ``RUN/export``) and write README.md (model card) beside it."""
    run_dir = Path(run_dir)
    final = run_dir / "final"
    if not (final / "config.json").is_file():
        raise FileNotFoundError(f"{final} has no trained model: finish `codegrep train` for this run first "
                                "(or set save_final_model: true)")
    # everything read (and refused when missing or damaged) before an earlier export is replaced
    config, versions = read_json_object(run_dir / "config.json"), read_json_object(run_dir / "versions.json")
    if not (run_dir / "metrics.jsonl").is_file():
        raise UserError(f"{run_dir / 'metrics.jsonl'}: not found (a run of `codegrep train` writes it)")
    rows = read_metrics(run_dir)
    try:
        card = _card(run_dir, config, versions, rows)
    except (KeyError, TypeError) as exc:
        raise UserError(f"{run_dir / 'config.json'}: not a run record of `codegrep train` (missing or wrong {exc})") \
            from None
    out = output_dir(Path(out_dir) if out_dir else run_dir / "export", "--out")
    if out.exists():  # replaced whole below: only an earlier export, never the run or a directory of the user's
        if run_dir.resolve() == out.resolve() or out.resolve() in run_dir.resolve().parents:
            raise UserError(f"--out {out}: holds the run {run_dir}; give a new directory")
        if any(out.iterdir()) and not ((out / "README.md").is_file() and (out / "config.json").is_file()):
            raise UserError(f"--out {out}: exists and is not an earlier export (no README.md and config.json); "
                            "give a new or empty directory")
        shutil.rmtree(out)
    shutil.copytree(final, out, ignore=shutil.ignore_patterns("training_args.bin"))
    write_atomic(out / "README.md", card)
    write_atomic(out / "training_config.json", json.dumps(config, indent=1))
    shutil.copy(run_dir / "metrics.jsonl", out / "metrics.jsonl")
    if (run_dir / "manifest.json").is_file():
        shutil.copy(run_dir / "manifest.json", out / "manifest.json")
    return out


def _card(run_dir: Path, config: dict[str, Any], versions: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The model card (README.md) of an exported run."""
    cg, grpo = config["codegrep"], config["grpo"]
    table, note = _card_metrics(rows)
    warm = ("supervised fine-tuning (TRL SFTTrainer, assistant tokens only) on " + ", ".join(cg["sft_sources"]) +
            " demonstrations (synthetic = oracle-guided scripted episodes, not model outputs; recorded = real "
            "mini-swe-agent runs converted to the tool protocol; evaluation instances excluded, see manifest.json)") \
        if cg["warm_start"] else "none"
    return CARD.format(
        base=cg["model"], name=run_dir.name, trl=versions.get("trl"), initial=config["initial_policy"], warm=warm,
        n_tasks=config["n_train_tasks"], profile=cg["profile"], layer=cg["efficiency_layer"],
        lam=cg["efficiency_lambda"], weights=cg["efficiency_weights"], fbeta=cg["fbeta"], fw=cg["format_weight"],
        steps=len(rows), G=grpo["num_generations"], beta=grpo["beta"], lr=grpo["learning_rate"], metrics=table,
        note=note, episode=(config.get("episode") or {}).get("used", "not recorded"),
        overrides=(", training-only overrides: " + json.dumps(config["episode"]["training_overrides"]))
        if (config.get("episode") or {}).get("training_overrides") else "")
