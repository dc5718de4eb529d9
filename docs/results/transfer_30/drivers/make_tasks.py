"""The untouched transfer set: every shipped SWE-bench Lite row of the seven transfer repositories that is not a
Verified row (so not in `../transfer_27/tasks.jsonl.gz`, whose rows are Verified), written in the task-row format
`codegrep evaluate --tasks` reads.  Run from the repository root:

    python docs/results/transfer_30/drivers/make_tasks.py docs/results/transfer_30/tasks.jsonl.gz
"""
import gzip
import json
import sys

REPOS = {"pytest-dev/pytest", "pydata/xarray", "sphinx-doc/sphinx", "pylint-dev/pylint", "psf/requests",
         "mwaskom/seaborn", "pallets/flask"}
FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch")


def rows(path):
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


verified = {r["instance_id"] for r in rows("data/swebench/swebench_verified.jsonl.gz")}
keep = [{k: r[k] for k in FIELDS} for r in rows("data/swebench/swebench_lite.jsonl.gz")
        if r["repo"] in REPOS and r["instance_id"] not in verified]
keep.sort(key=lambda r: r["instance_id"])
with gzip.GzipFile(sys.argv[1], "wb", mtime=0) as f:
    f.write("".join(json.dumps(r) + "\n" for r in keep).encode())
print(f"{len(keep)} rows -> {sys.argv[1]}")
