"""Shell parsing and every trajectory format, on REAL rows (the embedded copies of ../shared samples)."""
from __future__ import annotations

import json
import re

import pytest

from codegrep.data.tasks import patch_files
from codegrep.mining.formats import FORMATS, detect_format, parse_row
from codegrep.mining.inputs import embedded_dir, open_text, report_beside
from codegrep.mining.events import event_call, in_repo
from codegrep.mining.records import supervision_record
from codegrep.mining.shell import parse_shell

SAMPLES = embedded_dir()


def _rows(name: str) -> list[dict]:
    with open_text(SAMPLES / "format-samples" / name) as fh:
        data = json.load(fh)
    return data if isinstance(data, list) else [data]


def _mini() -> list[tuple[str, dict]]:
    out = []
    for path in sorted((SAMPLES / "mini-swe-agent").glob("*.traj.json.gz")):
        with open_text(path) as fh:
            out.append((str(path), json.load(fh)))
    return out


@pytest.mark.parametrize("command, expected", [
    ("grep -rn 'def foo' pkg/ | head -5", [("search", "pkg", "def foo", None)]),
    ("nl -ba /testbed/pkg/a.py | sed -n '10,40p'", [("view", "pkg/a.py", None, (10, 40))]),
    ("cat pkg/a.py | head -n 30", [("view", "pkg/a.py", None, (1, 30))]),
    ("sed -n '5,$p' pkg/a.py", [("view", "pkg/a.py", None, (5, -1))]),
    ("sed -i 's/a/b/g' pkg/a.py && python -m pytest tests/x.py -q", [("edit", "pkg/a.py", None, None),
                                                                    ("run", None, None, None)]),
    ("cat <<'EOF' > reproduce.py\nimport x\nprint(\"a | b && c\")\nEOF\npython reproduce.py",
     [("create", "reproduce.py", None, None), ("run", None, None, None)]),
    ("find . -name '*.py' -path '*forms*' | xargs grep -l Widget", [("find", "", "*.py", None),
                                                                    ("search", "", "Widget", None)]),
    ("cd /testbed/pkg && cat sub/b.py; ls", [("view", "pkg/sub/b.py", None, None), ("list", "pkg", None, None)]),
    ("echo 'x' >> pkg/a.py 2>&1", [("edit", "pkg/a.py", None, None)]),
    ('grep -n "a;b" "my dir/f.py" > /dev/null', [("search", "my dir/f.py", "a;b", None)]),
    ("rg -n --glob '*.py' foo src", [("search", "src", "foo", None)]),
    ("git grep -n foo -- pkg", [("search", "pkg", "foo", None)]),
    # every -e script is the script (the last one alone was read: one view, of lines 10-20)
    ("sed -n -e 1,5p -e '10,20p' pkg/a.py", [("view", "pkg/a.py", None, (1, 5)), ("view", "pkg/a.py", None, (10, 20))]),
    ("sed -n --expression=1,5p --expression 10,20p pkg/a.py", [("view", "pkg/a.py", None, (1, 5)),
                                                               ("view", "pkg/a.py", None, (10, 20))]),
])
def test_shell_commands(command, expected):
    got = [(e.kind, e.path, e.pattern, e.lines) for e in parse_shell(command)]
    assert got == expected


@pytest.mark.parametrize("command, expected", [
    # shapes of the shipped runs' 140 multi-line commands: each line after a backslash-newline is the same command
    ("sed -i 's/a/b/' seaborn/_core/plot.py && \\\nsed -i \"s/c/d/\" seaborn/_core/scales.py",
     [("edit", "seaborn/_core/plot.py"), ("edit", "seaborn/_core/scales.py")]),
    ("mkdir -p other_app && \\\ntouch other_app/__init__.py && \\\ncat other_app/fields.py",
     [("create", "other_app/__init__.py"), ("view", "other_app/fields.py")]),
    ("grep -n 'def foo' \\\n    pkg/a.py \\\n    pkg/b.py", [("search", "pkg/a.py"), ("search", "pkg/b.py")]),
    ('cat "pkg/a.py" "pkg/\\\nb.py"', [("view", "pkg/a.py"), ("view", "pkg/b.py")]),  # inside double quotes too
    ("grep -n 'a\\\nb' pkg/a.py", [("search", "pkg/a.py")]),  # literal inside single quotes
])
def test_line_continuations_join_the_lines_of_one_command(command, expected):
    assert [(e.kind, e.path) for e in parse_shell(command)] == expected


@pytest.mark.parametrize("command, expected", [
    # the shipped gemini runs comment their commands (1,274 of 15,028 commands have a '#')
    ("# Let's look at the definition\nsed -n '71,130p' sphinx/domains/python.py",
     [("view", "sphinx/domains/python.py")]),
    ("# don't guess\ncat pkg/a.py\n# it's the caller\ncat pkg/b.py", [("view", "pkg/a.py"), ("view", "pkg/b.py")]),
    ("cat pkg/a.py # the model", [("view", "pkg/a.py")]),
    ("grep -n '#' pkg/a.py; cat pkg/c#d.py", [("search", "pkg/a.py"), ("view", "pkg/c#d.py")]),  # not comments
])
def test_comments_are_not_commands(command, expected):
    assert [(e.kind, e.path) for e in parse_shell(command)] == expected


@pytest.mark.parametrize("command, lines", [
    ("tail -n +1868 django/db/models/sql/compiler.py", (1868, -1)),  # shipped gemini run django__django-15563
    ("tail -n +100 pkg/a.py | head -n 20", (100, 119)),
    ("sed -n '5,$p' pkg/a.py | sed -n '2,3p'", (6, 7)),
    ("tail -n 30 pkg/a.py | head -n 20", None),  # shipped: the last 30 lines' first 20, not lines 1-20
    ("cat -n pkg/a.py | tail -n 30 | head -n 20", None),
    ("nl -ba pkg/a.py | sed -n '10,40p'", (10, 40)),
    # a range taken from a range with a known end stays inside it (shipped: 'head -n 152 f | tail -n 10')
    ("head -n 152 django/contrib/postgres/forms/array.py | tail -n 10", (143, 152)),
    ("sed -n '100,200p' pkg/a.py | head -5", (100, 104)),
    ("head -n 30 pkg/a.py | sed -n '20,40p'", (20, 30)),
])
def test_tail_line_ranges(command, lines):
    assert [(e.kind, e.lines) for e in parse_shell(command)] == [("view", lines)]


@pytest.mark.parametrize("command, expected", [
    # a search run by xargs on the names the pipeline produced searches where they came from
    ("find django -name '*.py' | xargs grep -l 'class FileField'", [("find", "django"), ("search", "django")]),
    ("grep -rl foo src | xargs -I{} grep -n bar {} | sort", [("search", "src"), ("search", "src")]),
    ("git ls-files | xargs -0 -n 1 grep -n foo pkg/a.py", [("run", None), ("search", "pkg/a.py")]),
    ("find . -name '*.pyc' | xargs rm -f", [("find", "")]),  # the names removed are not known
    # in-place sed in a flag cluster edits; less's +N is where it starts, not a file
    ("sed -Ei 's/a/b/' pkg/a.py && sed -ni.bak '1p' pkg/b.py", [("edit", "pkg/a.py"), ("edit", "pkg/b.py")]),
    ("sed -E 's/a/b/' pkg/a.py", [("view", "pkg/a.py")]),
    ("less +120 pkg/a.py", [("view", "pkg/a.py")]),
])
def test_xargs_sed_flag_clusters_and_less(command, expected):
    assert [(e.kind, e.path) for e in parse_shell(command)] == expected


@pytest.mark.parametrize("command, expected", [
    # the command after a reserved word is an ordinary command: it was read as a program named then/do/{/!
    ("if grep -q old pkg/a.py; then sed -i 's/old/new/' pkg/a.py; fi", [("search", "pkg/a.py"), ("edit", "pkg/a.py")]),
    ("for f in 1 2; do cat pkg/a.py; done", [("view", "pkg/a.py")]),
    ("{ cat pkg/a.py; cat pkg/b.py; } | head -n 5", [("view", "pkg/a.py"), ("view", "pkg/b.py")]),
    ("! grep -q x pkg/a.py || echo ok", [("search", "pkg/a.py")]),
    ("if [ -f x ]; then :; else cat > pkg/c.py <<'EOF'\nx = 1\nEOF\nfi", [("run", None), ("run", None),
                                                                            ("create", "pkg/c.py")]),
])
def test_commands_inside_compound_commands(command, expected):
    assert [(e.kind, e.path) for e in parse_shell(command)] == expected


def test_unbalanced_quote_does_not_raise():
    assert [e.kind for e in parse_shell("grep -n 'unterminated pkg/a.py")] == ["search"]


