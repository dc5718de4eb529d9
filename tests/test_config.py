"""Profiles and overrides: one way to build a config from a mapping, and a typo anywhere names itself."""
from __future__ import annotations

import dataclasses

import pytest
import yaml

from codegrep.config import ConfigError, from_mapping, load_profile, notebook_profile, project_root, where

PROFILES = sorted(p.stem for p in (project_root() / "configs").glob("*.yaml"))  # every shipped profile


@pytest.mark.parametrize("profile", PROFILES)
def test_shipped_profile_sections_build_strictly(profile):
    from codegrep.agent.protocol import AgentConfig, policy_config
    from codegrep.env.tools import ToolConfig

    cfg = load_profile(profile)
    ToolConfig.from_dict(cfg["env"], where(cfg, "env"))
    AgentConfig.from_dict(cfg["agent"], where(cfg, "agent"))
    policy_config(cfg["agent"], where(cfg, "agent"))


@pytest.mark.parametrize("profile", PROFILES)
def test_evaluated_model_is_the_trained_model(profile):
    """The profile's agent evaluates the model its training YAML trains (paper: one 14B model, not two)."""
    cfg = load_profile(profile)
    train = yaml.safe_load((project_root() / cfg["train"]["config"]).read_text())
    assert cfg["agent"]["model"] == train["model"], (profile, cfg["agent"]["model"], train["model"])


@pytest.mark.parametrize("dotted, close", [
    ("train.max_stepz", "max_steps"),               # a TRL GRPOConfig field
    ("agent.max_turnz", "max_turns"),               # AgentConfig
    ("agent.temperatur", "temperature"),            # PolicyConfig
    ("env.max_worktree", "max_worktrees"),          # the worktree pool's key in the YAML
    ("retrievers.bm25.path_weigth", "path_weight"),  # BM25Config
    ("agnet.max_turns", "agent"),                   # a section name
])
def test_set_typo_is_an_error_naming_the_key_and_its_close_match(dotted, close):
    with pytest.raises(ConfigError) as info:
        load_profile("ci", [f"{dotted}=3"])
    msg, leaf = str(info.value), dotted.split(".")[-1] if close != "agent" else "agnet"
    assert msg.startswith(f"--set {dotted}: unknown key {leaf!r}")
    assert f"did you mean {close!r}" in msg


@pytest.mark.parametrize("dotted", ["train.max_steps", "agent.max_turns", "agent.temperature", "env.timeout_s",
                                    "retrievers.bm25.k1", "tasks.splits.train.limit", "seed",
                                    "notebooks.01_mining.workers"])
def test_valid_overrides_apply(dotted):
    cfg = load_profile("ci", [f"{dotted}=3"])
    node = cfg
    for key in dotted.split("."):
        node = node[key]
    assert node == 3


def test_unknown_section_in_a_profile_file_names_file_and_key(tmp_path):
    data = yaml.safe_load((project_root() / "configs" / "ci.yaml").read_text())
    data["retreivers"] = data.pop("retrievers")
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=rf"{path}: unknown key 'retreivers' \(did you mean 'retrievers'\?\)"):
        load_profile(path)


def test_unknown_key_inside_a_section_names_file_section_and_key(tmp_path):
    from codegrep.agent.protocol import AgentConfig
    from codegrep.env.tools import ToolConfig

    data = yaml.safe_load((project_root() / "configs" / "ci.yaml").read_text())
    data["env"]["max_output_line"] = 5
    data["agent"]["max_call_per_turn"] = 5
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = load_profile(path)
    with pytest.raises(ConfigError, match=rf"{path}: env: unknown key 'max_output_line' \(did you mean "
                                          r"'max_output_lines'"):
        ToolConfig.from_dict(cfg["env"], where(cfg, "env"))
    with pytest.raises(ConfigError, match=rf"{path}: agent: unknown key 'max_call_per_turn'"):
        AgentConfig.from_dict(cfg["agent"], where(cfg, "agent"))


def test_from_mapping_builds_skips_owned_keys_and_rejects_the_rest():
    @dataclasses.dataclass
    class C:
        a: int = 1
        b: str = "x"

    assert from_mapping(C, None, "s") == C()
    assert from_mapping(C, {"a": 2, "other": 1}, "s", ignore=["other"]) == C(a=2)
    with pytest.raises(ConfigError, match="s: unknown key 'bb'"):
        from_mapping(C, {"bb": 1}, "s")
    with pytest.raises(ConfigError, match="s: must be a mapping"):
        from_mapping(C, [1], "s")


