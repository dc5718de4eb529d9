"""grep/glob/read: golden outputs on a small repository, both modes agreeing, and the attack suite."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from codegrep.agent.protocol import shape_result
from codegrep.env.gitobjects import GitObjectEnvironment
from codegrep.env.procs import run_capped
from codegrep.env.tools import RepoToolEnvironment, ToolCall, ToolConfig, tool_schemas
from conftest import commit_all

SECRET = "TOPSECRET-7f3a"


def make_repo(base: Path) -> tuple[Path, Path, str]:
    """A small repository with text, binary, latin-1, empty and long-line files and hostile symlinks."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    work = base / "work"
    files = {
        "README.md": "# Demo\nA tiny repo.\n",
        "src/app/__init__.py": "",
        "src/app/core.py": "import os\n\n\ndef parse_args(argv):\n    return argv\n\n\nclass Engine:\n"
                           "    def run(self):\n        return parse_args([])\n",
        "src/app/util.py": "def helper():\n    # parse_args is elsewhere\n    return 1\n",
        "tests/test_core.py": "from app.core import parse_args\n\n\ndef test_parse():\n    assert parse_args([]) == []\n",
        "docs/long.txt": "\n".join(f"line {i}" for i in range(1, 501)) + "\n",
        "docs/minified.js": "var a=" + "1+" * 1000 + "1;\n",
        "-rf.txt": "flag-looking name\n",
    }
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    (work / "data.bin").write_bytes(b"\x00\x01binary parse_args\x00")
    (work / "latin1.txt").write_bytes("caf\xe9 parse_args\n".encode("latin-1"))
    (work / "src/app/empty.py").write_text("")
    os.symlink(outside / "secret.txt", work / "link_abs.txt")       # absolute, outside
    os.symlink("../outside/secret.txt", work / "link_rel.txt")      # relative, outside
    os.symlink("../outside", work / "link_dir")                     # directory, outside
    os.symlink("src/app/core.py", work / "link_in.py")              # inside: allowed
    return work, work / ".git", commit_all(work)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("envtools"))


@pytest.fixture(scope="module", params=["dir", "objects"])
def env(request, repo):
    work, git_dir, sha = repo
    config = ToolConfig(timeout_s=2.0)  # the regex bombs below end at the timeout
    e = RepoToolEnvironment(work, config) if request.param == "dir" else GitObjectEnvironment(git_dir, sha, config)
    yield e
    e.close()


def run(env, name, **arguments):
    return env.call(ToolCall(name, arguments))


GOLDEN = [
    (("grep", {"pattern": "parse_args"}),
     "latin1.txt:1:caf\ufffd parse_args\n"
     "src/app/core.py:4:def parse_args(argv):\nsrc/app/core.py:10:        return parse_args([])\n"
     "src/app/util.py:2:    # parse_args is elsewhere\ntests/test_core.py:1:from app.core import parse_args\n"
     "tests/test_core.py:5:    assert parse_args([]) == []"),
    (("grep", {"pattern": "PARSE_ARGS", "ignore_case": True, "path": "src", "include": "core.py"}),
     "src/app/core.py:4:def parse_args(argv):\nsrc/app/core.py:10:        return parse_args([])"),
    (("grep", {"pattern": "class Engine", "context": 1}),
     "src/app/core.py-7-\nsrc/app/core.py:8:class Engine:\nsrc/app/core.py-9-    def run(self):"),
    (("grep", {"pattern": "no_such_identifier"}), "No matches found."),
    (("glob", {"pattern": "*.py"}),
     "src/app/__init__.py\nsrc/app/core.py\nsrc/app/empty.py\nsrc/app/util.py\ntests/test_core.py"),
    (("glob", {"pattern": "app/*.py", "path": "src"}),
     "src/app/__init__.py\nsrc/app/core.py\nsrc/app/empty.py\nsrc/app/util.py"),
    (("glob", {"pattern": "**/test_*.{py,txt}"}), "tests/test_core.py"),
    (("read", {"path": "src/app/core.py", "start_line": 4, "end_line": 5}),
     "     4\tdef parse_args(argv):\n     5\t    return argv"),
    (("read", {"path": "src/app/empty.py"}), "(src/app/empty.py is empty)"),
    (("read", {"path": "latin1.txt"}), "     1\tcaf\ufffd parse_args"),
    (("read", {"path": "link_in.py", "end_line": 1}), "     1\timport os"),
    # a committed file whose name looks like a flag is listed, so it can be read (never passed as an argument)
    (("read", {"path": "-rf.txt"}), "     1\tflag-looking name"),
]