def test_mini_swe_agent_real_runs():
    runs = _mini()
    assert len(runs) == 15
    for path, row in runs:
        assert detect_format(row) == "mini-swe-agent"
        traj = parse_row(row, source=path, report=report_beside(path))
        rec = supervision_record(traj)
        assert rec.patch_files == patch_files(row["info"]["submission"]), path  # done-when: diff files
        assert rec.patch_source == "patch"
        assert traj.resolved is not None, "resolution comes from the report.json beside the run"
        assert traj.n_steps > 0 and traj.n_tokens and traj.problem_statement
        for p in rec.viewed_files + rec.edited_files + rec.context_files:
            assert not p.startswith(("/", "testbed")) and not re.search(r":\d+$", p), p  # no sandbox, no :line


def test_mini_swe_agent_views_keep_line_ranges():
    row = dict(_mini())[str(SAMPLES / "mini-swe-agent" / "django__django-11433.traj.json.gz")]
    traj = parse_row(row)
    views = [(e.path, e.lines) for e in traj.events if e.kind == "view"]
    assert ("django/forms/models.py", (441, 470)) in views
    assert supervision_record(traj).target_files == ["django/forms/models.py"]


def test_swe_gym_openhands_real_rows():
    rows = _rows("adp_SWE-Gym_OpenHands-Sampled-Trajectories.sample_raw.json.gz")
    recs = [supervision_record(parse_row(r)) for r in rows]
    assert {detect_format(r) for r in rows} == {"swe-gym-openhands"}
    first = recs[0]
    assert first.instance_id == "python__mypy-15976" and first.resolved is True
    assert first.target_files == ["mypy/plugins/attrs.py", "mypy/plugins/dataclasses.py"]
    assert first.excluded_files == {"reproduce_error.py": "scratch"}  # the agent's leftover, not supervision
    assert all(not p.startswith("/workspace") for r in recs for p in r.viewed_files)


def test_swe_smith_real_rows_xml_calls_and_foreign_patch():
    rows = _rows("adp_SWE-smith-trajectories.sample_raw.json.gz")
    recs = [supervision_record(parse_row(r)) for r in rows]
    assert {detect_format(r) for r in rows} == {"swe-smith"}
    arrow = recs[0]
    # the real row's `patch` edits autograd/, a repository this arrow run never touched
    assert patch_files(rows[0]["patch"])[0].startswith("autograd/")
    assert arrow.patch_source == "actions" and arrow.target_files == ["arrow/arrow.py"]
    assert "arrow/arrow.py" in arrow.viewed_files
    moto = recs[4]
    assert moto.target_files == ["moto/athena/models.py", "moto/athena/responses.py"]
    assert "tests/test_athena/test_athena.py" in moto.context_files


@pytest.mark.parametrize("instance_id, repo", [
    ("vercel__next.js-12345", "vercel/next.js"),          # a repository name with a dot (not a SWE-smith id)
    ("socketio__socket.io-4012", "socketio/socket.io"),
    ("getmoto__moto.694ce1f4.pr_6055", "getmoto/moto"),   # SWE-smith: owner__name.<commit>.<bug>
    ("pyutils__line_profiler.a646bf0f.100", "pyutils/line_profiler"),
    ("django__django-11433", "django/django"),
])
def test_repo_guessed_from_the_id_keeps_dots_in_repository_names(instance_id, repo):
    from codegrep.mining.records import repo_from_instance_id

    assert repo_from_instance_id(instance_id) == repo


def test_nebius_swe_agent_real_rows():
    rows = _rows("adp_nebius_SWE-agent-trajectories.sample_raw.json.gz")
    recs = [supervision_record(parse_row(r)) for r in rows]
    assert {detect_format(r) for r in rows} == {"nebius-swe-agent"}
    oqupy = recs[1]
    assert oqupy.instance_id == "tempoCollaboration__OQuPy-74" and oqupy.resolved is True
    assert oqupy.viewed_files == ["oqupy/process_tensor.py"]  # "/OQuPy/" root removed
    assert oqupy.edited_files[-1] == "oqupy/process_tensor.py" and oqupy.target_files == ["oqupy/process_tensor.py"]
    treon = recs[4]
    assert treon.target_files == ["treon/treon.py"]  # dir1/test.ipynb, dir2/test.ipynb were scratch


def test_swe_agent_traj_real_files():
    for name, target in [("sweagent_pydicom-1458_default.traj.gz", "pydicom/pixel_data_handlers/numpy_handler.py"),
                         ("sweagent_marshmallow-1867_function_calling.traj.gz", "src/marshmallow/fields.py")]:
        row = _rows(name)[0]
        assert detect_format(row) == "swe-agent"
        traj = parse_row(row, source=str(SAMPLES / "format-samples" / name))
        rec = supervision_record(traj)
        assert rec.target_files == [target] and target in rec.viewed_files
        assert "ISSUE" not in traj.problem_statement and len(traj.problem_statement) > 50


def test_openhands_event_stream_fixture():
    """No real OpenHands row is in ../shared: this hand-made row mirrors the documented schema."""
    row = {"instance_id": "django__django-11099", "instance": {"problem_statement": "Fix validators"},
           "test_result": {"git_patch": "diff --git a/django/core/validators.py b/django/core/validators.py\n"
                                        "--- a/django/core/validators.py\n+++ b/django/core/validators.py\n",
                           "report": {"resolved": True}},
           "metrics": {"accumulated_token_usage": {"prompt_tokens": 100, "completion_tokens": 20}},
           "history": [
               {"id": 0, "source": "user", "action": "message", "args": {"content": "Fix validators"}},
               {"id": 1, "source": "agent", "action": "run", "args": {"command": "grep -rn UsernameValidator "
                                                                                  "/workspace/django__django__3.0/django"}},
               {"id": 2, "source": "environment", "observation": "run", "content": "...", "cause": 1},
               {"id": 3, "source": "agent", "action": "read",
                "args": {"path": "/workspace/django__django__3.0/django/core/validators.py", "view_range": [1, 40]}},
               {"id": 4, "source": "agent", "action": "edit",
                "args": {"path": "/workspace/django__django__3.0/django/core/validators.py", "command": "str_replace"}},
               {"id": 5, "source": "agent", "action": "finish", "args": {}}]}
    assert detect_format(row) == "openhands" and detect_format(row["history"]) == "openhands"
    rec = supervision_record(parse_row(row))
    assert rec.resolved is True and rec.n_tokens == 120 and rec.n_steps == 3
    assert rec.search_patterns == ["UsernameValidator"] and rec.viewed_files == ["django/core/validators.py"]
    assert rec.target_files == ["django/core/validators.py"] and rec.steps_to_first_target_view == 2


def test_unknown_row_is_a_clear_error():
    with pytest.raises(ValueError, match="unrecognised trajectory format"):
        parse_row({"hello": 1}, source="x.jsonl:3")


def test_a_forced_format_that_is_another_rows_format_is_a_clear_error():
    """``--format swe-agent`` on mini-swe-agent runs parsed every run as a SWE-agent row with no steps and still
    made 'useful' records from the diff alone; ``--format mini-swe-agent`` on the nebius rows likewise."""
    (_, mini), nebius = _mini()[0], _rows("adp_nebius_SWE-agent-trajectories.sample_raw.json.gz")[0]
    with pytest.raises(ValueError, match=r"x.traj.json: row does not match --format swe-agent \(it is a "
                                         r"mini-swe-agent row\)"):
        parse_row(mini, "swe-agent", source="x.traj.json")
    with pytest.raises(ValueError, match="does not match --format mini-swe-agent"):
        parse_row(nebius, "mini-swe-agent")
    assert parse_row(mini, "mini-swe-agent").n_steps  # the row's own format, forced, is read as before
    assert parse_row(nebius, "nebius-swe-agent").events


def test_a_forced_format_that_finds_no_step_in_a_row_no_format_recognises_is_a_clear_error():
    """``--format X`` on a row of no known format (no step X reads) parsed it as an empty run and mined a record."""
    row = {"instance_id": "django__django-11099", "log": [{"who": "agent", "cmd": "ls"}], "info": {}}
    for name in FORMATS:
        with pytest.raises(ValueError, match=rf"x.jsonl:1: row does not match --format {name} \(no step of that "
                                             r"format; no known format recognises it"):
            parse_row(row, name, source="x.jsonl:1")


def _mini_run(commands: list[str], submission: str = "", instance_id: str = "bottlepy__bottle-1") -> dict:
    """A mini-swe-agent 1.x run that executed ``commands`` (one ```bash block per turn) and submitted a diff."""
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "<pr_description>Fix</pr_description>"}]
    for c in commands:
        messages += [{"role": "assistant", "content": f"THOUGHT\n```bash\n{c}\n```"},
                     {"role": "user", "content": "<returncode>0</returncode>"}]
    return {"trajectory_format": "mini-swe-agent-1", "instance_id": instance_id, "messages": messages,
            "info": {"submission": submission}}