def test_make_policy_rejects_unknown_keys():
    from codegrep.agent.policies import make_policy

    with pytest.raises(ConfigError, match="unknown key 'endpont'"):
        make_policy({"policy": "scripted", "endpont": "http://x"})


def test_notebook_profile_drops_none_and_records_what_it_applied():
    cfg = notebook_profile("ci", {"agent.max_turns": 2, "agent.max_new_tokens": None})
    assert cfg["agent"]["max_turns"] == 2 and cfg["_notebook_params"] == {"agent.max_turns": 2}
    with pytest.raises(ConfigError, match="unknown key 'max_turnz'"):
        notebook_profile("ci", {"agent.max_turnz": 2})


@pytest.mark.parametrize("profile", PROFILES)
def test_shipped_profiles_pass_the_deep_check(profile):
    from codegrep.config import check_profile

    check_profile(load_profile(profile))


def test_downstream_retrievers_given_as_one_string_is_refused():
    """``--set downstream.retrievers=bm25`` gave the string 'bm25', which the downstream stage took as the
    retrievers 'b', 'm', '2', '5'; it is refused as retrievers.names already is."""
    from codegrep.config import check_profile

    cfg = load_profile("ci")
    cfg["downstream"]["retrievers"] = "bm25"
    with pytest.raises(ConfigError, match=r"--set downstream.retrievers: must be a list of strings or null, got the string"):
        check_profile(cfg, overridden=["downstream.retrievers"])
    cfg["downstream"]["retrievers"] = None
    check_profile(cfg)


@pytest.mark.parametrize("path, key, close", [
    (("retrievers", "bm25"), "path_weigth", "path_weight"),
    (("env",), "max_disk_g", "max_disk_gb"),
    (("agent",), "batchsize", "batch_size"),
    (("downstream", "mini_swe_agent"), "step_limt", "step_limit"),
    (("tasks",), "instance_id", "instance_ids"),
    (("mining",), "resolved_onl", "resolved_only"),
    (("env", "bench"), "rollout", "rollouts"),
    (("downstream", "replay"), "trajectory", "trajectories"),
])
def test_deep_check_names_file_section_and_key(tmp_path, path, key, close):
    from codegrep.config import check_profile

    data = yaml.safe_load((project_root() / "configs" / "ci.yaml").read_text())
    node = data
    for part in path:
        node = node[part]
    node[key] = 1
    file = tmp_path / "typo.yaml"
    file.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        check_profile(load_profile(file))
    assert str(info.value).startswith(f"{file}: {'.'.join(path)}: unknown key {key!r} (did you mean {close!r}")


def test_every_registered_section_schema_resolves():
    """A class moved without updating ``SECTION_SCHEMAS`` would silently weaken the check: fail instead."""
    import importlib

    from codegrep.config import SECTION_SCHEMAS

    for dotted, specs in SECTION_SCHEMAS.items():
        for spec in specs:
            module, _, attr = spec.partition(":")
            obj = getattr(importlib.import_module(module), attr, None)
            assert obj is not None, f"SECTION_SCHEMAS[{dotted!r}]: {spec} does not exist"
            assert dataclasses.is_dataclass(obj) or all(isinstance(k, str) for k in obj), spec


@pytest.mark.parametrize("spec", ["codegrep.agent.protocol:RenamedAgentConfig", "codegrep.agent.no_such_module:X"])
def test_a_renamed_or_missing_schema_class_is_an_error_not_a_skipped_check(monkeypatch, spec):
    """Key checking for a section must never switch itself off because its class was renamed or moved."""
    from codegrep import config

    cfg = load_profile("ci")  # loading checks the profile too: load before breaking the registry
    monkeypatch.setitem(config.SECTION_SCHEMAS, "agent", (spec,))
    with pytest.raises(config.SchemaError, match=r"SECTION_SCHEMAS\['agent'\] names " + spec.replace(".", r"\.")):
        config.check_profile(cfg)
    with pytest.raises(config.SchemaError, match="internal error"):
        config.check_values(cfg, sections=["agent"])
    with pytest.raises(config.SchemaError):
        config.schema_keys("agent")
