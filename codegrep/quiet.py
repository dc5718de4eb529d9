"""Known, harmless noise filtered once, in the library (notebooks and CLI call :func:`quiet`).

Only warnings that are understood and carry no information for a reader of this bundle are
silenced, each by category or message, never all warnings: a new warning still shows.
"""
from __future__ import annotations

import logging
import os
import warnings

HARMLESS_MESSAGES = (
    r".*rich is experimental/alpha.*",                   # tqdm.rich
    r".*IProgress not found.*",                          # tqdm.auto without ipywidgets
    r".*does not have many workers.*",                   # torch DataLoader on 2 cores
    r".*TRL_EXPERIMENTAL_SILENCE.*",                     # TRL experimental module notice
    r".*is experimental and may change.*",               # TRL experimental features
    r".*`torch_dtype` is deprecated.*",                  # transformers rename
    r".*generation flags are not valid.*",               # generation config echo of sampling flags
    r".*Setting `pad_token_id` to `eos_token_id`.*",     # transformers generate default
    r".*The attention mask and the pad token id were not set.*",
    r".*Unable to parse line.*",                         # papermill parameter-cell parsing of comments
    r".*pin_memory.*no accelerator is found.*",          # torch DataLoader on CPU
    r".*`gradient_checkpointing` is deprecated.*",       # transformers TrainingArguments rename (TRL configs)
    r".*`is_gradient_checkpointing` is deprecated.*",    # transformers PreTrainedModel rename, read by TRL each step
)
"""Message patterns of warnings known to be harmless here."""


def filter_warnings() -> None:
    """Filter the harmless warnings above, by message (idempotent). Runs on ``import codegrep``, so a
    warning raised while a notebook's first cell imports the library (tqdm's ``IProgress not found``)
    is covered before :func:`quiet` is called."""
    for pattern in HARMLESS_MESSAGES:
        warnings.filterwarnings("ignore", message=pattern)


def quiet() -> None:
    """:func:`filter_warnings`, quieter third-party defaults and log levels (idempotent)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    filter_warnings()
    try:
        from tqdm import TqdmExperimentalWarning

        warnings.filterwarnings("ignore", category=TqdmExperimentalWarning)
    except ImportError:  # pragma: no cover - tqdm is a dependency
        pass
    for name in ("transformers", "datasets", "papermill", "httpx", "accelerate", "trl", "sentence_transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)


def show_bar(progress: bool) -> bool:
    """Whether a progress bar asked for with ``progress`` is drawn: not when ``TQDM_DISABLE`` is set (the headless
    notebook kernels of ``codegrep reproduce`` set it; tqdm's own default does not reach a bar that passes
    ``disable`` explicitly, so such a bar passes ``disable=not show_bar(progress)``).

    >>> import os; os.environ.pop("TQDM_DISABLE", None) and None
    >>> show_bar(True), show_bar(False)
    (True, False)
    """
    return bool(progress) and not os.environ.get("TQDM_DISABLE")