def _diff(*paths: str) -> str:
    return "".join(f"diff --git a/{p} b/{p}\nindex 1..2 100644\n--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-a\n+b\n"
                   for p in paths)


def test_a_repository_file_the_run_overwrote_is_not_its_own_new_file():
    """``cat <<EOF > f`` / ``mv f.new f`` over an existing file is an overwrite: the file stays a target (even at
    the top level, where the run's own new files are scratch) and its later views count."""
    rec = supervision_record(parse_row(_mini_run([
        "cat bottle.py", "grep -n 'def route' bottle.py",
        "sed -n '1,50p' bottle.py > bottle.py.new && echo fix >> bottle.py.new && mv bottle.py.new bottle.py",
        "nl -ba bottle.py | sed -n '40,60p'",
        "cat <<'EOF' > plugins/util.py\nx = 1\nEOF", "cat plugins/util.py"],
        _diff("bottle.py", "plugins/util.py"))))
    assert rec.target_files == ["bottle.py", "plugins/util.py"] and rec.excluded_files == {}
    assert rec.n_views == 4 and rec.n_target_views == 4  # with the view after the mv and plugins/util.py's


def _tool_call(name: str, **args) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{len(str(args))}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


_UPLOADED = "<uploaded_files>\n/workspace/getmoto__moto__4.1\n</uploaded_files>\nFix athena"
_PERSISTENT_SHELL_ROWS = {
    "swe-gym-openhands": {"instance_id": "getmoto__moto-5865", "run_id": "r", "test_result": {"git_patch": ""},
                          "messages": [{"role": "user", "content": _UPLOADED},
                                       _tool_call("execute_bash", command="cd /workspace/getmoto__moto__4.1/moto"),
                                       _tool_call("execute_bash", command="cat athena/models.py"),
                                       _tool_call("execute_bash", command="cd .. && grep -n list_named tests/x.py")]},
    "openhands": {"instance_id": "getmoto__moto-5865", "test_result": {"git_patch": ""}, "history": [
        {"source": "agent", "action": "run", "args": {"command": "cd /workspace/getmoto__moto__4.1/moto"}},
        {"source": "agent", "action": "run", "args": {"command": "cat athena/models.py"}},
        {"source": "agent", "action": "run", "args": {"command": "cd .. && grep -n list_named tests/x.py"}}]},
    "swe-agent": {"trajectory": [  # the recorded state is the working directory after each action
        {"action": "cd moto\n", "observation": "", "state": {"open_file": "n/a", "working_dir": "/moto/moto"}},
        {"action": "open athena/models.py\n", "observation": "", "state": {"working_dir": "/moto/moto"}},
        {"action": "cd ..\n", "observation": "", "state": {"working_dir": "/moto"}},
        {"action": "search_file list_named tests/x.py\n", "observation": "", "state": {"working_dir": "/moto"}}],
        "info": {"submission": ""}, "instance_id": "getmoto__moto-5865"},
    "nebius-swe-agent": {"instance_id": "getmoto__moto-5865_3", "target": True, "generated_patch": "", "trajectory": [
        {"role": "system", "text": "s"}, {"role": "user", "text": "ISSUE:\nFix athena\n(Current directory: /moto)"},
        {"role": "ai", "text": "```\ncd moto\n```"}, {"role": "user", "text": "(Current directory: /moto/moto)\nbash-$"},
        {"role": "ai", "text": "```\nopen athena/models.py\n```"}, {"role": "user", "text": "(Current directory: /moto/moto)"},
        {"role": "ai", "text": "```\ncd ..\n```"}, {"role": "user", "text": "(Current directory: /moto)"},
        {"role": "ai", "text": "```\nsearch_file list_named tests/x.py\n```"}]},
}


@pytest.mark.parametrize("fmt", list(_PERSISTENT_SHELL_ROWS))
def test_a_cd_holds_for_the_next_commands_of_a_persistent_shell(fmt):
    """SWE-agent, OpenHands and the tool-calling agents run every command in ONE shell session: after
    ``cd moto`` a relative path is under ``moto/`` until the next ``cd`` (mini-swe-agent starts each at the root)."""
    traj = parse_row(_PERSISTENT_SHELL_ROWS[fmt])
    assert traj.source_format == fmt
    assert [(e.kind, e.path) for e in traj.events if e.kind != "run"] == [
        ("view", "moto/athena/models.py"), ("search", "tests/x.py")]


def test_perl_in_place_edits_are_edits():
    """``perl -pi -e`` is how some agents edit (no diff recorded here: the written files stand in for it)."""
    rec = supervision_record(parse_row(_mini_run([
        "grep -rn 'old_name' pkg/", "perl -ne 'print if 10..20' pkg/a.py",
        "perl -0777 -pi -e 's/old_name/new_name/g' pkg/a.py pkg/b.py && perl -i.bak -pe 's/x/y/' pkg/c.py"])))
    assert rec.patch_source == "actions" and rec.target_files == ["pkg/a.py", "pkg/b.py", "pkg/c.py"]
    assert rec.viewed_files == ["pkg/a.py"] and rec.context_files == []


def test_older_editor_line_ranges_are_kept():
    """An old OpenHands ``read`` with ``start``/``end`` (0-based, end exclusive) and SWE-agent's
    ``str_replace_editor view PATH --view_range A B`` keep their ranges, as a ``view_range`` argument does."""
    openhands = {"instance_id": "getmoto__moto-5865", "test_result": {"git_patch": ""}, "history": [
        {"source": "agent", "action": "read", "args": {"path": "/workspace/getmoto__moto__4.1/moto/a.py",
                                                       "start": 99, "end": 140}},
        {"source": "agent", "action": "read", "args": {"path": "/workspace/getmoto__moto__4.1/moto/a.py",
                                                       "start": 200, "end": -1}},
        {"source": "agent", "action": "read", "args": {"path": "/workspace/getmoto__moto__4.1/moto/a.py",
                                                       "start": 0, "end": -1}}]}
    sweagent = {"instance_id": "getmoto__moto-5865", "info": {"submission": ""}, "trajectory": [
        {"action": "str_replace_editor view /moto/moto/a.py  --view_range 100 140", "observation": "",
         "state": {"working_dir": "/moto"}}]}
    assert [e.lines for e in parse_row(openhands).events] == [(100, 140), (201, -1), None]
    assert [(e.path, e.lines) for e in parse_row(sweagent).events] == [("moto/a.py", (100, 140))]


@pytest.mark.parametrize("root, command, expected", [
    # the home directory is outside the repository; a path with a variable names no known file
    ("/testbed", "cat ~/.bashrc && cat $HOME/.config/pip.conf && cat pkg/a.py", ["pkg/a.py"]),
    ("/testbed", "for f in pkg/a.py; do cat $f; done && cat \"${ROOT}/x.py\"", []),
    # after a cd outside a known root, relative paths are outside it, until a cd (or '..') comes back
    ("/testbed", "cd /tmp && cat repro.py && cat ../testbed/pkg/a.py && cd /testbed && cat pkg/b.py",
     ["pkg/a.py", "pkg/b.py"]),
    ("/testbed", "cd /usr/lib/python3/site-packages/django && cat db/models.py", []),
    ("/testbed", "cd .. && cat testbed/pkg/a.py && cd pkg && cd ../../testbed/pkg && cat b.py", ["pkg/a.py", "pkg/b.py"]),
    # the root is not recorded: only a system directory or an installed package is known to be outside
    (None, "cd /tmp && cat repro.py", []),
    (None, "cd /myproj && cat src/a.py", ["src/a.py"]),
])
def test_paths_outside_the_repository(root, command, expected):
    assert [e.path for e in parse_shell(command, root=root) if e.kind == "view" and in_repo(e.path)] == expected


def test_openhands_stream_knows_its_checkout():
    """An OpenHands run's root is its ``/workspace/<owner>__<repo>`` checkout: after ``cd /tmp`` a relative path
    is outside it (it was read as a repository file), and the session's cd back holds."""
    history = [{"source": "agent", "action": "run", "args": {"command": "cd /workspace/getmoto__moto__4.1 && ls"}},
               {"source": "agent", "action": "run", "args": {"command": "cd /tmp && cat models.py"}},
               {"source": "agent", "action": "run", "args": {"command": "cat moto/athena/models.py"}},
               {"source": "agent", "action": "run", "args": {"command": "cd /workspace/getmoto__moto__4.1/moto"}},
               {"source": "agent", "action": "run", "args": {"command": "cat athena/models.py"}}]
    views = [e.path for e in parse_row({"instance_id": "getmoto__moto-5865", "history": history,
                                        "test_result": {"git_patch": ""}}).events if e.kind == "view"]
    assert views == ["/tmp/models.py", "/tmp/moto/athena/models.py", "moto/athena/models.py"]


