"""``make_retriever(name, cfg)``: every retriever by name, configured from a profile's ``retrievers`` section."""
from __future__ import annotations

from typing import Any

from codegrep import Retriever
from codegrep.config import ConfigError, from_mapping

RETRIEVER_NAMES = ("bm25", "dense", "grep-heuristic", "agent", "oracle", "random", "bm25-plain")


def config_from_dict(cls: type, values: dict[str, Any] | None, where: str):
    """Build a config dataclass, naming unknown keys instead of silently ignoring them.

    >>> from codegrep.retrievers.calibration import RandomConfig
    >>> config_from_dict(RandomConfig, {"k": 3}, "retrievers.random").k
    3
    >>> config_from_dict(RandomConfig, {"kk": 3}, "retrievers.random")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: retrievers.random: unknown key 'kk' (did you mean 'k'?); known keys: k, seed, suffixes
    """
    values = dict(values or {})
    if "suffixes" in values and isinstance(values["suffixes"], list):
        values["suffixes"] = tuple(values["suffixes"])
    return from_mapping(cls, values, where)


def retriever_settings(cfg: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """The ``retrievers.<name>`` mapping of a profile (the key may spell ``-`` as ``_``)."""
    block = (cfg or {}).get("retrievers") or {}
    value = block.get(name, block.get(name.replace("-", "_"))) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"retrievers.{name} must be a mapping, got {type(value).__name__}")
    return dict(value)


def make_retriever(name: str, cfg: dict[str, Any] | None = None, **overrides: Any) -> Retriever:
    """A retriever configured from a profile (``cfg`` as ``load_profile`` returns it, or None for defaults).

    ``overrides`` replace keys of ``retrievers.<name>`` (e.g. ``model=...`` for dense, ``policy=...`` for agent).

    >>> make_retriever("random", {"retrievers": {"random": {"k": 2}}}).config.k
    2
    >>> make_retriever("nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown retriever 'nope'; choose one of ('bm25', 'dense', 'grep-heuristic', 'agent', 'oracle', 'random', 'bm25-plain')
    """
    settings = {**retriever_settings(cfg, name), **{k: v for k, v in overrides.items() if v is not None}}
    where = f"retrievers.{name}"
    if name == "bm25":
        from codegrep.retrievers.lexical import BM25Config, BM25Retriever
        return BM25Retriever(config_from_dict(BM25Config, settings, where))
    if name == "dense":
        from codegrep.retrievers.dense import DenseConfig, DenseRetriever
        return DenseRetriever(config_from_dict(DenseConfig, settings, where))
    if name == "grep-heuristic":
        from codegrep.retrievers.heuristic import HeuristicConfig, HeuristicRetriever
        return HeuristicRetriever(config_from_dict(HeuristicConfig, settings, where), env_config=_env(cfg))
    if name == "agent":
        from codegrep.retrievers.agentic import AgentRetriever
        return AgentRetriever.from_profile(cfg, settings)
    if name == "oracle":
        from codegrep.retrievers.calibration import OracleRetriever
        return OracleRetriever()
    if name == "random":
        from codegrep.retrievers.calibration import RandomConfig, RandomRetriever
        settings.setdefault("seed", int((cfg or {}).get("seed", 0)))
        return RandomRetriever(config_from_dict(RandomConfig, settings, where))
    if name == "bm25-plain":
        from codegrep.retrievers.plain import PlainBM25Retriever
        return PlainBM25Retriever(**settings)
    raise ValueError(f"unknown retriever {name!r}; choose one of {RETRIEVER_NAMES}")


def _env(cfg: dict[str, Any] | None) -> dict[str, Any]:
    """The ``env`` section (tool caps) the tool-using retrievers pass to the environment."""
    return dict((cfg or {}).get("env") or {})
