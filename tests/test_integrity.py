"""Nothing lost, nothing silently wrong (issue 29): the bad-input corpus grown by five classes, run through the
real command line (``python -m codegrep ...`` in a subprocess, several at a time so the corpus stays fast).

1. **Outputs** are atomic and guarded: an output that is an input, or two outputs that are one file, is refused
   before anything is opened; a full disk is one line naming the output and leaves the previous file as it was.
2. **Resume** is keyed by content: a stored row made for other task content or other settings is recomputed and
   counted; a row of the wrong type is refused naming ``file:line``.
3. **Profile values** are typed and range-checked (files, ``--set``), YAML with an alias-expansion limit.
4. **The cache** verifies what it reads: a truncated blob, pooled worktree file, index or model is detected; the
   blob, worktree and index are repaired with one line saying so, the model names itself and how to rebuild it.
5. **Parsers** have depth limits; names that are not UTF-8 are handled where the tools handle them.

Each case checks: the exit status, no traceback, an error case's last stderr line is ``codegrep <cmd>: error:``
naming the file/argument, and every file the user had is byte-identical afterwards (outputs a case may write
are listed in ``changes``). The kill -9 test of ``mine`` and the MCP cases are below the corpus.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from codegrep.env.blobstore import SOURCE_FILE

ROOT = Path(__file__).resolve().parent.parent
T = "{tmp}"
GOOD = {"instance_id": "o__n-1", "repo": "o/n", "base_commit": "a" * 40, "problem_statement": "x",
        "gold_files": ["a.py"]}
GOOD2 = {**GOOD, "instance_id": "o__n-2", "gold_files": ["b.py"]}
DEEP = "[" * 5000 + "]" * 5000
NON_UTF8 = b"caf\xe9"  # a Latin-1 file name, as an old archive or a Windows share leaves them
ORACLE = ["evaluate", "--retriever", "oracle", "--profile", "ci", "--tasks", f"{T}/t.jsonl", "--out", f"{T}/r.jsonl"]
CALL = json.dumps({"name": "grep", "arguments": {"pattern": "parse"}})


def jl(*rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def env_for(tmp: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "CODEGREP_CACHE": str(tmp / "cache"), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "MPLBACKEND": "Agg"}


def codegrep(argv: list, tmp: Path, preexec: Callable | None = None, timeout: float = 300):
    """Run ``python -m codegrep`` for real; (rc, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "codegrep", *argv], cwd=tmp, env=env_for(tmp), capture_output=True,
                          timeout=timeout, preexec_fn=preexec)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def small_disk(limit: int = 300) -> Callable:
    """A full disk for the child: files may grow to ``limit`` bytes, then writes fail with EFBIG (SIGXFSZ
    ignored, so the write returns the error instead of killing the process)."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def git_repo(path: Path) -> Path:
    (path / "src").mkdir(parents=True)
    (path / "src" / "a.py").write_text("def parse():\n    return 1\n" + "# filler line\n" * 20)
    (path / "src" / "b.py").write_text("x = 1\n")
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "i"]):
        subprocess.run(["git", "-C", str(path), *cmd], check=True)
    return path


def blob_files(tmp: Path) -> list[Path]:
    return sorted(p for p in (tmp / "cache" / "blobs").rglob("*")
                  if p.is_file() and p.name not in (".lock", SOURCE_FILE) and p.stat().st_size > 40)


def worktree_file(tmp: Path, rel: str) -> Path:
    return next(p for p in (tmp / "cache" / "worktrees").glob("*-*") if p.is_dir()) / rel


@dataclass
class Case:
    """One input: files to create, an optional setup (may run the CLI first), the argv, what must follow."""

    cls: int
    """Which of the five classes (see the module docstring)."""
    name: str
    argv: list
    names: list[str] = field(default_factory=list)
    """Substrings the error line (rc 2) or stdout/stderr (rc 0) must contain (``{tmp}`` replaced)."""
    files: dict[str, str | bytes] = field(default_factory=dict)
    rc: int = 2
    changes: list[str] = field(default_factory=list)
    """Files the command may write (its outputs); every other file must be byte-identical afterwards."""
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path, str, str], None] | None = None
    """Extra assertions on a successful run: (tmp, stdout, stderr)."""
    preexec: Callable | None = None


def _summary(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def _resumed(acc1: float, recomputed: int, reused: int = 0) -> Callable:
    def check(tmp: Path, out: str, err: str) -> None:
        s = _summary(out)
        assert s["acc@1"] == acc1 and s["recomputed"] == recomputed and s["reused"] == reused, s
        rows = [json.loads(line) for line in (tmp / "r.jsonl").read_text().splitlines()]
        assert all(r.get("fingerprint") for r in rows if r["instance_id"] in ("o__n-1", "o__n-2")), rows
        assert not (tmp / ".r.jsonl.partial").exists()
    return check


def _mine_ok(tmp: Path, out: str, err: str) -> None:
    rows = [json.loads(line) for line in (tmp / "m.jsonl").read_text().splitlines()]  # valid JSON, one record
    assert _summary(out)["parsed"] == 1 and len(rows) == 1, (out, rows)


def _whole_mine(tmp: Path, out: str, err: str) -> None:
    assert _summary(out)["records"] == len((tmp / "m.jsonl").read_text().splitlines()) > 0, out
    assert not [p.name for p in tmp.iterdir() if p.name.endswith(".tmp")], "a temporary file was left behind"


def _stale_row(iid: str, gold: list[str], acc1: float, **extra) -> dict:
    """A stored results row that a fresh oracle run would not produce (made for other gold files)."""
    return {"instance_id": iid, "repo": "o/n", "base_commit": "a" * 40, "retriever": "oracle", "k": None,
            "files": [], "ranked": [], "gold": gold, "acc@1": acc1, "precision": 0.0, "recall": 0.0, "f1": 0.0,
            "f0.5": 0.0, "acc@5": acc1, "recall@5": 0.0, "mrr": 0.0, "n_pred": 0, "rounds": 0, "tool_calls": 0,
            "tokens": 0, "seconds": 0.0, "extra": {}, **extra}


def _read_only_sys() -> None:
    """Even root may not create files in /sys (EACCES): a permission error without changing permissions."""
    try:
        Path("/sys/codegrep-probe").write_text("x")
    except OSError:
        return
    Path("/sys/codegrep-probe").unlink()
    pytest.skip("/sys is writable here")


def _prime_objects(tmp: Path) -> None:
    git_repo(tmp / "repo")
    assert codegrep(["tool", "--repo", "repo", CALL], tmp)[0] == 0


def _prime_worktree(tmp: Path) -> None:
    git_repo(tmp / "repo")
    assert codegrep(["tool", "--mode", "worktree", "--repo", "repo", CALL], tmp)[0] == 0


def _prime_bm25(tmp: Path) -> None:
    (tmp / "live" / "pkg").mkdir(parents=True)
    (tmp / "live" / "pkg" / "parser.py").write_text("def parse_expression(text):\n    return text\n")
    (tmp / "live" / "pkg" / "other.py").write_text("def unrelated():\n    pass\n")
    assert codegrep(["retrieve", "--repo", "live", "--retriever", "bm25", "--profile", "ci", "parse expression"],
                    tmp)[0] == 0


def _damage(fn: Callable[[Path], list[Path]], how: str) -> Callable[[Path], None]:
    def damage(tmp: Path) -> None:
        for path in fn(tmp):
            if how == "truncate":
                os.truncate(path, max(0, path.stat().st_size // 3))
            elif how == "empty":
                path.write_bytes(b"")
            elif how == "garbage":
                path.write_bytes(b"\0garbage" * 3)
            elif how == "delete":
                path.unlink()
    return damage


def _then(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        for step in steps:
            step(tmp)
    return run


def _found(name: str, line: str | None = None) -> Callable:
    def check(tmp: Path, out: str, err: str) -> None:
        assert name in out, out
        if line:
            assert line in err, err
    return check


def _non_utf8_tree(tmp: Path) -> None:
    root = tmp / "live"
    root.mkdir()
    (root / os.fsdecode(NON_UTF8 + b"_parse.py")).write_bytes(b"def parse_expression(text):\n    return text\n")
    (root / "other.py").write_text("def unrelated():\n    pass\n")


def _non_utf8_run(tmp: Path) -> None:
    src = sorted((ROOT / "codegrep" / "resources" / "trajectories" / "mini-swe-agent").glob("*.traj.json.gz"))[0]
    (tmp / "runs").mkdir()
    (tmp / "runs" / os.fsdecode(NON_UTF8 + b"__x-1.traj.json.gz")).write_bytes(src.read_bytes())


def _model_copy(damage: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        src = Path(os.environ.get("CODEGREP_CACHE", "")) / "models" / "smollm2-135m-instruct"
        if not (src / "config.json").is_file():
            pytest.skip("no converted SmolLM2 in CODEGREP_CACHE")
        (tmp / "model").mkdir()
        for f in src.iterdir():
            if f.name == damage:
                (tmp / "model" / f.name).write_bytes(f.read_bytes()[:700])
            else:
                os.symlink(f, tmp / "model" / f.name)  # read-only use of the shared files
    return setup


def _bomb(levels: int = 9) -> str:
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(rows) + "\n"


def _set(key_value: str, *names: str) -> Case:
    return Case(3, f"--set {key_value}", ["reproduce", "--profile", "ci", "--only", "01", "--set", key_value],
                [f"--set {key_value.split('=')[0]}", *names])


def _yaml(name: str, text: str, *names: str) -> Case:
    return Case(3, name, ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--profile", f"{T}/p.yaml",
                          "--out", f"{T}/r.jsonl"], ["p.yaml", *names], {"t.jsonl": jl(GOOD), "p.yaml": text})


MINE = ["mine"]
CASES: list[Case] = [
    # ---- 1. outputs: an output that is an input (or another output) is refused before anything is opened
    Case(1, "mine --out is its input", ["mine", "--out", f"{T}/t.jsonl", f"{T}/t.jsonl"], ["--out", "t.jsonl", "input"],
         {"t.jsonl": jl(GOOD)}),
    Case(1, "mine --out inside an input directory", ["mine", "--out", f"{T}/runs/a.jsonl", f"{T}/runs"],
         ["--out", "a.jsonl", "input"], {"runs/a.jsonl": jl({"x": 1})}),
    Case(1, "mine --demonstrations is --out", ["mine", "--out", f"{T}/m.jsonl", "--demonstrations", f"{T}/m.jsonl",
                                                f"{T}/t.jsonl"], ["--demonstrations", "m.jsonl", "--out"],
         {"t.jsonl": jl(GOOD), "m.jsonl": "previous\n"}),
    Case(1, "mine --demonstrations is the input", ["mine", "--out", f"{T}/m.jsonl", "--demonstrations",
                                                    f"{T}/t.jsonl", f"{T}/t.jsonl"], ["--demonstrations", "t.jsonl"],
         {"t.jsonl": jl(GOOD)}),
    Case(1, "mine --out is --tasks", ["mine", "--out", f"{T}/tasks.jsonl", "--tasks", f"{T}/tasks.jsonl",
                                      f"{T}/t.jsonl"], ["--out", "tasks.jsonl", "--tasks"],
         {"t.jsonl": jl(GOOD), "tasks.jsonl": jl(GOOD)}),
    Case(1, "mine --out is a symlink to its input", ["mine", "--out", f"{T}/link.jsonl", f"{T}/t.jsonl"],
         ["--out", "link.jsonl", "input"], {"t.jsonl": jl(GOOD)},
         setup=lambda tmp: os.symlink(tmp / "t.jsonl", tmp / "link.jsonl")),
    Case(1, "mine --out is a hard link to its input", ["mine", "--out", f"{T}/hard.jsonl", f"{T}/t.jsonl"],
         ["--out", "hard.jsonl", "input"], {"t.jsonl": jl(GOOD)},
         setup=lambda tmp: os.link(tmp / "t.jsonl", tmp / "hard.jsonl")),
    Case(1, "mine --out is ./input spelled differently", ["mine", "--out", f"{T}/sub/../t.jsonl", f"{T}/t.jsonl"],
         ["--out", "input"], {"t.jsonl": jl(GOOD), "sub/keep": "x"}),
    Case(1, "evaluate --out is --tasks", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "oracle", "--out",
                                          f"{T}/t.jsonl"], ["--out", "t.jsonl", "--tasks"], {"t.jsonl": jl(GOOD)}),
    Case(1, "evaluate --out is a symlink to --tasks", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "oracle",
                                                       "--out", f"{T}/l.jsonl"], ["--out", "l.jsonl", "--tasks"],
         {"t.jsonl": jl(GOOD)}, setup=lambda tmp: os.symlink(tmp / "t.jsonl", tmp / "l.jsonl")),
    Case(1, "evaluate --out is --profile", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "oracle",
                                            "--profile", f"{T}/p.yaml", "--out", f"{T}/p.yaml"],
         ["--out", "p.yaml", "--profile"], {"t.jsonl": jl(GOOD), "p.yaml": "seed: 1\n"}),
    Case(1, "mine --out under a file", ["mine", "--out", f"{T}/t.jsonl/m.jsonl", f"{T}/t.jsonl"], ["--out", "t.jsonl"],
         {"t.jsonl": jl(GOOD)}),
    Case(1, "mine --demonstrations is a directory", ["mine", "--out", f"{T}/m.jsonl", "--demonstrations", f"{T}/d",
                                                     f"{T}/t.jsonl"], ["--demonstrations", "d"],
         {"t.jsonl": jl(GOOD), "d/keep": "x"}),
    Case(1, "mine on a full disk keeps the previous output", [*MINE, "--out", f"{T}/m.jsonl", "embedded"],
         ["m.", "cannot write", "File too large"], {"m.jsonl": jl({"previous": "run"})}, preexec=small_disk()),
    Case(1, "evaluate on a full disk keeps the previous results",
         [*ORACLE[:-1], f"{T}/r.jsonl"], ["r.jsonl", "cannot write", "File too large"],
         {"t.jsonl": jl(*({**GOOD, "instance_id": f"o__n-{i}", "problem_statement": "x" * 200} for i in range(9))),
          "r.jsonl": jl(_stale_row("o__n-0", ["a.py"], 0.0))}, preexec=small_disk(2000)),
    Case(1, "mine --out where writing is not permitted", [*MINE, "--out", "/sys/codegrep-m.jsonl", "embedded"],
         ["/sys/codegrep-m.jsonl", "cannot write"], setup=lambda tmp: _read_only_sys()),
    Case(1, "evaluate --out where writing is not permitted", [*ORACLE[:-1], "/sys/codegrep-r.jsonl"],
         ["/sys/codegrep-r.jsonl", "cannot write"], {"t.jsonl": jl(GOOD)}, setup=lambda tmp: _read_only_sys()),
    Case(1, "a successful mine replaces the previous output whole, no temporary left behind",
         [*MINE, "--out", f"{T}/m.jsonl", "embedded"], ["\"parsed\""], {"m.jsonl": "old\n"}, rc=0,
         changes=["m.jsonl", "m.demos.jsonl"], check=_whole_mine),
    # ---- 2. resume keyed by content
    Case(2, "resume row made for other gold files is recomputed", ORACLE, ["\"recomputed\": 1"],
         {"t.jsonl": jl(GOOD), "r.jsonl": jl(_stale_row("o__n-1", ["z.py"], 0.0))}, rc=0, changes=["r.jsonl"],
         check=_resumed(1.0, 1)),
    Case(2, "resume rows without a fingerprint are recomputed", ORACLE, ["\"recomputed\": 2"],
         {"t.jsonl": jl(GOOD, GOOD2), "r.jsonl": jl(_stale_row("o__n-1", ["a.py"], 0.0),
                                                     _stale_row("o__n-2", ["b.py"], 0.0))},
         rc=0, changes=["r.jsonl"], check=_resumed(1.0, 2)),
    Case(2, "resume row with a stale fingerprint is recomputed", ORACLE, ["\"recomputed\": 1"],
         {"t.jsonl": jl(GOOD), "r.jsonl": jl(_stale_row("o__n-1", ["a.py"], 0.0, fingerprint="0" * 20))},
         rc=0, changes=["r.jsonl"], check=_resumed(1.0, 1)),
    Case(2, "a killed run's partial rows are checked too", ORACLE, ["\"recomputed\": 1"],
         {"t.jsonl": jl(GOOD), ".r.jsonl.partial": jl(_stale_row("o__n-1", ["z.py"], 0.0))}, rc=0,
         changes=["r.jsonl", ".r.jsonl.partial"], check=_resumed(1.0, 1)),
    Case(2, "rows of other instances are kept", ORACLE, ["\"new\": 1"],
         {"t.jsonl": jl(GOOD), "r.jsonl": jl(_stale_row("o__n-7", ["q.py"], 0.5))}, rc=0, changes=["r.jsonl"],
         check=lambda tmp, out, err: ('"o__n-7"' in (tmp / "r.jsonl").read_text()) or pytest.fail("row lost")),
    *(Case(2, f"resume row with {key} of the wrong type ({value!r})", ORACLE, ["r.jsonl:1", repr(key)],
           {"t.jsonl": jl(GOOD), "r.jsonl": jl({**_stale_row("o__n-1", ["a.py"], 1.0), key: value})})
      for key, value in (("ranked", "a.py"), ("files", 3), ("gold", [1, 2]), ("acc@1", "1.0"), ("acc@1", True),
                         ("retriever", 5), ("fingerprint", ["x"]), ("seconds", "fast"), ("mrr", {"v": 1}))),
    Case(2, "resume row without instance_id", ORACLE, ["r.jsonl:1", "instance_id"],
         {"t.jsonl": jl(GOOD), "r.jsonl": jl({"retriever": "oracle"})}),
    Case(2, "resume row nested too deeply", ORACLE, ["r.jsonl:2", "nested too deeply"],
         {"t.jsonl": jl(GOOD), "r.jsonl": jl(GOOD) + '{"instance_id": "x", "extra": ' + DEEP + "}\n" + jl(GOOD2)}),
    Case(2, "resume file of another retriever", ORACLE, ["r.jsonl", "random"],
         {"t.jsonl": jl(GOOD), "r.jsonl": jl({**_stale_row("o__n-1", ["a.py"], 1.0), "retriever": "random"})}),
    # ---- 3. profile values: types and ranges (--set and files), YAML limits
    _set("retrievers.k=0", ">= 1"), _set("retrievers.k=-2", ">= 1"), _set("retrievers.k=three", "integer"),
    _set("retrievers.k=1.5", "integer"), _set("retrievers.k=true", "integer"), _set("retrievers.workers=0", ">= 1"),
    _set("retrievers.names=bm25", "list"), _set("env.timeout_s=ten", "number"), _set("env.timeout_s=0", "> 0"),
    _set("env.timeout_s=-1", "> 0"), _set("env.timeout_s=.nan", "number"), _set("env.workers=0", ">= 1"),
    _set("env.max_output_lines=0", ">= 1"), _set("env.max_file_bytes=big", "integer"),
    _set("env.max_worktrees=0", ">= 1"), _set("env.max_disk_gb=0", "> 0"), _set("agent.max_turns=0", ">= 1"),
    _set("agent.max_turns=x", "integer"), _set("agent.top_p=2", "0..1"), _set("agent.temperature=-1", ">= 0"),
    _set("mining.workers=0", ">= 1"), _set("seed=abc", "integer"), _set("tasks.limit=0", ">= 1"),
    _set("env.bench.rollouts=0", ">= 1"),
    Case(3, "--set value is an alias bomb", ["reproduce", "--profile", "ci", "--only", "01", "--set",
                                             "seed=" + "{" + _bomb().replace("\n", ", ") + "}"],
         ["--set seed", "aliases"]),
    _yaml("profile retrievers.k: 0", "retrievers: {k: 0}\n", "retrievers.k", ">= 1"),
    _yaml("profile env.timeout_s: ten", "env: {timeout_s: ten}\n", "env.timeout_s", "number"),
    _yaml("profile env.timeout_s: 0", "env: {timeout_s: 0}\n", "env.timeout_s", "> 0"),
    _yaml("profile agent.max_turns: 0", "agent: {max_turns: 0}\n", "agent.max_turns"),
    _yaml("profile alias bomb", _bomb(), "aliases"),
    *(Case(3, f"train --set {kv}", ["train", "--config", "ci", "--set", kv], [f"--set {kv.split('=')[0]}", rule])
      for kv, rule in (("max_turns=0", ">= 1"), ("max_calls_per_turn=0", ">= 1"), ("efficiency_lambda=-1", ">= 0"),
                       ("ablation_max_turns=0", ">= 1"))),
    Case(3, "train YAML alias bomb", ["train", "--config", f"{T}/train.yaml"], ["train.yaml", "aliases"],
         {"train.yaml": _bomb()}),
    _yaml("profile nested too deeply", "seed: " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
    # ---- 4. the cache verifies what it reads (repaired, with one line; a model names itself)
    Case(4, "truncated blob is repaired", ["tool", "--repo", "repo", CALL], ["src/a.py:1:def parse"], rc=0,
         setup=_then(_prime_objects, _damage(blob_files, "truncate")), check=_found("src/a.py:1", "repaired")),
    Case(4, "emptied blob is repaired", ["tool", "--repo", "repo", CALL], ["src/a.py:1:def parse"], rc=0,
         setup=_then(_prime_objects, _damage(blob_files, "empty")), check=_found("src/a.py:1", "repaired")),
    Case(4, "overwritten blob is repaired", ["tool", "--repo", "repo", CALL], ["src/a.py:1:def parse"], rc=0,
         setup=_then(_prime_objects, _damage(blob_files, "garbage")), check=_found("src/a.py:1", "repaired")),
    Case(4, "deleted blob is rewritten", ["tool", "--repo", "repo", CALL], ["src/a.py:1:def parse"], rc=0,
         setup=_then(_prime_objects, _damage(blob_files, "delete")), check=_found("src/a.py:1")),
    Case(4, "truncated worktree file is rebuilt", ["tool", "--mode", "worktree", "--repo", "repo", CALL],
         ["src/a.py:1:def parse"], rc=0, check=_found("src/a.py:1", "rebuilt"),
         setup=_then(_prime_worktree, _damage(lambda tmp: [worktree_file(tmp, "src/a.py")], "truncate"))),
    Case(4, "deleted worktree file is rebuilt", ["tool", "--mode", "worktree", "--repo", "repo", CALL],
         ["src/a.py:1:def parse"], rc=0, check=_found("src/a.py:1", "rebuilt"),
         setup=_then(_prime_worktree, _damage(lambda tmp: [worktree_file(tmp, "src/a.py")], "delete"))),
    Case(4, "truncated bm25 index is rebuilt", ["retrieve", "--repo", "live", "--retriever", "bm25", "--profile",
                                                "ci", "parse expression"], ["pkg/parser.py"], rc=0,
         setup=_then(_prime_bm25, _damage(lambda tmp: list((tmp / "cache" / "indexes").rglob("*.npy")), "truncate")),
         check=_found("pkg/parser.py", "rebuilding")),
    Case(4, "garbled bm25 index metadata is rebuilt", ["retrieve", "--repo", "live", "--retriever", "bm25",
                                                       "--profile", "ci", "parse expression"], ["pkg/parser.py"], rc=0,
         setup=_then(_prime_bm25, _damage(lambda tmp: list((tmp / "cache" / "indexes").rglob("vocab.index.json")),
                                          "garbage")), check=_found("pkg/parser.py", "rebuilding")),
    Case(4, "truncated model weights name the model and the fix",
         ["retrieve", "--repo", "live", "--retriever", "agent", "--model", f"{T}/model", "--profile", "ci", "parse"],
         ["model", "damaged or truncated", "to rebuild"], setup=_then(_model_copy("model.safetensors"),
                                                                      _non_utf8_tree)),
    Case(4, "truncated model config names the model and the fix",
         ["retrieve", "--repo", "live", "--retriever", "agent", "--model", f"{T}/model", "--profile", "ci", "parse"],
         ["model", "damaged or truncated", "to rebuild"], setup=_then(_model_copy("config.json"), _non_utf8_tree)),
    # ---- 5. parsers: depth limits, names that are not UTF-8
    Case(5, "tasks stats: deeply nested .jsonl row", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:2", "nested"],
         {"t.jsonl": jl(GOOD) + DEEP + "\n"}),
    Case(5, "tasks stats: deeply nested .json", ["tasks", "stats", f"{T}/t.json"], ["t.json", "nested"],
         {"t.json": DEEP}),
    Case(5, "tasks stats: deeply nested object field", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:1", "nested"],
         {"t.jsonl": '{"instance_id": "o__n-1", "extra": ' + '{"a": ' * 3000 + "1" + "}" * 3000 + "}\n"}),
    Case(5, "tasks stats --skip-bad counts a deep row", ["tasks", "stats", "--skip-bad", f"{T}/t.jsonl"],
         ["skipped 1 of 2"], {"t.jsonl": jl(GOOD) + DEEP + "\n"}, rc=0),
    Case(5, "evaluate --tasks deeply nested", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "oracle",
                                               "--out", f"{T}/r.jsonl"], ["t.jsonl:1", "nested"],
         {"t.jsonl": DEEP + "\n"}),
    Case(5, "tool: deeply nested CALLS", ["tool", "--dir", T, DEEP], ["CALLS", "nested"]),
    Case(5, "tool: deeply nested CALLS object", ["tool", "--dir", T, '{"name": "grep", "arguments": ' +
                                                 '{"a": ' * 3000 + "1" + "}" * 3001], ["CALLS", "nested"]),
    Case(5, "mine: deeply nested .json (the previous output stays)", [*MINE, "--out", f"{T}/m.jsonl",
                                                                      f"{T}/d.traj.json"],
         ["d.traj.json", "nested too deeply"], {"d.traj.json": DEEP, "m.jsonl": "previous\n",
                                                "m.demos.jsonl": "previous\n"}),
    Case(5, "mine: deeply nested .jsonl row", [*MINE, "--out", f"{T}/m.jsonl", f"{T}/d.jsonl"],
         ["d.jsonl:1", "nested too deeply"], {"d.jsonl": DEEP + "\n"}),
    Case(5, "mine: deeply nested row among good ones is counted", [*MINE, "--out", f"{T}/m.jsonl", "embedded",
                                                                   f"{T}/d.jsonl"], ["invalid-json"],
         {"d.jsonl": DEEP + "\n"}, rc=0, changes=["m.jsonl", "m.demos.jsonl"],
         check=lambda tmp, out, err: _summary(out)["failed"].get("invalid-json") == 1 or pytest.fail(out)),
    Case(5, "mine: a trajectory file whose name is not UTF-8", [*MINE, "--out", f"{T}/m.jsonl", f"{T}/runs"],
         ["\"parsed\": 1"], rc=0, setup=_non_utf8_run, changes=["m.jsonl", "m.demos.jsonl"], check=_mine_ok),
    Case(5, "retrieve bm25: a file name that is not UTF-8", ["retrieve", "--repo", "live", "--retriever", "bm25",
                                                            "--profile", "ci", "parse expression"],
         ["caf\\xe9_parse.py"], rc=0, setup=_non_utf8_tree),
    Case(5, "retrieve grep-heuristic: a file name that is not UTF-8", ["retrieve", "--repo", "live", "--retriever",
                                                                      "grep-heuristic", "--profile", "ci",
                                                                      "parse_expression"],
         ["caf\\xe9_parse.py"], rc=0, setup=_non_utf8_tree),
    Case(5, "retrieve random: a file name that is not UTF-8", ["retrieve", "--repo", "live", "--retriever", "random",
                                                              "--profile", "ci", "parse"],
         ["caf\\xe9_parse.py"], rc=0, setup=_non_utf8_tree),
    Case(5, "tool grep: a file name that is not UTF-8", ["tool", "--dir", "live", CALL], ["caf\\xe9_parse.py"], rc=0,
         setup=_non_utf8_tree),
    Case(5, "tasks stats: a bad file whose name is not UTF-8", ["tasks", "stats", os.fsdecode(NON_UTF8 + b".jsonl")],
         ["caf", ".jsonl:1"], {os.fsdecode(NON_UTF8 + b".jsonl"): "[1]\n"}),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    """The user's files: not the cache, nor git's records of the pool's own worktrees (``.git/worktrees``)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.relative_to(root).parts[0] != "cache"
            and ".git/worktrees/" not in p.relative_to(root).as_posix()}