@pytest.mark.parametrize("call,expected", GOLDEN, ids=[f"{c[0]}-{i}" for i, (c, _) in enumerate(GOLDEN)])
def test_golden_outputs(env, call, expected):
    result = run(env, call[0], **call[1])
    if expected is None:
        assert not result.ok and "flag" in result.error
    else:
        assert result.ok, result.error
        assert result.output == expected
        assert result.latency_ms > 0 and result.bytes_out == len(expected.encode())


def test_a_live_checkout_lists_a_tracked_file_its_gitignore_matches(tmp_path):
    """``.gitignore`` has ``build/`` but ``build/gen.py`` is committed: the live view (the MCP server) hid it from
    grep and glob, while read served it and objects mode listed it. Untracked ignored files stay out, and a tracked
    path under a directory since replaced by a symlink to outside the checkout is not followed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("SECRET_OUTSIDE = 1\n")
    work = tmp_path / "live"
    commit_all(work, {".gitignore": "build/\n", "build/gen.py": "def generated(): pass\n",
                      "moved/x.py": "inside = 1\n"}, force=True)
    (work / "build" / "scratch.py").write_text("def generated_scratch(): pass\n")
    (work / "moved" / "x.py").unlink()
    (work / "moved").rmdir()
    (work / "moved").symlink_to(outside)
    env = RepoToolEnvironment(work, snapshot=False)
    assert run(env, "grep", pattern="generated").output == "build/gen.py:1:def generated(): pass"
    assert run(env, "glob", pattern="**/*.py").output == "build/gen.py"
    assert run(env, "grep", pattern="SECRET").output == "No matches found."


def test_read_caps_and_notes(env):
    default = run(env, "read", path="docs/long.txt")
    assert default.truncated and default.output.count("\n") == 200
    assert default.output.endswith("[... truncated: showing lines 1-200 of 500 in docs/long.txt; "
                                   "use start_line/end_line for more]")
    tail = run(env, "read", path="docs/long.txt", start_line=499)
    assert tail.output == "   499\tline 499\n   500\tline 500" and not tail.truncated
    clipped = run(env, "read", path="docs/minified.js")
    assert "[... 1608 more characters]" in clipped.output and len(clipped.output) < 600


def test_grep_of_a_line_ripgrep_cut_shows_its_whole_preview(repo):
    """ripgrep cuts a line over ``max_line_chars`` bytes to a preview plus its own marker; clipping that whole
    ``path:N:preview marker`` row again said "[... 42 more characters]" of a 2,000-character line and cut the
    preview's end (where a match may be) by the path's length. The text is clipped as read clips it, the path aside."""
    work, git_dir, sha = repo
    line = "var a=" + "1+" * 1000 + "1;"
    for env in (RepoToolEnvironment(work), GitObjectEnvironment(git_dir, sha)):
        row = run(env, "grep", pattern="var a", path="docs/minified.js").output
        assert row == f"docs/minified.js:1:{line[:400]} [... rest of a long line omitted]", row
    short = RepoToolEnvironment(work, ToolConfig(max_line_chars=10_000))  # not cut: the whole line
    assert run(short, "grep", pattern="var a", path="docs/minified.js").output == f"docs/minified.js:1:{line}"


def test_grep_caps_say_how_much_was_cut(repo):
    work, git_dir, sha = repo
    for env in (RepoToolEnvironment(work, ToolConfig(max_output_lines=3)),
                GitObjectEnvironment(git_dir, sha, ToolConfig(max_output_lines=3))):
        result = run(env, "grep", pattern="line", path="docs")
        assert result.truncated
        assert result.output.splitlines()[-1] == ("[... truncated: showing 3 of 500 lines; "
                                                  "narrow the pattern, path or include]")
        env.close()


def test_turn_runs_in_parallel_and_keeps_call_order(repo):
    env = RepoToolEnvironment(repo[0])
    calls = [ToolCall("read", {"path": "README.md"}), ToolCall("grep", {"pattern": "Engine"}),
             ToolCall("nope", {}), ToolCall("glob", {"pattern": "*.md"})] * 4
    results = env.run_turn(calls)
    assert [r.name for r in results] == [c.name for c in calls]
    assert [r.ok for r in results[:4]] == [True, True, False, True]
    assert results[2].text().startswith("ERROR: unknown tool 'nope'")
    env.close()


def test_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "grandchild.pid"
    start = time.monotonic()
    cap = run_capped(["sh", "-c", f"sleep 30 & echo $! > {marker}; wait"], None, 0.5, 1000)
    assert cap.timed_out and time.monotonic() - start < 5
    pid = int(marker.read_text())
    time.sleep(0.2)
    stat = Path(f"/proc/{pid}/stat")  # the backgrounded grandchild died with its group (gone, or a zombie
    assert not stat.exists() or stat.read_text().split(") ")[1].startswith("Z")  # if pid 1 does not reap)


def test_regex_timeout_is_a_tool_result(repo):
    env = RepoToolEnvironment(repo[0], ToolConfig(timeout_s=0.000001))
    result = run(env, "grep", pattern="parse_args")
    assert not result.ok and "timed out" in result.error


def test_schemas_are_function_calling_json():
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas()}
    assert list(schemas) == ["grep", "glob", "read", "submit"]
    assert schemas["grep"]["parameters"]["required"] == ["pattern"]
    assert set(schemas["grep"]["parameters"]["properties"]) == {"pattern", "path", "include", "ignore_case", "context"}
    assert schemas["read"]["parameters"]["properties"]["start_line"]["type"] == "integer"
    assert schemas["submit"]["parameters"]["properties"]["files"] == {
        "type": "array", "items": {"type": "string"}, "description": schemas["submit"]["parameters"]
        ["properties"]["files"]["description"]}


# ----------------------------------------------------------------------------- attack suite
ATTACKS = [
    ("read", {"path": "../outside/secret.txt"}), ("read", {"path": "../../etc/passwd"}),
    ("read", {"path": "/etc/passwd"}), ("read", {"path": "~/.ssh/id_rsa"}), ("read", {"path": "src/../../x"}),
    ("read", {"path": ".."}), ("read", {"path": "src/.."}), ("read", {"path": "link_abs.txt"}),
    ("read", {"path": "link_rel.txt"}), ("read", {"path": "link_dir/secret.txt"}), ("read", {"path": ".git/config"}),
    ("read", {"path": "src/.git/../../.git/HEAD"}), ("read", {"path": "src/app\x00/core.py"}),
    ("read", {"path": "src/app/core.py\n../outside"}), ("read", {"path": "--version"}),
    ("read", {"path": "C:\\Windows\\win.ini"}), ("read", {"path": "\\\\server\\share"}),
    ("read", {"path": "a" * 5000}), ("read", {"path": ["src/app/core.py"]}), ("read", {"path": 7}),
    ("read", {"path": "data.bin"}), ("read", {"path": "src"}), ("read", {"path": "missing.py"}),
    ("read", {"path": "src/app/core.py", "start_line": -3}), ("read", {"path": "src/app/core.py", "start_line": "x"}),
    ("read", {"path": "src/app/core.py", "start_line": 9, "end_line": 2}), ("read", {}),
    ("grep", {"pattern": "TOPSECRET", "path": "/"}), ("grep", {"pattern": "TOPSECRET", "path": "../outside"}),
    ("grep", {"pattern": "TOPSECRET", "path": "link_dir"}), ("grep", {"pattern": "x", "path": "--pre=/bin/sh"}),
    ("grep", {"pattern": "x", "include": "--pre=/bin/sh"}), ("grep", {"pattern": "x", "include": "../outside/*"}),
    ("grep", {"pattern": "x", "include": "/etc/*"}), ("grep", {"pattern": "x\x00y"}), ("grep", {"pattern": ""}),
    ("grep", {"pattern": "x", "context": 10_000}), ("grep", {"pattern": "(a{1000}){1000}{1000}"}),
    ("grep", {"pattern": "(("}), ("grep", {"pattern": "x", "flags": "--pre=sh"}),
    ("glob", {"pattern": "../outside/*"}), ("glob", {"pattern": "/etc/*"}), ("glob", {"pattern": "**/../../*"}),
    ("glob", {"pattern": "*", "path": "link_dir"}), ("glob", {"pattern": "-x"}), ("rm", {"path": "README.md"}),
]
HARMLESS = [  # accepted, but must never show outside content or run anything
    ("grep", {"pattern": "TOPSECRET"}), ("grep", {"pattern": "--pre=/bin/sh"}), ("grep", {"pattern": "-f/etc/passwd"}),
    ("grep", {"pattern": "(a+)+$"}), ("glob", {"pattern": "**/*secret*"}), ("glob", {"pattern": "link_dir/*"}),
    ("grep", {"pattern": "TOPSECRET", "include": "link_*"}), ("glob", {"pattern": "**"}),
]


@pytest.mark.parametrize("name,arguments", ATTACKS, ids=range(len(ATTACKS)))
def test_attack_is_refused_as_a_result(env, name, arguments):
    result = env.call(ToolCall(name, arguments))
    assert not result.ok and result.error and result.text().startswith("ERROR: ")
    assert SECRET not in result.text() and "root:" not in result.text()


@pytest.mark.parametrize("name,arguments", HARMLESS, ids=range(len(HARMLESS)))
def test_harmless_hostile_input_shows_nothing_outside(env, name, arguments):
    result = env.call(ToolCall(name, arguments))
    assert SECRET not in result.text() and "root:" not in result.text()
    assert "secret.txt" not in result.text()


def test_huge_file_refused_and_grep_still_answers(tmp_path):
    (tmp_path / "big.txt").write_bytes(b"needle\n" * 300_000)
    (tmp_path / "small.txt").write_text("needle\n")
    (tmp_path / "two.txt").write_text("needle\n")
    env = RepoToolEnvironment(tmp_path, ToolConfig(max_file_bytes=1_000_000))
    assert "too large" in run(env, "read", path="big.txt").error
    note = "[not searched (over 1000000 bytes): big.txt]"  # it said "No matches found." of a file it never read
    assert run(env, "grep", pattern="needle", path="big.txt").output == f"No matches found.\n{note}"
    assert run(env, "grep", pattern="needle").output == f"small.txt:1:needle\ntwo.txt:1:needle\n{note}"
    capped = RepoToolEnvironment(tmp_path, ToolConfig(max_file_bytes=1_000_000, max_output_lines=1))
    assert run(capped, "grep", pattern="needle").output.splitlines() == [  # the truncation note stays last
        "small.txt:1:needle", note, "[... truncated: showing 1 of 2 lines; narrow the pattern, path or include]"]
    files_view = shape_result(ToolCall("grep", {"pattern": "needle"}), run(env, "grep", pattern="needle"), "files")
    assert files_view.output == f"small.txt (1 hit)\ntwo.txt (1 hit)\n{note}"


@pytest.mark.parametrize("mode", ["dir", "objects"])
def test_read_numbers_lines_as_grep_does(mode, tmp_path):
    """A form feed (GNU-style page break), a vertical tab or a lone carriage return made ``read`` (str.splitlines)
    start a new line where grep does not, so read at a grep hit's line number showed another line."""
    work = tmp_path / "r"
    work.mkdir()
    source = b"import os\n\x0c\ndef first():\x0b pass\nold = 1\rnew = 2\ndef target():\r\n    return 1\n"
    (work / "m.py").write_bytes(source)
    sha = commit_all(work)
    env = RepoToolEnvironment(work, ToolConfig()) if mode == "dir" else GitObjectEnvironment(work / ".git", sha,
                                                                                             ToolConfig())
    try:
        hit = run(env, "grep", pattern="def target").output
        number = int(hit.split(":")[1])
        shown = run(env, "read", path="m.py", start_line=number, end_line=number).output
        assert shown.endswith("\tdef target():"), (hit, shown)
        assert run(env, "read", path="m.py").output.count("\n") == 5  # six lines, as `grep -c ''` counts them
    finally:
        env.close()