def test_openhands_editor_actions_read_paths_against_the_streams_checkout():
    """The editor's read/edit/write of an OpenHands stream whose checkout is not a known sandbox directory
    (``<uploaded_files>/home/me/myrepo``) kept absolute paths outside the repository, so its views and edits named no
    repository file, while ``cat`` of the same file in its shell named one."""
    root = "/home/me/myrepo"
    history = [{"source": "user", "action": "message", "args": {"content": f"<uploaded_files>\n{root}\n</uploaded_files>"}},
               {"source": "agent", "action": "read", "args": {"path": f"{root}/pkg/a.py"}},
               {"source": "agent", "action": "edit", "args": {"path": f"{root}/pkg/a.py", "command": "str_replace"}},
               {"source": "agent", "action": "write", "args": {"path": f"{root}/repro.py", "content": "x"}},
               {"source": "agent", "action": "read", "args": {"path": "/tmp/notes.py"}},
               {"source": "agent", "action": "run", "args": {"command": f"cat {root}/pkg/b.py"}}]
    events = parse_row({"instance_id": "me__myrepo-1", "history": history, "test_result": {"git_patch": ""}}).events
    assert [(e.kind, e.path) for e in events] == [("view", "pkg/a.py"), ("edit", "pkg/a.py"), ("create", "repro.py"),
                                                  ("view", "/tmp/notes.py"), ("view", "pkg/b.py")]


def test_openhands_stream_of_a_repository_mounted_at_workspace_keeps_its_folders():
    """OpenHands' default layout for a user's own project mounts the repository at ``/workspace`` itself (no
    ``<uploaded_files>``, no ``/workspace/<owner>__<repo>`` folder): ``/workspace/src/dateparse/core.py`` lost its first
    folder (``dateparse/core.py``, read as the sandbox prefix ``/workspace/<repo>/``), so the diff's ``src/...`` looked
    like another run's and was replaced by the (wrong) paths of the actions. The diff's files place the checkout."""
    root, f = "/workspace", "src/dateparse/core.py"
    history = [{"id": 0, "source": "user", "action": "message", "args": {"content": "Fix the date parser"}},
               {"id": 1, "source": "agent", "action": "read", "args": {"path": f"{root}/{f}", "start": 0, "end": -1}},
               {"id": 2, "source": "agent", "action": "run", "args": {"command": f"grep -rn parse_date {root}/src"}},
               {"id": 3, "source": "agent", "action": "edit", "args": {"path": f"{root}/{f}", "command": "str_replace"}},
               {"id": 4, "source": "agent", "action": "run", "args": {"command": f"cd {root} && cat tests/test_core.py"}}]
    patch = f"diff --git a/{f} b/{f}\n--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-a\n+b\n"
    rec = supervision_record(parse_row({"instance_id": "acme__dateparse-1", "history": history, "resolved": True,
                                        "test_result": {"git_patch": patch}}))
    assert rec.patch_source == "patch" and rec.target_files == [f]
    assert rec.viewed_files == [f, "tests/test_core.py"] and rec.edited_files == [f]
    # the layout with a folder per repository is read as before
    nested = json.loads(json.dumps(history).replace('"/workspace/', '"/workspace/dateparse/').replace(
        "/workspace/src", "/workspace/dateparse/src").replace("cd /workspace &&", "cd /workspace/dateparse &&"))
    rec = supervision_record(parse_row({"instance_id": "acme__dateparse-1", "history": nested, "resolved": True,
                                        "test_result": {"git_patch": patch}}))
    assert rec.patch_source == "patch" and rec.target_files == [f] and rec.viewed_files == [f, "tests/test_core.py"]


_FIX_SCRIPT = ("cat <<'EOF' > fix_http.py\nfile_path = 'bottle/http.py'\nwith open(file_path) as f:\n    s = f.read()\n"
               "with open(file_path, 'w') as f:\n    f.write(s.replace('a', 'b'))\nEOF")


def test_edits_made_by_scripts_and_patches_are_edits():
    """A script the run wrote and ran (shipped: 101 really-edited files of 95 runs were seen only in the diff),
    ``python - <<EOF``, ``python -c``, ``git apply`` and ``patch`` of a patch the run wrote are edits, at the step
    they ran: the first write to a target ends the context (views after it are not context)."""
    rec = supervision_record(parse_row(_mini_run([
        "cat bottle/http.py", _FIX_SCRIPT, "cat bottle/util.py", "python fix_http.py", "cat bottle/route.py",
        "python3 - <<'EOF'\nfrom pathlib import Path\np = Path('bottle/route.py')\np.write_text(p.read_text())\nEOF",
        "python -c \"s = open('bottle/app.py').read(); open('bottle/app.py', 'w').write(s)\"",
        "git apply <<'EOF'\ndiff --git a/bottle/a.py b/bottle/a.py\n--- a/bottle/a.py\n+++ b/bottle/a.py\n@@ -1 +1 @@\nEOF",
        "cat > /tmp/b.diff <<'EOF'\n--- bottle/b.py\t2024\n+++ bottle/b.py\t2024\n@@ -1 +1 @@\nEOF\npatch -p0 < /tmp/b.diff",
        "patch bottle/c.py /tmp/c.diff"],
        _diff("bottle/http.py", "bottle/route.py", "bottle/app.py", "bottle/a.py", "bottle/b.py", "bottle/c.py"))))
    assert rec.edited_files == ["fix_http.py", "bottle/http.py", "bottle/route.py", "bottle/app.py", "bottle/a.py",
                                "bottle/b.py", "bottle/c.py"]
    assert rec.context_files == ["bottle/util.py"]  # read before the script's edit; bottle/route.py after it


def test_git_apply_of_standard_input_is_an_edit():
    """``git apply -`` reads the patch from standard input (a heredoc) as ``git apply`` without a file does: the
    ``-`` was read as a file the run had not written, so the edit was lost and later views counted as context."""
    rec = supervision_record(parse_row(_mini_run([
        "cat bottle/util.py",
        "git apply - <<'EOF'\ndiff --git a/bottle/a.py b/bottle/a.py\n--- a/bottle/a.py\n+++ b/bottle/a.py\n@@ -1 +1 @@\nEOF",
        "cat bottle/route.py"], _diff("bottle/a.py"))))
    assert rec.edited_files == ["bottle/a.py"] and rec.context_files == ["bottle/util.py"]


@pytest.mark.parametrize("commands", [
    [_FIX_SCRIPT],  # written, never run
    [_FIX_SCRIPT.replace("file_path = 'bottle/http.py'", "import sys\nfile_path = sys.argv[1]"),
     "python fix_http.py bottle/http.py"],  # a path the script is given: not known
    [_FIX_SCRIPT.replace("with open(file_path, 'w')", "with open(file_path, 'w'"), "python fix_http.py"],  # no parse
    ["python -m pytest bottle/http.py", "python fix_http.py"],  # a module; a script the run did not write
    ["cat > x.diff <<'EOF'\n--- bottle/http.py\n+++ bottle/http.py\nEOF\npatch < x.diff && git apply --check x.diff"],
])
def test_scripts_and_patches_that_edit_no_known_file(commands):
    """No edit is named where the run did not show it: a script written but not run, computed paths, code that
    does not parse, a plain diff given to ``patch`` without ``-p`` (patch would ask), ``git apply --check``."""
    rec = supervision_record(parse_row(_mini_run(commands, _diff("bottle/http.py"))))
    assert "bottle/http.py" not in rec.edited_files


@pytest.mark.parametrize("fmt", ["openhands", "swe-gym-openhands"])
def test_a_script_an_editor_created_and_the_run_ran_edits(fmt):
    """Function-calling agents write their fix scripts with the editor (``create`` + ``file_text``; OpenHands'
    ``write`` + ``content``) and run them in the shell."""
    script, path = "p = 'moto/athena/models.py'\nopen(p, 'w').write(open(p).read())", "/workspace/getmoto__moto__4.1/fix.py"
    run = f"cd /workspace/getmoto__moto__4.1 && python {path}"
    if fmt == "openhands":
        row = {"instance_id": "getmoto__moto-5865", "test_result": {"git_patch": ""}, "history": [
            {"source": "agent", "action": "write", "args": {"path": path, "content": script}},
            {"source": "agent", "action": "run", "args": {"command": run}}]}
    else:
        row = {"instance_id": "getmoto__moto-5865", "run_id": "r", "test_result": {"git_patch": ""}, "messages": [
            {"role": "user", "content": _UPLOADED},
            _tool_call("str_replace_editor", command="create", path=path, file_text=script),
            _tool_call("execute_bash", command=run)]}
    assert [(e.kind, e.path) for e in parse_row(row).events if e.kind != "run"] == [
        ("create", "fix.py"), ("edit", "moto/athena/models.py")]