def _run_case(case: Case, tmp: Path) -> dict:
    tmp.mkdir(parents=True)
    for rel, content in case.files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    try:
        if case.setup:
            case.setup(tmp)
    except pytest.skip.Exception as exc:
        return {"skip": str(exc)}
    before = _snapshot(tmp)
    argv = [a.replace(T, str(tmp)) for a in case.argv]
    rc, out, err = codegrep(argv, tmp, case.preexec)
    return {"rc": rc, "out": out, "err": err, "dir": tmp, "before": before, "after": _snapshot(tmp)}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    """Every case, run four at a time (each is its own process; most of the time is interpreter start-up)."""
    base = tmp_path_factory.mktemp("integrity")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {c.name: pool.submit(_run_case, c, base / f"case{i}") for i, c in enumerate(CASES)}
        return {name: f.result() for name, f in futures.items()}


def test_the_corpus_covers_five_classes_with_enough_cases():
    from tests.test_bad_input import CASES as EARLIER

    by_class = {k: sum(c.cls == k for c in CASES) for k in range(1, 6)}
    assert all(n >= 6 for n in by_class.values()), by_class
    assert len(CASES) + len(EARLIER) + len(MCP_DEEP) >= 140
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.cls}-{c.name}" for c in CASES])
def test_case(case: Case, results):
    r = results[case.name]
    if "skip" in r:
        pytest.skip(r["skip"])
    rc, out, err = r["rc"], r["out"], r["err"]
    assert "Traceback" not in err, err[-3000:]
    assert rc == case.rc, f"rc {rc}, expected {case.rc}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    if case.rc == 2:
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"codegrep {case.argv[0]}") and ": error: " in last, err[-2000:]
        for name in case.names:
            assert name.replace(T, "") in last, f"{name!r} not named in: {last}"
        assert not out.strip(), f"a result was printed for bad input: {out[-500:]}"
    else:
        for name in case.names:
            assert name in out or name in err, f"{name!r} not in output:\n{out[-1500:]}\n{err[-1500:]}"
    changed = {k for k in r["before"] if r["after"].get(k) != r["before"][k]} - set(case.changes)
    assert not changed, f"input files changed or removed: {sorted(changed)}"
    if case.check:
        case.check(r["dir"], out, err)


