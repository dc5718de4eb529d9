"""Profiles (``configs/<name>.yaml``), paths and seeding.

A profile is one nested YAML mapping: ``ci`` (tests, seconds to minutes), ``smoke`` (the default:
CPU, offline, embedded data, a small real model) and ``paper`` (the paper's settings). Profiles
differ by configuration only; every stage reads its own section (``tasks``, ``env``, ``mining``,
``retrievers``, ``agent``, ``train``, ``downstream``, ``notebooks``).
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import importlib
import os
import random
import re
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, TypeVar

import yaml

from codegrep.env.contract import ENV_MODES
from codegrep.errors import UserError
from codegrep.files import read_text

T = TypeVar("T")

PROFILES = ("ci", "smoke", "paper")
DEFAULT_PROFILE = "smoke"


class ConfigError(UserError):
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


MAX_YAML_NODES = 200_000
"""Most values a YAML document may expand to, aliases counted at every use (an alias bomb is refused)."""


class _LimitedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a document whose aliases expand it beyond ``MAX_YAML_NODES`` and a mapping
    that repeats a key (YAML 1.2 forbids it; PyYAML would keep the last value silently)."""

    def construct_mapping(self, node, deep=False):  # noqa: D102 - PyYAML's hook
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.setdefault(key, key_node)
                    except TypeError:  # an unhashable key: PyYAML's own error follows
                        continue
                    if first is not key_node:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key!r} appears twice in one mapping (first on line "
                            f"{first.start_mark.line + 1}); keep one", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def compose_document(self):  # noqa: D102 - PyYAML's hook
        node = super().compose_document()
        sizes: dict[int, int] = {}
        stack: list[tuple[Any, bool]] = [(node, False)]
        while stack:  # post-order, iterative (no recursion on deep documents), memoised per node
            current, expanded = stack.pop()
            if id(current) in sizes:
                continue
            children = current.value if isinstance(current, yaml.SequenceNode) else \
                [n for kv in current.value for n in kv] if isinstance(current, yaml.MappingNode) else []
            if expanded:
                sizes[id(current)] = 1 + sum(sizes.get(id(c), MAX_YAML_NODES + 1) for c in children)
                if sizes[id(current)] > MAX_YAML_NODES:
                    raise yaml.YAMLError(f"the document expands to more than {MAX_YAML_NODES} values through "
                                         "aliases (&anchor/*alias); refusing it")
                continue
            stack.append((current, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
        return node


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML safely, with the alias-expansion limit; an error names ``source`` (and its line).

    >>> load_yaml("a: 1", "x.yaml")
    {'a': 1}
    >>> rows = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
    ...     f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    >>> bomb = chr(10).join(rows)
    >>> load_yaml(bomb, "bomb.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: bomb.yaml: invalid YAML: the document expands to more than 200000 values ...
    >>> load_yaml("train:\\n  max_steps: 4\\n  seed: 0\\n  max_steps: 8\\n", "x.yaml")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: x.yaml:4: invalid YAML: key 'max_steps' appears twice in one mapping (first on line 2); keep one
    """
    try:
        return yaml.load(text, Loader=_LimitedLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise ConfigError(f"{source}: invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where_ = f"{source}:{mark.line + 1}" if mark is not None else source
        what = " ".join(str(p) for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p) \
            if isinstance(exc, yaml.MarkedYAMLError) else str(exc)
        raise ConfigError(f"{where_}: invalid YAML: {what or exc}") from None


def unknown_key_error(key: str, known: Iterable[str], source: str) -> "ConfigError":
    """The one wording of an unknown key: the source, the key, its close matches, the known keys.

    >>> print(unknown_key_error("max_stepz", ["max_steps", "seed"], "--set train.max_stepz"))
    --set train.max_stepz: unknown key 'max_stepz' (did you mean 'max_steps'?); known keys: max_steps, seed
    """
    known = sorted(set(known))
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return ConfigError(f"{source}: unknown key {key!r}{hint}; known keys: {', '.join(known) or '(none)'}")


def check_keys(data: Mapping[str, Any] | None, known: Iterable[str], source: str) -> None:
    """Raise ``ConfigError`` naming ``source`` and the first unknown key of ``data`` (with close matches).

    >>> check_keys({"mode": 1}, ["max_worktrees", "mode"], "configs/x.yaml: env")
    >>> check_keys({"max_worktree": 1}, ["max_worktrees", "mode"], "configs/x.yaml: env")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: configs/x.yaml: env: unknown key 'max_worktree' (did you mean 'max_worktrees'?); known keys: max_worktrees, mode
    """
    if data is None:
        return
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: must be a mapping, got {type(data).__name__}")
    known = set(known)
    for key in data:
        if key not in known:
            raise unknown_key_error(str(key), known, source)


def config_fields(cls: type) -> list[str]:
    """Field names of a config dataclass."""
    return [f.name for f in dataclasses.fields(cls)]


def from_mapping(cls: type[T], data: Mapping[str, Any] | None, source: str, *, ignore: Iterable[str] = ()) -> T:
    """Build the config dataclass ``cls`` from a mapping; the one way to do it in this package.

    ``source`` names where the mapping came from (``where(cfg, "env")``, ``"--set"``, a file) and heads
    the error; keys in ``ignore`` are allowed but belong to another component (skipped). An unknown key is
    a ``ConfigError`` naming the key and its close matches; None means all defaults.

    >>> @dataclasses.dataclass
    ... class Demo:
    ...     max_turns: int = 4
    ...     top_p: float = 1.0
    >>> from_mapping(Demo, {"max_turns": 2, "model": "x"}, "agent", ignore=["model"])
    Demo(max_turns=2, top_p=1.0)
    >>> from_mapping(Demo, {"max_turn": 2}, "configs/ci.yaml: agent")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: configs/ci.yaml: agent: unknown key 'max_turn' (did you mean 'max_turns'?); known keys: max_turns, top_p
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"from_mapping needs a dataclass, got {cls!r}")
    names, ignore = config_fields(cls), set(ignore)
    check_keys(data, set(names) | ignore, source)
    values = {k: v for k, v in (data or {}).items() if k in names and k not in ignore}
    check_fields(cls, values, source)
    return cls(**values)


# ------------------------------------------------------------------------------- value types and ranges
# A field's type is its annotation; its range is declared beside it as ``field(..., metadata={"range": ">= 1"})``
# (``">= 1"``, ``"> 0"``, ``"<= 1"``, ``"0..1"``). ``from_mapping`` (files, ``--set``, notebook parameters: all
# three build configs through it) and ``load_profile`` (keys of sections without a dataclass, ``KEY_RULES``)
# refuse a wrong type or an out-of-range value with one line naming the source and the key, before any work.


def in_range(value: float, spec: str | None) -> bool:
    """Whether ``value`` satisfies a range spec.

    >>> in_range(0, ">= 1"), in_range(0.5, "0..1"), in_range(0, "> 0"), in_range(3, None)
    (False, True, False, True)
    """
    if not spec:
        return True
    spec = spec.strip()
    if ".." in spec:
        lo, hi = (float(x) for x in spec.split(".."))
        return lo <= value <= hi
    for op, test in ((">=", lambda a, b: a >= b), ("<=", lambda a, b: a <= b), (">", lambda a, b: a > b),
                     ("<", lambda a, b: a < b)):
        if spec.startswith(op):
            return test(value, float(spec[len(op):]))
    raise ValueError(f"bad range spec {spec!r}")


def _describe(tp: Any) -> str:
    import typing

    if tp is type(None):
        return "null"
    if isinstance(tp, type):
        return {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
                "list": "a list", "dict": "a mapping", "tuple": "a list"}.get(tp.__name__, tp.__name__)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if origin in (list, tuple) and len(typing.get_args(tp)) == 1:  # not "must be a list, got list ['nan', 0, 0]"
        return f"a list of {_PLURALS.get(_describe(typing.get_args(tp)[0]), 'values')}"
    if origin is not None:
        return _describe(origin)
    return str(tp)


_PLURALS = {"an integer": "integers", "a number": "numbers", "a string": "strings", "true or false": "true/false values"}


def type_ok(value: Any, tp: Any) -> bool:
    """Whether a YAML value fits an annotation (an int is a float; a bool is not a number; unknown: yes).

    >>> type_ok(3, float), type_ok(True, int), type_ok("ten", float), type_ok(None, int | None), type_ok([1], list[int])
    (True, False, False, True, True)
    """
    import math
    import typing

    if tp is Any or tp is typing.Any or isinstance(tp, (str, typing.TypeVar)):
        return True
    if tp is type(None):
        return value is None
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return value in typing.get_args(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return any(type_ok(value, a) for a in typing.get_args(tp))
    if origin is not None:
        if origin in (list, tuple, set, frozenset, typing.Sequence, __import__("collections.abc").abc.Sequence):
            if not isinstance(value, (list, tuple)):
                return False
            args = [a for a in typing.get_args(tp) if a is not Ellipsis]
            return len(args) != 1 or all(type_ok(v, args[0]) for v in value)
        if origin in (dict, typing.Mapping, __import__("collections.abc").abc.Mapping):
            return isinstance(value, dict)
        return True
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tp in (str, list, dict, tuple):
        return isinstance(value, tp if tp is not tuple else (list, tuple))
    return True  # a class this check does not know (a path type, a callable): its owner checks it


def check_value(value: Any, tp: Any, rng: str | None, where_: str) -> None:
    """Raise ``ConfigError`` naming ``where_`` when ``value`` does not fit ``tp`` or ``rng``.

    >>> check_value(0, int, ">= 1", "configs/x.yaml: retrievers.k")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: configs/x.yaml: retrievers.k: must be >= 1, got 0
    >>> check_value("ten", float, "> 0", "--set env.timeout_s")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: --set env.timeout_s: must be a number, got the string 'ten'
    >>> check_value([1.0, -0.5, 0], list[float], ">= 0", "c.yaml: efficiency_weights")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: c.yaml: efficiency_weights: every item must be >= 0, got -0.5 (item 2 of [1.0, -0.5, 0])
    >>> check_value(["nan", 0, 0], list[float], None, "c.yaml: efficiency_weights")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: c.yaml: efficiency_weights: must be a list of numbers, got list ['nan', 0, 0]
    """
    if not type_ok(value, tp):
        got = f"the string {value!r}" if isinstance(value, str) else "null (an empty value)" if value is None else \
            f"{type(value).__name__} {value!r}"[:120]
        raise ConfigError(f"{where_}: must be {_describe(tp)}, got {got}")
    if rng and isinstance(value, (int, float)) and not isinstance(value, bool) and not in_range(value, rng):
        raise ConfigError(f"{where_}: must be {rng}, got {value!r}")
    if rng and isinstance(value, (list, tuple)):  # a list's range holds for each of its numbers
        for i, item in enumerate(value, 1):
            if isinstance(item, (int, float)) and not isinstance(item, bool) and not in_range(item, rng):
                raise ConfigError(f"{where_}: every item must be {rng}, got {item!r} (item {i} of {list(value)!r})"[:300])


def _hints(cls: type) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that cannot be resolved here: its fields go unchecked
        return {}


def check_fields(cls: type, values: Mapping[str, Any], source: str) -> None:
    """Check each value against its dataclass field's annotation and declared range (``ConfigError``): the
    field's ``metadata["range"]``, or the class's ``FIELD_RANGES`` mapping (for classes whose metadata goes to
    argparse, e.g. TrlParser's, which refuses unknown keys there); and a string against the values the class
    declares for the field (:func:`field_choices`)."""
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    ranges = getattr(cls, "FIELD_RANGES", {})
    for key, value in values.items():
        if key in fields:
            where_ = source if source.endswith((f".{key}", f" {key}")) else f"{source}.{key}"
            check_value(value, hints.get(key, Any), fields[key].metadata.get("range", ranges.get(key)), where_)
            check_choice(cls, key, value, where_)


_DOC_CHOICES = re.compile(r"(?:Supported values are|Must be one of|Possible values are)\b")
_PASSED_ON = frozenset({"vllm_model_impl"})
"""Fields whose docstring lists only some of the values accepted where TRL passes them on (vLLM's ``model_impl`` also
takes ``auto``, its default): not checked from the docstring."""


@functools.lru_cache(maxsize=None)
def field_choices(cls: type, name: str) -> tuple[str, ...] | None:
    """The values a dataclass field accepts, as its class declares them; ``None`` where it declares none.

    In this order: the field's ``metadata["choices"]`` (what HfArgumentParser hands argparse: TrainingArguments'
    ``log_level``); a ``Literal`` annotation, or an ``Enum`` one, also in a union with ``str`` (transformers'
    ``SchedulerType``, ``OptimizerNames``): its members' values; else the values the class's docstring gives the
    field after "Supported values are:" (a bullet list) or "Must be one of" (one sentence), as TRL documents the
    fields it annotates ``str`` (GRPOConfig's ``loss_type``, ``scale_rewards``, ``vllm_mode`` ...). argparse checks
    the first two on a command line only, never a train YAML's value (TrlParser sets those as defaults), and nothing
    checks the third before the trainer reads it, minutes into a run.

    >>> @dataclasses.dataclass
    ... class Demo:
    ...     '''Args:
    ...         mode (`str`, *optional*, defaults to `"fast"`):
    ...             How to run. Supported values are:
    ...
    ...             - `"fast"` (default): quickly.
    ...             - `True` or `"slow"`: slowly.
    ...         level (`str`):
    ...             Must be one of `"low"` or `"high"`. `"low"` is quiet.
    ...     '''
    ...     mode: str = "fast"
    ...     level: str = "low"
    ...     kind: Literal["a", "b"] = "a"
    ...     note: str = ""
    >>> [field_choices(Demo, n) for n in ("mode", "level", "kind", "note")]
    [('fast', 'slow'), ('low', 'high'), ('a', 'b'), None]
    """
    import enum
    import inspect
    import typing

    field = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    if field is None:
        return None
    if field.metadata.get("choices"):
        return tuple(str(c) for c in field.metadata["choices"])
    tp = _hints(cls).get(name)
    for arg in (tp, *typing.get_args(tp)):
        if typing.get_origin(arg) is Literal:  # (not beside a plain str: ``str | Literal[False]`` takes any string)
            return tuple(str(a) for a in typing.get_args(arg)) if str not in typing.get_args(tp) else None
        if isinstance(arg, type) and issubclass(arg, enum.Enum):
            return tuple(str(m.value) for m in arg)
    if name in _PASSED_ON:
        return None
    for klass in inspect.getmro(cls):  # the class's docstring, HF style: "name (`type`, ...):" then an indented text
        doc = klass.__dict__.get("__doc__") or ""
        head = re.search(rf"^([ \t]*){re.escape(name)} \(`[^\n]*\):[ \t]*\n", doc, re.M)
        if not head:
            continue
        body = []
        for line in doc[head.end():].splitlines():
            if line.strip() and len(line) - len(line.lstrip()) <= len(head.group(1)):
                break
            body.append(line)
        text = " ".join(" ".join(body).split())
        said = _DOC_CHOICES.search(text)
        if not said:
            return None
        rest = text[said.end():]
        if rest.startswith(":"):  # a bullet list: - `"a"` (default): ..., - `True` or `"b"`: ...
            items = re.findall(r"(?:^|\s)- ((?:`[^`]+`(?: or )?)+)", rest)
        else:  # one sentence: Must be one of `"a"` or `"b"`.
            items = [re.split(r"\.(?:\s|$)", rest, maxsplit=1)[0]]
        values = tuple(v for item in items for v in re.findall(r'`"([^"`]+)"`', item))
        return values or None
    return None


def check_choice(cls: type | None, key: str, value: Any, where_: str, choices: Iterable[str] | None = None) -> None:
    """Refuse a string (or a list's string) that is not one of the values ``field_choices`` (or ``choices``) gives
    for ``cls``'s field ``key``: one line naming ``where_``, close matches and the allowed values. A value of another
    type is left to the type check.

    >>> check_choice(None, "loss_type", "dpao", "c.yaml: loss_type", ["grpo", "dapo", "dr_grpo"])
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: c.yaml: loss_type: unknown value 'dpao' (did you mean 'dapo'?); allowed values: grpo, dapo, dr_grpo
    """
    allowed = list(choices) if choices is not None else list(field_choices(cls, key) or ()) if cls else []
    if not allowed:
        return
    for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, str) and item not in allowed:
            close = difflib.get_close_matches(item, allowed, n=3, cutoff=0.6)
            hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
            raise ConfigError(f"{where_}: unknown value {item!r}{hint}; allowed values: {', '.join(allowed)}")


KEY_RULES: dict[str, tuple[Any, str | None]] = {
    "seed": (int, ">= 0"),
    "tasks.limit": (int | None, ">= 1"), "tasks.seed": (int | None, ">= 0"), "tasks.offline": (bool | None, None),
    "tasks.on_error": (str, None),
    "env.mode": (Literal[ENV_MODES], None), "env.max_worktrees": (int, ">= 1"), "env.max_disk_gb": (float, "> 0"),
    "env.pool_root": (str | None, None),
    "mining.workers": (int, ">= 1"), "mining.demonstrations": (bool, None), "mining.resolved_only": (bool, None),
    "env.bench.rollouts": (int, ">= 1"), "env.bench.group": (int, ">= 1"), "env.bench.turns": (int, ">= 1"),
    "env.bench.calls": (int, ">= 1"), "env.bench.samples": (int, ">= 1"),
    "retrievers.k": (int | None, ">= 1"), "retrievers.workers": (int | None, ">= 1"),
    "retrievers.limit": (int | None, ">= 1"), "retrievers.names": (list[str], None),
    "downstream.retrievers": (list[str] | None, None),  # a string would be read as a list of its letters
    # fields of config classes that declare no range yet (their owners may move these into field metadata)
    "agent.max_turns": (int, ">= 1"), "agent.max_calls_per_turn": (int, ">= 1"),
    "agent.max_observation_tokens": (int, ">= 1"), "agent.max_issue_chars": (int, ">= 1"),
    "agent.max_submit_files": (int, ">= 1"), "agent.max_new_tokens": (int, ">= 1"),
    "agent.temperature": (float, ">= 0"), "agent.top_p": (float, "0..1"), "agent.batch_size": (int, ">= 1"),
    "agent.rank_files": (int, ">= 0"), "agent.max_call_tokens": (int | None, ">= 1"), "agent.min_greps": (int, ">= 0"),
    "agent.draft_tokens": (int, ">= 0"), "agent.prefix_cache_mb": (int | None, ">= 0"),
    "agent.rank_relevance": (float, ">= 0"), "retrievers.grep-heuristic.relevance_weight": (float, ">= 0"),
    "agent.cpu_threads": (int | None, ">= 1"), "agent.eval_processes": (int, ">= 1"),
    # TRL GRPOConfig fields its __post_init__ divides by (0 is a ZeroDivisionError there) or that leave no batch;
    # codegrep.rl.training_run checks the same ranges in a train YAML and `codegrep train --set`
    "train.num_generations": (int, ">= 2"), "train.per_device_train_batch_size": (int, ">= 1"),
    "train.gradient_accumulation_steps": (int, ">= 1"), "train.steps_per_generation": (int | None, ">= 1"),
    "train.generation_batch_size": (int | None, ">= 1"),
    # ... and ones TRL takes as they are: a negative rate climbs the loss, temperature 0 divides the logits by zero,
    # no completion token leaves nothing to train, a negative seed is a ValueError in transformers' set_seed (numpy)
    "train.learning_rate": (float, ">= 0"), "train.temperature": (float, "> 0"), "train.seed": (int, ">= 0"),
    "train.top_p": (float, "0..1"),  # above 1 nucleus sampling keeps every token; a typo, not a setting
    "train.max_completion_length": (int | None, ">= 1"),
    # ... and ones HF reads otherwise: max_steps <= 0 trains num_train_epochs epochs instead of GRPO steps (every
    # summary and figure counts steps), a negative KL coefficient pays the policy to drift from the reference
    "train.max_steps": (int, ">= 1"), "train.beta": (float, ">= 0"),
}
KEY_RULES.update({f"tasks.splits.{split}.{key}": KEY_RULES[f"tasks.{key}"]  # a split's overrides: the same rules
                  for split in ("train", "eval") for key in ("limit", "seed", "offline", "on_error")})
"""Types and ranges of the keys of sections read key by key (``TASKS_KEYS``, ``MINING_KEYS`` ... below)."""
CHEAP_SECTIONS = ("env", "agent")
"""Sections whose config classes ``load_profile`` checks on every load (their modules import in milliseconds);
the others are checked by ``from_mapping`` when their component is built, and all by ``check_profile``."""


def check_values(cfg: Mapping[str, Any], sections: Iterable[str] | None = None,
                 overridden: Iterable[str] = ()) -> None:
    """Check a loaded profile's values: ``KEY_RULES`` and the dataclass fields of ``sections`` (default: all
    registered, ``train`` included: TRL's ``parse_dict`` builds its dataclasses without checking types, so an
    ill-typed ``--set train.learning_rate=abc`` fails here, before any work). A value given by ``--set`` (or a
    notebook parameter) is named as ``--set <key>``."""
    overridden = set(overridden)

    def source(dotted: str) -> str:
        return f"--set {dotted}" if dotted in overridden else where(cfg, dotted)

    for dotted, (tp, rng) in KEY_RULES.items():
        node: Any = cfg
        keys = dotted.split(".")
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and keys[-1] in node:
            check_value(node[keys[-1]], tp, rng, source(dotted))
    for dotted in (SECTION_SCHEMAS if sections is None else sections):
        node = cfg
        for key in dotted.split("."):
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None and not isinstance(node, Mapping):  # --set downstream.verify=abc
            raise ConfigError(f"{source(dotted)}: must be a mapping of settings, got {type(node).__name__}")
        if not isinstance(node, Mapping) or (dotted == "train" and set(node) <= {"config"}):
            continue  # nothing to check; and TRL is not imported for a train section that only names its YAML
        for spec in SECTION_SCHEMAS.get(dotted, ()):
            obj = schema_object(dotted, spec)
            if dataclasses.is_dataclass(obj):
                names = set(config_fields(obj))
                for k, v in node.items():
                    if k in names:
                        check_fields(obj, {k: v}, source(f"{dotted}.{k}"))
                _check_construction(obj, {k: v for k, v in node.items() if k in names}, dotted, source)


def _check_construction(cls: type, values: dict[str, Any], dotted: str, source: Any) -> None:
    """Build one of codegrep's config classes from a section's values, so the checks of its ``__post_init__`` (a
    choice such as ``agent.grep_view``) fail at load, naming the section, instead of inside a notebook."""
    if not cls.__module__.startswith("codegrep.") or not hasattr(cls, "__post_init__"):
        return
    try:
        cls(**values)
    except (TypeError, ValueError) as exc:
        given = [k for k in values if source(f"{dotted}.{k}").startswith("--set ")]
        raise ConfigError(f"{source(f'{dotted}.{given[0]}') if given else source(dotted)}: {exc}") from None


def where(cfg: Mapping[str, Any] | None, dotted: str) -> str:
    """The source string of a profile section for error messages: ``"configs/smoke.yaml: env.bench"``.

    >>> where({"_source": "configs/ci.yaml"}, "agent")
    'configs/ci.yaml: agent'
    >>> where(None, "agent")
    'agent'
    """
    src = (cfg or {}).get("_source")
    return f"{src}: {dotted}" if src else dotted


# Which config dataclasses a profile path may hold, beside the keys its YAML already has ("module:attr",
# imported only when a `--set`/notebook key is not in the YAML). Owners: add your section's classes here.
# An attr is a config dataclass or a tuple of key names (keys owned by code that has no dataclass).
SECTION_SCHEMAS: dict[str, tuple[str, ...]] = {
    "agent": ("codegrep.agent.protocol:AgentConfig", "codegrep.agent.protocol:PolicyConfig"),
    "env": ("codegrep.env.config:ToolConfig", "codegrep.env.config:ENV_OTHER_KEYS"),
    "train": ("codegrep.rl.trainer:CodeGrepArgs", "trl:GRPOConfig"),
    "retrievers.bm25": ("codegrep.retrievers.lexical:BM25Config",),
    "retrievers.dense": ("codegrep.retrievers.dense:DenseConfig",),
    "retrievers.grep-heuristic": ("codegrep.retrievers.heuristic:HeuristicConfig",),
    "retrievers.random": ("codegrep.retrievers.calibration:RandomConfig",),
    "downstream.mini_swe_agent": ("codegrep.downstream.mini_swe_agent:MiniSweAgentConfig",),
    "downstream.openhands": ("codegrep.downstream.openhands:OpenHandsConfig",),
    "downstream.hints": ("codegrep.downstream.hints:HintExperimentConfig",),
    "downstream.verify": ("codegrep.downstream.verify:VerifyConfig",),
    "downstream.replay.params": ("codegrep.downstream.replay:ReplayParams",),
    "downstream.threshold": ("codegrep.downstream.threshold:ThresholdConfig",),
    # Sections read key by key (no dataclass yet): their keys, listed below; owners may move them beside their code.
    "tasks": ("codegrep.config:TASKS_KEYS",),
    "tasks.splits.train": ("codegrep.config:TASKS_SPLIT_KEYS",),
    "tasks.splits.eval": ("codegrep.config:TASKS_SPLIT_KEYS",),
    "mining": ("codegrep.config:MINING_KEYS",),
    "env.bench": ("codegrep.config:ENV_BENCH_KEYS",),
    "retrievers": ("codegrep.config:RETRIEVERS_KEYS",),
    "retrievers.agent": ("codegrep.retrievers.agentic:OWN_KEYS", "codegrep.agent.protocol:AgentConfig",
                         "codegrep.agent.protocol:PolicyConfig"),
    "downstream": ("codegrep.config:DOWNSTREAM_KEYS",),
    "downstream.replay": ("codegrep.config:DOWNSTREAM_REPLAY_KEYS",),
}
TASKS_KEYS = ("source", "repos_dir", "mirror_dir", "offline", "repos", "instance_ids", "limit", "seed", "on_error",
              "splits")
"""``tasks:`` (``codegrep.data.tasks.profile_tasks``)."""
TASKS_SPLITS = ("train", "eval")
"""``tasks.splits:`` the splits a profile's tasks are drawn for."""
TASKS_SPLIT_KEYS = tuple(k for k in TASKS_KEYS if k != "splits")
"""``tasks.splits.<split>``: per-split overrides of the ``tasks:`` keys."""
MINING_KEYS = ("inputs", "format", "tasks", "repos", "workers", "demonstrations", "resolved_only")
"""``mining:`` (``codegrep.mining.catm.mine_profile``)."""
ENV_BENCH_KEYS = ("repo", "rollouts", "group", "turns", "calls", "samples", "concurrency")
"""``env.bench:`` (``codegrep.env.bench.profile_environment``)."""
RETRIEVERS_KEYS = ("names", "k", "workers", "limit", "bm25", "dense", "grep-heuristic", "grep_heuristic", "agent",
                   "oracle", "random")
"""``retrievers:`` (``codegrep.retrievers.evaluate``) and one block per retriever (``registry.retriever_settings``)."""
DOWNSTREAM_KEYS = ("agent", "retrievers", "primary", "replay", "threshold", "mini_swe_agent", "openhands", "hints",
                   "verify")
"""``downstream:`` (``codegrep.downstream.stages``, ``commands``)."""
DOWNSTREAM_REPLAY_KEYS = ("trajectories", "gold_tasks", "seed", "params")
"""``downstream.replay:`` (``codegrep.downstream.stages.replay_setup``)."""
# Top-level keys of a profile. A new section is added here by its owner.
PROFILE_SECTIONS = ("profile", "seed", "tasks", "env", "mining", "agent", "retrievers", "train", "downstream",
                    "notebooks")


class SchemaError(RuntimeError):
    """Internal error: a ``SECTION_SCHEMAS`` entry names a module or class that does not exist (renamed or moved
    without updating the registry). Never a user error, never skipped: a skipped schema would switch key checking
    off for that section."""


def schema_object(dotted: str, spec: str) -> Any:
    """The config dataclass (or tuple of key names) a ``SECTION_SCHEMAS`` entry names.

    >>> schema_object("tasks", "codegrep.config:TASKS_KEYS") == TASKS_KEYS
    True
    >>> schema_object("agent", "codegrep.agent.protocol:NoSuchConfig")
    Traceback (most recent call last):
    ...
    codegrep.config.SchemaError: internal error: SECTION_SCHEMAS['agent'] names codegrep.agent.protocol:NoSuchConfig, \
which does not exist (AttributeError: module 'codegrep.agent.protocol' has no attribute 'NoSuchConfig'); update the \
registry in codegrep/config.py
    """
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise SchemaError(f"internal error: SECTION_SCHEMAS[{dotted!r}] names {spec}, which does not exist "
                          f"({type(exc).__name__}: {exc}); update the registry in codegrep/config.py") from exc


def schema_keys(dotted: str) -> set[str]:
    """Field names of the dataclasses registered for a profile path (empty when none is registered)."""
    out: set[str] = set()
    for spec in SECTION_SCHEMAS.get(dotted, ()):
        obj = schema_object(dotted, spec)
        out |= set(config_fields(obj)) if dataclasses.is_dataclass(obj) else set(obj)
    return out


def check_profile(cfg: Mapping[str, Any], overridden: Iterable[str] = ()) -> None:
    """Check every registered section of a loaded profile against its config classes (unknown key -> error
    naming the file, the section and the key). ``train`` is checked when it holds more than ``config``. A value
    in ``overridden`` (the ``--set`` keys) is named as the ``--set`` it came from."""
    for dotted in SECTION_SCHEMAS:
        node: Any = cfg
        for key in dotted.split("."):
            node = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping) or (dotted == "train" and set(node) <= {"config"}):
            continue
        known = schema_keys(dotted)
        if dotted == "train":
            known |= {"config"} | _train_yaml_keys(cfg)
        if known:
            check_keys(node, known, where(cfg, dotted))
    check_values(cfg, overridden=overridden)


def _train_yaml_keys(cfg: Mapping[str, Any]) -> set[str]:
    """Keys of the training YAML the profile's ``train.config`` names (``train.*`` overrides reach it)."""
    rel = (cfg.get("train") or {}).get("config") if isinstance(cfg.get("train"), Mapping) else None
    if not rel:
        return set()
    path = Path(rel) if Path(rel).is_absolute() else project_root() / rel
    try:
        data = load_yaml(path.read_text(), str(path)) or {}
    except (OSError, ConfigError):
        return set()
    return set(data) if isinstance(data, dict) else set()


def check_override_key(cfg: Mapping[str, Any], dotted: str, source: str = "--set") -> None:
    """Refuse a dotted override whose path is neither in the profile nor a field of the section's config.

    >>> check_override_key({"agent": {"max_turns": 4}}, "agent.max_turns")
    >>> check_override_key({"agent": {"max_turns": 4}}, "agent.max_turnz")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: --set agent.max_turnz: unknown key 'max_turnz' (did you mean 'max_turns'?); ...
    """
    keys = dotted.split(".")
    node: Any = cfg
    for depth, key in enumerate(keys):
        prefix = ".".join(keys[:depth])
        if depth == 0:
            known = set(cfg) | set(PROFILE_SECTIONS)
        else:
            known = (set(node) if isinstance(node, Mapping) else set()) | schema_keys(prefix)
            if prefix == "train":
                known |= _train_yaml_keys(cfg)
            if prefix.startswith("notebooks."):
                return  # a notebook's parameters: `codegrep reproduce` checks them against its parameters cell
        if key not in known:
            err = unknown_key_error(key, known, f"{source} {dotted}")
            if len(str(err)) > 400:
                err = ConfigError(str(err)[:400] + " ...")
            raise err
        node = node.get(key) if isinstance(node, Mapping) else None
        if node is None and depth < len(keys) - 1 and not schema_keys(".".join(keys[: depth + 1])):
            return  # a new nested mapping under a known key (e.g. a per-split override): nothing to check


def validate_profile(cfg: Mapping[str, Any], source: str) -> None:
    """Top-level keys of a profile must be known sections."""
    check_keys({k: v for k, v in cfg.items() if not str(k).startswith("_")}, PROFILE_SECTIONS, source)
    check_sections(cfg, source)


def check_sections(cfg: Mapping[str, Any], source: str, overridden: Iterable[str] = ()) -> None:
    """Each section of a profile (all but ``profile`` and ``seed``) is a mapping or empty: ``retrievers: [1]`` is one
    line naming it, not an ``AttributeError`` where the section is read.

    >>> check_sections({"agent": 5}, "p.yaml")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: p.yaml: agent: must be a mapping of settings, got int
    """
    for name in PROFILE_SECTIONS[2:]:
        value = cfg.get(name)
        if value is not None and not isinstance(value, Mapping):
            where_ = f"--set {name}" if name in set(overridden) else f"{source}: {name}"
            raise ConfigError(f"{where_}: must be a mapping of settings, got {type(value).__name__}")


def check_task_keys(cfg: Mapping[str, Any]) -> None:
    """The ``tasks:`` section's keys, its ``splits`` (``train``, ``eval``) and each split's keys: a misspelt key
    (``sorce``, a split ``trian``) is one line naming it, not a run on the default task set.

    >>> check_task_keys({"_source": "p.yaml", "tasks": {"splits": {"trian": {"limit": 3}}}})
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: p.yaml: tasks.splits: unknown key 'trian' (did you mean 'train'?); known keys: eval, train
    """
    tasks = cfg.get("tasks") or {}
    check_keys(tasks, TASKS_KEYS, where(cfg, "tasks"))
    splits = tasks.get("splits")
    check_keys(splits, TASKS_SPLITS, where(cfg, "tasks.splits"))
    for name, keys in (splits or {}).items():
        check_keys(keys, TASKS_SPLIT_KEYS, where(cfg, f"tasks.splits.{name}"))


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

    An empty value (``KEY=``) is null, as in YAML; :func:`load_profile` takes it only where the key takes null
    (:func:`check_null_override`).

    >>> parse_overrides(["a.b=3", "c=x", "d=[1, 2]", "e="])
    {'a.b': 3, 'c': 'x', 'd': [1, 2], 'e': None}
    """
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not KEY=VALUE (e.g. train.max_steps=3)")
        key, raw = item.split("=", 1)
        out[key.strip()] = load_yaml(raw, f"--set {key.strip()}") if raw.strip() else None
    return out


def empty_overrides(items: Iterable[str]) -> list[str]:
    """The keys of ``KEY=`` overrides (nothing after the ``=``).

    >>> empty_overrides(["a=1", "b=", "c= ", "d=null"])
    ['b', 'c']
    """
    return [item.split("=", 1)[0].strip() for item in items if "=" in item and not item.split("=", 1)[1].strip()]


def declared_type(dotted: str) -> tuple[bool, Any]:
    """``(True, annotation)`` of a profile key that has one (``KEY_RULES``, or a field of the config classes
    ``SECTION_SCHEMAS`` registers for its section), else ``(False, None)``.

    >>> declared_type("tasks.limit"), declared_type("tasks.source")
    ((True, int | None), (False, None))
    """
    if dotted in KEY_RULES:
        return True, KEY_RULES[dotted][0]
    section_, _, key = dotted.rpartition(".")
    for spec in SECTION_SCHEMAS.get(section_, ()):
        obj = schema_object(section_, spec)
        if dataclasses.is_dataclass(obj) and key in config_fields(obj):
            return True, _hints(obj).get(key, Any)
    return False, None


def check_null_override(cfg: Mapping[str, Any], dotted: str, empty: bool = True) -> None:
    """``--set KEY=`` (an empty value, null) is taken where the key takes null, and there it is null (``tasks.limit=``:
    every task; ``env.pool_root=``: the default place). Elsewhere it is one line naming the key, before the profile
    (``cfg``, before the override) is changed: a key typed otherwise (``seed=``), a section (``agent=`` dropped the
    whole section, its defaults used in silence; ``agent=null`` too, ``empty`` False), a key no class types whose
    profile value is not null (``train.config=``: write ``null`` out where null is meant).

    >>> check_null_override({"tasks": {"limit": 5}}, "tasks.limit")
    >>> check_null_override({"seed": 0}, "seed")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: --set seed: empty value; seed must be an integer
    >>> check_null_override({"agent": {"max_turns": 4}}, "agent")
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: --set agent: empty value would drop the whole 'agent' section; set its keys instead (--set agent.KEY=VALUE)
    """
    node: Any = cfg
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    if isinstance(node, Mapping) or dotted in SECTION_SCHEMAS or dotted in PROFILE_SECTIONS[2:]:
        raise ConfigError(f"--set {dotted}: {'empty value' if empty else 'null'} would drop the whole {dotted!r} "
                          f"section; set its keys instead (--set {dotted}.KEY=VALUE)")
    if not empty:  # a null written out: the type checks take it from here
        return
    typed, tp = declared_type(dotted)
    if typed and not type_ok(None, tp):
        raise ConfigError(f"--set {dotted}: empty value; {dotted.rpartition('.')[2]} must be {_describe(tp)}")
    if not typed and node is not None:
        raise ConfigError(f"--set {dotted}: empty value; the profile has {node!r} here: give a value (or write null "
                          "where null is meant)"[:300])


def load_profile(profile: str | os.PathLike = DEFAULT_PROFILE,
                 overrides: dict[str, Any] | Iterable[str] | None = None) -> dict[str, Any]:
    """Load a profile, apply dotted overrides, and record where it came from under ``_source``."""
    path = profile_path(profile)
    cfg = load_yaml(read_text(path, "profile"), str(path)) or {}
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(cfg).__name__}")
    validate_profile(cfg, str(path))
    empty: list[str] = []
    if overrides is not None and not isinstance(overrides, dict):
        overrides = list(overrides)
        empty = empty_overrides(overrides)
        overrides = parse_overrides(overrides)
    for k, v in (overrides or {}).items():
        check_override_key(cfg, k, "--set")
        if v is None:
            check_null_override(cfg, k, empty=k in empty)
        _set_dotted(cfg, k, v, "--set")
    cfg.setdefault("profile", path.stem)
    cfg.setdefault("seed", 0)
    cfg["_source"] = str(path)
    check_sections(cfg, str(path), overrides or ())  # a --set that replaced a section by a value
    check_task_keys(cfg)  # read key by key by every task loader: an unknown key was ignored (its default used)
    check_values(cfg, CHEAP_SECTIONS, overrides or ())  # wrong types and ranges fail here, before any work
    return cfg


def cli_profile(profile: str | os.PathLike, sets: Iterable[str] | None = None) -> dict[str, Any]:
    """The one way a command reads ``--profile`` and its ``--set KEY=VALUE`` overrides (:func:`add_set_option`):
    the profile loaded, then every registered section checked before any work, so an unknown key or a wrong value
    is one line naming the file and key, or the ``--set`` it came from. The overrides applied are kept under
    ``_overrides`` (``{}`` when none), for the results a command writes to record.

    >>> cfg = cli_profile("ci", ["agent.max_turns=2"])
    >>> cfg["agent"]["max_turns"], cfg["_overrides"]
    (2, {'agent.max_turns': 2})
    >>> cli_profile("ci", ["agent.max_trns=2"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: --set agent.max_trns: unknown key 'max_trns' (did you mean 'max_turns' ...
    """
    given = list(sets or [])
    cfg = load_profile(profile, given)
    applied = parse_overrides(given)
    check_profile(cfg, applied)  # every --set value, used by this command or not, before work
    cfg["_overrides"] = applied
    return cfg


def add_set_option(parser: Any, example: str) -> None:
    """``--set KEY=VALUE`` (repeatable) on a command that reads a profile; read it with :func:`cli_profile`."""
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", default=None,
                        help=f"profile override, e.g. {example} (repeatable; applied after --profile and checked "
                             "before any work); KEY= (empty) is null, taken only where the key takes null")


def notebook_profile(profile: str | os.PathLike, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The one way a notebook applies its parameters: load ``profile`` with dotted overrides.

    ``params`` maps profile paths to the notebook's parameters, e.g. ``{"mining.workers": workers}``;
    a value of None means "the profile's own value" and is dropped. Keys are checked like ``--set``
    (an unknown one is a ``ConfigError`` naming it); what was applied is kept under ``_notebook_params``.
    """
    from codegrep.quiet import quiet

    quiet()  # known-harmless warnings only (see codegrep.quiet)
    applied = {k: v for k, v in (params or {}).items() if v is not None}
    cfg = load_profile(profile, applied)
    check_profile(cfg)
    cfg["_notebook_params"] = applied
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
