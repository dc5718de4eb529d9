"""One plain line per logged training step, for notebooks and logs.

transformers prints every log as a raw dict (``PrinterCallback``, or ``ProgressCallback.on_log`` beside
its bar); in an executed notebook that is a wall of ``{'loss': '0.71', ...}``. :func:`plain_progress`
swaps both for :class:`StepProgress`: ``SFT step 3/24: loss 0.357, token accuracy 0.926; 41 s elapsed, ~287 s left``.

>>> p = StepProgress("SFT", {"loss": "loss {:.3f}"}, max_steps=4)
>>> p.line(step=1, logs={"loss": 0.5}, elapsed=10.0)
'SFT step 1/4: loss 0.500; 10 s elapsed, ~30 s left'
>>> p.line(step=2, logs={"epoch": 1.0}, elapsed=20.0) is None  # nothing this callback reports
True
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

from transformers import TrainerCallback

SFT_FIELDS = {"loss": "loss {:.3f}", "mean_token_accuracy": "token accuracy {:.3f}"}
"""What a supervised warm-start step reports (TRL ``SFTTrainer`` log keys -> format)."""

GRPO_FIELDS = {"reward": "reward {:.3f}", "episode/f_beta": "F0.5 {:.3f}", "episode/rounds": "rounds {:.2f}",
               "episode/submitted": "submitted {:.2f}", "kl_probe": "KL {:.3g}",
               "constraints/allowed_mass": "allowed mass {:.2f}"}
"""What a GRPO step reports (``CodeGrepGRPOTrainer`` log keys -> format; a key a run does not log is left out);
``reward`` marks a step log."""


class StepProgress(TrainerCallback):
    """Prints one line per step log that holds the first of ``fields`` (elapsed and estimated time left)."""

    def __init__(self, label: str, fields: dict[str, str], max_steps: int | None = None) -> None:
        self.label, self.fields, self.max_steps = label, dict(fields), max_steps
        self.started = time.perf_counter()

    def line(self, step: int, logs: dict[str, Any], elapsed: float) -> str | None:
        """The line for one log (None when it is not a step log this callback reports).

        >>> logs = {"reward": 0.5, "episode/submitted": 1.0, "kl_probe": 0.003}
        >>> StepProgress("GRPO", GRPO_FIELDS, 4).line(1, logs, 10.0)
        'GRPO step 1/4: reward 0.500, submitted 1.00, KL 0.003; 10 s elapsed, ~30 s left'
        >>> StepProgress("GRPO", GRPO_FIELDS, 4).line(1, {"loss": 1.0}, 10.0) is None
        True
        """
        key = next(iter(self.fields))
        if key not in logs:
            return None
        parts = [fmt.format(float(logs[k])) for k, fmt in self.fields.items() if k in logs]
        total = self.max_steps or 0
        left = elapsed / max(step, 1) * max(total - step, 0)
        where = f"{step}/{total}" if total else str(step)
        return f"{self.label} step {where}: {', '.join(parts)}; {elapsed:.0f} s elapsed, ~{left:.0f} s left"

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.started = time.perf_counter()
        self.max_steps = self.max_steps or state.max_steps

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        text = self.line(state.global_step, logs, time.perf_counter() - self.started)
        if text:
            print(text, flush=True)


def plain_progress(trainer: Any, label: str, fields: dict[str, str], max_steps: int | None = None) -> None:
    """Replace the trainer's raw-dict log printers with one :class:`StepProgress` line per step."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    printers: list[Any] = [PrinterCallback, ProgressCallback]
    try:  # chosen instead of ProgressCallback in Jupyter; its module needs IPython, absent from plain installs
        from transformers.utils.notebook import NotebookProgressCallback
        printers.append(NotebookProgressCallback)
    except ImportError:
        pass
    for printer in printers:
        trainer.remove_callback(printer)
    trainer.add_callback(StepProgress(label, fields, max_steps))


class PhaseClock:
    """Wall seconds of a stage's named phases, in the order they ran; each phase prints one line when it ends, so
    long work shows where it is. The numbers are this call's: a phase whose results were cached (a finished run, cached
    evaluation rows) takes about 0 s, so they time a cold run only when the run was cold.

    >>> clock = PhaseClock("03_training", echo=False)
    >>> with clock("ceiling"):
    ...     pass
    >>> list(clock.seconds), clock.seconds["ceiling"] < 1.0
    (['ceiling'], True)
    >>> PhaseClock.line({"training": 850.2, "evaluation": 1090.7})
    'time per phase (this call; cached phases ~0 s): training 850 s, evaluation 1091 s'
    """

    def __init__(self, label: str, echo: bool = True) -> None:
        self.label, self.echo = label, echo
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - started, 1)
            if self.echo:
                print(f"[{self.label}] {name}: {self.seconds[name]:.0f} s", flush=True)

    @staticmethod
    def line(seconds: dict[str, float]) -> str:
        """The phases' times in one line."""
        return "time per phase (this call; cached phases ~0 s): " + ", ".join(
            f"{name} {s:.0f} s" for name, s in seconds.items())