# ------------------------------------------------------------------- kill -9 of mine at several moments


def test_kill_9_of_mine_leaves_the_previous_output_whole_or_a_new_complete_one(tmp_path):
    """``mine`` killed (SIGKILL) at several moments: the records file is either the previous one, byte for byte,
    or a complete new one (as many rows as a full run writes, every line valid JSON) -- never a truncated file."""
    rows = "".join(json.dumps({"instance_id": f"o__n-{i}", "messages": [{"role": "user", "content": "x" * 400}]})
                   + "\n" for i in range(3000))
    (tmp_path / "in.jsonl").write_text(rows)  # rows of no known format: mined (and counted) quickly, in order
    (tmp_path / "sub").mkdir()
    good = sorted((ROOT / "codegrep" / "resources" / "trajectories" / "mini-swe-agent").glob("*.traj.json.gz"))
    for copy in range(12):  # ~180 real runs: a records file of that many rows, written over a second or more
        for f in good:
            (tmp_path / "sub" / f"{copy}-{f.name}").write_bytes(f.read_bytes())
    argv = [sys.executable, "-m", "codegrep", "mine", "--workers", "1", "--out",
            str(tmp_path / "m.jsonl"), str(tmp_path / "sub"), str(tmp_path / "in.jsonl")]
    started = time.monotonic()
    full = subprocess.run(argv, env=env_for(tmp_path), capture_output=True, timeout=300)
    took = time.monotonic() - started
    assert full.returncode == 0, full.stderr.decode()[-2000:]
    complete = (tmp_path / "m.jsonl").read_bytes()
    n_complete = len(complete.splitlines())
    assert n_complete == json.loads(full.stdout.decode().splitlines()[-1])["records"] > 0
    previous = b'{"previous": "output"}\n'
    outcomes = []
    for share in (0.02, 0.2, 0.4, 0.6, 0.8, 0.95):  # moments through a run (start-up, mining, the end)
        delay = share * took
        (tmp_path / "m.jsonl").write_bytes(previous)
        proc = subprocess.Popen(argv, env=env_for(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        now = (tmp_path / "m.jsonl").read_bytes()
        lines = now.splitlines()
        assert now == previous or (len(lines) == n_complete and all(json.loads(line) for line in lines)), \
            f"killed after {delay:.2f}s: {len(lines)} lines, neither the previous output nor a complete one"
        outcomes.append("previous" if now == previous else "complete")
    assert "previous" in outcomes, outcomes  # at least one kill landed mid-run
    # a killed run's temporary siblings are hidden files; the next run removes them (their process is gone)
    assert subprocess.run(argv, env=env_for(tmp_path), capture_output=True, timeout=300).returncode == 0
    assert (tmp_path / "m.jsonl").read_bytes() == complete
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------------------ repaired on the next run (library)


def test_truncated_blob_is_detected_and_repaired_on_the_next_run(tmp_path, monkeypatch, capsys):
    """The grep answer is the same before and after a blob of the store is truncated; the next run repairs the
    blob (one line) and the run after that finds it whole (no line)."""
    from codegrep.env import blobstore, gitobjects
    from codegrep.env.config import ToolConfig
    from codegrep.env.tools import ToolCall

    repo = git_repo(tmp_path / "repo")
    store = tmp_path / "blobs"

    def grep() -> str:
        blobstore._STORES.clear()  # a new run: nothing remembered in this process
        gitobjects.forget_trees()
        env = gitobjects.GitObjectEnvironment(repo, "HEAD", ToolConfig(store_root=str(store)))
        try:
            return env.run_turn([ToolCall("grep", {"pattern": "parse"})])[0].output
        finally:
            blobstore.wait_background()
            env.close()

    first = grep()
    assert "src/a.py:1" in first
    blob = max((p for p in store.rglob("*") if p.is_file() and p.name not in (".lock", SOURCE_FILE)),
               key=lambda p: p.stat().st_size)
    whole = blob.read_bytes()
    os.truncate(blob, 10)
    capsys.readouterr()
    assert grep() == first
    assert "repaired 1 damaged blob" in capsys.readouterr().err and blob.read_bytes() == whole
    assert grep() == first and "repaired" not in capsys.readouterr().err


def test_truncated_worktree_file_is_detected_and_rebuilt_on_the_next_run(tmp_path, capsys):
    from codegrep.env.pool import WorktreePool

    repo = git_repo(tmp_path / "repo")
    root = tmp_path / "pool"
    with WorktreePool(root).acquire(repo, "HEAD") as wt:
        whole = (wt / "src" / "a.py").read_bytes()
    os.truncate(wt / "src" / "a.py", 5)
    capsys.readouterr()
    with WorktreePool(root).acquire(repo, "HEAD") as wt2:  # a new run (a new pool object)
        assert (wt2 / "src" / "a.py").read_bytes() == whole
    assert "rebuilt from git" in capsys.readouterr().err
    with WorktreePool(root).acquire(repo, "HEAD"):
        pass
    assert "rebuilt" not in capsys.readouterr().err


def test_atomic_write_on_a_full_disk_keeps_the_previous_file(tmp_path, monkeypatch):
    """The OS boundary refuses the data (ENOSPC when it is flushed to disk, as delayed allocation reports it):
    the error names the file, the previous content stays, and no temporary file is left."""
    import errno

    from codegrep.errors import UserError, user_message
    from codegrep.files import atomic_write

    path = tmp_path / "out.jsonl"
    path.write_text("previous\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(UserError) as info:
        with atomic_write(path, "wb") as fh:
            fh.write(b"x" * 10)
    assert str(path) in user_message(info.value) and "No space left" in str(info.value)
    assert path.read_text() == "previous\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_evaluate_reuses_a_row_whose_fingerprint_matches(tmp_path):
    """The other side of content-keyed resume: an unchanged task and retriever reuse their rows (no rework)."""
    (tmp_path / "t.jsonl").write_text(jl(GOOD, GOOD2))
    argv = [a.replace(T, str(tmp_path)) for a in ORACLE]
    assert codegrep(argv, tmp_path)[0] == 0
    rc, out, err = codegrep(argv, tmp_path)
    assert rc == 0 and _summary(out)["reused"] == 2 and _summary(out)["recomputed"] == 0, (out, err)
    (tmp_path / "t.jsonl").write_text(jl({**GOOD, "problem_statement": "another issue"}, GOOD2))
    rc, out, err = codegrep(argv, tmp_path)
    assert rc == 0 and _summary(out)["reused"] == 1 and _summary(out)["recomputed"] == 1, (out, err)
    assert "recomputed" in err


def test_evaluate_refuses_a_second_run_on_the_same_out(tmp_path):
    """Two evaluations on one --out (a second started by mistake) once both streamed into one hidden resume file:
    the second now fails at once with one line naming the first's pid, and reads or writes nothing; the lock goes
    with the first run (a dead holder's flock is dropped by the kernel), so the next run proceeds."""
    from codegrep.files import single_writer, writer_lock_path

    (tmp_path / "t.jsonl").write_text(jl(GOOD, GOOD2))
    (tmp_path / "r.jsonl").write_text(jl(_stale_row("o__n-1", ["z.py"], 0.0)))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    argv = [a.replace(T, str(tmp_path)) for a in ORACLE]
    with single_writer(tmp_path / "r.jsonl", "evaluation"):  # the first run, holding its output
        rc, out, err = codegrep(argv, tmp_path)
        assert rc == 2 and out == "", (rc, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        assert str(tmp_path / "r.jsonl") in lines[0] and f"another evaluation (pid {os.getpid()})" in lines[0], err
        after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        assert after == {**before, writer_lock_path("r.jsonl").name: f"{os.getpid()}\n".encode()}, sorted(after)
    assert not writer_lock_path(tmp_path / "r.jsonl").exists()
    rc, out, err = codegrep(argv, tmp_path)
    assert rc == 0 and _summary(out)["recomputed"] == 1 and _summary(out)["new"] == 1, (out, err)
    assert not writer_lock_path(tmp_path / "r.jsonl").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["r.jsonl", "t.jsonl"]


# ------------------------------------------------------------------------------------- the MCP server

MCP_DEEP = [  # (line, expected error code): nested too deeply or too long; each answered, the server keeps serving
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", -32700),
    (b"{" + b'"a":{' * 5000 + b"}" * 5001 + b"\n", -32700),
    (b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "find_relevant_files", '
     b'"arguments": {"query": ' + b"[" * 2000 + b"]" * 2000 + b"}}}\n", -32700),
    (b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": ' + b"[" * 900 + b"]" * 900 + b"}\n", -32700),
    (b"[" * 70 + b"]" * 70 + b"\n", -32700),
    (b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": "' + b"y" * (9 << 20) + b'"}}\n', -32700),
]


def test_mcp_server_answers_deeply_nested_lines_and_keeps_serving(tmp_path):
    from tests.test_serve_malformed import INIT, _read_reply

    repo = tmp_path / "r"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("def parse():\n    pass\n")
    (repo / "src" / os.fsdecode(NON_UTF8 + b".py")).write_text("def parse_more():\n    pass\n")
    proc = subprocess.Popen([sys.executable, "-m", "codegrep", "mcp", "--repo", str(repo)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(tmp_path))
    try:
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        proc.stdin.flush()
        assert _read_reply(proc)["id"] == 0
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for line, code in MCP_DEEP:
            proc.stdin.write(line)
            proc.stdin.flush()
            reply = _read_reply(proc, timeout=60)
            assert reply["error"]["code"] == code, (line[:80], reply)
        call = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                "params": {"name": "find_relevant_files", "arguments": {"query": "parse"}}}
        proc.stdin.write(json.dumps(call).encode() + b"\n")
        proc.stdin.flush()
        reply = _read_reply(proc, timeout=120)
        assert reply["id"] == 99 and "a.py" in json.dumps(reply["result"]), reply
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        err = proc.stderr.read().decode()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