def test_a_cd_in_a_subshell_ends_with_it():
    """``(cd pkg && make)`` and ``$(cd pkg && pwd)`` change directory in a subshell only: the commands after it run
    where the shell was (for one command line and across the commands of a persistent session)."""
    assert [e.path for e in parse_shell("(cd pkg && cat a.py); cat b.py && cd lib && (cd sub; cat c.py) && cat d.py")
            if e.kind == "view"] == ["pkg/a.py", "b.py", "lib/sub/c.py", "lib/d.py"]
    rows = _PERSISTENT_SHELL_ROWS["openhands"]
    history = [{"source": "agent", "action": "run", "args": {"command": "(cd moto && ls)"}},
               {"source": "agent", "action": "run", "args": {"command": "cat setup.py"}}]
    assert [e.path for e in parse_row({**rows, "history": history}).events if e.kind == "view"] == ["setup.py"]


@pytest.mark.parametrize("command, expected", [
    # a wildcard names no one file: ls finds the files it matches (a search keeps its wildcard scope: the recorded
    # answer covers only the files the shell expanded it to, see run_converter's shell-glob-path)
    ("ls lib/tests/test_contour*", [("find", "lib/tests", "test_contour*")]),
    ("ls -d */", [("find", "", "*")]),
])
def test_wildcard_paths(command, expected):
    assert [(e.kind, e.path, e.pattern) for e in parse_shell(command)] == expected


def test_a_wildcard_read_is_a_read_of_no_one_file():
    """``cat pkg/*.py`` is a read (the step showed file contents) but names no file: no viewed file, no read call."""
    rec = supervision_record(parse_row(_mini_run(["cat pkg/*.py", "cat pkg/a.py"])))
    assert rec.viewed_files == ["pkg/a.py"] and rec.n_views == 1
    assert [event_call(e) for e in parse_shell("cat pkg/*.py")] == [None]


def test_a_wildcard_edit_is_an_edit_of_no_one_file():
    """``sed -i ... pkg/*.py`` edits the files the shell expanded it to, which are not known: it kept 'pkg/*.py' as
    an edited file and, with no diff, as a changed (target) file; as a wildcard read, it names no file now, but
    still ends the context before the first edit."""
    rec = supervision_record(parse_row(_mini_run(["cat pkg/a.py", "sed -i 's/a/b/' pkg/*.py", "cat pkg/b.py"])))
    assert rec.edited_files == [] and rec.patch_files == [] and rec.target_files == []
    assert rec.viewed_files == ["pkg/a.py", "pkg/b.py"] and rec.context_files == ["pkg/a.py"]


def test_a_sed_script_of_several_ranges_reads_each():
    """``sed -n '1,50p;250,270p' f`` shows both ranges: it was one view of 1-50, and the recorded-run converter made
    it a read of lines 1-50 whose output held lines 250-270 as 51-71; now two views, which it does not convert."""
    from codegrep.mining.run_converter import convert_command

    command = "sed -n '1,50p;250,270p' pkg/a.py"
    assert [(e.kind, e.path, e.lines) for e in parse_shell(command)] == [
        ("view", "pkg/a.py", (1, 50)), ("view", "pkg/a.py", (250, 270))]
    output = "<returncode>0</returncode>\n<output>\n" + "".join(f"line {i}\n" for i in [*range(1, 51), *range(250, 271)])
    assert convert_command(command, output + "</output>")[:2] == (None, "several-events")


def test_a_file_put_back_with_git_is_no_longer_changed():
    """With no diff the files the run wrote stand in: one it then put back (``git checkout f``, ``git restore f``,
    ``git checkout .``) was still counted as changed. A branch checkout or another revision's file reverts nothing."""
    edits = ["sed -i 's/a/b/' pkg/a.py", "sed -i 's/a/b/' pkg/b.py", "sed -i 's/a/b/' pkg/c.py"]
    rec = supervision_record(parse_row(_mini_run([*edits, "git checkout pkg/a.py", "cd pkg && git restore b.py",
                                                  "git checkout v1 -- pkg/c.py", "git checkout -b fix"])))
    assert rec.patch_source == "actions" and rec.patch_files == ["pkg/c.py"]
    assert rec.edited_files == ["pkg/a.py", "pkg/b.py", "pkg/c.py"]
    assert supervision_record(parse_row(_mini_run([*edits, "git checkout ."]))).patch_files == []


def test_a_wildcard_rm_deletes_the_files_it_matches():
    """With no diff the files the run wrote stand in; ``rm repro_*.py`` removes the matching ones (only in that
    directory: the shell's ``*`` stops at ``/``)."""
    rec = supervision_record(parse_row(_mini_run([
        "cat <<'EOF' > repro_a.py\nx\nEOF", "cat <<'EOF' > pkg/repro_b.py\nx\nEOF", "sed -i 's/a/b/' pkg/a.py",
        "rm repro_*.py"])))
    assert rec.patch_source == "actions" and rec.patch_files == ["pkg/repro_b.py", "pkg/a.py"]


@pytest.mark.parametrize("command, expected", [
    ("git show HEAD:pkg/a.py | head -20", [("view", "pkg/a.py", (1, 20))]),  # a file at a revision
    ("cd pkg && git show HEAD~1:./b.py", [("view", "pkg/b.py", None)]),
    ("git show abc123 -- pkg/c.py", []),  # a commit, not a file
    ("git blame -L 10,20 pkg/d.py", [("view", "pkg/d.py", (10, 20))]),
    ("awk 'NR>=10 && NR<=20 {print NR\": \"$0}' pkg/a.py", [("view", "pkg/a.py", (10, 20))]),
    ("awk 'NR==5,NR==9' pkg/a.py", [("view", "pkg/a.py", (5, 9))]),
    ("awk '{print $1}' pkg/a.py", [("view", "pkg/a.py", None)]),
    ("rg --files -g '*.py' pkg | grep models", [("find", "pkg", None)]),  # lists files: no search pattern
    ("tree -L 2 pkg", [("list", "pkg", None)]),  # -L's value is not a directory
    ("bash -c 'cd pkg && cat a.py' && cat b.py", [("view", "pkg/a.py", None), ("view", "b.py", None)]),
    ("cat <<'EOF' > t.sh\ngrep -n x pkg/a.py\nEOF\nbash t.sh", [("create", "t.sh", None), ("search", "pkg/a.py", None)]),
])
def test_git_reads_awk_ranges_file_listings_and_child_shells(command, expected):
    assert [(e.kind, e.path, e.lines) for e in parse_shell(command) if e.kind != "run"] == expected


def test_swe_agent_root_script_text_and_a_visit_outside():
    """A SWE-agent run's root is where its recorded states are (the shallowest working directory was taken: a run
    that once stood in /tmp had /tmp as its root, and its repository reads were outside it); the text of a file
    it created with ``str_replace_editor create --file_text`` (over several lines) is the script it then ran."""
    state = {"working_dir": "/moto"}
    row = {"instance_id": "getmoto__moto-5865", "info": {"submission": ""}, "trajectory": [
        {"action": "cd /tmp && ls", "observation": "", "state": {"working_dir": "/tmp"}},
        {"action": "cd /moto && cat moto/a.py", "observation": "", "state": state},
        {"action": "str_replace_editor create /moto/fix.py --file_text 'p = \"moto/b.py\"\ns = open(p).read()\n"
                   "open(p, \"w\").write(s)\n'", "observation": "", "state": state},
        {"action": "python fix.py", "observation": "", "state": state}]}
    assert [(e.kind, e.path) for e in parse_row(row).events if e.kind in ("view", "edit", "create")] == [
        ("view", "moto/a.py"), ("create", "fix.py"), ("edit", "moto/b.py")]


@pytest.mark.parametrize("command, expected", [
    ("sed -i '' 's/a/b/' pkg/a.py", [("edit", "pkg/a.py")]),  # BSD sed: '' is the backup suffix, not a file
    ("echo x | tee -a pkg/a.py", [("edit", "pkg/a.py")]),  # appends to an existing file
    ("echo x | tee pkg/b.py", [("create", "pkg/b.py")]),
])
def test_bsd_sed_and_tee_append(command, expected):
    assert [(e.kind, e.path) for e in parse_shell(command) if e.kind != "run"] == expected


def test_a_program_beyond_the_parsers_limits_is_no_error():
    """``ast.parse`` raises MemoryError on 100,000 nested unary minuses: the run is mined, the program writes
    nothing known (it raised out of mining before)."""
    code = "x = " + "-" * 100000 + "1\nopen('pkg/a.py', 'w')"
    assert [e.kind for e in parse_shell(f"python -c \"{code}\"")] == ["run"]


