"""The reviewer's report: every empty cell has a reason, figures are embedded and load in a real browser."""
from __future__ import annotations

import base64
import math
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from codegrep.artifacts import Outputs
from codegrep.report import CLAIMS, SCALE, build_report, claim_rows

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _run(tmp_path: Path, profile: str = "ci") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from codegrep import plots

    out = Outputs(tmp_path / "artifacts", tmp_path / "figures")
    fig, ax = plots.subplots()
    ax.plot([0, 1, 2], [0.1, 0.5, 0.3], label="reward")
    ax.legend()
    plots.title(ax, "Reward per step", data="real", n=4)
    out.figure(fig, "03_training_curves")
    out.headline("03_training", {"p_at_1_agent": 0.25, "p_at_1_bm25": 0.5, "p_at_1_diff": -0.25,
                                 "p_at_1_diff_lo": -0.5, "p_at_1_diff_hi": 0.0, "n_eval_instances": 4})
    out.headline("04_ablation", {"kl_ratio": None, "verdict": "undefined"},
                 reasons={"kl_ratio": "the reward arm's probe KL is 0 at the last step (ci: 2 steps)"})
    (tmp_path / "artifacts" / "run.json").write_text(json.dumps(
        {"profile": profile, "seed": 0, "git_commit": "abc", "notebook_seconds": {"03_training": 12.0}}))
    build_report(tmp_path / "artifacts")
    return tmp_path / "artifacts"


def test_every_empty_cell_has_a_reason_and_values_carry_intervals(tmp_path):
    artifacts = _run(tmp_path)
    rows = claim_rows(artifacts)
    assert len(rows) == len(CLAIMS)
    for r in rows:
        assert (r["this run"] != "—") or r["why empty"], r
    diff = next(r for r in rows if r["claim"].startswith("agent - BM25"))
    assert diff["this run"] == "-0.250 [-0.500, +0.000]" and diff["n"] == "4"
    kl = next(r for r in rows if r["claim"].startswith("probe KL"))
    assert "reward arm's probe KL is 0" in kl["why empty"]
    missing = next(r for r in rows if r["notebook"] == "01_mining")
    assert "did not run" in missing["why empty"]
    md = (artifacts / "report.md").read_text()
    assert SCALE["ci"] in md
    assert "](notebooks/03_training.ipynb)" in md
    assert "(../figures/03_training_curves.png)" in md


def test_html_embeds_figures_and_renders_markdown(tmp_path):
    page = (_run(tmp_path) / "report.html").read_text()
    assert "**" not in page and "`" not in page
    srcs = re.findall(r"<img alt='[^']*' src='([^']+)'", page)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert base64.b64decode(srcs[0].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<a href='notebooks/03_training.ipynb'>" in page


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="no chromium on this machine (.ci/run installs it; in CI this test must run)")
def test_report_in_a_real_headless_browser(tmp_path):
    artifacts = _run(tmp_path)
    page = (artifacts / "report.html").read_text()
    probe = page.replace("</body>", "<script>window.addEventListener('load', () => {const imgs=[...document.images];"
                         "document.title='images=' + imgs.length + ' broken=' + imgs.filter(i => !i.complete || "
                         "i.naturalWidth === 0).length;});</script></body>")
    probe_path = artifacts / "probe.html"
    probe_path.write_text(probe)
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000"]
    dom = subprocess.run(flags + ["--dump-dom", probe_path.as_uri()], capture_output=True, text=True, timeout=120)
    title = re.search(r"<title>(.*?)</title>", dom.stdout)
    assert title and title.group(1) == "images=1 broken=0", dom.stdout[:500] + dom.stderr[-500:]
    shot = tmp_path / "shot.png"
    subprocess.run(flags + ["--window-size=1200,900", f"--screenshot={shot}", (artifacts / "report.html").as_uri()],
                   capture_output=True, text=True, timeout=120)
    from PIL import Image

    img = Image.open(shot).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 100, "the screenshot is blank"
    dark = sum(img.histogram()[:128])
    assert dark > 2000, "almost nothing drawn on the page"


