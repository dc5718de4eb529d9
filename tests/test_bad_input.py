"""The bad-input corpus (issue 19): every user mistake is one line naming the file/line/argument, exit 2.

Each case runs the real command line (``codegrep.cli.main``, in process so the corpus stays fast; no model is
loaded) and checks: no traceback, a non-zero exit (2), the last stderr line is
``codegrep <command>: error: ...`` and names what was wrong, nothing was printed as a result on stdout, and every
input file the user had is byte-for-byte unchanged afterwards. A second part checks the other side of the
boundary: an internal error keeps its traceback and says it is a bug.
"""
from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from codegrep import cli
from codegrep.errors import UserError, user_message
from codegrep.report import README_BEGIN, README_END

GOOD = {"instance_id": "o__n-1", "repo": "o/n", "base_commit": "a" * 40, "problem_statement": "x",
        "gold_files": ["a.py"]}


def jl(*rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@dataclass
class Case:
    """One bad input: files to create under tmp_path, the argv (``{tmp}`` is replaced), what stderr must name."""

    name: str
    argv: list[str]
    names: list[str]
    """Substrings the error line must contain (``{tmp}`` replaced): the file, line or argument."""
    files: dict[str, str | bytes] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    one_line: bool = True
    """stderr is that one error line and nothing else (no usage dump before it; argparse refusals included,
    ``codegrep.cli.CliParser``); False only where a command legitimately says more before it."""


T = "{tmp}"
RUN = {"r/final/config.json": "{}", "r/versions.json": "{}", "r/metrics.jsonl": "", "r/config.json": json.dumps({
    "codegrep": {"sft_sources": ["synthetic"], "warm_start": True, "model": "smollm2", "profile": "ci",
                 "efficiency_layer": "advantage", "efficiency_lambda": 0.1, "efficiency_weights": [0.5, 0, 0.5],
                 "fbeta": 0.5, "format_weight": 0.2},
    "grpo": {"num_generations": 2, "beta": 0.0, "learning_rate": 1e-6}, "initial_policy": "warm", "n_train_tasks": 2})}
"""A finished training run as ``codegrep export`` reads it (no weights: ``final/`` only needs its config.json)."""
CI_TRAIN_YAML = (Path(__file__).resolve().parent.parent / "configs" / "train" / "ci.yaml").read_text()
def _res(retriever: str, *ids: str) -> str:
    """A results file ``codegrep evaluate`` could have written: one row per instance."""
    return jl(*({"instance_id": i, "retriever": retriever, "ranked": ["a.py"], "files": ["a.py"], "gold": ["a.py"]}
                for i in ids))


CASES = [
    # ---- task files (codegrep.data.tasks): wrong shapes, silent results, encodings
    Case("task row is a list", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:1", "JSON object"],
         {"t.jsonl": "[1, 2]\n"}),
    Case(".json of ints", ["tasks", "stats", f"{T}/t.json"], ["t.json", "item 0", "JSON object"], {"t.json": "[1, 2, 3]"}),
    Case(".json object, not a list", ["tasks", "stats", f"{T}/t.json"], ["t.json", "list"], {"t.json": '{"a": 1}'}),
    Case("patch is a number", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:1", "'patch'"],
         {"t.jsonl": jl({**GOOD, "patch": 123, "gold_files": []})}),
    Case("gold_files is a string", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:2", "'gold_files'", "src/a.py"],
         {"t.jsonl": jl(GOOD, {**GOOD, "instance_id": "o__n-2", "gold_files": "src/a.py"})}),
    Case("gold_files holds a number", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:1", "'gold_files'"],
         {"t.jsonl": jl({**GOOD, "gold_files": ["a.py", 3]})}),
    Case("instance_id is a number", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:1", "'instance_id'"],
         {"t.jsonl": jl({**GOOD, "instance_id": 5})}),
    Case("missing field", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:1", "'base_commit'"],
         {"t.jsonl": jl({k: v for k, v in GOOD.items() if k != "base_commit"})}),
    Case("repo not owner/name", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:1", "'repo'"],
         {"t.jsonl": jl({**GOOD, "repo": "noslash"})}),
    Case("duplicate instance id", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:2", "duplicate"],
         {"t.jsonl": jl(GOOD, GOOD)}),
    Case("invalid JSON line", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:2", "invalid JSON"],
         {"t.jsonl": jl(GOOD) + "{nope\n"}),
    Case("invalid .json", ["tasks", "stats", f"{T}/t.json"], ["t.json:1", "invalid JSON"], {"t.json": "[{,]"}),
    Case("empty tasks file", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl", "no task rows"], {"t.jsonl": ""}),
    Case("blank-lines-only tasks file", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl", "no task rows"],
         {"t.jsonl": "\n  \n"}),
    Case("every row bad under --skip-bad", ["tasks", "stats", "--skip-bad", f"{T}/t.jsonl"],
         ["t.jsonl", "none of its 2 rows"], {"t.jsonl": "[1]\n" + jl({**GOOD, "patch": 5, "gold_files": []})}),
    Case("non-UTF-8 .jsonl", ["tasks", "stats", f"{T}/t.jsonl"], ["t.jsonl:1", "UTF-8"],
         {"t.jsonl": json.dumps(GOOD).replace('"x"', '"caf\\u00e9"').encode().replace(b"\\u00e9", b"\xe9") + b"\n"}),
    Case("non-UTF-8 .json", ["tasks", "stats", f"{T}/t.json"], ["t.json", "UTF-8"], {"t.json": b"[\xff]"}),
    Case(".jsonl.gz that is not gzip", ["tasks", "stats", f"{T}/t.jsonl.gz"], ["t.jsonl.gz", "gzip"],
         {"t.jsonl.gz": "not gzip"}),
    # damaged inside the deflate stream (a bad download, a flipped byte): zlib.error, which is no OSError
    Case(".jsonl.gz damaged inside", ["tasks", "stats", f"{T}/t.jsonl.gz"], ["t.jsonl.gz", "gzip"],
         {"t.jsonl.gz": (lambda z: z[:10] + bytes(b ^ 0x55 for b in z[10:40]) + z[40:])(
             gzip.compress(jl(*({**GOOD, "instance_id": f"o__n-{i}"} for i in range(200))).encode(), mtime=0))}),
    Case("corrupt .parquet", ["tasks", "stats", f"{T}/t.parquet"], ["t.parquet", "parquet"], {"t.parquet": "garbage"}),
    Case("tasks file missing", ["tasks", "stats", f"{T}/nope.jsonl"], ["nope.jsonl", "not found"]),
    Case("tasks path is a directory", ["tasks", "stats", f"{T}/d.jsonl"], ["d.jsonl", "is a directory"], dirs=["d.jsonl"]),
    Case("unsupported task file type", ["tasks", "stats", f"{T}/t.csv"], ["t.csv", ".csv"], {"t.csv": "a,b\n"}),
    # ---- evaluate: output paths, resume files, numeric arguments
    Case("evaluate --out is a directory", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random",
                                           "--profile", "ci", "--out", f"{T}/outdir"], ["--out", "outdir", "directory"],
         {"t.jsonl": jl(GOOD)}, ["outdir"]),
    Case("evaluate --out under a file", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random",
                                         "--profile", "ci", "--out", f"{T}/t.jsonl/r.jsonl"], ["--out", "t.jsonl"],
         {"t.jsonl": jl(GOOD)}),
    Case("evaluate resume file with a corrupt line", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random",
                                                      "--profile", "ci", "--out", f"{T}/r.jsonl"], ["r.jsonl:2"],
         {"t.jsonl": jl(GOOD), "r.jsonl": jl({"instance_id": "o__n-0", "retriever": "random"}) + "GARBAGE\n"
          + jl({"instance_id": "o__n-9", "retriever": "random"})}),
    Case("evaluate resume row is a list", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random",
                                           "--profile", "ci", "--out", f"{T}/r.jsonl"], ["r.jsonl:1"],
         {"t.jsonl": jl(GOOD), "r.jsonl": "[1, 2]\n"}),
    Case("evaluate resume file not UTF-8", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random",
                                            "--profile", "ci", "--out", f"{T}/r.jsonl"], ["r.jsonl:1"],
         {"t.jsonl": jl(GOOD), "r.jsonl": b'{"instance_id": "\xff"}\n'}),
    Case("compare a missing results file", ["compare", f"{T}/a.jsonl", f"{T}/nope.jsonl"], ["nope.jsonl", "no such"],
         {"a.jsonl": _res("bm25", "o__n-0")}),
    Case("compare one file", ["compare", f"{T}/a.jsonl"], ["at least two"], {"a.jsonl": _res("bm25", "o__n-0")}),
    Case("compare files of other tasks", ["compare", f"{T}/a.jsonl", f"{T}/b.jsonl"], ["share no instance"],
         {"a.jsonl": _res("bm25", "o__n-0"), "b.jsonl": _res("agent", "o__n-1")}),
    Case("compare --reference not compared", ["compare", f"{T}/a.jsonl", f"{T}/b.jsonl", "--reference", "dense"],
         ["--reference", "dense"], {"a.jsonl": _res("bm25", "o__n-0"), "b.jsonl": _res("agent", "o__n-0")}),
    Case("compare results file with a corrupt line", ["compare", f"{T}/a.jsonl", f"{T}/b.jsonl"], ["b.jsonl:1"],
         {"a.jsonl": _res("bm25", "o__n-0"), "b.jsonl": "GARBAGE\n" + _res("agent", "o__n-0")}),
    Case("compare --out is the first input", ["compare", f"{T}/a.jsonl", f"{T}/b.jsonl", "--out", f"{T}/a.jsonl"],
         ["--out", "a.jsonl"], {"a.jsonl": _res("bm25", "o__n-0"), "b.jsonl": _res("agent", "o__n-0")}),
    Case("compare --out is an input", ["compare", f"{T}/a.jsonl", f"{T}/b.jsonl", "--out", f"{T}/b.jsonl"],
         ["--out", "b.jsonl"], {"a.jsonl": _res("bm25", "o__n-0"), "b.jsonl": _res("agent", "o__n-0")}),
    Case("evaluate empty tasks file", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random",
                                       "--profile", "ci", "--out", f"{T}/r.jsonl"], ["t.jsonl", "no task rows"],
         {"t.jsonl": ""}),
    Case("--k -5", ["evaluate", "--tasks", "x", "--retriever", "random", "--out", "o", "--k", "-5"], ["--k", "-5"]),
    Case("--k 0", ["evaluate", "--tasks", "x", "--retriever", "random", "--out", "o", "--k", "0"], ["--k"]),
    Case("--k abc", ["evaluate", "--tasks", "x", "--retriever", "random", "--out", "o", "--k", "abc"], ["--k", "abc"]),
    Case("--workers 0", ["evaluate", "--tasks", "x", "--retriever", "random", "--out", "o", "--workers", "0"],
         ["--workers"]),
    Case("--limit -1", ["evaluate", "--tasks", "x", "--retriever", "random", "--out", "o", "--limit", "-1"],
         ["--limit"]),
    Case("unknown retriever", ["evaluate", "--tasks", "x", "--retriever", "nosuch", "--out", "o"], ["--retriever"]),
    # ---- retrieve: issue file and repository
    Case("retrieve --issue-file is a directory", ["retrieve", "--repo", T, "--retriever", "random",
                                                  "--issue-file", f"{T}/idir"], ["--issue-file", "idir", "directory"],
         dirs=["idir"]),
    Case("retrieve --issue-file missing", ["retrieve", "--repo", T, "--retriever", "random",
                                           "--issue-file", f"{T}/nope.txt"], ["--issue-file", "nope.txt"]),
    Case("retrieve --issue-file not UTF-8", ["retrieve", "--repo", T, "--retriever", "random",
                                             "--issue-file", f"{T}/i.txt"], ["i.txt", "UTF-8"], {"i.txt": b"caf\xe9\n"}),
    Case("retrieve empty issue", ["retrieve", "--repo", T, "--retriever", "random", "--issue-file", f"{T}/i.txt"],
         ["no issue text"], {"i.txt": "  \n"}),
    Case("retrieve --repo missing", ["retrieve", "--repo", f"{T}/nosuch", "--retriever", "random", "x"],
         ["nosuch"]),
    Case("retrieve --k -5", ["retrieve", "--repo", T, "--retriever", "random", "--k", "-5", "x"], ["--k"]),
    # ---- reproduce: output directory, profile
    Case("reproduce --out is a file", ["reproduce", "--profile", "ci", "--only", "01", "--out", f"{T}/f.txt"],
         ["--out", "f.txt", "is a file"], {"f.txt": "keep me\n"}),
    Case("reproduce --out under a file", ["reproduce", "--profile", "ci", "--only", "01", "--out", f"{T}/f.txt/o"],
         ["--out", "f.txt"], {"f.txt": "keep me\n"}),
    Case("reproduce --out artifacts is a file", ["reproduce", "--profile", "ci", "--only", "01", "--out", f"{T}/o"],
         ["--out", "artifacts"], {"o/artifacts": "keep me\n"}),
    Case("reproduce env.mode not a mode", ["reproduce", "--profile", "ci", "--only", "02", "--set", "env.mode=bogus"],
         ["--set env.mode", "'objects', 'worktree'", "bogus"]),
    Case("reproduce unknown profile", ["reproduce", "--profile", "nosuch", "--only", "01"], ["nosuch"]),
    Case("reproduce profile YAML missing", ["reproduce", "--profile", f"{T}/p.yaml"], ["p.yaml", "not found"]),
    Case("reproduce profile YAML syntax error", ["reproduce", "--profile", f"{T}/p.yaml", "--only", "01"],
         ["p.yaml", "YAML"], {"p.yaml": "seed: [1\nx: 2\n"}),
    Case("profile YAML not UTF-8", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--profile",
                                    f"{T}/p.yaml", "--out", f"{T}/r.jsonl"], ["p.yaml", "UTF-8"],
         {"t.jsonl": jl(GOOD), "p.yaml": b"seed: \xff\n"}),
    Case("profile YAML repeats a key", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--profile",
                                        f"{T}/p.yaml", "--out", f"{T}/r.jsonl"], ["p.yaml:4", "'top_n' appears twice"],
         {"t.jsonl": jl(GOOD), "p.yaml": "retrievers:\n  bm25:\n    top_n: 5\n    top_n: 50\n"}),
    Case("train YAML repeats a key", ["train", "--config", f"{T}/c.yaml"], ["c.yaml:3", "'max_steps' appears twice"],
         {"c.yaml": "max_steps: 2\nseed: 1\nmax_steps: 8\n"}),
    Case("profile section not a mapping", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--profile",
                                           f"{T}/p.yaml", "--out", f"{T}/r.jsonl"], ["p.yaml", "retrievers", "mapping"],
         {"t.jsonl": jl(GOOD), "p.yaml": "retrievers: [1]\n"}),
    Case("--set replaces a section by a value", ["downstream", "--tasks", "mined", "--candidates", "none", "--out",
                                                 f"{T}/d.jsonl", "--set", "downstream=5"],
         ["--set downstream", "mapping"]),
    Case("--set replaces a subsection by a value", ["verify", "--tasks", "x", "--set", "downstream.verify=abc"],
         ["--set downstream.verify", "mapping"]),
    Case("reproduce --set not KEY=VALUE", ["reproduce", "--profile", "ci", "--only", "01", "--set", "seed"],
         ["seed", "KEY=VALUE"]),
    Case("reproduce --only nosuch", ["reproduce", "--profile", "ci", "--only", "99"], ["99"]),
    Case("reproduce notebook parameter out of range", ["reproduce", "--profile", "ci", "--only", "03", "--out",
                                                       f"{T}/o", "--set", "notebooks.03_training.ceiling_tasks=-1"],
         ["--set notebooks.03_training.ceiling_tasks", ">= 1"]),
    Case("reproduce notebook parameter ill-typed", ["reproduce", "--profile", "ci", "--only", "04", "--out", f"{T}/o",
                                                    "--set", "notebooks.04_ablation.level=high"],
         ["--set notebooks.04_ablation.level", "number"]),
    Case("reproduce split limit 0", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o", "--set",
                                     "tasks.splits.train.limit=0"], ["--set tasks.splits.train.limit"]),
    Case("reproduce rank_relevance negative", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                               "--set", "agent.rank_relevance=-1"], ["--set agent.rank_relevance", ">= 0"]),
    Case("reproduce heuristic relevance_weight a word", ["reproduce", "--profile", "ci", "--only", "05", "--out",
                                                         f"{T}/o", "--set", "retrievers.grep-heuristic.relevance_weight=x"],
         ["--set retrievers.grep-heuristic.relevance_weight", "number"]),
    Case("reproduce agent choice unknown", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o", "--set",
                                            "agent.grep_view=nope"], ["--set agent.grep_view", "nope"]),
    Case("reproduce decode precision unknown", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                                "--set", "agent.decode_precision=bf61"],
         ["--set agent.decode_precision", "bf61"]),
    # ---- train: config YAML and --resume
    Case("train YAML syntax error", ["train", "--config", f"{T}/c.yaml"], ["c.yaml:3", "invalid YAML"],
         {"c.yaml": "seed: 1\nmax_steps: [1, 2\nfoo: 3\n"}),
    Case("train YAML is a list", ["train", "--config", f"{T}/c.yaml"], ["c.yaml", "mapping"], {"c.yaml": "- 1\n"}),
    Case("train YAML not UTF-8", ["train", "--config", f"{T}/c.yaml"], ["c.yaml", "UTF-8"], {"c.yaml": b"seed: \xff\n"}),
    Case("train YAML unknown setting", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs"],
         ["c.yaml", "no_such_setting"], {"c.yaml": CI_TRAIN_YAML + "\nno_such_setting: 3\n"}),
    Case("train --resume without a checkpoint", ["train", "--config", "ci", "--out", f"{T}/runs", "--name", "r",
                                                  "--resume"], ["--resume", "no complete checkpoint"]),
    Case("train --resume with only a half-written checkpoint",
         ["train", "--config", "ci", "--out", f"{T}/runs", "--name", "r", "--resume"],
         ["--resume", "checkpoint-2", "trainer_state.json"],
         {"runs/r/checkpoints/checkpoint-2/model.safetensors": b"\0" * 8,
          "runs/r/checkpoints/checkpoint-2/trainer_state.json": '{"global_st'}),
    Case("train --max-steps abc", ["train", "--max-steps", "abc"], ["--max-steps"]),
    Case("train --max-steps 0", ["train", "--max-steps", "0"], ["--max-steps"]),
    Case("train --efficiency-lambda nan", ["train", "--efficiency-lambda", "nan"], ["--efficiency-lambda"]),
    Case("train --seed x", ["train", "--seed", "x"], ["--seed"]),
    Case("train --config missing", ["train", "--config", f"{T}/nope.yaml"], ["nope.yaml"]),
    # ---- --set values for TRL's GRPOConfig / CodeGrepArgs: refused before any work, as the --set the user wrote
    Case("train --set ill-typed", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "learning_rate=abc"],
         ["--set learning_rate=abc", "float"]),
    Case("train --set unknown field", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "max_stepz=3"],
         ["--set max_stepz", "'max_steps'"]),
    Case("train --set model missing keeps an earlier run", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                                          f"model={T}/nope"], [f"{T}/nope", "no such directory"],
         {"runs/ci-advantage-lam0.1-s0/done.json": '{"seconds": 1.0, "steps": 1}'}),
    Case("retrieve --retriever oracle (free text has no gold files)",
         ["retrieve", "--repo", T, "--retriever", "oracle", "fix it"], ["--retriever oracle", "evaluate"],
         {"a.py": "x = 1\n"}),
    Case("retrieve agent --model missing", ["retrieve", "--repo", T, "--retriever", "agent", "--model", f"{T}/nope",
                                            "fix it"], [f"{T}/nope", "no such directory"]),
    Case("retrieve dense --model missing", ["retrieve", "--repo", T, "--retriever", "dense", "--model", f"{T}/nope",
                                            "fix it"], [f"{T}/nope", "no such directory"], {"a.py": "x = 1\n"},
         one_line=True),
    Case("reproduce --set train value ill-typed", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                                   "--set", "train.learning_rate=abc"],
         ["--set train.learning_rate", "number"]),
    Case("reproduce --set train.top_p above 1", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                                "--set", "train.top_p=5"], ["--set train.top_p", "0..1"]),
    # ---- other commands: numeric arguments, input and output paths
    Case("verify --timeout -1", ["verify", "--tasks", "x", "--timeout", "-1"], ["--timeout", "-1"]),
    Case("verify --timeout nan", ["verify", "--tasks", "x", "--timeout", "nan"], ["--timeout", "nan"]),
    Case("verify --jobs 0", ["verify", "--tasks", "x", "--jobs", "0"], ["--jobs"]),
    Case("downstream --limit 0", ["downstream", "--tasks", "x", "--out", "o", "--limit", "0"], ["--limit"]),
    Case("downstream --set value ill-typed", ["downstream", "--tasks", "mined", "--candidates", "none", "--out",
                                              f"{T}/d.jsonl", "--set", "downstream.threshold.grid=abc"],
         ["--set downstream.threshold.grid"]),
    Case("verify --set value ill-typed", ["verify", "--tasks", "x", "--set", "downstream.verify.timeout=abc"],
         ["--set downstream.verify.timeout"]),
    # mini-swe-agent reads a step or cost limit of 0 or less as no limit at all: a run without end, not none
    Case("downstream --set mini-swe-agent step_limit 0", ["downstream", "--tasks", "mined", "--candidates", "none",
                                                         "--out", f"{T}/d.jsonl", "--set",
                                                         "downstream.mini_swe_agent.step_limit=0"],
         ["--set downstream.mini_swe_agent.step_limit", ">= 1"]),
    Case("downstream --set mini-swe-agent command_timeout negative", ["downstream", "--tasks", "mined", "--candidates",
                                                                     "none", "--out", f"{T}/d.jsonl", "--set",
                                                                     "downstream.mini_swe_agent.command_timeout=-5"],
         ["--set downstream.mini_swe_agent.command_timeout", ">= 1"]),
    Case("downstream --candidates corrupt", ["downstream", "--tasks", f"{T}/t.jsonl", "--candidates", f"{T}/c.jsonl",
                                             "--out", f"{T}/d.jsonl"], ["c.jsonl:2"],
         {"t.jsonl": jl(GOOD), "c.jsonl": jl({"instance_id": "o__n-1", "files": []}) + "GARBAGE\n"}),
    Case("downstream --candidates missing", ["downstream", "--tasks", f"{T}/t.jsonl", "--candidates",
                                             f"{T}/nope.jsonl", "--out", f"{T}/d.jsonl"], ["nope.jsonl"],
         {"t.jsonl": jl(GOOD)}),
    Case("downstream --candidates is a directory", ["downstream", "--tasks", f"{T}/t.jsonl", "--candidates",
                                                    f"{T}/cands", "--out", f"{T}/d.jsonl"], ["cands", "is a directory"],
         {"t.jsonl": jl(GOOD)}, dirs=["cands"]),
    Case("downstream --compare is a directory", ["downstream", "--tasks", "mined", "--candidates", "none", "--compare",
                                                 f"{T}/prev", "--out", f"{T}/d.jsonl"], ["prev", "is a directory"],
         dirs=["prev"]),
    Case("bench retrieve --files -1", ["bench", "retrieve", "--files", "-1", "--tasks", "none"], ["--files"]),
    Case("bench retrieve --model-ref missing", ["bench", "retrieve", "--model-ref", f"{T}/nope", "--tasks", "none",
                                                "--files", "10", "--queries", "1", "--episodes", "1"],
         [f"{T}/nope", "no such directory"]),
    Case("bench env --concurrency 0", ["bench", "env", "--concurrency", "0"], ["--concurrency", "'0'"]),
    Case("bench env --modes unknown", ["bench", "env", "--modes", "objects,nope"], ["--modes", "nope"]),
    Case("bench train min above max", ["bench", "train", "--sft-min-tokens", "900", "--sft-max-tokens", "100"],
         ["--sft-min-tokens 900", "--sft-max-tokens 100"]),
    Case("bench train --scored-share above 1", ["bench", "train", "--scored-share", "1.5"], ["--scored-share 1.5"]),
    Case("bench train --scored-share 0", ["bench", "train", "--scored-share", "0"], ["--scored-share", "'0'"]),
    Case("bench decode --result under a file", ["bench", "decode", "--result", f"{T}/f.txt/r.json"],
         ["--result", "f.txt"], {"f.txt": "keep\n"}),
    Case("bench decode --batch-sizes 0", ["bench", "decode", "--batch-sizes", "8", "0"], ["--batch-sizes", "'0'"]),
    Case("bench demos --result under a file", ["bench", "demos", "--result", f"{T}/f.txt/r.json"],
         ["--result", "f.txt"], {"f.txt": "keep\n"}),
    Case("bench ceiling --result under a file", ["bench", "ceiling", "--result", f"{T}/f.txt/r.json"],
         ["--result", "f.txt"], {"f.txt": "keep\n"}),
    Case("bench ceiling --result over its --profile", ["bench", "ceiling", "--profile", f"{T}/p.yaml", "--result",
                                                       f"{T}/p.yaml"], ["--result", "p.yaml"],
         {"p.yaml": "agent: {max_turns: 2}\n"}),
    Case("ablation study --result under a file", ["ablation", "study", "--config", "ci", "--seeds", "1", "--out",
                                                  f"{T}/st", "--result", f"{T}/f.txt/r.json"],
         ["--result", "f.txt"], {"f.txt": "keep\n"}),
    Case("mine --out is a directory", ["mine", "--out", f"{T}/outdir", f"{T}/t.jsonl"], ["--out", "outdir"],
         {"t.jsonl": jl(GOOD)}, ["outdir"]),
    Case("mine --format nosuch", ["mine", "--format", "nosuch", "--out", f"{T}/m.jsonl", f"{T}/t.jsonl"],
         ["--format", "nosuch"], {"t.jsonl": jl(GOOD)}),
    Case("mine --format on rows no format recognises", ["mine", "--workers", "1", "--format", "mini-swe-agent", "--out",
                                                         f"{T}/m.jsonl", f"{T}/r.jsonl"],
         ["r.jsonl:1", "--format mini-swe-agent", "no known format"],
         {"r.jsonl": jl({"instance_id": "django__django-11099", "log": [{"who": "agent", "cmd": "ls"}]})}),
    Case("mine a Hugging Face dataset id offline", ["mine", "--workers", "2", "--out", f"{T}/m.jsonl", "nosuch/dataset"],
         ["'nosuch/dataset'", "offline"]),
    Case("mine a .jsonl.gz that is not gzip", ["mine", "--workers", "2", "--out", f"{T}/m.jsonl", f"{T}/t.jsonl.gz"],
         ["t.jsonl.gz", "gzip"], {"t.jsonl.gz": "not gzip\n"}),
    Case("mine a corrupt .parquet", ["mine", "--workers", "1", "--out", f"{T}/m.jsonl", f"{T}/t.parquet"],
         ["t.parquet", "parquet"], {"t.parquet": "garbage"}),
    Case("tool CALLS not JSON", ["tool", "--dir", T, "notjson"], ["CALLS", "JSON"]),
    Case("tool CALLS a list of ints", ["tool", "--dir", T, "[1, 2]"], ["CALLS"]),
    Case("tool --repo missing", ["tool", "--repo", f"{T}/nosuch", '{"name": "grep", "arguments": {"pattern": "x"}}'],
         ["nosuch"]),
    Case("report --artifacts missing", ["report", "--artifacts", f"{T}/nosuch"], ["nosuch"]),
    Case("evaluate --repos missing", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--repos",
                                      f"{T}/nosuch", "--out", f"{T}/r.jsonl"], ["--repos", "nosuch", "not a directory"],
         {"t.jsonl": jl(GOOD)}),
    Case("report --artifacts a folder without a run", ["report", "--artifacts", f"{T}/empty"],
         ["--artifacts", "empty", "holds no run"], {"empty/notes.txt": "keep\n"}),
    Case("report corrupt run.json", ["report", "--artifacts", f"{T}/a"], [f"{T}/a/run.json:1", "invalid JSON"],
         {"a/run.json": "{bad", "a/headlines/03_training.json": "{}"}),
    Case("report corrupt headline", ["report", "--artifacts", f"{T}/a"],
         [f"{T}/a/headlines/03_training.json:2", "invalid JSON"],
         {"a/run.json": "{}", "a/headlines/03_training.json": '{"numbers": {},\n'}),
    Case("report headline numbers a list", ["report", "--artifacts", f"{T}/a"],
         [f"{T}/a/headlines/03_training.json", "'numbers'", "list"],
         {"a/run.json": "{}", "a/headlines/03_training.json": '{"notebook": "03_training", "numbers": [1, 2]}'}),
    Case("report headline value the claim table prints not a number", ["report", "--artifacts", f"{T}/a"],
         [f"{T}/a/headlines/01_mining.json", "numbers['gold_precision']", "must be a number", "str"],
         {"a/run.json": "{}", "a/headlines/01_mining.json": '{"numbers": {"gold_precision": "0.9", "gold_n": 5}}'}),
    Case("report headline reasons a list", ["report", "--artifacts", f"{T}/a"],
         [f"{T}/a/headlines/05_precision_threshold.json", "'reasons'", "list"],
         {"a/run.json": "{}", "a/headlines/05_precision_threshold.json": '{"numbers": {}, "reasons": ["x"]}'}),
    Case("report --replicates with a P@1 that is not a number", ["report", "--replicates", f"{T}/o.json", "--results",
                                                                 f"{T}/r"],
         [f"{T}/r/smoke/per_instance.json", "GRPO", "number"],
         {"r/smoke/per_instance.json": json.dumps({"p_at_1": {"eval/GRPO": {"a": "1"}, "eval/bm25": {"a": None}}})}),
    Case("report --replicates with p_at_1 a list", ["report", "--replicates", f"{T}/o.json", "--results", f"{T}/r"],
         [f"{T}/r/smoke/per_instance.json", "'p_at_1'", "list"],
         {"r/smoke/per_instance.json": json.dumps({"p_at_1": [1, 2]})}),
    Case("report --readme from a corrupt committed run.json", ["report", "--readme", f"{T}/README.md", "--results",
                                                               f"{T}/res"], [f"{T}/res/run.json:1", "invalid JSON"],
         {"README.md": f"x\n{README_BEGIN}\nthe good table\n{README_END}\n", "res/run.json": "{bad"}),
    Case("report --seeds with one run", ["report", "--seeds", f"{T}/res/s0"], ["--seeds", "at least two"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --seeds with a folder that holds no run", ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1"],
         ["--seeds", "res/s1", "neither a per_instance.json", "nor a run.json"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --seeds with a P@1 that is not a number", ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1"],
         ["res/s1/per_instance.json", "GRPO", "'x'"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": "x"}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --seeds: runs that share no policy pair", ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1"],
         ["--seeds", "no pair", "s1: random"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/per_instance.json": json.dumps({"p_at_1": {"eval/random": {"a": 0.0}}})}),
    Case("report --seeds with a habits.json that lacks the counts", ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1"],
         ["res/s1/habits.json", "'habits'", "grep_calls"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 0.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/habits.json": json.dumps({"habits": {"x/GRPO": {"glob": 3}}})}),
    Case("report --seeds with one run given twice", ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1",
                                                     f"{T}/res/../res/s0"], ["--seeds", "res/../res/s0", "the same run as"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 0.0}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --seeds-against holding a run of --seeds", ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1",
                                                             "--seeds-against", f"{T}/res/s2", f"{T}/res/s1"],
         ["--seeds-against", "res/s1", "the same run as --seeds"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 0.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s2/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 0.0}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --seeds with a bench demos result of several points", ["report", "--seeds", f"{T}/d0.json",
                                                                     f"{T}/d1.json"],
         ["d1.json", "holds 2 points", "one --tasks size"],
         {"d0.json": json.dumps({"dev_ids": ["a", "b"], "expert_per_task": [1.0, 1.0], "points": [{"per_task": [1.0, 0.0]}]}),
          "d1.json": json.dumps({"dev_ids": ["a", "b"], "expert_per_task": [1.0, 1.0], "points": [{"per_task": [1.0, 0.0]}, {"per_task": [0.0, 0.0]}]})}),
    Case("report --seeds with a bench demos row of the wrong length", ["report", "--seeds", f"{T}/d0.json",
                                                                      f"{T}/d1.json"],
         ["d1.json", "scripted-expert row", "one P@1 per dev task (2)", "list of 3"],
         {"d0.json": json.dumps({"dev_ids": ["a", "b"], "expert_per_task": [1.0, 1.0], "points": [{"per_task": [1.0, 0.0]}]}),
          "d1.json": json.dumps({"dev_ids": ["a", "b"], "expert_per_task": [1.0, 1.0, 0.0], "points": [{"per_task": [1.0, 0.0]}]})}),
    Case("report --seeds with a bench demos result without rows", ["report", "--seeds", f"{T}/d0.json", f"{T}/d1.json"],
         ["d1.json", "no 'per_task' row"],
         {"d0.json": json.dumps({"dev_ids": ["a"], "expert_per_task": [1.0], "points": [{"per_task": [1.0]}]}),
          "d1.json": json.dumps({"dev_ids": ["a"], "points": [{"n_tasks": 40}]})}),
    Case("report --seeds with a JSON file that is not a bench demos result", ["report", "--seeds", f"{T}/d0.json",
                                                                             f"{T}/x.json"],
         ["x.json", "not a bench demos --result file"],
         {"d0.json": json.dumps({"dev_ids": ["a", "b"], "expert_per_task": [1.0, 1.0], "points": [{"per_task": [1.0, 0.0]}]}), "x.json": json.dumps({"p_at_1": 0.5})}),
    Case("report --seeds-against without --seeds", ["report", "--seeds-against", f"{T}/res/s0", f"{T}/res/s1"],
         ["--seeds-against needs --seeds"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --seeds-against with one run", ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1", "--seeds-against",
                                                 f"{T}/res/s2"], ["--seeds-against", "two or more runs", "got 2 and 1"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 0.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s2/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 0.0}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --seeds-plot that is not a figure file", ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1",
                                                            "--seeds-plot", f"{T}/seeds.txt"], ["--seeds-plot", ".png"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 0.0}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --seeds --seeds-out over a run's per_instance.json",
         ["report", "--seeds", f"{T}/res/s0", f"{T}/res/s1", "--seeds-out", f"{T}/res/s1/per_instance.json"],
         ["--seeds-out", "is also an input"],
         {"res/s0/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}}),
          "res/s1/per_instance.json": json.dumps({"p_at_1": {"x/GRPO": {"a": 0.0}, "eval/bm25": {"a": 0.0}}})}),
    Case("report --replicates: per_instance.json without P@1 tables", ["report", "--replicates", f"{T}/rep.json",
                                                                       "--results", f"{T}/res"],
         [f"{T}/res/ci/per_instance.json", "P@1"], {"res/ci/per_instance.json": '{"a": {"b": 1}}'}),
    Case("report --replicates: a P@1 that is not a number", ["report", "--replicates", f"{T}/rep.json", "--results",
                                                             f"{T}/res"], ["per_instance.json", "GRPO", "'high'"],
         {"res/ci/per_instance.json": '{"p_at_1": {"x/GRPO": {"a": "high"}, "x/warm_start": {"a": 1.0}}}'}),
    Case("bench decode with --processes and --batch-sizes", ["bench", "decode", "--processes", "2", "--batch-sizes",
                                                              "8"], ["--processes", "--batch-sizes", "one of them"]),
    Case("bench decode with --batch-sizes and --decode-precisions", ["bench", "decode", "--batch-sizes", "8",
                                                                      "--decode-precisions", "bf16"],
         ["--batch-sizes", "--decode-precisions", "one of them"]),
    Case("bench decode with --attention and --decode-precisions", ["bench", "decode", "--attention", "spans",
                                                                    "--decode-precisions", "bf16"],
         ["--decode-precisions", "--attention", "one of them"]),
    Case("bench decode --attention ragged", ["bench", "decode", "--attention", "ragged"],
         ["--attention", "'ragged'"]),
    Case("bench decode --decode-precisions bf61", ["bench", "decode", "--decode-precisions", "bf61"],
         ["--decode-precisions", "'bf61'"]),
    Case("export a run that does not exist", ["export", f"{T}/nosuch"], ["nosuch"]),
    Case("export --out a directory of the user's", ["export", f"{T}/r", "--out", f"{T}/keep"],
         ["--out", "keep", "not an earlier export"], {**RUN, "keep/notes.txt": "keep\n"}),
    Case("export --out the directory holding the run", ["export", f"{T}/r", "--out", T], ["--out", "holds the run"],
         RUN),
    Case("export keeps an earlier export when the run record is damaged", ["export", f"{T}/r"],
         ["r/config.json:1", "invalid JSON"], {**RUN, "r/config.json": "{bad", "r/export/README.md": "# card\n",
                                               "r/export/config.json": "{}"}),
    Case("tasks default --out is a file", ["tasks", "default", "--out", f"{T}/f.txt"], ["f.txt"], {"f.txt": "keep\n"}),
    Case("tool --timeout -1", ["tool", "--dir", T, "--timeout", "-1", '{"name": "grep", "arguments": {"pattern": "x"}}'],
         ["--timeout"]),
    Case("bench policies: --run without a run record", ["bench", "policies", "--run", f"{T}/r", "--out", f"{T}/o"],
         ["--run", "config.json"], dirs=["r"]),
    Case("an option no parser knows is refused by the sub-command chosen",
         ["bench", "policies", "--run", f"{T}/r", "--bogus", "1"], ["codegrep bench policies: error",
                                                                   "--bogus 1", "'codegrep bench policies --help'"]),
    Case("tool --timeout nan", ["tool", "--dir", T, "--timeout", "nan", '{"name": "grep", "arguments": {"pattern": "x"}}'],
         ["--timeout"]),
    # ---- audit of the sub-commands (bad-input sweep): tracebacks, silent results, late or misleading refusals
    Case("tasks stats --split no task has", ["tasks", "stats", "--split", "nosuch", f"{T}/t.jsonl"],
         ["t.jsonl", "'nosuch'", "train"], {"t.jsonl": jl({**GOOD, "split": "train"})}),
    Case("tool CALLS an empty list", ["tool", "--dir", T, "[]"], ["CALLS", "empty"]),
    Case("tool --repo not a git repository", ["tool", "--repo", T, '{"name": "read", "arguments": {"path": "a.py"}}'],
         ["--repo", T, "not a git repository"], {"a.py": "x = 1\n"}),
    Case("downstream --candidates row not an object", ["downstream", "--tasks", f"{T}/t.jsonl", "--candidates",
                                                       f"{T}/c.jsonl", "--out", f"{T}/d.jsonl"],
         ["c.jsonl:1", "JSON object"], {"t.jsonl": jl(GOOD), "c.jsonl": "5\n"}),
    Case("downstream --candidates not UTF-8", ["downstream", "--tasks", f"{T}/t.jsonl", "--candidates", f"{T}/c.jsonl",
                                               "--out", f"{T}/d.jsonl"], ["c.jsonl", "UTF-8"],
         {"t.jsonl": jl(GOOD), "c.jsonl": b'{"instance_id": "caf\xe9", "files": []}\n'}),
    Case("downstream --compare not a results file", ["downstream", "--tasks", "mined", "--candidates", "none", "--out",
                                                     f"{T}/d.jsonl", "--compare", f"{T}/c.jsonl"],
         ["c.jsonl:1", "downstream result"], {"c.jsonl": jl({"a": 1})}),
    Case("downstream --out is the --candidates file", ["downstream", "--tasks", "mined", "--candidates", f"{T}/c.jsonl",
                                                       "--out", f"{T}/c.jsonl"], ["--out", "c.jsonl", "--candidates"],
         {"c.jsonl": jl({"instance_id": "o__n-1", "files": ["a.py"]})}),
    Case("downstream --from-output trajectory not JSON", ["downstream", "--tasks", f"{T}/t.jsonl", "--agent",
                                                          "mini-swe-agent", "--candidates", "none", "--out",
                                                          f"{T}/d.jsonl", "--from-output", f"{T}/runs"],
         ["runs/x.traj.json:1", "invalid JSON"], {"t.jsonl": jl(GOOD), "runs/x.traj.json": "{bad"}),
    Case("downstream --from-output without trajectories keeps an earlier --out",
         ["downstream", "--tasks", f"{T}/t.jsonl", "--agent", "mini-swe-agent", "--candidates", "none", "--out",
          f"{T}/d.jsonl", "--from-output", f"{T}/runs"], ["--from-output", "runs", "traj.json"],
         {"t.jsonl": jl(GOOD), "d.jsonl": jl({"instance_id": "o__n-1"})}, ["runs"]),
    Case("downstream --report not a JSON object", ["downstream", "--tasks", f"{T}/t.jsonl", "--agent", "openhands",
                                                   "--candidates", "none", "--out", f"{T}/d.jsonl", "--from-output",
                                                   f"{T}/o.jsonl", "--report", f"{T}/rep.json"],
         ["rep.json", "JSON object"], {"t.jsonl": jl(GOOD), "o.jsonl": "", "rep.json": "[1, 2]"}),
    Case("downstream --from-output empty OpenHands output keeps an earlier --out",
         ["downstream", "--tasks", f"{T}/t.jsonl", "--agent", "openhands", "--candidates", "none", "--out",
          f"{T}/d.jsonl", "--from-output", f"{T}/o.jsonl"], ["--from-output", "o.jsonl", "no results"],
         {"t.jsonl": jl(GOOD), "o.jsonl": "", "d.jsonl": jl({"instance_id": "o__n-1"})}),
    Case("downstream --from-output OpenHands output not UTF-8",
         ["downstream", "--tasks", "none", "--agent", "openhands", "--candidates", "none", "--out", f"{T}/d.jsonl",
          "--from-output", f"{T}/o.jsonl"], ["o.jsonl", "UTF-8"], {"o.jsonl": b'{"instance_id": "caf\xe9"}\n'}),
    Case("downstream --from-output OpenHands row not an object",
         ["downstream", "--tasks", "none", "--agent", "openhands", "--candidates", "none", "--out", f"{T}/d.jsonl",
          "--from-output", f"{T}/o.jsonl"], ["o.jsonl:2", "JSON object"], {"o.jsonl": jl({"instance_id": "a__b-1",
                                                                                          "history": []}) + "[1]\n"}),
    Case("downstream --from-output OpenHands row without an instance id",
         ["downstream", "--tasks", "none", "--agent", "openhands", "--candidates", "none", "--out", f"{T}/d.jsonl",
          "--from-output", f"{T}/o.jsonl"], ["o.jsonl:1", "instance_id"], {"o.jsonl": jl({"history": []})}),
    Case("downstream --from-output trajectory truncated gzip",
         ["downstream", "--tasks", "none", "--agent", "mini-swe-agent", "--candidates", "none", "--out",
          f"{T}/d.jsonl", "--from-output", f"{T}/runs"], ["runs/a__b-1.traj.json.gz", "gzip"],
         {"runs/a__b-1.traj.json.gz": gzip.compress(b'{"messages": []}')[:12]}),
    Case("verify --patch not UTF-8", ["verify", "--tasks", f"{T}/t.jsonl", "--repos", T, "--patch", f"{T}/p.diff"],
         ["--patch", "p.diff", "UTF-8"],
         {"t.jsonl": jl({**GOOD, "repo": "sympy/sympy", "instance_id": "sympy__sympy-1"}), "p.diff": b"\xff\n"}),
    Case("verify --out is the --tasks file", ["verify", "--tasks", f"{T}/t.jsonl", "--repos", T, "--patch", "none",
                                              "--out", f"{T}/t.jsonl"], ["--out", "t.jsonl", "--tasks"],
         {"t.jsonl": jl({**GOOD, "repo": "sympy/sympy", "instance_id": "sympy__sympy-1"})}),
    Case("verify --out is a directory", ["verify", "--tasks", f"{T}/t.jsonl", "--repos", T, "--patch", "none", "--out",
                                         f"{T}/outdir"], ["--out", "outdir"],
         {"t.jsonl": jl({**GOOD, "repo": "sympy/sympy", "instance_id": "sympy__sympy-1"})}, ["outdir"]),
    # --set model=<missing>: a range the old code let through ends at the model check, never in training
    Case("train --set num_generations=0", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "num_generations=0",
                                           "--set", f"model={T}/nope"], ["--set num_generations", ">= 2"]),
    Case("train --set per_device_train_batch_size=0", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                                       "per_device_train_batch_size=0", "--set", f"model={T}/nope"],
         ["--set per_device_train_batch_size", ">= 1"]),
    Case("reproduce --set train.num_generations=0", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                                     "--set", "train.num_generations=0", "--set",
                                                     "notebooks.03_training.ceiling_tasks=-1"],
         ["--set train.num_generations", ">= 2"]),  # (the old code stopped at the notebook parameter, after it)
    Case("train --name .. (OUT/NAME is removed before a fresh run)", ["train", "--config", "ci", "--out", f"{T}/runs",
                                                                      "--name", "..", "--set", f"model={T}/nope"],
         ["--name '..'", "run name"], {"keep.txt": "keep\n"}),
    Case("train --name .", ["train", "--config", "ci", "--out", f"{T}/runs", "--name", ".", "--set", f"model={T}/nope"],
         ["--name '.'", "run name"], {"runs/other-run/done.json": "{}"}),
    Case("reproduce --set train.config missing", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                                  "--set", f"train.config={T}/nope.yaml", "--set",
                                                  "notebooks.03_training.ceiling_tasks=-1"],
         [f"{T}/nope.yaml", "not found"]),  # (the old code stopped at the notebook parameter, then notebook 03 failed)
    # --result under a file: where the old code let --out or --first-seed through, it stops there, before training
    Case("ablation study --out is a file", ["ablation", "study", "--config", "ci", "--seeds", "1", "--out", f"{T}/f.txt",
                                            "--result", f"{T}/f.txt/r.json"], ["--out", "f.txt", "is a file"],
         {"f.txt": "keep\n"}),
    Case("ablation study --first-seed not below --seeds", ["ablation", "study", "--config", "ci", "--seeds", "1",
                                                           "--first-seed", "3", "--out", f"{T}/st", "--result",
                                                           f"{T}/f.txt/r.json"], ["--first-seed 3", "--seeds 1"],
         {"f.txt": "keep\n"}),
    Case("bench mcp --files 0", ["bench", "mcp", "--files", "0"], ["--files", "'0'"]),
    Case("bench mcp --out under a file", ["bench", "mcp", "--files", "10", "--queries", "1", "--out",
                                          f"{T}/f.txt/r.json"], ["--out", "f.txt"], {"f.txt": "keep\n"}),
    # ---- second sweep (every sub-command's path/number/choice arguments): tracebacks, silent results, late refusals
    Case("report --readme not UTF-8", ["report", "--readme", f"{T}/README.md", "--results", f"{T}/res"],
         ["--readme", "README.md", "UTF-8"],
         {"README.md": f"caf\xe9\n{README_BEGIN}\n{README_END}\n".encode("latin-1"), "res/run.json": "{}"}),
    Case("downstream --out is a directory (refused before the run)", ["downstream", "--tasks", "mined", "--candidates",
                                                                       "none", "--out", f"{T}/od"],
         ["--out", "od", "is a directory"], dirs=["od"]),
    Case("downstream --candidates empty (not 'nothing retrieved for every task')",
         ["downstream", "--tasks", "mined", "--candidates", f"{T}/c.jsonl", "--out", f"{T}/d.jsonl"],
         ["c.jsonl", "no candidates rows", "--candidates none"], {"c.jsonl": "", "d.jsonl": "keep\n"}),
    Case("retrieve issue text and --issue-file", ["retrieve", "--repo", T, "--retriever", "bm25", "--issue-file",
                                                  f"{T}/i.txt", "parse fails"], ["--issue-file", "not both"],
         {"i.txt": "other issue\n", "a.py": "def parse(): pass\n"}),
    Case("tool --dir with --commit (a plain directory has no commits)",
         ["tool", "--dir", T, "--commit", "abc", '{"name": "grep", "arguments": {"pattern": "x"}}'],
         ["--dir", "--commit", "do not apply"], {"a.py": "x = 1\n"}),
    Case("tool --dir with --repo", ["tool", "--dir", T, "--repo", f"{T}/r", '{"name": "grep", "arguments": {"pattern": '
                                    '"x"}}'], ["--dir", "--repo", "do not apply"], {"a.py": "x = 1\n"}, ["r"]),
    Case("tool --dir is a file", ["tool", "--dir", f"{T}/f.txt", '{"name": "grep", "arguments": {"pattern": "x"}}'],
         ["--dir", "f.txt", "not a directory"], {"f.txt": "keep\n"}),
    Case("tasks default --out under a file", ["tasks", "default", "--out", f"{T}/f.txt/sets"],
         ["--out", f"{T}/f.txt/sets", "is a file"], {"f.txt": "keep\n"}),
    Case("task patch names no file and no gold_files", ["tasks", "stats", f"{T}/t.jsonl"],
         ["t.jsonl:1", "'patch' names no file"], {"t.jsonl": jl({**GOOD, "gold_files": [], "patch": "fix it"})}),
    # counts whose 0 the trainer read as "not set" (every task, every demonstration), and TRL values taken as they are
    *[Case(f"train YAML {key}: {value}", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs", "--set",
                                          f"model={T}/nope"], ["c.yaml", key, rule],
           {"c.yaml": re.sub(rf"(?m)^{key}:.*$", f"{key}: {value}", CI_TRAIN_YAML)})
      for key, value, rule in (("train_tasks", 0, ">= 1"), ("sft_max_demos", 0, ">= 1"), ("eval_tasks", 0, ">= 1"),
                               ("sft_batch_size", 0, ">= 1"), ("sft_epochs", 0, "> 0"), ("sft_seed", -1, ">= 0"),
                               ("learning_rate", -0.001, ">= 0"), ("temperature", 0.0, "> 0"),
                               ("max_completion_length", 0, ">= 1"))],
    # values read otherwise (max_steps <= 0: epochs; kl_probe_every 0: 1), signs and shapes of weights and grids
    *[Case(f"train YAML {key}: {value}", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs", "--set",
                                          f"model={T}/nope"], ["c.yaml", key, rule],
           {"c.yaml": re.sub(rf"(?m)^{key}:.*$", f"{key}: {value}", CI_TRAIN_YAML)})
      for key, value, rule in (("max_steps", 0, ">= 1"), ("max_steps", -1, ">= 1"), ("beta", -0.1, ">= 0"),
                               ("format_weight", -0.2, ">= 0"), ("lambda_grid", "[]", "empty"),
                               ("lambda_grid", "[0.1, -0.1]", "item 2"), ("efficiency_weights", "[0.5, -1, 0]", ">= 0"),
                               ("ablation_probe_every", 0, ">= 1"), ("ablation_max_steps", 0, ">= 1"),
                               ("ablation_screen_samples", 1, ">= 2"), ("ablation_seeds", "[0, -1]", ">= 0"),
                               ("ablation_layers", "[reward, advantag]", "advantag"),
                               ("sft_sources", "[synthetic, recordd]", "recordd"),
                               ("sft_sources", "[format]", "mechanism"),
                               ("data_ablation_arms", "[synthetic+catm, synth]", "synth"),
                               ("sft_lr_scheduler", "steep", "steep"))],
    Case("train YAML without max_steps", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs", "--set",
                                          f"model={T}/nope"], ["c.yaml", "max_steps is not set", "epochs"],
         {"c.yaml": re.sub(r"(?m)^max_steps:.*\n", "", CI_TRAIN_YAML)}),
    Case("export a run that does not exist", ["export", f"{T}/nope", "--runs-dir", f"{T}/runs"],
         ["nope: no such run directory", "--runs-dir"]),
    Case("train --set kl_probe_every=0", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "kl_probe_every=0",
                                          "--set", f"model={T}/nope"], ["--set kl_probe_every", ">= 1"]),
    Case("train --set seen_credit=2", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "seen_credit=2",
                                       "--set", f"model={T}/nope"], ["--set seen_credit", "0..1"]),
    Case("train --set max_steps=-1", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "max_steps=-1",
                                      "--set", f"model={T}/nope"], ["--set max_steps", ">= 1"]),
    Case("reproduce --set train.max_steps=0", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                               "--set", "train.max_steps=0"], ["--set train.max_steps", ">= 1"]),
    Case("reproduce --set train.sft_sources=[bogus]", ["reproduce", "--profile", "ci", "--only", "03", "--out",
                                                       f"{T}/o", "--set", "train.sft_sources=[bogus]"],
         ["train.sft_sources", "bogus"]),
    Case("reproduce --set train.efficiency_weights=[1,-1,0]", ["reproduce", "--profile", "ci", "--only", "03", "--out",
                                                               f"{T}/o", "--set", "train.efficiency_weights=[1,-1,0]"],
         ["--set train.efficiency_weights", ">= 0"]),
    Case("train --set sft_max_demos=0", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "sft_max_demos=0",
                                         "--set", f"model={T}/nope"], ["--set sft_max_demos", ">= 1"]),
    Case("train --set learning_rate=-1", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "learning_rate=-1",
                                          "--set", f"model={T}/nope"], ["--set learning_rate", ">= 0"]),
    Case("reproduce --set train.temperature=0", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                                 "--set", "train.temperature=0"], ["--set train.temperature", "> 0"]),
    Case("train --out is a file (refused before the model is resolved)",
         ["train", "--config", "ci", "--out", f"{T}/f.txt", "--set", f"model={T}/nope"], ["--out", "f.txt", "is a file"],
         {"f.txt": "keep\n"}),
    Case("train --name that is a file under --out", ["train", "--config", "ci", "--out", f"{T}/runs", "--name", "r",
                                                     "--set", f"model={T}/nope"], ["--out", "runs/r", "is a file"],
         {"runs/r": "keep\n"}),
    Case("mcp --commit without --query (the server ignored it)", ["mcp", "--repo", T, "--commit", "HEAD"],
         ["--commit HEAD", "--query"], dirs=["src"]),
    Case("verify --patch is a directory", ["verify", "--tasks", f"{T}/t.jsonl", "--repos", T, "--patch", f"{T}/pd"],
         ["--patch", "pd", "is a directory"],
         {"t.jsonl": jl({**GOOD, "repo": "sympy/sympy", "instance_id": "sympy__sympy-1"})}, ["pd"]),
    Case("report --figures is a file", ["report", "--artifacts", f"{T}/a", "--figures", f"{T}/f.txt"],
         ["--figures", "f.txt", "not a directory"], {"a/run.json": "{}", "f.txt": "keep\n"}),
    Case("report --figures missing", ["report", "--artifacts", f"{T}/a", "--figures", f"{T}/figs"],
         ["--figures", "figs", "not a directory"], {"a/run.json": "{}"}),
    *[Case(f"evaluate --retriever {name} --model missing (refused before any task)",
           ["evaluate", "--tasks", f"{T}/t.jsonl", "--repos", f"{T}/repos", "--retriever", name, "--model", f"{T}/nope",
            "--profile", "ci", "--out", f"{T}/r.jsonl"], [f"{T}/nope", "no such directory"], {"t.jsonl": jl(GOOD)},
           ["repos"]) for name in ("dense", "agent")],
    # a stopped run's hidden rows of another retriever: the error named --out, which did not exist
    Case("evaluate --out whose stopped run was another retriever",
         ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--out", f"{T}/r.jsonl"],
         [f"{T}/.r.jsonl.partial", "'bm25'", "stopped run"],
         {"t.jsonl": jl(GOOD), ".r.jsonl.partial": jl({"instance_id": "o__n-1", "retriever": "bm25"})}),
    # a negative seed: numpy's ValueError inside transformers' set_seed once training started (an internal error)
    Case("train YAML seed: -1", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs", "--set", f"model={T}/nope"],
         ["c.yaml", "seed", ">= 0"], {"c.yaml": re.sub(r"(?m)^seed:.*$", "seed: -1", CI_TRAIN_YAML)}),
    Case("train --set seed=-1", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "seed=-1", "--set",
                                 f"model={T}/nope"], ["--set seed", ">= 0"]),
    *[Case(f"{' '.join(a for a in argv[:2] if not a.startswith('-'))} --seed -1", [*argv, "--seed", "-1"], ["--seed", "'-1'"])
      for argv in (["train", "--config", "ci"], ["reproduce", "--only", "01"], ["bench", "ceiling"], ["bench", "demos"],
                   ["bench", "decode"], ["bench", "train"], ["bench", "mine"], ["bench", "mcp"],
                   ["downstream", "--tasks", "mined", "--candidates", "none", "--out", f"{T}/d.jsonl"])],
    Case("train YAML a list of numbers holding a string", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs",
                                                          "--set", f"model={T}/nope"],
         ["c.yaml", "efficiency_weights", "must be a list of numbers", "'nan'"],
         {"c.yaml": re.sub(r"(?m)^efficiency_weights:.*$", "efficiency_weights: [nan, 0, 0]", CI_TRAIN_YAML)}),
    # values that are not strings reached TRL unconverted (argparse converts only string defaults): an empty value
    # (null) was a TypeError in the max_steps check or TRL, or a learning rate of None minutes later
    *[Case(f"train YAML {key}: {value or '(empty)'}", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs",
                                                      "--set", f"model={T}/nope"], ["c.yaml", key, rule],
           {"c.yaml": re.sub(rf"(?m)^{key}:.*$", f"{key}: {value}", CI_TRAIN_YAML)})
      for key, value, rule in (("max_steps", "", "must be an integer"), ("num_generations", "[2]", "must be an integer"),
                               ("learning_rate", "", "must be a number"), ("max_steps", "true", "must be an integer"),
                               ("temperature", "{a: 1}", "must be a number"))],
    # the tasks: section is read key by key: a misspelt key or split was ignored (the default task set was used)
    Case("profile tasks: unknown key", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--profile",
                                        f"{T}/p.yaml", "--out", f"{T}/r.jsonl"], ["p.yaml", "tasks", "'sorce'", "source"],
         {"t.jsonl": jl(GOOD), "p.yaml": "tasks:\n  sorce: verified\n"}),
    Case("profile tasks.splits: unknown split", ["bench", "ceiling", "--profile", f"{T}/p.yaml", "--tasks", "1"],
         ["p.yaml", "tasks.splits", "'trian'"], {"p.yaml": "tasks:\n  splits:\n    trian: {limit: 3}\n"}),
    Case("profile tasks.splits: a list", ["bench", "ceiling", "--profile", f"{T}/p.yaml", "--tasks", "1"],
         ["p.yaml", "tasks.splits", "mapping"], {"p.yaml": "tasks:\n  splits: [train]\n"}),
    Case("profile tasks.splits.train: unknown key", ["bench", "ceiling", "--profile", f"{T}/p.yaml", "--tasks", "1"],
         ["p.yaml", "tasks.splits.train", "'limt'"], {"p.yaml": "tasks:\n  splits:\n    train: {limt: 3}\n"}),
    # --set on the commands that read a profile (retrieve, evaluate and the agent's benchmarks took none): a
    # misspelt key is one line naming the --set, before any work
    *[Case(f"{' '.join(a for a in argv[:2] if not a.startswith('-'))} --set with an unknown key",
           [*argv, "--set", "agent.max_trns=2"], ["--set agent.max_trns", "unknown key", "max_turns"],
           {"t.jsonl": jl(GOOD)})
      for argv in (["retrieve", "--repo", T, "--retriever", "bm25", "some issue"],
                   ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--out", f"{T}/r.jsonl"],
                   ["bench", "ceiling", "--tasks", "1"], ["bench", "decode", "--tasks", "1"],
                   ["bench", "demos", "--tasks", "1", "--dev", "1", "--out", f"{T}/d"])],
    Case("evaluate --set with a wrong value", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "agent", "--out",
                                              f"{T}/r.jsonl", "--set", "agent.max_turns=0"],
         ["--set agent.max_turns", ">= 1"], {"t.jsonl": jl(GOOD)}),
    # reproduce: --only that names nothing ran all six notebooks ('') or none (','); a damaged cache.json
    Case("reproduce --only ''", ["reproduce", "--profile", "ci", "--only", "", "--out", f"{T}/o"],
         ["--only", "must not be empty"]),
    Case("reproduce --only ,", ["reproduce", "--profile", "ci", "--only", ",", "--out", f"{T}/o"],
         ["--only", "names no notebook"]),
    Case("reproduce cache.json damaged", ["reproduce", "--profile", "ci", "--only", "01", "--out", f"{T}/o"],
         ["o/artifacts/notebooks/cache.json:1", "invalid JSON", "delete"],
         {"o/artifacts/notebooks/cache.json": '{"01_mining": {"key": '}),
    Case("reproduce cache.json entry not an object", ["reproduce", "--profile", "ci", "--only", "01", "--out", f"{T}/o"],
         ["o/artifacts/notebooks/cache.json", "not a notebook cache", "delete"],
         {"o/artifacts/notebooks/cache.json": '{"01_mining": 5}'}),
    # settings that name files were read where used: the probe set when the trainer was built (after the warm start,
    # minutes later), recorded runs when demonstrations were; now at load, naming the setting and the file
    Case("train --set kl_probe_set missing", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                              f"kl_probe_set={T}/nope.jsonl", "--set", f"model={T}/nope"],
         ["--set kl_probe_set", f"{T}/nope.jsonl", "not found"]),
    Case("train YAML kl_probe_set missing", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs", "--set",
                                             f"model={T}/nope"], ["c.yaml: kl_probe_set", "no_such_probe.jsonl"],
         {"c.yaml": CI_TRAIN_YAML + "\nkl_probe_set: no_such_probe.jsonl\n"}),
    Case("train kl_probe_set row without env_mask", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                                     f"kl_probe_set={T}/p.jsonl", "--set", f"model={T}/nope"],
         ["p.jsonl:2", "probe row", "env_mask"],
         {"p.jsonl": jl({"prompt_ids": [1], "completion_ids": [2], "env_mask": [1]},
                        {"prompt_ids": [1], "completion_ids": [2]})}),
    Case("train kl_probe_set empty", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                      f"kl_probe_set={T}/p.jsonl", "--set", f"model={T}/nope"],
         ["p.jsonl", "no probe rows"], {"p.jsonl": "\n"}),
    Case("train kl_probe_set without kl_probe", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                                 f"kl_probe_set={T}/p.jsonl", "--set", "kl_probe=false", "--set",
                                                 f"model={T}/nope"], ["kl_probe_set needs --kl_probe true"],
         {"p.jsonl": jl({"prompt_ids": [1], "completion_ids": [2], "env_mask": [1]})}),
    Case("train recorded_runs missing", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                         f"recorded_runs=[{T}/runs.d]", "--set", f"model={T}/nope"],
         ["--set recorded_runs", f"{T}/runs.d", "no such file"]),
    Case("train recorded_runs a folder without runs", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                                       f"recorded_runs=[{T}/rd]", "--set", f"model={T}/nope"],
         ["--set recorded_runs", f"{T}/rd", "no recorded runs"], {"rd/notes.txt": "keep\n"}),
    Case("train warm_start_dir a file", ["train", "--config", "ci", "--out", f"{T}/runs", "--set",
                                         f"warm_start_dir={T}/f.txt", "--set", f"model={T}/nope"],
         ["--set warm_start_dir", "f.txt", "is a file"], {"f.txt": "keep\n"}),
    # an empty value fell back silently to the default (--name: the default run name, whose earlier run a fresh run
    # replaces; --out: the default place); every option's refusal is checked in tests/test_cli.py
    Case("train --name ''", ["train", "--config", "ci", "--out", f"{T}/runs", "--name", "", "--set", f"model={T}/nope"],
         ["argument --name", "must not be empty"], {"runs/ci-advantage-lam0.1-s0/done.json": '{"seconds": 1.0}'}),
    Case("train --out ''", ["train", "--config", "ci", "--out", "", "--set", f"model={T}/nope"],
         ["argument --out", "must not be empty"]),
    Case("evaluate --out ''", ["evaluate", "--tasks", f"{T}/t.jsonl", "--retriever", "random", "--profile", "ci",
                               "--out", ""], ["argument --out", "must not be empty"], {"t.jsonl": jl(GOOD)}),
    Case("train YAML out: ''", ["train", "--config", f"{T}/c.yaml", "--set", f"model={T}/nope"],
         ["c.yaml", "--out", "must not be empty"], {"c.yaml": re.sub(r"(?m)^out:.*$", 'out: ""', CI_TRAIN_YAML)}),
    Case("train --set name=''", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "name=''", "--set",
                                 f"model={T}/nope"], ["--name", "must not be empty"]),
    Case("tool CALLS ''", ["tool", "--dir", T, ""], ["argument CALLS", "must not be empty"]),
    # a TRL/transformers choice field misspelt: read from the config classes (field metadata, Enum annotations, TRL's
    # documented values), refused at parse time naming the YAML file and the key; it failed when the trainer read it
    *[Case(f"train YAML {key}: {value}", ["train", "--config", f"{T}/c.yaml", "--out", f"{T}/runs", "--set",
                                          f"model={T}/nope"], ["c.yaml", f"{key}: unknown value '{bad}'", close],
           {"c.yaml": re.sub(rf"(?m)^{key}:.*\n", "", CI_TRAIN_YAML) + f"{key}: {value}\n"})
      for key, value, bad, close in (
          ("loss_type", "dpao", "dpao", "'dapo'"), ("lr_scheduler_type", "cosin", "cosin", "'cosine'"),
          ("optim", "adamw_torc", "adamw_torc", "'adamw_torch'"), ("report_to", "wandbb", "wandbb", "'wandb'"),
          ("report_to", "[tensorboard, wandbb]", "wandbb", "'wandb'"), ("log_level", "debg", "debg", "'debug'"),
          ("scale_rewards", "grop", "grop", "'group'"), ("save_strategy", "stepz", "stepz", "'steps'"))],
    Case("train --set loss_type=dpao", ["train", "--config", "ci", "--out", f"{T}/runs", "--set", "loss_type=dpao",
                                        "--set", f"model={T}/nope"], ["--set loss_type", "'dpao'", "dapo, bnpo"]),
    Case("reproduce --set train.loss_type=dpao", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o",
                                                  "--set", "train.loss_type=dpao", "--set",
                                                  "notebooks.03_training.ceiling_tasks=-1"],
         ["--set train.loss_type", "'dapo'"]),  # (the old code stopped at the notebook parameter, after it)
    # --set KEY= (empty): null only where the key takes null; it dropped a whole section, replaced a profile value by
    # null where nothing types the key, and reached TrlParser as the string 'None' (a run named None, runs in ./None)
    *[Case(f"reproduce --set {item}", ["reproduce", "--profile", "ci", "--only", "03", "--out", f"{T}/o", "--set",
                                       item, "--set", "notebooks.03_training.ceiling_tasks=-1"], names)
      for item, names in (("agent=", ["--set agent", "whole"]), ("retrievers.bm25=null", ["--set retrievers.bm25", "whole"]),
                          ("train.config=", ["--set train.config", "empty value", "ci.yaml"]),
                          ("seed=", ["--set seed", "empty value", "integer"]))],
    Case("downstream --set downstream.agent=", ["downstream", "--tasks", "mined", "--candidates", "none", "--out",
                                                f"{T}/d.jsonl", "--set", "downstream.agent="],
         ["--set downstream.agent", "empty value"]),
    *[Case(f"train --set {key}=", ["train", "--config", "ci", *(["--out", f"{T}/runs"] if key != "out" else []),
                                   "--set", f"{key}=", *(["--set", f"model={T}/nope"] if key != "model" else [])],
           [f"--set {key}", "no value", what])
      for key, what in (("out", "a string"), ("model", "a string"), ("loss_type", "a string"),
                        ("max_steps", "an integer"), ("sft_sources", "a list"))],
    # an output over a file the command reads: refused before the work, as --out over --tasks is
    Case("report --replicates over a committed per_instance.json",
         ["report", "--results", f"{T}/res", "--replicates", f"{T}/res/smoke/per_instance.json"],
         ["--replicates", "res/smoke/per_instance.json", "is also an input"],
         {"res/smoke/per_instance.json": json.dumps({"run_commit": "c", "p_at_1": {
             "x/GRPO": {"a": 1.0, "b": 0.0}, "x/warm_start": {"a": 0.0, "b": 0.0}}})}),
    Case("ablation study --result over its --config (written after the training)",
         ["ablation", "study", "--config", f"{T}/s.yaml", "--seeds", "2", "--out", f"{T}/o", "--result", f"{T}/s.yaml"],
         ["--result", "s.yaml", "is also an input (--config)"],
         {"s.yaml": re.sub(r"(?m)^model:.*$", "model: ./nope-model",
                           (Path(__file__).resolve().parent.parent / "configs/train/study.yaml").read_text())}),
    Case("bench decode --result over its --profile", ["bench", "decode", "--profile", f"{T}/p.yaml", "--result",
                                                      f"{T}/p.yaml", "--model", f"{T}/nope"],
         ["--result", "p.yaml", "is also an input (--profile)"], {"p.yaml": "profile: p\n"}),
    Case("tool --repo '   '", ["tool", "--repo", "   ", '{"name": "grep", "arguments": {"pattern": "x"}}'],
         ["argument --repo", "must not be empty", "'   '"]),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = cli.main(argv)
    except SystemExit as exc:  # argparse refuses an argument: exit 2, one error line (CliParser)
        rc = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_exit_2_and_nothing_lost(case: Case, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    for rel, content in case.files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for rel in case.dirs:
        (tmp_path / rel).mkdir(parents=True, exist_ok=True)
    before = _snapshot(tmp_path)
    argv = [a.replace(T, str(tmp_path)) for a in case.argv]

    rc, out, err = run_cli(argv, capsys)

    assert "Traceback" not in err, err
    assert rc == 2, f"rc {rc} (a silent result?)\nstdout: {out}\nstderr: {err}"
    last = err.strip().splitlines()[-1]
    if case.one_line:
        assert len(err.strip().splitlines()) == 1, err
    assert last.startswith(f"codegrep {argv[0]}: error: ") or last.startswith(f"codegrep {argv[0]}") and \
        ": error: " in last, err
    for name in case.names:
        assert name.replace(T, str(tmp_path)) in last, f"{name!r} not named in: {last}"
    assert not out.strip(), f"a result was printed for bad input: {out}"
    after = _snapshot(tmp_path)
    assert {k: after.get(k) for k in before} == before, "an input file was changed or removed"


def test_skip_bad_skips_wrong_shapes(tmp_path, capsys):
    """``--skip-bad`` skips (and counts) the rows that are a list, an int, or carry ``"patch": 123``."""
    (tmp_path / "t.jsonl").write_text("[1]\n7\n" + jl({**GOOD, "instance_id": "o__n-2", "patch": 123,
                                                            "gold_files": []}, GOOD))
    rc, out, err = run_cli(["tasks", "stats", "--skip-bad", "--json", str(tmp_path / "t.jsonl")], capsys)
    assert rc == 0, err
    assert "skipped 3 of 4 rows" in err and "Traceback" not in err
    assert json.loads(out.strip().splitlines()[-1])["tasks"] == 1


def test_a_tasks_file_saved_with_a_byte_order_mark_reads(tmp_path, capsys):
    """A tasks JSONL (plain or gzipped) a Windows editor saved with a BOM is read like any other (row 1 was
    'invalid JSON: Unexpected UTF-8 BOM')."""
    (tmp_path / "t.jsonl").write_bytes(b"\xef\xbb\xbf" + jl(GOOD, {**GOOD, "instance_id": "o__n-2"}).encode())
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress((tmp_path / "t.jsonl").read_bytes()))
    for name in ("t.jsonl", "t.jsonl.gz"):
        rc, out, err = run_cli(["tasks", "stats", "--json", str(tmp_path / name)], capsys)
        assert rc == 0, err
        assert json.loads(out.strip().splitlines()[-1])["tasks"] == 2