@pytest.mark.parametrize("command, expected", [
    # a range taken from several files' concatenation, or from lines a grep picked, is no range of the last file
    ("cat pkg/a.py pkg/b.py | head -n 40", [("view", "pkg/a.py", None), ("view", "pkg/b.py", None)]),
    ("cat -n pkg/a.py | grep -v '#' | head -n 5", [("view", "pkg/a.py", None)]),
    ("tail -n 5 pkg/a.py | cat -n | head -n 2", [("view", "pkg/a.py", None)]),
    ("sed -n '10,30p' pkg/a.py | cat -n | head -n 2", [("view", "pkg/a.py", (10, 11))]),
    # commands that rewrite files in place are edits, not runs
    ("truncate -s 0 pkg/log.txt && truncate --size=+1K pkg/a.py", [("create", "pkg/log.txt", None),
                                                                   ("edit", "pkg/a.py", None)]),
    ("dos2unix pkg/a.py pkg/b.py", [("edit", "pkg/a.py", None), ("edit", "pkg/b.py", None)]),
    ("unix2dos -n pkg/a.py out.txt", [("view", "pkg/a.py", None), ("create", "out.txt", None)]),
])
def test_pipe_ranges_and_in_place_rewrites(command, expected):
    assert [(e.kind, e.path, e.lines) for e in parse_shell(command) if e.kind != "run"] == expected


_TRACEBACK = ('Traceback (most recent call last):\n  File "/testbed/fix_http.py", line {line}, in <module>\n'
              "    with open(file_path) as f:\nFileNotFoundError: [Errno 2] No such file or directory: 'bottle/x.py'")


def _mini_run_outputs(steps: list[tuple[str, str]], submission: str = "") -> dict:
    """A mini-swe-agent 1.x run whose commands answered with the given observations."""
    run = _mini_run([c for c, _ in steps], submission)
    answers = iter(o for _, o in steps)
    for m in run["messages"][3::2]:
        m["content"] = next(answers)
    return run


@pytest.mark.parametrize("line, returncode, edited", [
    (2, 1, False),  # stopped reading the file it was to rewrite: the write was never reached
    (5, 1, True),  # stopped in the statement that writes: it may have written
    (2, 0, True),  # a traceback it printed and went on from (its exit status, recorded and its own, is 0)
])
def test_a_script_that_stopped_before_its_write_edited_nothing(line, returncode, edited):
    """A fix script the run ran counted as an edit of the files it writes even when its output shows it stopped on an
    error before any write (mini-swe-agent records the traceback and the <returncode>)."""
    out = f"<returncode>{returncode}</returncode>\n<output>\n{_TRACEBACK.format(line=line)}\n</output>"
    rec = supervision_record(parse_row(_mini_run_outputs([(_FIX_SCRIPT, "<returncode>0</returncode>"),
                                                          ("python fix_http.py", out)])))
    assert ("bottle/http.py" in rec.edited_files) is edited


def test_a_script_that_stopped_before_its_write_edited_nothing_in_other_formats():
    """The same stop as OpenHands (exit_code in the observation's metadata), SWE-Gym's OpenHands messages (the tool
    result's text) and SWE-agent (the step's observation; it records no exit status) record it; and a script that
    is not valid Python to the run's interpreter (a SyntaxError naming it) ran no line."""
    script = "file_path = 'moto/a.py'\nwith open(file_path) as f:\n    s = f.read()\nopen(file_path, 'w').write(s)\n"
    path, stop = "/workspace/getmoto__moto__4.1/fix.py", _TRACEBACK.replace("/testbed/fix_http.py", "{path}")
    out = stop.format(path=path, line=2)
    oh = {"instance_id": "getmoto__moto-5865", "test_result": {"git_patch": ""}, "history": [
        {"id": 1, "source": "agent", "action": "write", "args": {"path": path, "content": script}},
        {"id": 2, "source": "agent", "action": "run", "args": {"command": f"python {path}"}},
        {"id": 3, "source": "environment", "observation": "run", "cause": 2, "content": out,
         "extras": {"metadata": {"exit_code": 1}}}]}
    call = _tool_call("execute_bash", command=f"python {path}")
    gym = {"instance_id": "getmoto__moto-5865", "run_id": "r", "test_result": {"git_patch": ""}, "messages": [
        {"role": "user", "content": _UPLOADED}, _tool_call("str_replace_editor", command="create", path=path,
                                                            file_text=script),
        call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
               "content": out + "\n[Command finished with exit code 1]"}]}
    swe = {"trajectory": [
        {"action": f"create {path}\n", "observation": "", "state": {"working_dir": "/workspace/getmoto__moto__4.1"}},
        {"action": f"cat > {path} <<'EOF'\n{script}EOF\n", "observation": "", "state": {}},
        {"action": f"python {path}\n", "observation": out, "state": {}}], "info": {"submission": ""},
        "history": [{"role": "user", "content": "<uploaded_files>/workspace/getmoto__moto__4.1</uploaded_files>"}]}
    syntax = _mini_run_outputs([("python -c \"open('moto/a.py', 'w').write(f'{x=}')\"",
                                 '<returncode>1</returncode>\n<output>\n  File "<string>", line 1\n'
                                 "    open('moto/a.py', 'w').write(f'{x=}')\n                                ^\n"
                                 "SyntaxError: invalid syntax\n</output>")])
    for row in (oh, gym, swe, syntax):
        assert "moto/a.py" not in [e.path for e in parse_row(row).events if e.kind in ("edit", "create")], row
        ran = json.loads(json.dumps(row).replace("exit code 1", "exit code 0").replace("line 2, in", "line 4, in")
                         .replace("SyntaxError", "RuntimeError"))
        assert "moto/a.py" in [e.path for e in parse_row(ran).events if e.kind in ("edit", "create")], row


def _answered(*calls: tuple[dict, str]) -> list[dict]:
    """Tool-call messages each followed by the tool message that answered it."""
    out: list[dict] = []
    for n, (call, answer) in enumerate(calls):
        call["tool_calls"][0]["id"] = f"call_{n}"
        out += [call, {"role": "tool", "tool_call_id": f"call_{n}", "content": answer}]
    return out


def test_a_view_whose_output_says_it_failed_is_no_view():
    """``cat missing.py`` ("No such file or directory"), ``sed -n`` on a path that is not there, one file of a
    ``head`` of two, and a directory given to ``cat`` showed nothing of those files: they were counted as views (and
    as viewed files). The same command is judged by each of its outputs (a failed rerun is not a cached success)."""
    gone = ("<returncode>1</returncode>\n<output>\ncat: tests/serializers/models.py: No such file or directory\n"
            "</output>")
    rec = supervision_record(parse_row(_mini_run_outputs([
        ("cat tests/serializers/models.py", gone),
        ("sed -n '1,40p' bottle/gone.py", "<returncode>2</returncode>\n<output>\nsed: can't read bottle/gone.py: "
                                          "No such file or directory\n</output>"),
        ("head -n 3 bottle/a.py bottle/b.py", "<returncode>1</returncode>\n<output>\n==> bottle/a.py <==\nimport os\n"
                                              "head: cannot open 'bottle/b.py' for reading: No such file or directory"
                                              "\n</output>"),
        ("cd bottle && cat ext", "<returncode>1</returncode>\n<output>\ncat: ext: Is a directory\n</output>"),
        ("cat tests/serializers/models.py", "<returncode>0</returncode>\n<output>\nclass M: pass\n</output>"),
        ("cat tests/serializers/models.py", gone)])))
    assert rec.viewed_files == ["bottle/a.py", "tests/serializers/models.py"] and rec.n_views == 2


def test_a_view_whose_own_text_names_the_path_beside_an_error_word_is_a_view():
    """A shown file's own lines (``cat -n``'s numbered text, a comment naming a path) beside "Permission denied" or
    "does not exist" were taken for the reader's error: the view, and one file of a ``head`` of two, were dropped."""
    rec = supervision_record(parse_row(_mini_run_outputs([
        ("cat -n pkg/a.py", "<returncode>0</returncode>\n<output>\n     1\t# see pkg/a.py: Permission denied errors "
                            "are retried\n</output>"),
        ("head -n 20 pkg/c.py pkg/b.py", "<returncode>0</returncode>\n<output>\n==> pkg/c.py <==\n# pkg/b.py does not "
                                         "exist on Windows\n==> pkg/b.py <==\nimport os\n</output>")])))
    assert rec.viewed_files == ["pkg/a.py", "pkg/c.py", "pkg/b.py"] and rec.n_views == 3


