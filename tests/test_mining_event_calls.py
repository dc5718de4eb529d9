"""One event -> tool-call mapping (``codegrep.mining.events.event_call``) for both of its callers, the
demonstrations (``mining.demos``) and the recorded-run converter (``mining.run_converter``), checked on the shipped
trajectories (issue 26). The pinned digests were computed with the two separate functions this one replaced
(``demos.event_call`` and ``explore._event_call`` at 0bf497c, the converter then named ``mining.explore``): both callers' outputs are byte-identical."""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from codegrep.data.shipped import trajectory_dirs
from codegrep.mining import run_converter
from codegrep.mining.events import event_call
from codegrep.mining.formats import minisweagent as msa, parse_row
from codegrep.mining.targets import is_artifact

SAMPLES = Path(__file__).resolve().parent.parent / "codegrep" / "resources" / "trajectories" / "format-samples"
CONVERTER = {"default_glob": None, "skip_artifacts": False}  # what convert_command passes


def _digest(items) -> str:
    return hashlib.sha256("\n".join(repr(x) for x in items).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def shipped():
    """(events of every shipped run and format sample, converter output of every shipped run)."""
    files = [f for d in trajectory_dirs() for f in sorted(d.glob("*.traj.json.gz"))]
    assert len(files) == 400, "the shipped real runs are missing"
    events, converted = [], []
    for f in files:
        run = msa.read(msa.load(f), str(f))
        events += run.events()
        converted += run_converter.convert_steps(run)
    for f in sorted(SAMPLES.glob("*.gz")):
        data = json.load(gzip.open(f))
        for row in data if isinstance(data, list) else [data]:
            events += parse_row(row, source=str(f)).events
    return events, converted


def test_both_callers_outputs_are_unchanged_on_the_shipped_data(shipped):
    events, converted = shipped
    demo = [event_call(e) for e in events]
    conv = [event_call(e, **CONVERTER) for e in events if e.kind in ("search", "find", "view")]
    # 51318c9 (line continuations): 18460 -> 18451 events, 7280 -> 7284 / 6389 -> 6393 calls (the commands after a
    # backslash-newline are read: 4 more views); the converter's output is unchanged
    # comments (the commit after): 45 fewer events (a comment line was a 'run' of a program '#'), the same calls;
    # the converter converts 5 more commands ('# Read the file ...<newline>sed -n 71,130p f': one read now)
    # tail ranges (the commit after): 3 reads change ('tail -n +1868 f' starts at 1868, not 1; 'tail -n 30 f | head
    # -n 20' is no longer lines 1-20); the converter drops that wrong 1-20 read and converts 'tail -n +348 f'
    # xargs (the commit after): 18 searches run by '... | xargs grep P' are read (18 more events and calls); the
    # converter's output is unchanged
    # script edits (the commit after): 311 more edit/create events (files written by 'python fix.py', 'python -c',
    # 'python - <<EOF', 'git apply', 'patch'), which map to no call: the same calls, the converter's output unchanged
    # wildcards (the commit after): 'cat dir/x_*.py' is no read call (2 views of one run), 'ls dir/test_x*' is a glob
    # of that pattern in dir; the converter's output is unchanged
    # child shells (the commit after): the commands of 'bash script.sh' scripts the runs wrote are read (31 more
    # events, 5 more calls: one run's script greps its build output); the converter's output is unchanged
    # several sed ranges (the commit after 26deeaa): 'sed -n 1,50p;250,270p f' shows both ranges (20 more views and
    # calls); the converter no longer converts those 14 commands into one read whose output mixes the ranges
    # reverts (the commit after): 'git checkout f' / 'git restore f' put f back (112 more revert events, no call)
    # stopped scripts (h-down3, after the pipe ranges): 15 edit/create events of 7 runs' scripts that stopped on a
    # traceback before their writes ('python apply_fix.py' failing in readlines(), 'python3 patch.py' on an
    # IndexError) are gone: no call (15 fewer None entries), the converter's output unchanged
    # failed views (h-mining): 3 views whose recorded answer says they read nothing are gone, with their calls: one
    # run's 'cat tests/serializers/models.py' ("No such file or directory") and a SWE-Gym row's two editor views
    # answered "ERROR: Invalid `view_range`: [0, 40]" (3 fewer events, demonstration calls and converter calls)
    # failed writes (h-mining 2): 10 edit/create events whose answer says nothing was written are gone, with no call:
    # 'touch test_app/__init__.py' / 'cat <<EOF > test_fk_app/models.py' into a folder not made ("No such file or
    # directory"), 'sed -i ... apply_patch.py' of a file not there, and 7 SWE-agent 'edit's its linter rejected
    # ("Your proposed edit has introduced new syntax error(s)"); the calls and the converter's output are unchanged
    assert (len(events), sum(c is not None for c in demo), sum(c is not None for c in conv)) == (18870, 7323, 6434)
    # a search keeps its wildcard scope again (the commit after: the converter refuses it, shell-glob-path)
    # ranges taken from ranges (the commit after: 'head -n 152 f | tail -n 10' reads 143-152, was 1-152)
    # pipe ranges (h-down3): 'nl -ba f | grep -n P | head -n 20' is no longer a read of lines 1-20 of f (one run of
    # sympy-13877): that call reads the file, in both callers; the converter's output is unchanged
    # was a98997d2ee4ff5f1 (before the failed views), b5f5748a818b4f1a, 20d9194b574fb53a (112 more Nones: reverts)
    # was 3419e7b62f900334 (before the failed writes: 10 more Nones)
    assert _digest(demo) == "492ae8dcbe88c0ef"
    assert _digest(conv) == "7782ae5a230e5ab8"  # was d5eaf3c75d36ebc5, 893caeb132f411c9
    assert (len(converted), _digest(converted)) == (4631, "5793fd680579b25a")


def test_the_callers_differ_only_by_the_explicit_parameters(shipped):
    events, _ = shipped
    differing = 0
    for e in events:
        a, b = event_call(e), event_call(e, **CONVERTER)
        if a != b:
            differing += 1
            assert (e.kind == "find" and not e.pattern) or (e.kind == "view" and is_artifact(e.path)), e
    assert differing > 0  # the shipped data exercises the difference, so the parameters are not dead