def test_resume_falls_back_to_the_last_complete_checkpoint(tmp_path, capsys):
    """A checkpoint half-written by a killed save is skipped, said on stderr, and the previous one is used."""
    from codegrep.rl.training_run import resume_checkpoint

    ck = tmp_path / "checkpoints"
    for step, state in ((1, '{"global_step": 1}'), (2, '{"global_step": 2}'), (3, '{"glob')):
        (ck / f"checkpoint-{step}").mkdir(parents=True)
        (ck / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
        if step != 2:
            (ck / f"checkpoint-{step}" / "model.safetensors").write_bytes(b"\0")
    (ck / "checkpoint-tmp").mkdir()  # not a step number: ignored, never an int() crash
    assert resume_checkpoint(tmp_path) == ck / "checkpoint-1"
    err = capsys.readouterr().err
    assert "checkpoint-3 (unreadable trainer_state.json" in err and "checkpoint-2 (no model weights)" in err
    assert "resuming from checkpoint-1" in err


def test_evaluate_resume_keeps_a_complete_row_without_newline(tmp_path):
    """A hand-edited results file whose last row lacks its newline keeps that row (only a partial row is cut)."""
    from codegrep.retrievers.evaluate import read_rows

    path = tmp_path / "r.jsonl"
    path.write_text('{"instance_id": "a", "retriever": "random"}\n{"instance_id": "b", "retriever": "random"}')
    assert set(read_rows(path)) == {"a", "b"}
    path.write_text('{"instance_id": "a", "retriever": "random"}\n{"instance_id": "b", "retr')
    assert set(read_rows(path)) == {"a"}  # the partial row of a killed run: rerun that instance


def test_evaluate_a_repository_not_available_offline_is_said_as_such_not_as_a_write_error(tmp_path, capsys,
                                                                                          monkeypatch):
    """A task of a repository that is not under --repos (e.g. a django row with only sympy snapshots), offline: the
    line says the repository is missing, not '--out: cannot write (...)' (the resolver's OSError was taken for one)."""
    monkeypatch.setenv("CODEGREP_OFFLINE", "1")
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    (tmp_path / "repos").mkdir()
    (tmp_path / "t.jsonl").write_text(jl(GOOD))
    rc, out, err = run_cli(["evaluate", "--tasks", str(tmp_path / "t.jsonl"), "--repos", str(tmp_path / "repos"),
                            "--retriever", "random", "--out", str(tmp_path / "r.jsonl")], capsys)
    last = err.strip().splitlines()[-1]
    assert rc == 2 and "Traceback" not in err, err
    assert last.startswith("codegrep evaluate: error: repository o/n at commit " + "a" * 40), last
    # stopped before its first row: no empty hidden .r.jsonl.partial is left for a next run to "resume" from
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "repos", "t.jsonl"]
    assert "not available offline" in last and "cannot write" not in last, last