def test_an_editor_view_that_errored_is_no_view():
    """An editor ``view`` answered by an error (a bad ``view_range``, a missing path), SWE-agent's ``open`` of a file
    that is not there and an OpenHands ``read`` answered by an error observation read nothing."""
    view = "/workspace/getmoto__moto__4.1/moto/a.py"
    gym = {"instance_id": "getmoto__moto-5865", "run_id": "r", "test_result": {"git_patch": ""}, "messages": [
        {"role": "user", "content": _UPLOADED}, *_answered(
            (_tool_call("str_replace_editor", command="view", path=view, view_range=[0, 40]),
             "OBSERVATION:\nERROR:\nInvalid `view_range`: [0, 40]. Its first element `0` should be within [1, 90]"),
            (_tool_call("str_replace_editor", command="view", path=view.replace("a.py", "gone.py")),
             "ERROR:\nInvalid `path` parameter: /workspace/getmoto__moto__4.1/moto/gone.py. The path does not exist."),
            (_tool_call("str_replace_editor", command="view", path=view, view_range=[1, 40]),
             f"Here's the result of running `cat -n` on {view}:\n     1\timport os"))]}
    swe = {"trajectory": [
        {"action": "open moto/gone.py\n", "observation": "File moto/gone.py not found", "state": {}},
        {"action": "open moto/a.py\n", "observation": "[File: /moto/moto/a.py (9 lines total)]\n1:import os",
         "state": {}}], "info": {"submission": ""},
        "history": [{"role": "user", "content": "ISSUE:\nx\n(Current directory: /moto)"}]}
    oh = {"instance_id": "getmoto__moto-5865", "test_result": {"git_patch": ""}, "history": [
        {"id": 1, "source": "agent", "action": "read", "args": {"path": view.replace("a.py", "gone.py")}},
        {"id": 2, "source": "environment", "observation": "error", "cause": 1,
         "content": f"File not found: {view.replace('a.py', 'gone.py')}."},
        {"id": 3, "source": "agent", "action": "read", "args": {"path": view}},
        {"id": 4, "source": "environment", "observation": "read", "cause": 3, "content": "import os"}]}
    for row in (gym, swe, oh):
        assert [(e.kind, e.path) for e in parse_row(row).events] == [("view", "moto/a.py")], row


@pytest.mark.parametrize("command, expected", [
    ("ruby -i -pe 'gsub(/old/, %q(new))' lib/a.rb", [("edit", "lib/a.rb")]),
    ("ruby -r json -pi.orig -e 'x' lib/a.rb", [("edit", "lib/a.rb")]),
    ("ruby -ne 'print if /def/' lib/a.rb", [("view", "lib/a.rb")]),
    ("perl -MList::Util=sum -lne 'print' pkg/a.py", [("view", "pkg/a.py")]),  # -M's value is no -i
    ("perl -Mwarnings -ne 'print' pkg/a.py", [("view", "pkg/a.py")]),
    ("perl -0777 -pi -e 's/a/b/' pkg/a.py", [("edit", "pkg/a.py")]),
    ("gofmt -w cmd/main.go && goimports -w cmd/util.go", [("edit", "cmd/main.go"), ("edit", "cmd/util.go")]),
    ("gofmt -l cmd/main.go", [("run", None)]),  # prints the files it would change
    ("npx prettier --write src/app.ts", [("edit", "src/app.ts")]),
    ("prettier --check src/app.ts", [("run", None)]),
    ("black -l 100 pkg/a.py && ruff format pkg/b.py", [("edit", "pkg/a.py"), ("edit", "pkg/b.py")]),
    ("black --check pkg/a.py", [("run", None)]),
    ("python -m black pkg/a.py", [("run", None), ("edit", "pkg/a.py")]),
    ("ruff check --fix pkg/a.py && isort pkg/b.py", [("edit", "pkg/a.py"), ("edit", "pkg/b.py")]),
    ("autopep8 -i pkg/a.py && yapf --in-place pkg/b.py", [("edit", "pkg/a.py"), ("edit", "pkg/b.py")]),
    ("clang-format -i src/a.cc", [("edit", "src/a.cc")]),
    ("black .", [("edit", "*")]),  # a directory: files under it, no one file
    ("sed -i -f fix.sed pkg/a.py", [("edit", "pkg/a.py")]),  # the script is a file: every word is a file
    ("sed --in-place=.bak -e 's/a/b/' pkg/a.py", [("edit", "pkg/a.py")]),
    ("go fmt ./...", [("edit", "*")]),  # Go's package pattern: the packages under ., no file named './...'
    ("gofmt -l -w pkg/...", [("edit", "pkg/*")]),
    ("go fmt -n ./...", [("run", None)]),  # prints the commands only
    ("prettier --write Makefile", [("edit", "Makefile")]),  # a suffix-less file, not a folder
    ("perl -I lib fix.pl", [("run", None)]),  # -I's value is a folder of modules: fix.pl is the program, no file read
    ("perl -I lib -ne 'print' pkg/a.py", [("view", "pkg/a.py")]),
])
def test_in_place_writers_are_edits(command, expected):
    """``ruby -i``, formatters that rewrite their files (``gofmt -w``, ``prettier --write``, ``black``, ``ruff
    format``) and ``sed -i -f`` were runs (or no edit); ``perl -M...`` with an ``i`` in the module name was an edit."""
    assert [(e.kind, e.path) for e in parse_shell(command)] == expected


def test_a_formatter_run_on_its_files_is_an_edit_of_them():
    rec = supervision_record(parse_row(_mini_run(["cat bottle.py", "gofmt -w bottle/x.go", "cat README.md"])))
    assert rec.patch_source == "actions" and rec.target_files == ["bottle/x.go"]
    assert rec.context_files == ["bottle.py"]


@pytest.mark.parametrize("new_file, label", [
    ("bottle/check.py", "target"), ("bottle/temp_units.py", "target"), ("bottle/my_widgets.py", "target"),
    ("bottle/reproduce_bug.py", "scratch"),  # an agent's own word, wherever it lies
    ("bottle/demo_app/models.py", "scratch"),  # a directory the run never knew
    ("check_fix.py", "scratch"),  # the top level
])
def test_an_ordinary_module_word_does_not_make_a_new_source_file_scratch(new_file, label):
    """``check``, ``temp``, ``my`` ... made any new file scratch: a new ``bottle/check.py`` beside the package files
    the run read is a module of the fix."""
    diff = _diff("bottle/app.py") + (f"diff --git a/{new_file} b/{new_file}\nnew file mode 100644\n--- /dev/null\n"
                                     f"+++ b/{new_file}\n@@ -0,0 +1 @@\n+x = 1\n")
    rec = supervision_record(parse_row(_mini_run(["cat bottle/app.py", "grep -rn route bottle/"], diff)))
    assert {**{f: "target" for f in rec.target_files}, **rec.excluded_files}[new_file] == label


def test_a_run_of_zero_steps_is_not_useful():
    """A resolved run whose diff names a target but that shows no step (every turn a format error, a cut row) has
    no exploration to learn from: it was counted useful and made a demonstration."""
    row = {"instance_id": "getmoto__moto-5865", "messages": [{"role": "user", "content": _UPLOADED}],
           "patch": _diff("moto/a.py"), "resolved": True}
    rec = supervision_record(parse_row(row))
    assert rec.n_steps == 0 and rec.target_files == ["moto/a.py"] and not rec.useful
    row["messages"].append(_tool_call("bash", command="cat moto/a.py"))
    rec = supervision_record(parse_row(row))
    assert rec.n_steps == 1 and rec.useful


def test_claude_code_tool_calls_are_read():
    """Claude Code's tools (``Bash``, ``Read``, ``Edit``, ``MultiEdit``, ``Write``, ``Grep``, ``Glob``) as OpenAI
    ``tool_calls`` and as Anthropic ``tool_use`` blocks gave no event; a ``Read`` answered by an error reads nothing."""
    root = "/workspace/getmoto__moto__4.1"
    calls = [("Glob", {"pattern": "**/athena/*.py"}), ("Grep", {"pattern": "def list_named", "path": f"{root}/moto"}),
             ("Read", {"file_path": f"{root}/moto/gone.py"}), ("Read", {"file_path": f"{root}/moto/athena/models.py",
                                                                      "offset": 100, "limit": 50}),
             ("Edit", {"file_path": f"{root}/moto/athena/models.py", "old_string": "a", "new_string": "b"}),
             ("MultiEdit", {"file_path": f"{root}/moto/athena/responses.py", "edits": []}),
             ("Write", {"file_path": f"{root}/repro.py", "content": "import moto"}),
             ("Bash", {"command": "python repro.py", "description": "run it"})]
    answers = ["", "", "<tool_use_error>File does not exist.</tool_use_error>", "   100\tclass X:", "", "", "", ""]
    expected = [("find", "", "**/athena/*.py", None), ("search", "moto", "def list_named", None),
                ("view", "moto/athena/models.py", None, (100, 149)), ("edit", "moto/athena/models.py", None, None),
                ("edit", "moto/athena/responses.py", None, None), ("create", "repro.py", None, None),
                ("run", None, None, None)]
    openai = [m for n, (name, args) in enumerate(calls) for m in (
        {"role": "assistant", "content": "", "tool_calls": [{"id": f"t{n}", "type": "function", "function": {
            "name": name, "arguments": json.dumps(args)}}]},
        {"role": "tool", "tool_call_id": f"t{n}", "content": answers[n]})]
    anthropic = [m for n, (name, args) in enumerate(calls) for m in (
        {"role": "assistant", "content": [{"type": "text", "text": "next"},
                                          {"type": "tool_use", "id": f"tu{n}", "name": name, "input": args}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"tu{n}", "content": answers[n],
                                      "is_error": n == 2}]})]
    for messages in (openai, anthropic):
        row = {"instance_id": "getmoto__moto-5865", "run_id": "r", "test_result": {"git_patch": ""},
               "messages": [{"role": "user", "content": _UPLOADED}, *messages]}
        traj = parse_row(row)
        assert traj.n_steps == len(calls)
        assert [(e.kind, e.path, e.pattern, e.lines) for e in traj.events] == expected


