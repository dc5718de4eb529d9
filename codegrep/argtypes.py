"""argparse types that refuse wrong shapes with one line (``codegrep`` sub-commands use them)."""
from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1.

    >>> positive_int("5")
    5
    >>> positive_int("-5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive integer, got '-5'
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (refuses ``nan``, ``inf``, ``-1``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (refuses ``nan``, ``inf``, ``-1``).

    >>> positive_float("2.5")
    2.5
    >>> positive_float("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive finite number, got 'nan'
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return value


_SIZE_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
               "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}


def byte_size(text: str) -> int:
    """argparse type: a size in bytes, with an optional unit (``500M``, ``5G``, ``1.5GB``, ``2GiB``; decimal units).

    >>> byte_size("5G"), byte_size("1.5 mb"), byte_size("2GiB"), byte_size("0")
    (5000000000, 1500000, 2147483648, 0)
    >>> byte_size("5 parsecs")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a size such as 500M, 5G or 1.5GB, got '5 parsecs'
    """
    import re

    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"must be a size such as 500M, 5G or 1.5GB, got {text!r}")
    return int(float(match.group(1)) * _SIZE_UNITS[unit])