# --- issue 30: the summary table, the per-section tables, the README's generated table -------------------------
from codegrep import claims  # noqa: E402
from codegrep.rl import paired  # noqa: E402
from codegrep.report import README_BEGIN, README_END, update_readme  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _headlines(tmp_path: Path, numbers: dict[str, dict], config: dict | None = None) -> Path:
    out = Outputs(tmp_path / "artifacts", tmp_path / "figures")
    for nb, nums in numbers.items():
        out.headline(nb, nums)
    (out.artifacts / "run.json").write_text(json.dumps({"profile": "ci", "seed": 0, "git_commit": "abcdef0123",
                                                        "finished_at": "2026-12-01T16:00:00Z",
                                                        "config": config or {}}))
    return out.artifacts


DOWN = {"n_instances": 5, "agent.n": 5, "oracle.n": 5, "bm25.n": 5,
        **{f"{r}.{k}{s}": v for r, base in (("oracle", -0.2), ("bm25", 0.05), ("agent", -0.1))
           for k in ("rounds_change", "tokens_resolved_change", "rounds_change_observational",
                     "tokens_resolved_change_observational", "resolve_change_observational")
           for s, v in (("", base), ("_lo", base - 0.05), ("_hi", base + 0.04))},
        "agent.precision": 0.01, "agent.precision_lo": 0.0, "agent.precision_hi": 0.03,
        "oracle.precision": 1.0, "bm25.precision": 0.3}


def test_summary_table_tops_the_report_with_one_verdict_per_claim(tmp_path):
    artifacts = _run(tmp_path)
    md = (artifacts / "report.md").read_text()
    assert md.index("## Summary") < md.index("## CATM mining")
    rows = claims.summary_rows(claims.Results.load(artifacts))
    for needle in ("CATM", "67K", "Docker-free environment", "verification", "precision on SWE-bench",
                   "better than BM25", "advantage layer", "precision threshold", "rounds", "tokens", "resolve rate"):
        assert any(needle in r.claim for r in rows), needle
    assert all(r.verdict in claims.VERDICTS and r.why for r in rows)
    agent = next(r for r in rows if "better than BM25" in r.claim)
    assert agent.verdict == "inconclusive" and agent.n == "4 instances" and "[-0.500, +0.000]" in agent.value
    kl = next(r for r in rows if r.claim.startswith("Efficiency"))
    assert kl.verdict == "not measured here"
    env = next(r for r in rows if r.claim.startswith("Docker-free environment"))  # notebook 02 did not run
    assert env.verdict == "not measured here" and env.value == "n/a"  # was 'n/ax; tool p50 n/a ms; n/a-way ...'
    for r in rows:
        assert f"**{r.verdict}**" in md


def test_downstream_verdict_refuses_a_weak_agent_and_reads_a_strong_one(tmp_path):
    weak = claims.Results.load(_headlines(tmp_path / "w", {"06_downstream_eval": DOWN}))
    rows = [r for r in claims.summary_rows(weak) if r.claim.startswith("Downstream")]
    assert len(rows) == 3 and all(r.verdict == "not measured here" for r in rows)
    assert "far below the paper's CodeGrep" in rows[0].why and "--profile paper" in rows[0].why
    assert "oracle -20.0%" in rows[0].value and "bm25 +5.0%" in rows[0].value  # the right rows side by side
    strong = claims.Results.load(_headlines(tmp_path / "s", {"06_downstream_eval": {
        **DOWN, "agent.precision": 0.7, "agent.precision_hi": 0.8}}))
    rows = [r for r in claims.summary_rows(strong) if r.claim.startswith("Downstream")]
    assert [r.verdict for r in rows] == ["supported", "supported", "contradicted"]


def test_agent_goal_row_says_when_a_met_bar_is_a_tie_within_the_interval(tmp_path):
    def row(d, lo, hi):
        nums = {"p_at_1_agent": 0.43, "p_at_1_grep_heuristic": 0.43 - d, "n_eval_instances": 86,
                "p_at_1_diff_heuristic": d, "p_at_1_diff_heuristic_lo": lo, "p_at_1_diff_heuristic_hi": hi}
        res = claims.Results.load(_headlines(tmp_path / f"r{d}{lo}", {"03_training": nums}))
        return next(r for r in claims.summary_rows(res) if "grep heuristic's P@1" in r.claim)
    tie, above, below = row(0.0, -0.105, 0.105), row(0.1, 0.02, 0.2), row(-0.02, -0.1, 0.06)
    assert tie.verdict == "supported" and "does not tell the two apart" in tie.why
    assert above.verdict == "supported" and "interval above 0" in above.why and "apart" not in above.why
    assert below.verdict == "inconclusive"