def test_live_checkout_sees_uncommitted_files_but_not_ignored_or_git(tmp_path):
    work, _, _ = make_repo(tmp_path)
    (work / ".gitignore").write_text("venv/\n")
    (work / "venv").mkdir()
    (work / "venv" / "lib.py").write_text("def parse_args(): pass\n")
    (work / "new_module.py").write_text("def parse_args_v2(): pass\n")  # uncommitted
    env = RepoToolEnvironment(work)
    out = run(env, "grep", pattern="parse_args").output
    assert "new_module.py:1:" in out and "venv/" not in out and ".git/" not in out
    assert "new_module.py" in run(env, "glob", pattern="*.py").output


def test_pool_serves_a_non_bare_repository(tmp_path):
    from codegrep.env.pool import WorktreePool

    work, _, sha = make_repo(tmp_path)
    pool = WorktreePool(tmp_path / "pool")
    with pool.acquire(work, sha) as checkout:
        assert run(RepoToolEnvironment(checkout), "read", path="README.md").output == "     1\t# Demo\n     2\tA tiny repo."
    assert pool.clear() == 1 and not pool.leaked()


def test_env_package_has_no_import_cycle():
    """Contract and wiring are split (issue 16): no module of codegrep/env imports one that imports it back,
    counting imports inside functions too."""
    import ast

    root = Path(__file__).resolve().parents[1] / "codegrep" / "env"
    names = {p.stem for p in root.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in root.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "codegrep.env":
                deps |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("codegrep.env."):
                deps.add(node.module.split(".")[2])
        graph[path.stem] = deps - {path.stem}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(d == goal or (d not in seen and reaches(d, goal, seen | {d})) for d in graph.get(start, ()))

    cycles = [m for m in graph if reaches(m, m, {m})]
    assert cycles == [], f"import cycles through {cycles}"
    importers = {m for m, deps in graph.items() if "tools" in deps}  # the wiring is used by entry points only
    assert importers <= {"commands", "bench"}, importers


@pytest.mark.parametrize("mode", ["dir", "objects"])
def test_timeout_and_capture_cap_bound_all_ripgrep_runs_of_one_grep(repo, mode, monkeypatch):
    """A large repository's grep is split into several ripgrep runs (ARG_MAX); the call's ``timeout_s`` and
    ``capture_bytes`` bound them together (each run used to get the whole timeout and cap, so a grep over a
    repository of N chunks could run N x timeout_s and buffer N x capture_bytes)."""
    from codegrep.env import repo_view

    work, git_dir, sha = repo

    def make(config):
        return RepoToolEnvironment(work, config) if mode == "dir" else GitObjectEnvironment(git_dir, sha, config)

    whole = make(ToolConfig())
    expected = run(whole, "grep", pattern="parse_args").output
    whole.close()
    monkeypatch.setattr(repo_view, "_ARG_CHUNK_BYTES", 1)  # one file per ripgrep run
    env = make(ToolConfig())
    assert run(env, "grep", pattern="parse_args").output == expected  # same answer, run by run
    env.close()

    real, budgets = repo_view.run_capped, []

    def three_seconds_each(cmd, cwd, timeout_s, cap_bytes, *args):
        budgets.append(timeout_s)
        cap = real(cmd, cwd, timeout_s, cap_bytes, *args)
        cap.seconds = 3.0  # as if each run took 3 s of the call's 10 s
        return cap

    monkeypatch.setattr(repo_view, "run_capped", three_seconds_each)
    env = make(ToolConfig(timeout_s=10.0))
    result = run(env, "grep", pattern="parse_args")
    assert not result.ok and result.error.startswith("timed out after 10s")
    assert budgets == pytest.approx([10.0, 7.0, 4.0, 1.0])  # the 5th run would start past the deadline
    env.close()

    sizes = []

    def measured(cmd, cwd, timeout_s, cap_bytes, *args):
        cap = real(cmd, cwd, timeout_s, cap_bytes, *args)
        sizes.append(len(cap.stdout))
        return cap

    monkeypatch.setattr(repo_view, "run_capped", measured)
    env = make(ToolConfig())
    run(env, "grep", pattern="parse_args")
    env.close()
    assert sum(s > 0 for s in sizes) >= 2 and max(sizes) < sum(sizes) - 1
    monkeypatch.setattr(repo_view, "run_capped", real)
    env = make(ToolConfig(capture_bytes=sum(sizes) - 1))  # every run fits; all of them together do not
    result = run(env, "grep", pattern="parse_args")
    assert result.truncated and "of more than" in result.output.splitlines()[-1]
    assert len(result.output.splitlines()[:-1]) < len(expected.splitlines())  # the last hit was cut
    env.close()


def test_first_grep_of_one_file_does_not_wait_for_the_whole_blob_store_fill(tmp_path, monkeypatch):
    """Opening a commit in checkout-free mode starts filling the blob store in the background; a grep of one
    file must wait for that file (and at most one batch in progress), not for every blob of the repository
    (it used to wait on the store's lock for the whole fill: 3.6 s for one file of a 6,861-file repository)."""
    import threading

    from codegrep.env import blobstore

    work = tmp_path / "work"
    for i in range(40):
        (work / f"pkg/m{i:02d}.py").parent.mkdir(parents=True, exist_ok=True)
        (work / f"pkg/m{i:02d}.py").write_text(f"def f{i}():\n    return {i}\n")
    sha = commit_all(work)
    monkeypatch.setattr(blobstore, "WRITE_BATCH", 4, raising=False)
    monkeypatch.setattr(blobstore, "_STORES", {})
    real_write, first_batch_held = blobstore.BlobStore._write, threading.Event()

    def write(self, shas):
        if threading.current_thread().name == "codegrep-blobs" and not first_batch_held.is_set():
            first_batch_held.set()  # the background fill is writing its first batch, holding the lock:
            deadline = time.monotonic() + 10  # let the foreground grep queue up behind it
            while time.monotonic() < deadline and not getattr(self, "foreground_waiting", lambda: 1)():
                time.sleep(0.005)
        return real_write(self, shas)

    def stored() -> int:
        return sum(1 for p in (tmp_path / "blobs").rglob("*") if p.is_file() and p.name not in (".lock", blobstore.SOURCE_FILE))

    real_batch, foreground_done = blobstore.BlobStore._ensure_batch, []

    def ensure_batch(self, todo, sizes, wait=False):
        written = real_batch(self, todo, sizes, wait)
        if not wait:  # a foreground batch (the grep's own files): counted while the grep still holds the fill back
            foreground_done.append(stored())  # (counting after the grep returned raced the resumed fill on a busy host)
        return written

    monkeypatch.setattr(blobstore.BlobStore, "_write", write)
    monkeypatch.setattr(blobstore.BlobStore, "_ensure_batch", ensure_batch)
    env = GitObjectEnvironment(work / ".git", sha, ToolConfig(store_root=str(tmp_path / "blobs")))
    assert first_batch_held.wait(10)
    result = run(env, "grep", pattern="return", path="pkg/m39.py")
    blobstore.wait_background()
    env.close()
    assert result.output == "pkg/m39.py:2:    return 39"
    assert stored() == 40
    # the grep's files were in when at most the fill's batch in progress (4) and one it had already queued (4) were:
    # it did not wait for the whole fill (40)
    assert foreground_done and max(foreground_done) <= 1 + 2 * 4, foreground_done


def test_parallel_calls_of_a_turn_share_one_listing_of_a_live_checkout(repo, monkeypatch):
    """A live checkout is re-listed (``rg --files`` over the whole tree) when its listing is stale; the parallel
    calls of a turn used to start one listing each (8 listings of a 6,861-file tree per turn: 650 ms a turn, 360 ms
    with one). Their answers are unchanged."""
    import threading

    from codegrep.env import workdir
    from codegrep.env.procs import Captured

    real, listings = workdir.run_capped, []

    def slow_listing(cmd, *args):
        if "--files" in cmd:
            listings.append(threading.get_ident())
            time.sleep(0.3)  # a large tree: every call of the turn arrives while the first listing runs
        return real(cmd, *args)

    calls = [ToolCall("grep", {"pattern": "parse_args"}), ToolCall("glob", {"pattern": "*.py"}),
             ToolCall("read", {"path": "src/app/core.py"}), ToolCall("grep", {"pattern": "Engine"})] * 2
    expected = [r.output for r in RepoToolEnvironment(repo[0], snapshot=False).run_turn(calls)]
    monkeypatch.setattr(workdir, "run_capped", slow_listing)
    env = RepoToolEnvironment(repo[0], ToolConfig(workers=8), snapshot=False)
    assert [r.output for r in env.run_turn(calls)] == expected
    env.close()
    assert len(listings) == 1

    def failing_listing(cmd, *args):
        listings.append(threading.get_ident())
        time.sleep(0.3)
        return Captured(b"", b"", None, timed_out=True)

    listings.clear()
    monkeypatch.setattr(workdir, "run_capped", failing_listing)
    env = RepoToolEnvironment(repo[0], ToolConfig(workers=8), snapshot=False)
    results = env.run_turn(calls)
    env.close()
    assert all(not r.ok and "listing the repository timed out" in r.error for r in results)
    assert len(listings) == 1  # the calls that waited for the failed listing share its answer


def test_cached_tree_listings_are_bounded_by_files_not_only_by_commits(tmp_path, monkeypatch):
    """Checkout-free mode caches the listing of the last 64 commits it opened; each costs about 0.6 KB per file,
    so on a large repository the cache is bounded by its files in all too (it kept 64 commits whatever their size).
    The answers do not depend on it."""
    from codegrep.env import gitobjects

    work = tmp_path / "work"
    shas = []
    for i in range(4):
        for j in range(10):
            (work / f"pkg{i}/m{j}.py").parent.mkdir(parents=True, exist_ok=True)
            (work / f"pkg{i}/m{j}.py").write_text(f"X = {i}\n")
        shas.append(commit_all(work))  # 10, 20, 30, 40 files
    monkeypatch.setattr(gitobjects, "_TREES", gitobjects.tree_cache(max_files=60))
    store = tmp_path / "blobs"
    answers = []
    for sha in shas:
        env = GitObjectEnvironment(work / ".git", sha, ToolConfig(store_root=str(store)))
        answers.append(run(env, "glob", pattern="**/m0.py").output)
        env.close()
    assert [len(entries) for entries, _ in gitobjects._TREES.values()] == [40]  # 30 + 40 > 60: only the newest
    assert answers[-1] == "pkg0/m0.py\npkg1/m0.py\npkg2/m0.py\npkg3/m0.py"
    env = GitObjectEnvironment(work / ".git", shas[0], ToolConfig(store_root=str(store)))  # listed again
    assert run(env, "glob", pattern="**/m0.py").output == answers[0] == "pkg0/m0.py"
    env.close()


def test_repeated_double_star_segments_compile_to_one(env):
    """``**/**/`` matches what ``**/`` matches; each repeat was compiled to another ``(?:.*/)?``, which Python's
    backtracking ``re`` tries in every split of a path (10 repeats: 805 ms for one glob over 6,861 files, 3 ms as
    one; glob has no timeout). Same files, one group."""
    from codegrep.env.textops import glob_to_regex

    assert glob_to_regex("**/**/**/**/*.py").pattern == glob_to_regex("**/*.py").pattern
    assert glob_to_regex("src/**/**/**/core.py").pattern == glob_to_regex("src/**/core.py").pattern
    for pattern in ("**/*.py", "src/**/*.py", "**/app/*.py"):
        many = pattern.replace("**/", "**/**/**/**/")
        assert run(env, "glob", pattern=many).output == run(env, "glob", pattern=pattern).output != "No files matched."
        assert run(env, "grep", pattern="parse_args", include=many).output == \
            run(env, "grep", pattern="parse_args", include=pattern).output


def test_glob_and_include_matching_end_at_the_timeout(repo):
    """Globs are matched in Python (a backtracking ``re``) over every listed path, with no timeout: the slowest
    glob found, ``**/`` + ``?**/`` x 40 + ``zzz``, took 2.0 s over 6,861 files, in proportion to the files. Like
    grep, glob and grep's include now end at ``timeout_s`` with the timed-out message."""
    work, git_dir, sha = repo
    for make in (lambda c: RepoToolEnvironment(work, c), lambda c: GitObjectEnvironment(git_dir, sha, c)):
        env = make(ToolConfig())
        assert run(env, "glob", pattern="**/core.py").output == "src/app/core.py"  # listed (the listing has its own)
        env.config = ToolConfig(timeout_s=0.000001)
        for result in (run(env, "glob", pattern="**/?**/?**/?**/x"),
                       run(env, "grep", pattern="parse_args", include="**/?**/?**/?**/x")):
            assert not result.ok and result.error.startswith("timed out after 1e-06s")
        env.close()


def test_grep_shows_a_crlf_line_without_its_carriage_return(tmp_path):
    """``read`` dropped a CRLF line's ``\\r`` but grep showed it (``a.py:1:x = 1\\r``), match and context lines alike."""
    work = tmp_path / "crlf"
    sha = commit_all(work, {"a.py": b"x = 1\r\ny = 2\r\nz = 3\r\n"})
    for env in (RepoToolEnvironment(work), GitObjectEnvironment(work, sha)):
        assert run(env, "grep", pattern="y = 2", context=1).output == "a.py-1-x = 1\na.py:2:y = 2\na.py-3-z = 3"
        assert run(env, "read", path="a.py").output == "     1\tx = 1\n     2\ty = 2\n     3\tz = 3"