def test_downstream_a_repository_not_available_offline_is_said_as_such_not_as_a_write_error(tmp_path, capsys,
                                                                                            monkeypatch):
    """The same for a live agent's run (``downstream --agent mini-swe-agent``): ``atomic_write`` wrapped the
    resolver's OSError (raised by code, no errno) as '--out: cannot write (...)'; the earlier --out is kept."""
    monkeypatch.setenv("CODEGREP_OFFLINE", "1")
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    (tmp_path / "t.jsonl").write_text(jl(GOOD))
    (tmp_path / "d.jsonl").write_text("keep\n")
    rc, out, err = run_cli(["downstream", "--tasks", str(tmp_path / "t.jsonl"), "--agent", "mini-swe-agent",
                            "--endpoint", "http://127.0.0.1:9/v1", "--candidates", "none",
                            "--out", str(tmp_path / "d.jsonl")], capsys)
    last = err.strip().splitlines()[-1]
    assert rc == 2 and "Traceback" not in err and not out.strip(), err
    assert last.startswith("codegrep downstream: error: repository o/n at commit " + "a" * 40), last
    assert "not available offline" in last and "cannot write" not in last, last
    assert (tmp_path / "d.jsonl").read_text() == "keep\n"


def test_tasks_default_names_the_out_directory_it_cannot_write(tmp_path, capsys, monkeypatch):
    """A directory the set cannot be built in (no permission, read-only): the line named the hidden working
    directory (``set.tmp-<pid>-<thread>``), a path the user never gave."""
    from codegrep.data import default_set

    def refuse(out, selection):
        raise PermissionError(13, "Permission denied", str(Path(out) / "repos"))

    monkeypatch.setattr(default_set, "build_default_set", refuse)
    rc, out, err = run_cli(["tasks", "default", "--out", str(tmp_path / "set")], capsys)
    assert rc == 2 and not out.strip() and "Traceback" not in err, err
    assert err.strip() == f"codegrep tasks: error: {tmp_path / 'set'}: cannot write (Permission denied); nothing was " \
                          "written", err
    assert list(tmp_path.iterdir()) == []  # no working directory left behind