def test_ablation_row_calls_the_pipelines_two_seeds_small_whatever_the_verdict(tmp_path):
    """Two paired seeds can give a narrow t interval (the seeds agreed): a 'no difference' verdict from them is still
    the reduced design's, not the powered study's; the row said so only when the verdict was inconclusive."""
    for lo, hi, verdict in ((0.016, 0.118, "contradicted"), (-0.8, 0.9, "inconclusive")):
        nums = {"kl_ratio": 1.07, "kl_ratio_lo": math.exp(lo), "kl_ratio_hi": math.exp(hi), "n_paired_seeds": 2,
                "tied_group_share": 0.125, "verdict": paired.verdict(lo, hi, 2)}
        res = claims.Results.load(_headlines(tmp_path / f"a{lo}", {"04_ablation": nums}))
        row = next(r for r in claims.summary_rows(res) if r.claim.startswith("Efficiency signal"))
        assert row.verdict == verdict and "reduced design" in row.why and "SMALL" in row.why, row.why
        assert not row.why.lower().startswith(f"{verdict}:"), row.why  # the bold verdict is not read twice


def test_precision_table_labels_definitions_and_gives_the_real_reason_for_a_missing_retriever(tmp_path):
    config = {"retrievers": {"names": ["bm25", "oracle"]}, "agent": {"model": "smollm2"}}
    artifacts = _headlines(tmp_path, {"05_precision_threshold": {
        "n_instances": 5, "p_at_1_bm25": 0.6, "p_at_1_bm25_lo": 0.4, "p_at_1_bm25_hi": 0.8,
        "p_at_3_bm25": 0.25, "precision_bm25": 0.25}, "06_downstream_eval": DOWN}, config)
    build_report(artifacts)
    md = (artifacts / "report.md").read_text()
    assert "P@1 (= Acc@1)" in md and "does not state its definition" in md and "set precision (bracket)" in md
    dense = next(line for line in md.splitlines() if line.startswith("| dense |"))
    assert "configs/ci.yaml `retrievers.names`" in dense and "--set retrievers.names=[bm25,oracle,dense]" in dense
    agent = next(line for line in md.splitlines() if line.startswith("| trained agent (SmolLM2-135M"))
    assert "not the paper's 14B CodeGrep" in agent
    assert "| *CodeGrep (paper, reference)* |" in md
    assert md.index("| oracle |") < md.index("| bm25 |") < md.index("| *CodeGrep (paper")


def test_every_stage_figure_has_a_caption_saying_what_to_read():
    """Each figure a stage saves (its ``FIGURES``) gets a caption in the report, not its file name."""
    import importlib

    from codegrep.report_tables import CAPTIONS

    saved = set()
    for module in ("codegrep.mining.stage", "codegrep.env.stage", "codegrep.rl.training_stage",
                   "codegrep.rl.ablation_stage", "codegrep.downstream.threshold_stage",
                   "codegrep.downstream.eval_stage"):
        saved |= {spec[1] for spec in importlib.import_module(module).FIGURES.values()}
    assert len(saved) >= 18
    assert sorted(saved - set(CAPTIONS)) == []
    assert all(len(CAPTIONS[name]) > 40 for name in saved)


