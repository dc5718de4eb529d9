"""Profiles (``configs/<name>.yaml``), paths and seeding.

A profile is one nested YAML mapping: ``ci`` (tests, seconds to minutes), ``smoke`` (the default:
CPU, offline, embedded data, a small real model) and ``paper`` (the paper's settings). Profiles
differ by configuration only; every stage reads its own section (``tasks``, ``env``, ``mining``,
``retrievers``, ``agent``, ``train``, ``downstream``, ``notebooks``).
"""
from __future__ import annotations

import copy
import os
import random
from pathlib import Path
from typing import Any, Iterable

import yaml

PROFILES = ("ci", "smoke", "paper")
DEFAULT_PROFILE = "smoke"


class ConfigError(ValueError):
    """A profile or override that cannot be used; the message names the file or argument."""


def project_root() -> Path:
    """The checkout holding ``configs/`` (the package's parent), or the current directory."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "configs").is_dir() else Path.cwd()


def cache_dir() -> Path:
    """Where mirrors, worktrees, indexes and converted models are cached (``CODEGREP_CACHE``)."""
    return Path(os.environ.get("CODEGREP_CACHE", Path.home() / ".cache" / "codegrep")).expanduser()


def profile_path(profile: str | os.PathLike) -> Path:
    """``ci`` -> ``<root>/configs/ci.yaml``; an existing path is used as is."""
    p = Path(profile)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise ConfigError(f"profile file not found: {p}")
        return p
    cand = project_root() / "configs" / f"{profile}.yaml"
    if not cand.is_file():
        raise ConfigError(f"unknown profile {str(profile)!r}: expected one of {PROFILES} or a YAML path "
                          f"(looked for {cand})")
    return cand


def _set_dotted(cfg: dict, dotted: str, value: Any, source: str) -> None:
    node = cfg
    keys = dotted.split(".")
    for k in keys[:-1]:
        nxt = node.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"{source}: {dotted!r} goes through {k!r}, which is not a mapping")
        node = nxt
    node[keys[-1]] = value


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """``["train.max_steps=3", "seed=1"]`` -> ``{"train.max_steps": 3, "seed": 1}`` (values parsed as YAML).

    >>> parse_overrides(["a.b=3", "c=x", "d=[1, 2]"])
    {'a.b': 3, 'c': 'x', 'd': [1, 2]}
    """
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not KEY=VALUE (e.g. train.max_steps=3)")
        key, raw = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
    return out


def load_profile(profile: str | os.PathLike = DEFAULT_PROFILE,
                 overrides: dict[str, Any] | Iterable[str] | None = None) -> dict[str, Any]:
    """Load a profile, apply dotted overrides, and record where it came from under ``_source``."""
    path = profile_path(profile)
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(cfg).__name__}")
    if overrides is not None and not isinstance(overrides, dict):
        overrides = parse_overrides(overrides)
    for k, v in (overrides or {}).items():
        _set_dotted(cfg, k, v, "override")
    cfg.setdefault("profile", path.stem)
    cfg.setdefault("seed", 0)
    cfg["_source"] = str(path)
    return cfg


def section(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """A copy of one section of a profile (empty mapping when absent)."""
    return copy.deepcopy(cfg.get(name) or {})


def seed_everything(seed: int) -> None:
    """Seed every random source the package uses: ``random``, NumPy, torch (CPU and CUDA)."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % (2**32))
    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        import torch

        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    except ImportError:  # torch is a hard dependency, but config stays importable without it
        pass