def test_save_results_of_a_run_without_headlines_keeps_the_committed_results(tmp_path):
    """``report --save-results`` of artifacts whose headlines/ is empty (no notebook finished) removed the committed
    docs/results/<profile>/ and left a run.json alone in its place."""
    from codegrep.report import save_results

    (tmp_path / "a" / "headlines").mkdir(parents=True)
    (tmp_path / "a" / "run.json").write_text('{"profile": "ci"}')
    committed = tmp_path / "root" / "docs" / "results" / "ci" / "headlines" / "03_training.json"
    committed.parent.mkdir(parents=True)
    committed.write_text('{"numbers": {}}')
    with pytest.raises(UserError, match="holds no headline") as exc:
        save_results(tmp_path / "a", root=tmp_path / "root")
    assert user_message(exc.value) == str(exc.value) and "headlines" in str(exc.value)
    assert committed.read_text() == '{"numbers": {}}'


def test_retrieve_in_a_bare_repository_without_commit_says_so(tmp_path, capsys):
    """A bare clone (what --repos directories hold) has no work tree: ranking its git directory found nothing and
    said 'no file ... matched the issue text', as if the issue matched no code."""
    import subprocess

    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "parser.py").write_text("def parse_config_file(path):\n    return path\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=src, env=env, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(tmp_path / "o__n.git")], env=env, check=True,
                   capture_output=True)
    argv = ["retrieve", "--repo", str(tmp_path / "o__n.git"), "--retriever", "bm25", "parse_config_file fails"]
    rc, out, err = run_cli(argv, capsys)
    assert rc == 2 and not out.strip() and "Traceback" not in err, err
    assert "bare git repository" in err and "--commit" in err, err
    rc, out, err = run_cli([*argv[:3], "--commit", "HEAD", *argv[3:]], capsys)
    assert rc == 0 and out.split() == ["pkg/parser.py"], (out, err)


