"""Argument checks for tool calls: the model's JSON arguments -> validated Python values, or a ``ToolError``."""
from __future__ import annotations

import json
from typing import Any

from codegrep.env.contract import ToolCall, ToolError

ALLOWED = {"grep": {"pattern", "path", "include", "ignore_case", "context"},
           "glob": {"pattern", "path"}, "read": {"path", "start_line", "end_line"}}


def int_arg(value: Any, name: str, low: int, high: int | None = None) -> int | None:
    """An optional integer in ``[low, high]`` (``"3"`` and ``3.0`` accepted; NaN, booleans, ``2.5`` refused).

    >>> int_arg("3", "context", 0, 10), int_arg(None, "context", 0)
    (3, None)
    >>> int_arg(float("nan"), "start_line", 1)
    Traceback (most recent call last):
    ...
    codegrep.env.contract.ToolError: start_line must be an integer >= 1, got nan
    """
    if value is None or value == "":
        return None
    try:
        number = int(value) if not isinstance(value, bool) and float(value) == int(float(value)) else None
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or number < low or (high is not None and number > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ToolError(f"{name} must be an integer {bound}, got {value!r}")
    return number


def bool_arg(value: Any, name: str) -> bool:
    """A boolean; ``"true"``/``"no"``/``1`` accepted, anything else refused."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    if isinstance(value, int):
        return bool(value)
    raise ToolError(f"{name} must be true or false, got {value!r}")


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as a dict with only known keys (a JSON string is parsed first).

    >>> parse_arguments(ToolCall("grep", "[" * 100000))
    Traceback (most recent call last):
    ...
    codegrep.env.contract.ToolError: arguments are nested too deeply to be a JSON object of call arguments
    """
    args = call.arguments
    if isinstance(args, str):  # some models emit the arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON: {exc}") from None
        except RecursionError:  # "[[[[..." nested past the parser's depth (it was "internal error in grep")
            raise ToolError("arguments are nested too deeply to be a JSON object of call arguments") from None
    if not isinstance(args, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(args).__name__}")
    unknown = sorted(set(args) - ALLOWED[call.name])
    if unknown:
        raise ToolError(f"unknown argument(s) {unknown} for {call.name}; expected {sorted(ALLOWED[call.name])}")
    return args
