"""Real GRPO runs through the real entry point (ci profile, SmolLM2-135M, CPU, tiny budget)."""
from __future__ import annotations

import json

import pytest
import torch

from codegrep.cli import main
from codegrep.rl.trainer import read_metrics

pytestmark = pytest.mark.slow

# Tiny but real: no warm start (SFT has its own test below), 16 new tokens per turn, 2 tasks.
TINY = ["--set", "warm_start=false", "--set", "max_completion_length=16", "--set", "max_observation_tokens=32",
        "--set", "train_tasks=2"]
REQUIRED = ("reward_mean", "reward_std", "f_beta", "precision", "recall", "rounds", "tool_calls", "tokens",
            "efficiency_cost", "kl", "entropy", "clip_ratio", "grad_norm", "seconds")


@pytest.fixture(scope="module", autouse=True)
def offline(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    yield
    mp.undo()


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    assert main(["train", "--config", "ci", "--out", str(out), "--name", "straight", *TINY]) == 0
    return out / "straight"


def _weights(run_dir):
    from safetensors.torch import load_file

    return load_file(str(run_dir / "final" / "model.safetensors"))


def test_cli_train_writes_metrics_config_and_exports(two_step_run):
    rows = read_metrics(two_step_run)
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        missing = [k for k in REQUIRED if k not in row]
        assert not missing, missing
        assert row["advantage_gap"] < 1e-5  # TRL's advantages + our efficiency term == the documented maths
        assert row["rounds"] >= 1 and row["kl"] >= 0
        assert 0 < row["prefix_reuse_share"] < 1  # rollouts reuse key/value states (shared system prompt, turns)
    assert rows[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before any update
    config = json.loads((two_step_run / "config.json").read_text())
    assert config["codegrep"]["efficiency_layer"] == "advantage" and config["grpo"]["beta"] == 0.0
    # episode limits: the profile's agent: section, the --set override reported as training-only (issue 16)
    assert config["episode"]["training_overrides"]["max_observation_tokens"] == 32  # --set, reported
    assert config["episode"]["used"]["max_calls_per_turn"] == config["episode"]["profile"]["max_calls_per_turn"]
    manifest = json.loads((two_step_run / "manifest.json").read_text())
    assert manifest["overlap"] == [] and manifest["grpo_prompts"] and manifest["n_evaluation_ids"] > 0
    assert json.loads((two_step_run / "versions.json").read_text())["trl"]
    assert main(["export", str(two_step_run)]) == 0
    card = (two_step_run / "export" / "README.md").read_text()
    assert "advantage" in card and (two_step_run / "export" / "config.json").is_file()


def test_bench_policies_checks_the_runs_two_policies_on_train_tasks_it_never_used(two_step_run, tmp_path):
    """``bench policies``: the run's initial policy and its GRPO policy on a real train task that was neither a
    demonstration nor a GRPO prompt (nor an evaluation instance), paired, with the policy the check keeps."""
    from codegrep.config import load_profile
    from codegrep.data.tasks import evaluation_instance_ids

    result = tmp_path / "check.json"
    assert main(["bench", "policies", "--run", str(two_step_run), "--profile", "ci", "--limit", "1",
                 "--out", str(tmp_path / "rows"), "--result", str(result)]) == 0
    doc = json.loads(result.read_text())
    manifest = json.loads((two_step_run / "manifest.json").read_text())
    used = set(manifest["grpo_prompts"]) | {d["instance_id"] for d in manifest["sft_demonstrations"]}
    assert doc["n_tasks"] == len(doc["task_ids"]) == 1 and doc["n_used_tasks"] == len(used)
    assert not set(doc["task_ids"]) & (used | evaluation_instance_ids(load_profile("ci")))
    assert all(t.startswith("sympy__sympy-") for t in doc["task_ids"])  # real issues only
    for arm in ("warm_start", "grpo"):
        assert len(doc[arm]["per_task"]) == 1 and doc[arm]["p_at_1"] in (0.0, 1.0)
    assert doc["grpo_won"] + doc["grpo_lost"] <= 1 and doc["keep"] in ("GRPO", "warm start")


def test_resume_continues_bit_for_bit(two_step_run, tmp_path):
    base = ["train", "--config", "ci", "--out", str(tmp_path), "--name", "resumed", *TINY]
    assert main([*base, "--max-steps", "1"]) == 0
    assert main([*base, "--max-steps", "2", "--resume"]) == 0
    def clock(k: str) -> bool:  # wall-clock measurements differ between any two runs; everything else must not
        return k in ("seconds", "trl") or k.startswith("time_") or k.endswith("_per_s")

    a = [{k: v for k, v in r.items() if not clock(k)} for r in read_metrics(two_step_run)]
    b = [{k: v for k, v in r.items() if not clock(k)} for r in read_metrics(tmp_path / "resumed")]
    assert a == b
    wa, wb = _weights(two_step_run), _weights(tmp_path / "resumed")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_kl_probe_is_nonzero_after_an_update_with_beta_zero(tmp_path):
    from codegrep.config import load_profile
    from codegrep.rl.training_run import build_trainer, train_arguments

    overrides = {"warm_start": False, "max_completion_length": 8, "max_observation_tokens": 16, "train_tasks": 1,
                 "out": str(tmp_path)}
    cfg = load_profile("ci")
    cg, grpo = train_arguments(cfg, overrides)
    assert grpo.beta == 0.0
    (tmp_path / "probe").mkdir()
    trainer = build_trainer(cfg, cg, grpo, tmp_path / "probe")
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which this test drives by hand
    rows = [trainer.train_dataset[0]] * grpo.num_generations
    batch = trainer._generate_and_score_completions(rows)
    assert "probe_ref_logps" in batch
    batch["advantages"] = torch.tensor([1.0, -1.0])  # force a non-zero policy gradient
    trainer.compute_loss(trainer.model, batch).backward()
    assert trainer._metrics["train"]["kl_probe"][-1] == pytest.approx(0.0, abs=1e-6)
    torch.optim.SGD(trainer.model.parameters(), lr=1e-2).step()
    with torch.no_grad():
        trainer.compute_loss(trainer.model, batch)
    assert trainer._metrics["train"]["kl_probe"][-1] > 1e-6


def test_grpo_rollouts_decode_under_the_agents_constraints(tmp_path, monkeypatch):
    """GRPO's rollout turns get the stops and constraints evaluation decodes with (agent.copy_greps here, and ci's
    agent.argument_keys): the rollout's decoder receives the turn stop, the copy constraint and the argument-keys
    guard for its prompt width, and the copy constraint, on the rollout's own prompt, lets a grep pattern continue
    only into one of the issue's terms."""
    import codegrep.agent.prefix_cache as pc
    from codegrep.agent.constraints import ArgumentKeys, CopiedGrepPatterns, issue_patterns
    from codegrep.agent.stopping import TurnStop
    from codegrep.config import load_profile
    from codegrep.rl.training_run import build_trainer, train_arguments

    cfg = load_profile("ci")
    cfg["agent"] = {**cfg["agent"], "copy_greps": True, "min_greps": 2}
    cg, grpo = train_arguments(cfg, {"warm_start": False, "max_completion_length": 6, "train_tasks": 1,
                                     "out": str(tmp_path)})
    (tmp_path / "c").mkdir()
    trainer = build_trainer(cfg, cg, grpo, tmp_path / "c")
    seen = []
    real = pc.generate_with_prefix_cache
    monkeypatch.setattr(pc, "generate_with_prefix_cache", lambda *a, **k: seen.append(k) or real(*a, **k))
    tok = trainer.processing_class
    prompt = tok.apply_chat_template(trainer.train_dataset[0]["prompt"], tokenize=True, add_generation_prompt=True,
                                     return_dict=False)
    completions, _ = trainer._generate_single_turn([prompt, prompt[3:]], None, {}, num_generations=1)
    assert len(completions) == 2 and len(seen) == 1
    (stop,), processors = seen[0]["stopping_criteria"], seen[0]["logits_processor"]
    if cg.constrained_loss:  # the controls run inside the recorder of what they restricted (codegrep.rl.constrained)
        (recorder,) = processors
        processors = recorder.processors
    (proc, keys) = processors
    assert isinstance(stop, TurnStop) and stop.max_calls == cfg["agent"]["max_calls_per_turn"]
    assert cfg["agent"]["argument_keys"] and isinstance(keys, ArgumentKeys) and keys.width == len(prompt)  # ci: on
    assert isinstance(proc, CopiedGrepPatterns) and proc.width == len(prompt) and proc.min_greps == 2
    terms = issue_patterns(tok.decode(prompt))
    assert terms
    opening = tok('<tool_call>{"name": "grep", "arguments": {"pattern": "', add_special_tokens=False)["input_ids"]
    scores = proc(torch.tensor([prompt + opening]), torch.zeros(1, len(tok)))[0]
    open_ids = torch.nonzero(scores == 0)[:, 0].tolist()
    assert 0 < len(open_ids) < 1000  # of a 49K vocabulary: only starts of the issue's terms
    assert all(any(p.startswith(tok.decode([i])) for p in terms) for i in open_ids)


def test_warm_start_trains_assistant_tokens_only(tmp_path):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import get_training_chat_template

    from codegrep.agent.models import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("smollm2"))
    tok.chat_template = get_training_chat_template(tok)
    msgs = [{"role": "user", "content": "issue"}, {"role": "assistant", "content": "<tool_call>A</tool_call>"},
            {"role": "user", "content": "OBSERVATION"}, {"role": "assistant", "content": "<tool_call>B</tool_call>"}]
    enc = tok.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    trained = tok.decode([i for i, m in zip(enc["input_ids"], enc["assistant_masks"]) if m])
    assert "A" in trained and "B" in trained and "OBSERVATION" not in trained and "issue" not in trained


def test_grpo_loss_reads_the_masked_log_probs_where_the_rollout_was_restricted(tmp_path):
    """constrained_loss, through the real trainer and rollout: each restricted position is recorded on a model token
    with the token the sampler drew from the allowed set, the restrictions travel with the batch's rows, and the loss
    reads at those positions the log-softmax of the model's logits with the banned tokens masked out."""
    from transformers import LogitsProcessor, LogitsProcessorList

    from codegrep.config import load_profile
    from codegrep.rl.training_run import build_trainer, train_arguments

    class Alternate(LogitsProcessor):  # new token t: even t only ids 100-399 (allow-list), odd t not ids 0-999 (ban)
        def __init__(self, width):
            self.width = width

        def __call__(self, input_ids, scores):
            t = input_ids.shape[1] - self.width
            if t % 2 == 0:
                keep = scores[:, 100:400].clone()
                scores[:] = float("-inf")
                scores[:, 100:400] = keep
            else:
                scores[:, :1000] = float("-inf")
            return scores

    class Controls:
        def generate_kwargs(self, tokenizer, width):
            return {"logits_processor": LogitsProcessorList([Alternate(width)])}

    cfg = load_profile("ci")
    cg, grpo = train_arguments(cfg, {"warm_start": False, "max_completion_length": 6, "max_observation_tokens": 16,
                                     "train_tasks": 1, "out": str(tmp_path), "constrained_loss": True,
                                     "cpu_precision": "fp32"})
    (tmp_path / "c").mkdir()
    trainer = build_trainer(cfg, cg, grpo, tmp_path / "c")
    trainer.turn_controls = Controls()
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    batch = trainer._generate_and_score_completions([trainer.train_dataset[0]] * grpo.num_generations)
    restrictions = batch["restrictions"]
    model_tokens = batch["completion_mask"] * batch["tool_mask"]
    for r, row in enumerate(restrictions):
        n_model = int(model_tokens[r].sum())
        assert len(row) == n_model  # every generated token was restricted, and only those are recorded
        for k, allowed, ids in row:
            token = int(batch["completion_ids"][r, k])
            assert model_tokens[r, k] == 1 and allowed == (token in range(100, 400)) and (token in ids) == allowed
    trainer.compute_loss(trainer.model, batch).backward()  # gradient checkpointing (ci) recomputes outside the hook
    assert 0 < trainer._metrics["train"]["constraints/allowed_mass"][-1] < 1
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    with torch.no_grad():
        logits = trainer.model(input_ids=ids, attention_mask=attention).logits / trainer.temperature
    prompt = batch["prompt_ids"].size(1)
    for r, row in enumerate(restrictions):
        for k, allowed, listed in row:
            z = logits[r, prompt + k - 1].float()
            keep = torch.zeros_like(z, dtype=torch.bool)
            keep[listed] = True
            keep = keep if allowed else ~keep
            expected = torch.log_softmax(z.masked_fill(~keep, float("-inf")), -1)[int(ids[r, prompt + k])]
            assert trainer._loss_policy_logps[r, k].item() == pytest.approx(expected.item(), abs=2e-4)