def test_retrieve_where_only_a_script_without_a_suffix_matches_says_what_is_indexed(tmp_path, capsys):
    """A shebang script without a suffix (``bin/migrate``) is not indexed; the message blamed the issue text alone
    ('no file ... matched the issue text'), though the name the issue gives is in that script."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "migrate").write_text("#!/usr/bin/env python\ndef run_migrations():\n    pass\n")
    (tmp_path / "app.py").write_text("def main():\n    return 0\n")
    rc, out, err = run_cli(["retrieve", "--repo", str(tmp_path), "--retriever", "bm25",
                            "run_migrations in bin/migrate fails"], capsys)
    assert rc == 0 and not out.strip() and "Traceback" not in err, err  # an empty ranking, said on stderr
    assert "retrievers.bm25.suffixes" in err and len(err.strip().splitlines()) == 1, err


def test_bench_ceiling_on_a_profile_without_train_tasks_says_so(tmp_path, capsys, monkeypatch):
    """A profile whose one task file has no split: every task is in the eval pool, so none reaches train, and
    ``bench ceiling`` ended in a ZeroDivisionError traceback (the baseline's P@1 over no task)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    (tmp_path / "t.jsonl").write_text(jl(GOOD))
    (tmp_path / "p.yaml").write_text(f"tasks: {{source: {tmp_path / 't.jsonl'}}}\n")
    rc, out, err = run_cli(["bench", "ceiling", "--profile", str(tmp_path / "p.yaml"), "--tasks", "2"], capsys)
    assert rc == 2 and not out.strip() and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("codegrep bench: error: ") and "p.yaml" in last and "train split" in last, err


def test_tool_names_a_commit_that_is_not_there(tmp_path, capsys):
    """``tool --commit`` that the repository lacks is one line naming ``--commit``, not git's command line."""
    from conftest import commit_all

    commit_all(tmp_path / "r", {"a.py": "x = 1\n"})
    rc, out, err = run_cli(["tool", "--repo", str(tmp_path / "r"), "--commit", "nosuch",
                            '{"name": "read", "arguments": {"path": "a.py"}}'], capsys)
    assert rc == 2 and not out, err
    assert err.strip() == f"codegrep tool: error: --commit nosuch: not a commit of the git repository {tmp_path / 'r'}"



def test_tool_names_a_commit_the_default_repository_lacks(tmp_path, capsys, monkeypatch):
    """``tool --commit`` without ``--repo`` (the default-set repository): the line said git's command line with an
    empty reason (``git rev-parse --verify --quiet abc^{commit} in ... failed:``), not the argument."""
    from conftest import commit_all

    import codegrep.env.bench as bench

    commit_all(tmp_path / "r", {"a.py": "x = 1\n"})
    monkeypatch.setattr(bench, "default_bench_repo", lambda: (tmp_path / "r", "HEAD"))
    rc, out, err = run_cli(["tool", "--commit", "nosuch", '{"name": "read", "arguments": {"path": "a.py"}}'], capsys)
    assert rc == 2 and not out and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == ("codegrep tool: error: --commit nosuch: not a commit of the default-set "
                                            f"repository {tmp_path / 'r'} (no --repo given)")


# ----------------------------------------------------------------------------- the other side: bugs


def test_an_internal_error_keeps_its_traceback_and_says_bug(monkeypatch, capsys):
    from codegrep.data import commands

    def broken(args):
        return {}["matched"]

    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_func(parser(), "tasks", broken))
    rc, out, err = run_cli(["tasks", "stats", "default"], capsys)
    assert rc == 1
    assert "Traceback" in err and "KeyError: 'matched'" in err
    assert "internal error" in err and "bug" in err
    assert commands  # the module the command lives in was imported


