"""The reviewer's report: every empty cell has a reason, figures are embedded and load in a real browser."""
from __future__ import annotations

import base64
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
    assert "![03_training_curves](../figures/03_training_curves.png)" in md


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