def test_a_write_whose_output_says_it_failed_is_no_edit():
    """``sed -i`` of a path that is not there and a redirection into a folder that is not there ("No such file or
    directory", the program's or the shell's error line naming the path) wrote nothing: they counted as edits."""
    rec = supervision_record(parse_row(_mini_run_outputs([
        ("sed -i 's/a/b/' bottle/gone.py bottle/a.py", "<returncode>2</returncode>\n<output>\nsed: can't read "
                                                        "bottle/gone.py: No such file or directory\n</output>"),
        ("cat <<'EOF' > bottle/new/x.py\nx = 1\nEOF", "<returncode>1</returncode>\n<output>\nbash: line 1: "
                                                     "bottle/new/x.py: No such file or directory\n</output>")])))
    assert rec.edited_files == ["bottle/a.py"]


def test_an_editor_edit_that_was_rejected_is_no_edit():
    """An edit whose answer says it was not applied (SWE-agent's linter: "Your proposed edit has introduced new syntax
    error(s)"; ``str_replace`` "No replacement was performed, old_str ... did not appear verbatim"; OpenHands' error
    observation; Claude Code's ``<tool_use_error>``) counted as an edit of the file; an applied one still does."""
    path = "/workspace/getmoto__moto__4.1/moto/a.py"
    lint = ("Your proposed edit has introduced new syntax error(s). Please read this error message carefully and then "
            "retry editing the file.\nERRORS:\n- E999 IndentationError: unexpected indent")
    verbatim = f"ERROR:\nNo replacement was performed, old_str `x = 1` did not appear verbatim in {path}."
    gym = {"instance_id": "getmoto__moto-5865", "run_id": "r", "test_result": {"git_patch": ""}, "messages": [
        {"role": "user", "content": _UPLOADED}, *_answered(
            (_tool_call("str_replace_editor", command="str_replace", path=path, old_str="x = 1", new_str="x = 2"),
             verbatim.replace("ERROR:\n", "")),
            (_tool_call("Edit", file_path=path, old_string="x = 1", new_string="x = 2"),
             "<tool_use_error>String to replace not found in file.</tool_use_error>"))]}
    swe = {"trajectory": [
        {"action": "open moto/a.py\n", "observation": "[File: /moto/moto/a.py (9 lines total)]", "state": {}},
        {"action": "edit 2:2\n  x = 2\nend_of_edit\n", "observation": lint, "state": {"open_file": "/moto/moto/a.py"}},
        {"action": "str_replace_editor str_replace /moto/moto/a.py --old_str 'x = 1' --new_str 'x = 2'\n",
         "observation": verbatim.replace("ERROR:\n", "").replace(path, "/moto/moto/a.py"), "state": {}}],
        "info": {"submission": ""}, "history": [{"role": "user", "content": "ISSUE:\nx\n(Current directory: /moto)"}]}
    nebius = {"instance_id": "getmoto__moto-5865_3", "target": True, "generated_patch": "", "trajectory": [
        {"role": "system", "text": "s"}, {"role": "user", "text": "ISSUE:\nFix\n(Current directory: /moto)"},
        {"role": "ai", "text": "```\nopen moto/a.py\n```"}, {"role": "user", "text": "[File: /moto/moto/a.py]"},
        {"role": "ai", "text": "```\nedit 2:2\n  x = 2\nend_of_edit\n```"}, {"role": "user", "text": lint}]}
    oh = {"instance_id": "getmoto__moto-5865", "test_result": {"git_patch": ""}, "history": [
        {"id": 1, "source": "agent", "action": "edit", "args": {"path": path, "command": "str_replace"}},
        {"id": 2, "source": "environment", "observation": "error", "cause": 1, "content": verbatim}]}
    for row in (gym, swe, nebius, oh):
        assert not [e for e in parse_row(row).events if e.kind in ("edit", "create")], row
        applied = json.loads(json.dumps(row).replace("<tool_use_error>", "").replace("error", "edit").replace(
            "Your proposed", "Our").replace("No replacement", "A replacement").replace("ERROR", "OK"))
        assert ("edit", "moto/a.py") in [(e.kind, e.path) for e in parse_row(applied).events], row


def test_an_editor_view_of_a_suffix_less_file_is_a_view():
    """``str_replace_editor view Makefile`` with no answer recorded was taken for a folder listing (no dot in the
    name); the formatters share the rule (``prettier --write Makefile``)."""
    from codegrep.mining.formats.tools import tool_events

    assert [(e.kind, e.path) for p in ("/testbed/Makefile", "/testbed/docker/Dockerfile", "/testbed/pkg")
            for e in tool_events("str_replace_editor", {"command": "view", "path": p}, 0, None)] == [
        ("view", "Makefile"), ("view", "docker/Dockerfile"), ("list", "pkg")]


def test_an_editor_view_of_a_dotfile_is_a_view():
    """``looks_like_file`` reads ``.gitignore`` as ``gitignore`` (no suffix: a folder), so a view of a dotfile with no
    answer recorded (every OpenHands ``read``: its answer is not passed on) became a folder listing; it was a view
    before ``looks_like_file``, and still is."""
    from codegrep.mining.formats.openhands import action_events
    from codegrep.mining.formats.tools import tool_events

    assert [(e.kind, e.path) for p in ("/testbed/.gitignore", "/testbed/.flake8", "/testbed/pkg/.coveragerc")
            for e in tool_events("str_replace_editor", {"command": "view", "path": p}, 0, None)] == [
        ("view", ".gitignore"), ("view", ".flake8"), ("view", "pkg/.coveragerc")]
    assert [(e.kind, e.path) for e in action_events({"action": "read", "args": {"path": "/workspace/p/.gitignore"}}, 0,
                                                    None, {"observation": "read", "content": "*.pyc\n"})] == [
        ("view", ".gitignore")]


def test_a_write_is_undone_by_its_writers_error_line_only():
    """A create or an edit whose command's output names the file in an error line of ANOTHER program was dropped: a
    check before the create (``ls x.py`` answered "No such file": the file was missing, then made), or the script just
    written, run, reporting its own error (``run.sh: line 1: cd: nodir: No such file or directory``, argparse's
    ``repro.py: error: ...``). The shell's or the writer's own line still undoes the write."""
    from codegrep.mining.shell import ShellParser

    def kinds(command, output):
        return [(e.kind, e.path) for e in ShellParser()(command, 0, output=output) if e.kind != "run"]

    assert kinds("ls x.py; cat > x.py <<'EOF'\nx = 1\nEOF", "ls: cannot access 'x.py': No such file or directory") \
        == [("list", "x.py"), ("create", "x.py")]
    assert kinds("cat > run.sh <<'EOF'\ncd nodir\nEOF\nbash run.sh",
                 "run.sh: line 1: cd: nodir: No such file or directory") == [("create", "run.sh")]
    assert kinds("sed -i 's/a/b/' repro.py && python repro.py data.csv",
                 "repro.py: error: argument infile: can't open 'data.csv': [Errno 2] No such file or directory: "
                 "'data.csv'") == [("edit", "repro.py")]
    assert kinds("echo x > nodir/x.py", "bash: line 1: nodir/x.py: No such file or directory") == []
    assert kinds("touch nodir/x.py", "touch: cannot touch 'nodir/x.py': No such file or directory") == []
    assert kinds("sed -i 's/a/b/' gone.py", "sed: can't read gone.py: No such file or directory") == []


def test_a_windowed_edit_that_was_not_applied_is_no_edit():
    """SWE-agent's search/replace ``edit`` (windowed_edit_replace) answers "Your edit was not applied (file not
    modified): Text ... not found": ``failed`` did not know it, so the rejected edit counted as an edit."""
    from codegrep.mining.formats.tools import failed

    assert failed("Your edit was not applied (file not modified): Text 'x = 1' not found in displayed lines (or "
                  "anywhere in the file).\nPlease modify your search string.")