def _with_func(parser, command: str, func: Callable):
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    tasks = sub.choices[command]
    inner = next(a for a in tasks._actions if isinstance(a, argparse._SubParsersAction))
    for p in inner.choices.values():
        p.set_defaults(func=func)
    return parser


def _raise(exc: Exception) -> BaseException:
    try:
        raise exc
    except Exception as caught:  # noqa: BLE001 - we want the traceback attached
        return caught


def test_the_boundary_rule():
    """UserError and OSErrors naming a file are user mistakes; a ValueError from inside a call is a bug."""
    assert user_message(UserError("a.jsonl:3: bad\nrow")) == "a.jsonl:3: bad row"
    assert user_message(IsADirectoryError(21, "Is a directory", "out")) == "out: Is a directory"
    import os

    from codegrep.data.tasks import read_tasks
    from codegrep.errors import PACKAGE_DIR

    try:  # a ValueError raised by a call inside codegrep (here int("x")), not a message written for the user
        exec(compile("int('x')", os.path.join(PACKAGE_DIR, "not_a_module.py"), "exec"))
    except ValueError as exc:
        assert user_message(exc) is None
    try:  # an explicit `raise ValueError(...)` in codegrep's own code: its message was written for the user
        read_tasks("default", on_error="sometimes")
    except ValueError as exc:
        assert user_message(exc) == "on_error must be 'raise' or 'skip', got 'sometimes'"
    for exc in (KeyError("k"), TypeError("t"), AttributeError("a"), UnicodeDecodeError("utf-8", b"\xff", 0, 1, "x")):
        assert user_message(_raise(exc)) is None


