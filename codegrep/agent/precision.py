"""Reduced precision on CPU: detected at run time, chosen by one setting, recorded wherever a run is described.

``cpu_precision`` (train YAML, :class:`codegrep.rl.trainer.CodeGrepArgs`) is one of :data:`PRECISIONS`:

* ``auto``: bf16 autocast where the CPU multiplies bf16 natively (``avx512_bf16`` or ``amx_bf16``: oneDNN's
  bf16 kernels), fp32 elsewhere (e.g. AVX2-only CPUs, where bf16 would be emulated and slower);
* ``fp32``: everything in fp32 (the switch that turns reduced precision off);
* ``bf16``: bf16 autocast even where it is emulated (for comparisons; slower there).

Autocast keeps the weights (and the optimizer state) in fp32: matmuls run in bf16, reductions such as the
softmax and the loss stay fp32. Results must not depend on the choice beyond a stated tolerance
(tests/test_precision.py: a fixed batch's loss and the probe KL, fp32 against bf16).
"""
from __future__ import annotations

import contextlib
import platform
from pathlib import Path
from typing import Any, Iterator

PRECISIONS = ("auto", "fp32", "bf16")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
REPORTED_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The ``flags`` of the first processor in ``/proc/cpuinfo`` (empty where there is none, e.g. macOS).

    >>> sorted(cpu_flags("processor : 0\\nflags : fpu avx2 avx512_bf16\\n\\nprocessor : 1\\nflags : fpu\\n"))
    ['avx2', 'avx512_bf16', 'fpu']
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name (``/proc/cpuinfo``), or ``platform.processor()``.

    >>> cpu_model("model name\\t: AMD EPYC\\n")
    'AMD EPYC'
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return platform.processor() or platform.machine()


def native_bf16(flags: set[str]) -> bool:
    """True where the CPU has bf16 arithmetic instructions.

    >>> native_bf16({"avx2", "avx512_bf16"}), native_bf16({"amx_bf16"}), native_bf16({"avx2", "fma"})
    (True, True, False)
    """
    return any(f in flags for f in NATIVE_BF16_FLAGS)


def resolve_precision(setting: str, flags: set[str] | None = None, name: str = "cpu_precision") -> str:
    """The precision a ``cpu_precision`` (or ``decode_precision``: ``name``, said in the error) setting gives on a CPU
    with ``flags`` (default: this one's).

    >>> resolve_precision("auto", {"avx512_bf16"}), resolve_precision("auto", {"avx2"})
    ('bf16', 'fp32')
    >>> resolve_precision("fp32", {"amx_bf16"}), resolve_precision("bf16", {"avx2"})
    ('fp32', 'bf16')
    """
    if setting not in PRECISIONS:
        raise ValueError(f"{name} {setting!r}: expected one of {PRECISIONS}")
    if setting != "auto":
        return setting
    return "bf16" if native_bf16(cpu_flags() if flags is None else flags) else "fp32"


def cpu_features() -> dict[str, Any]:
    """What the run's speed depends on: CPU model, the relevant ISA flags, torch's kernel level and threads."""
    import torch

    flags = cpu_flags()
    return {"cpu_model": cpu_model(), "flags": [f for f in REPORTED_FLAGS if f in flags],
            "native_bf16": native_bf16(flags), "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "mkldnn_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
            "torch_threads": torch.get_num_threads()}


def precision_record(setting: str) -> dict[str, Any]:
    """``{"setting", "precision", "cpu"}`` for run.json and a training run's config.json."""
    return {"setting": setting, "precision": resolve_precision(setting), "cpu": cpu_features()}


@contextlib.contextmanager
def autocast(precision: str, device: str = "cpu") -> Iterator[None]:
    """bf16 autocast for ``precision == "bf16"``, nothing for fp32.

    One context around several forwards also makes autocast cast each weight once for all of them (its cache of
    casts of leaf parameters lives until the outermost context exits), but only outside ``torch.inference_mode``,
    where the cache is off (``torch.no_grad`` keeps it: ``prefix_cache._prefill``).
    """
    import torch

    if precision == "bf16":
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            yield
    else:
        yield


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``n`` inside the context and restored after it (None or 0 = leave them alone).
    torch's setting is process-wide: set once and never restored, an evaluation with ``agent.cpu_threads`` would
    also change every later training in the same process (a notebook kernel, a test worker), and with it the order
    of its floating-point sums.

    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    import torch

    if not n:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fresh_accelerator_state() -> None:
    """Forget accelerate's process-wide ``AcceleratorState`` before building a trainer.

    accelerate keeps one state per process and refuses a second ``Accelerator`` with another mixed precision. One
    process builds several trainers here (the SFT warm start, whose bf16 autocast is the Trainer's own, then the
    GRPO trainer, whose bf16 autocast is applied by :class:`codegrep.rl.trainer.CodeGrepGRPOTrainer` with TRL's
    ``bf16`` off; notebooks 03 and 04 run many), so each starts from a fresh state. Single-process only: a
    distributed launch (accelerate/DeepSpeed on GPUs) keeps its state.
    """
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=False)  # TrainingArguments hold the PartialState
