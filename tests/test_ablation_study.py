"""``codegrep ablation study``: the resumable paired-seed loop, on a tiny random-init policy (real trainer, 1 step)."""
from __future__ import annotations

import json
import math

import pytest

from codegrep.config import ConfigError
from codegrep.errors import UserError
from codegrep.rl.study import seed_row, summarize


def _rows(shares, kl):
    return [{"step": i + 1, "tied_group_share": s, "kl_exact": kl} for i, s in enumerate(shares)]


def test_a_seed_without_a_mixed_step_is_uninformative_and_not_paired():
    mixed = seed_row(0, {"advantage": _rows([0.5, 1.0], 0.01), "reward": _rows([0.5, 0.0], 0.03)})
    unmixed = seed_row(1, {"advantage": _rows([1.0, 0.0], 0.02), "reward": _rows([1.0, 0.0], 0.01)})
    assert mixed["informative"] and not unmixed["informative"]
    assert unmixed["mixed_steps"] == {"advantage": 0, "reward": 0}
    assert math.isclose(unmixed["kl_ratio"], 2.0)  # its ratio is shown ...
    s = summarize([mixed, unmixed, seed_row(2, {"advantage": _rows([0.25], 0.02), "reward": _rows([0.25], 0.05)})])
    assert s["n_paired_seeds"] == 2 and s["n_uninformative_seeds"] == 1 and s["n_seeds_run"] == 3  # ... not paired
    assert "1 uninformative" in s["verdict_sentence"]


def test_no_informative_seed_gives_no_verdict():
    s = summarize([seed_row(0, {"advantage": _rows([1.0], 0.01), "reward": _rows([1.0], 0.01)})])
    assert s["n_paired_seeds"] == 0 and s["kl_log_ratio_lo"] != s["kl_log_ratio_lo"]  # NaN
    assert s["verdict_sentence"].startswith("No verdict")


TINY_STUDY = """\
profile: ci
model: tiny
out: {out}
efficiency_layer: advantage
efficiency_lambda: 0.1
efficiency_weights: [0.5, 0.0, 0.5]
format_weight: 0.2
max_turns: 1
max_observation_tokens: 32
warm_start: false
kl_probe: true
ablation_layers: [reward, advantage]
ablation_max_steps: 1
ablation_prompts_per_step: 2
ablation_num_generations: 2
ablation_max_turns: 1
ablation_screen_tasks: 2
ablation_screen_samples: 2
ablation_pool_size: 2
ablation_probe_size: 2
ablation_probe_every: 1
max_steps: 1
num_generations: 2
per_device_train_batch_size: 2
max_completion_length: 8
temperature: 1.0
learning_rate: 1.0e-3
beta: 0.0
scale_rewards: group
loss_type: dapo
use_cpu: true
bf16: false
logging_steps: 1
save_strategy: "no"
report_to: none
seed: 0
disable_tqdm: true
"""


@pytest.mark.slow
def test_study_writes_seeds_as_it_goes_and_resume_gives_the_same_result(tmp_path, monkeypatch):
    from codegrep.rl.study import run_study

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_STUDY.format(out=tmp_path / "unused"))
    straight = run_study(config, 2, tmp_path / "straight", progress=lambda *_: None)
    assert straight["n_seeds_run"] == 2 and len(straight["seeds"]) == 2
    assert all(len(r["tied_group_share"]["reward"]) == 1 for r in straight["seeds"])

    class Cut(Exception):
        pass

    def cut_after_first_seed(message):
        if message.startswith("study: seed 0 done"):
            raise Cut

    with pytest.raises(Cut):  # a run cut short after seed 0 ...
        run_study(config, 2, tmp_path / "cut", progress=cut_after_first_seed)
    kept = tmp_path / "cut" / "seeds" / "seed-0000.json"
    assert kept.is_file() and not (tmp_path / "cut" / "seeds" / "seed-0001.json").exists()
    before = kept.read_text()
    resumed = run_study(config, 2, tmp_path / "cut", resume=True, progress=lambda *_: None)  # ... continues
    assert kept.read_text() == before  # reused, not retrained
    keys = ("seed", "kl_exact", "kl_ratio", "mixed_steps", "tied_group_share", "informative")
    assert [{k: r[k] for k in keys} for r in resumed["seeds"]] == [{k: r[k] for k in keys} for r in straight["seeds"]]
    assert json.loads((tmp_path / "cut" / "ablation_study.json").read_text())["n_seeds_run"] == 2
    # a random-init policy never formats a submission: every group ties, so no seed is informative
    assert resumed["n_paired_seeds"] == 0 and resumed["n_uninformative_seeds"] == 2
    # a damaged seed file is refused in one line naming it, and left as it was
    kept.write_text('{"seed": 0,')
    with pytest.raises(UserError, match=r"seed-0000\.json:1: invalid JSON"):
        run_study(config, 2, tmp_path / "cut", resume=True, progress=lambda *_: None)
    assert kept.read_text() == '{"seed": 0,'
    kept.write_text(before)
    # reusing seeds produced with other settings is refused, in one line
    config.write_text(TINY_STUDY.format(out=tmp_path / "unused").replace("learning_rate: 1.0e-3", "learning_rate: 2.0e-3"))
    with pytest.raises(ConfigError, match="other settings"):
        run_study(config, 2, tmp_path / "cut", resume=True, progress=lambda *_: None)


def test_committed_study_result_has_the_documented_keys_and_is_consistent():
    """docs/results/ablation_study.json carries exactly RESULT_KEYS, and its summary agrees with its seed rows."""
    import json
    import math
    from pathlib import Path

    from codegrep.rl.study import RESULT_KEYS

    path = Path(__file__).resolve().parent.parent / "docs" / "results" / "ablation_study.json"
    result = json.loads(path.read_text())
    assert set(result) == set(RESULT_KEYS)
    informative = [s for s in result["seeds"] if s["informative"]]
    assert result["n_paired_seeds"] == len(informative)
    assert result["n_seeds_run"] == len(result["seeds"])
    mean = sum(s["kl_log_ratio"] for s in informative) / len(informative)
    assert math.isclose(result["kl_log_ratio_mean"], mean, rel_tol=1e-6, abs_tol=1e-9)
    assert result["kl_log_ratio_lo"] <= mean <= result["kl_log_ratio_hi"]