def test_bench_demos_result_that_is_the_figure_path_is_refused_before_the_work(tmp_path, capsys, monkeypatch):
    """``bench demos --result x.png`` wrote the JSON there and then the figure (RESULT with .png) over it, after
    minutes of work: the numbers were lost."""
    import codegrep.rl.curve as curve

    called = []
    monkeypatch.setattr(curve, "demos_curve", lambda *a, **k: called.append(1) or {"points": []})
    monkeypatch.setattr(curve, "demos_figure", lambda doc: __import__("matplotlib.pyplot").pyplot.figure())
    rc, out, err = run_cli(["bench", "demos", "--out", str(tmp_path / "bd"), "--result", str(tmp_path / "d.png")],
                           capsys)
    assert rc == 2 and not called and "--result" in err and "d.png" in err and ".json" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "d.png").exists()


def test_bench_demos_a_size_beyond_the_pool_is_said(tmp_path, capsys, monkeypatch):
    """``bench demos --tasks 10,100000``: the second point silently became the whole pool (labelled by its size)."""
    import codegrep.env.pool as env_pool
    from codegrep.config import load_profile
    from codegrep.rl.curve import demos_curve, real_train_split

    class Stop(Exception):
        pass

    def stop(*a, **k):
        raise Stop

    monkeypatch.setattr(env_pool.WorktreePool, "from_config", stop)  # the first step after the sizes are chosen
    cfg = load_profile("ci")
    pool = len(real_train_split(cfg, 1, 0)[0])
    with pytest.raises(Stop):
        demos_curve(cfg, None, [1, 100_000], dev=1, out=tmp_path)
    said = f"--tasks 100000: only {pool} real train tasks outside the --dev 1; that point uses {pool}"
    # the line said once; on an empty cache the default set's build progress also lands on stderr (not compared)
    assert capsys.readouterr().err.splitlines().count(said) == 1