def test_report_draws_agent_vs_bm25_per_instance(tmp_path):
    artifacts = _run(tmp_path)
    d = artifacts / "train" / "eval" / "run1"
    d.mkdir(parents=True)
    rows = [{"instance_id": f"i{i}", "ranked": ["a.py", "b.py"], "gold": ["a.py" if i % 2 else "b.py"]} for i in range(6)]
    (d / "GRPO.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (d / "bm25.jsonl").write_text("\n".join(json.dumps({**r, "ranked": ["b.py"]}) for r in rows) + "\n")
    build_report(artifacts)
    md = (artifacts / "report.md").read_text()
    assert "(../figures/report_agent_vs_bm25.png)" in md and "points above the diagonal" in md and "off-diagonal" in md
    assert (tmp_path / "figures" / "report_agent_vs_bm25.png").stat().st_size > 1000


def test_readme_headline_table_is_what_the_committed_results_produce():
    """Fails when README.md's generated block differs from docs/results (fix: `codegrep report --readme README.md`)."""
    changed = update_readme(ROOT / "README.md", check=True)
    assert not changed, "README.md's headline table differs from docs/results: run `codegrep report --readme README.md`"


def test_readme_check_fails_when_a_committed_number_changes(tmp_path):
    run = _headlines(tmp_path, {"03_training": {"p_at_1_agent": 0.1, "p_at_1_bm25": 0.5, "p_at_1_diff": -0.4,
                                                "p_at_1_diff_lo": -0.6, "p_at_1_diff_hi": -0.2, "n_eval_instances": 9}})
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{README_BEGIN}\nold\n{README_END}\n\nrest\n")
    assert update_readme(readme, run) and not update_readme(readme, run, check=True)
    text = readme.read_text()
    assert text.endswith("\n\nrest\n") and "ci run, commit abcdef0, 2026-12-01" in text and "**contradicted**" in text
    head = json.loads((run / "headlines" / "03_training.json").read_text())
    head["numbers"]["p_at_1_diff_hi"] = 0.1
    (run / "headlines" / "03_training.json").write_text(json.dumps(head))
    assert update_readme(readme, run, check=True)


def test_save_results_commits_a_run_the_readme_generator_then_reads(tmp_path):
    from codegrep.report import committed_run, save_results

    artifacts = _run(tmp_path / "run")
    rows = artifacts / "train" / "eval" / "ci-run"
    rows.mkdir(parents=True)
    (rows / "GRPO.jsonl").write_text('{"instance_id": "b", "p@1": 1.0}\n{"instance_id": "a", "p@1": 0.0}\n\n')
    (artifacts / "eval").mkdir()
    (artifacts / "eval" / "bm25.jsonl").write_text('{"instance_id": "a", "p@1": 1.0}\n')
    dest = save_results(artifacts, root=tmp_path / "repo")
    assert dest == tmp_path / "repo" / "docs" / "results" / "ci"
    assert sorted(p.name for p in (dest / "headlines").iterdir()) == ["03_training.json", "04_ablation.json"]
    kept = json.loads((dest / "per_instance.json").read_text())  # for instance-by-instance comparisons later
    assert kept["p_at_1"] == {"ci-run/GRPO": {"a": 0.0, "b": 1.0}, "eval/bm25": {"a": 1.0}}
    assert kept["run_commit"] == "abc"
    assert not (dest / "habits.json").exists()  # no episodes saved: no habits file
    assert committed_run(tmp_path / "repo") == dest
    (dest.parent / "smoke" / "headlines").mkdir(parents=True)
    (dest.parent / "smoke" / "run.json").write_text("{}")
    assert committed_run(tmp_path / "repo") == dest.parent / "smoke"  # a committed smoke run wins over ci


@pytest.mark.parametrize("where", ["run.json", "headline", "evaluation row"])
def test_save_results_refuses_a_corrupt_input_and_keeps_the_committed_copy(tmp_path, where):
    """A corrupt file of the run is named (file and line) before the committed results it would replace are touched."""
    from codegrep.errors import UserError
    from codegrep.report import save_results

    artifacts = _run(tmp_path / "run")
    rows = artifacts / "train" / "eval" / "ci-run"
    rows.mkdir(parents=True)
    (rows / "GRPO.jsonl").write_text('{"instance_id": "a", "p@1": 1.0}\n')
    bad = {"run.json": artifacts / "run.json", "headline": artifacts / "headlines" / "03_training.json",
           "evaluation row": rows / "GRPO.jsonl"}[where]
    bad.write_text(bad.read_text() + '{"instance_id": "b", "p@1"\n')
    committed = tmp_path / "repo" / "docs" / "results" / "ci"
    (committed / "headlines").mkdir(parents=True)
    (committed / "run.json").write_text('{"profile": "ci", "git_commit": "old"}')
    with pytest.raises(UserError, match=re.escape(str(bad)) + r":\d+: invalid JSON"):
        save_results(artifacts, root=tmp_path / "repo")
    assert (committed / "run.json").read_text() == '{"profile": "ci", "git_commit": "old"}'


def test_save_results_that_fails_part_way_keeps_the_committed_copy_whole(tmp_path, monkeypatch):
    """The committed results were removed first and the new ones copied in after: a copy failing part-way (a full
    disk) left a run.json and some headlines of the new run, or nothing. Now the committed copy is untouched and no
    half-written directory is left beside it."""
    import shutil

    from codegrep.errors import UserError
    from codegrep.report import save_results

    artifacts = _run(tmp_path / "run")
    committed = tmp_path / "repo" / "docs" / "results" / "ci"
    (committed / "headlines").mkdir(parents=True)
    (committed / "run.json").write_text('{"profile": "ci", "git_commit": "old"}')
    (committed / "headlines" / "03_training.json").write_text('{"old": true}')
    real, calls = shutil.copy2, []

    def copy_then_fill_the_disk(src, dst, *a, **k):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(src, dst, *a, **k)

    monkeypatch.setattr(shutil, "copy2", copy_then_fill_the_disk)
    with pytest.raises(UserError, match="No space left on device.*left as they were"):
        save_results(artifacts, root=tmp_path / "repo")
    assert (committed / "run.json").read_text() == '{"profile": "ci", "git_commit": "old"}'
    assert sorted(p.name for p in (committed / "headlines").iterdir()) == ["03_training.json"]
    assert sorted(p.name for p in committed.parent.iterdir()) == ["ci"]
    monkeypatch.setattr(shutil, "copy2", real)
    assert save_results(artifacts, root=tmp_path / "repo") == committed
    assert sorted(p.name for p in (committed / "headlines").iterdir()) == ["03_training.json", "04_ablation.json"]
    assert sorted(p.name for p in committed.parent.iterdir()) == ["ci"]


def test_replicates_pool_runs_instance_by_instance_and_count_a_reused_run_once(tmp_path, capsys):
    """`report --replicates`: won/lost per run on the instances both policies have, pooled over distinct runs."""
    from codegrep import cli

    results = tmp_path / "results"
    rows = {"smoke": ({"a": 1.0, "b": 0.0, "c": 0.0}, {"a": 1.0, "b": 1.0, "c": 1.0}),
            "replicates/r1": ({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 1.0}),
            "replicates/r2": ({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 1.0})}  # r2 re-uses r1's rows
    for name, (grpo, warm) in rows.items():
        (results / name).mkdir(parents=True)
        (results / name / "per_instance.json").write_text(json.dumps(
            {"run_commit": name, "p_at_1": {"x/GRPO": grpo, "x/warm_start": warm, "eval/bm25": {"a": 1.0}}}))
    out = tmp_path / "pairs.json"
    assert cli.main(["report", "--replicates", str(out), "--results", str(results)]) == 0
    doc = json.loads(out.read_text())
    pooled = doc["pooled"]["GRPO vs warm_start"]
    assert (pooled["won"], pooled["lost"], pooled["n"], pooled["runs"]) == (0, 3, 5, 2)
    assert [r["run"] for r in doc["runs"]] == ["smoke", "r1", "r2"]
    assert doc["runs"][2]["GRPO vs warm_start"]["repeat_of_an_earlier_run"]
    assert doc["pooled"]["GRPO vs bm25"]["n"] == 2  # only the instances both have, r2 (a repeat) not again
    assert "sign test p = 0.250" in capsys.readouterr().out


def test_seed_replicates_summarise_one_recipe_over_seeds_on_common_instances(tmp_path, capsys):
    """`report --seeds`: each run's P@1 and won/lost on the instances every run has; over the runs the mean, range,
    how many reach the other side, and the seed-averaged paired difference with its interval over instances."""
    from codegrep import cli

    bm25 = {"a": 1.0, "b": 0.0, "c": 0.0, "d": 1.0}
    grpo = {"s0": {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0}, "s1": {"a": 0.0, "b": 0.0, "c": 0.0, "d": 1.0},
            "s2": {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0}}  # e: one run only, left out
    dirs = []
    for name, g in grpo.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "per_instance.json").write_text(json.dumps(
            {"run_commit": name, "p_at_1": {"x/GRPO": g, "eval/bm25": {**bm25, "e": 0.0} if "e" in g else bm25}}))
        dirs.append(str(tmp_path / name))
    out = tmp_path / "seeds.json"
    assert cli.main(["report", "--seeds", *dirs, "--seeds-out", str(out)]) == 0
    v = json.loads(out.read_text())["pairs"]["GRPO vs bm25"]
    assert (v["n_runs"], v["n"]) == (3, 4)
    assert [r["p_at_1"] for r in v["runs"]] == [0.75, 0.25, 1.0] and [r["won"] for r in v["runs"]] == [1, 0, 2]
    assert (v["p_at_1"], v["p_at_1_min"], v["p_at_1_max"], v["runs_at_or_above"]) == (0.666667, 0.25, 1.0, 2)
    assert v["diff"] == round(2 / 3 - 0.5, 6) and v["diff_lo"] <= v["diff"] <= v["diff_hi"]
    assert "GRPO vs warm_start" not in json.loads(out.read_text())["pairs"]  # no warm-start rows: no pair
    printed = capsys.readouterr().out
    assert "2 of 3 at or above" in printed and "each is read on the 4 all have (s2 has 5)" in printed
    (tmp_path / "s3").mkdir()  # a seed that left GRPO's rows as s1's: kept, and said to be no independent seed
    (tmp_path / "s3" / "per_instance.json").write_text(json.dumps(
        {"run_commit": "s3", "p_at_1": {"x/GRPO": grpo["s1"], "eval/bm25": bm25}}))
    assert cli.main(["report", "--seeds", *dirs, str(tmp_path / "s3")]) == 0
    assert "identical rows: s3 = s1; the same P@1 on every instance" in capsys.readouterr().out
    art = tmp_path / "seed4" / "artifacts"  # a run's artifacts straight from `reproduce --out`: read the same way
    (art / "train" / "eval" / "r").mkdir(parents=True)
    (art / "eval").mkdir()
    (art / "run.json").write_text(json.dumps({"git_commit": "abcdef0123", "profile": "smoke"}))
    (art / "train" / "eval" / "r" / "GRPO.jsonl").write_text("".join(
        json.dumps({"instance_id": i, "p@1": p}) + "\n" for i, p in grpo["s0"].items()))
    (art / "eval" / "bm25.jsonl").write_text("".join(json.dumps({"instance_id": i, "p@1": p}) + "\n"
                                                     for i, p in bm25.items()))
    assert cli.main(["report", "--seeds", dirs[1], str(art), "--seeds-out", str(out)]) == 0
    runs = json.loads(out.read_text())["pairs"]["GRPO vs bm25"]["runs"]
    assert [(r["run"], r["commit"], r["p_at_1"]) for r in runs] == [("s1", "s1", 0.25), ("seed4", "abcdef0", 0.75)]
    figure = tmp_path / "seeds.png"
    assert cli.main(["report", "--seeds", *dirs, "--seeds-plot", str(figure)]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib

    from codegrep.replicates import seed_figure, seed_spread

    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text kept as text: the legend can be read back
        doc = seed_spread(dirs)
        assert "no training, the same in every run" in seed_figure(doc, tmp_path / "same.svg").read_text()
        doc["pairs"]["GRPO vs bm25"]["runs"][0]["p_at_1_against"] = 0.1  # a baseline that moved between runs
        assert "the mean over runs (they differ" in seed_figure(doc, tmp_path / "moved.svg").read_text()


def test_replicate_lines_round_p_at_1_once(tmp_path, capsys):
    """47 of 86 is 0.54651: the line says 0.547 (rounding the JSON's value to 4 digits first printed 0.546)."""
    from codegrep import cli

    results = tmp_path / "results"
    (results / "smoke").mkdir(parents=True)
    grpo = {f"i{k}": float(k < 47) for k in range(86)}
    (results / "smoke" / "per_instance.json").write_text(json.dumps(
        {"run_commit": "smoke", "p_at_1": {"x/GRPO": grpo, "x/warm_start": {f"i{k}": 0.0 for k in range(86)}}}))
    assert cli.main(["report", "--replicates", str(tmp_path / "pairs.json"), "--results", str(results)]) == 0
    assert "P@1 0.547 vs 0.000" in capsys.readouterr().out


def test_save_results_keeps_each_policys_call_habits_and_report_seeds_prints_them(tmp_path, capsys):
    """The episodes stay in the artifacts (not committed): their call habits are counted into habits.json, and
    `report --seeds` reads them back beside P@1 (a run saved before habits were kept is said to lack them)."""
    from codegrep import cli
    from codegrep.report import save_results

    dirs = []
    for seed, globs in (("s0", 0), ("s1", 3)):
        artifacts = _run(tmp_path / seed)
        episodes = artifacts / "train" / "eval" / f"smoke-{seed}" / "GRPO"
        episodes.mkdir(parents=True)
        (episodes.parent / "GRPO.jsonl").write_text('{"instance_id": "a", "p@1": 1.0}\n{"instance_id": "b", "p@1": 0.0}\n')
        (artifacts / "eval").mkdir()
        (artifacts / "eval" / "bm25.jsonl").write_text('{"instance_id": "a", "p@1": 1.0}\n{"instance_id": "b", "p@1": 1.0}\n')
        for i in "ab":
            calls = [{"name": "grep"}] + [{"name": "glob"}] * globs
            (episodes / f"{i}.json").write_text(json.dumps({"submitted": True, "turns": [
                {"calls": calls, "errors": [], "completion_tokens": 100}]}))
        dest = save_results(artifacts, root=tmp_path / f"repo-{seed}")
        kept = json.loads((dest / "habits.json").read_text())["habits"]
        assert kept[f"smoke-{seed}/GRPO"]["glob_calls"] == 2 * globs and kept[f"smoke-{seed}/GRPO"]["episodes"] == 2
        dirs.append(str(dest))
    old = tmp_path / "old"  # a run saved before habits.json existed
    old.mkdir()
    (old / "per_instance.json").write_text(json.dumps({"run_commit": "old", "p_at_1": {
        "x/GRPO": {"a": 1.0, "b": 1.0}, "eval/bm25": {"a": 1.0, "b": 1.0}}}))
    out = tmp_path / "seeds.json"
    assert cli.main(["report", "--seeds", *dirs, str(old), "--seeds-out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "habits: grep 2, glob 6, read 0" in printed and "old" in printed and "habits not kept" in printed
    assert json.loads(out.read_text())["habits"]["old"] == {}


def test_seeds_against_compares_two_recipes_paired_over_instances(tmp_path, capsys):
    """`report --seeds B... --seeds-against A...`: each recipe's mean and seed disagreement, and B - A paired over the
    instances all runs share; a recipe whose seeds agree everywhere has disagreement 0."""
    from codegrep import cli

    runs = {"a0": [1, 0, 1, 0, 1], "a1": [0, 1, 1, 0, 0], "b0": [1, 1, 1, 0, 1], "b1": [1, 1, 1, 0, 1]}
    for name, g in runs.items():
        (tmp_path / name).mkdir()
        table = dict(zip("abcde", map(float, g)))
        (tmp_path / name / "per_instance.json").write_text(json.dumps({"run_commit": name, "p_at_1": {
            "x/GRPO": table, "x/warm_start": table, "eval/bm25": dict.fromkeys("abcde", 1.0)}}))
    out = tmp_path / "seeds.json"
    assert cli.main(["report", "--seeds", str(tmp_path / "b0"), str(tmp_path / "b1"), "--seeds-against",
                     str(tmp_path / "a0"), str(tmp_path / "a1"), "--seeds-out", str(out)]) == 0
    v = json.loads(out.read_text())["against"]["policies"]["GRPO"]
    assert (v["this"]["p_at_1"], v["other"]["p_at_1"], v["n"]) == (0.8, 0.5, 5)
    assert (v["this"]["disagreement"], v["other"]["disagreement"]) == (0.0, 0.6)  # a0/a1 differ on a, b, e
    assert v["diff"] == 0.3 and v["diff_lo"] <= 0.3 <= v["diff_hi"] and v["disagreement_diff"] == -0.6
    printed = capsys.readouterr().out
    assert "seed pairs disagree on 60.0% of the 5 instances" in printed and "this - other: seed-averaged P@1 +0.300" in printed
    import matplotlib

    figure = tmp_path / "recipes.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text kept as text: the labels can be read back
        assert cli.main(["report", "--seeds", str(tmp_path / "b0"), str(tmp_path / "b1"), "--seeds-against",
                         str(tmp_path / "a0"), str(tmp_path / "a1"), "--against-plot", str(figure),
                         "--seeds-label", "recipe B", "--against-label", "recipe A"]) == 0
    text = figure.read_text()
    assert "recipe B: one dot per seed" in text and "recipe B minus recipe A" in text and "BM25 (1.000)" in text


def test_call_habits_count_the_protocols_own_error_messages():
    """The habits are counted from the turn function's messages, not from a copy of their wording: an invalid block
    parsed by the real parser and the real repeat message are both counted."""
    from codegrep.agent.protocol import REPEAT_ERROR, parse_tool_calls
    from codegrep.replicates import call_habits

    errors = parse_tool_calls('<tool_call>{"name": "grep", "arguments": {pattern</tool_call>').errors
    assert errors
    h = call_habits([{"submitted": True, "turns": [{"calls": [], "errors": errors}]},
                     {"submitted": True, "turns": [{"calls": [], "errors": [REPEAT_ERROR]}]}])
    assert (h["episodes_with_invalid_json"], h["episodes_with_a_turn_ended_by_a_repeated_call"]) == (1, 1)


def _demos_result(path, per_task, expert, seed, ids="abcde"):
    """A `bench demos --result` file of one point (the keys bench demos writes that report --seeds reads)."""
    path.write_text(json.dumps({"what": "warm-start P@1 on held-out REAL train tasks", "seed": 0, "dev_ids": list(ids),
                                "sft": {"seed": seed}, "expert_p_at_1": sum(expert) / len(expert),
                                "expert_per_task": expert, "git_commit": "abc1234def",
                                "points": [{"n_tasks": 40, "p_at_1": sum(per_task) / len(per_task),
                                            "per_task": per_task}]}))
    return path


def test_seeds_reads_bench_demos_results_as_a_seed_study_on_train_tasks(tmp_path, capsys):
    """`report --seeds` over `bench demos --result` files (one point and one SFT seed each): the warm start against
    the scripted expert per seed and over seeds, and two recipes compared paired over the dev tasks, as for runs."""
    from codegrep import cli

    expert = [1.0, 1.0, 0.0, 1.0, 0.0]
    c = [_demos_result(tmp_path / f"C_s{s}.json", g, expert, s) for s, g in
         enumerate(([1.0, 1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0, 1.0]))]
    d = [_demos_result(tmp_path / f"D_s{s}.json", g, expert, s) for s, g in
         enumerate(([0.0, 1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0, 0.0]))]
    out, fig = tmp_path / "seeds.json", tmp_path / "recipes.svg"
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none"}):
        assert cli.main(["report", "--seeds", *map(str, c), "--seeds-against", *map(str, d), "--seeds-out", str(out),
                         "--seeds-plot", str(tmp_path / "seeds.png"), "--against-plot", str(fig)]) == 0
    doc = json.loads(out.read_text())
    v = doc["pairs"]["warm_start vs scripted-expert"]
    assert (v["n_runs"], v["n"], v["p_at_1"], v["p_at_1_against"]) == (2, 5, 0.7, 0.6)
    assert [(r["run"], r["won"], r["lost"]) for r in v["runs"]] == [("C_s0", 0, 0), ("C_s1", 1, 0)]
    w = doc["against"]["policies"]["warm_start"]
    assert (w["this"]["p_at_1"], w["other"]["p_at_1"], w["this"]["disagreement"], w["other"]["disagreement"]) == \
        (0.7, 0.5, 0.2, 0.6)  # C's seeds differ on e; D's on a, b, c
    assert w["diff"] == 0.2 and doc["habits"] == {}
    printed = capsys.readouterr().out
    assert "C_s1" in printed and "warm_start vs scripted-expert" in printed and "habits not kept" not in printed
    text = fig.read_text()
    assert "scripted expert (0.600)" in text and "held-out TRAIN tasks" in text and (tmp_path / "seeds.png").is_file()