def test_a_train_yaml_may_give_scale_rewards_as_trl_documents_it(tmp_path):
    """TRL's GRPOConfig documents ``scale_rewards`` as ``str`` or ``bool`` (its ``__post_init__`` maps ``false`` to
    ``"none"``, the Dr. GRPO setting) but annotates ``str``: the YAML type check refused ``scale_rewards: false``,
    which TRL (and codegrep before the check) took."""
    from codegrep.rl.training_run import parse_train_args

    path = tmp_path / "c.yaml"
    path.write_text(re.sub(r"(?m)^scale_rewards:.*$", "scale_rewards: false", CI_TRAIN_YAML))
    assert parse_train_args(path).grpo.scale_rewards == "none"


def test_an_empty_set_value_is_null_where_the_key_takes_null(tmp_path):
    """``--set KEY=`` is null where the key takes null: a profile's ``tasks.limit=`` (every task), and ``codegrep
    train``'s ``name=``/``warm_start_dir=`` (TrlParser's command line made them the string 'None': a run named None,
    demonstrations under ./None)."""
    from codegrep.config import load_profile, parse_overrides
    from codegrep.rl.training_run import parse_train_args

    assert load_profile("ci", ["tasks.splits.train.limit=", "env.pool_root="])["tasks"]["splits"]["train"]["limit"] is None
    cg = parse_train_args("ci", parse_overrides(["name=", "warm_start_dir=", "train_tasks=null"])).codegrep
    assert (cg.name, cg.warm_start_dir, cg.train_tasks) == (None, None, None)


def test_every_shipped_train_yaml_passes_the_choice_check_and_trl_documents_its_choices():
    """The choices read from TRL's docstring (``loss_type``, ``scale_rewards`` annotate ``str``) are found, and every
    shipped train YAML's values are among them: a TRL upgrade that rewords its docstring shows here."""
    from trl import GRPOConfig

    from codegrep.config import field_choices
    from codegrep.rl.training_run import _check_choices, _yaml_settings

    assert {"dapo", "grpo", "dr_grpo"} <= set(field_choices(GRPOConfig, "loss_type"))
    assert set(field_choices(GRPOConfig, "scale_rewards")) == {"group", "batch", "none"}
    assert "cosine" in field_choices(GRPOConfig, "lr_scheduler_type") and field_choices(GRPOConfig, "seed") is None
    assert field_choices(GRPOConfig, "trackio_static_space_id") is None  # str | Literal[False]: any string
    for path in sorted((Path(__file__).resolve().parent.parent / "configs" / "train").glob("*.yaml")):
        _check_choices(_yaml_settings(path), set(), path)


def test_train_set_bools_and_a_null_report_to_go_in_as_trl_reads_them():
    """``--set scale_rewards=false`` reached TRL as the string 'false' (its bool mapping never saw it: a ValueError at
    the first reward, minutes in); ``--set report_to=`` became ``[None]``, refused by the Trainer only when built."""
    from codegrep.config import ConfigError
    from codegrep.rl.training_run import parse_train_args

    yaml = Path(__file__).resolve().parent.parent / "configs" / "train" / "ci.yaml"
    assert parse_train_args(yaml, {"scale_rewards": False}).grpo.scale_rewards == "none"
    assert parse_train_args(yaml, {"scale_rewards": True}).grpo.scale_rewards == "group"
    with pytest.raises(ConfigError, match="report_to=none"):
        parse_train_args(yaml, {"report_to": None})


def test_an_output_under_a_folder_that_cannot_be_searched_is_one_line(tmp_path, monkeypatch):
    """``Path.exists`` raises PermissionError (EACCES) under a folder the user may not search: the new cleanup's
    look at which folders a write makes turned 'cannot create its directory' into a traceback."""
    from codegrep.files import atomic_write

    locked = tmp_path / "locked"
    real_exists = Path.exists

    def exists(self, *a, **k):
        if str(self).startswith(str(locked)):
            raise PermissionError(13, "Permission denied", str(self))
        return real_exists(self, *a, **k)

    def mkdir(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "exists", exists)
    monkeypatch.setattr(Path, "mkdir", mkdir)
    with pytest.raises(UserError, match="cannot create its directory"):
        with atomic_write(locked / "sub" / "x.txt", "w") as fh:
            fh.write("x")


def test_vllm_model_impl_takes_values_trl_passes_on_to_vllm():
    """TRL's docstring lists transformers and vllm for ``vllm_model_impl``; vLLM also takes ``auto`` (its default):
    refused by the docstring check, a GPU user's valid YAML failed."""
    from trl import GRPOConfig

    from codegrep.config import check_choice, field_choices

    assert field_choices(GRPOConfig, "vllm_model_impl") is None
    check_choice(GRPOConfig, "vllm_model_impl", "auto", "c.yaml: vllm_model_impl")
