"""Recorded agent runs -> demonstrations in this bundle's protocol, observations taken from the recording.

A mini-swe-agent run explores with shell commands (``grep -rn``, ``find -name``, ``cat``, ``sed -n``,
``nl -ba | sed -n`` ...), one per model call. :func:`convert_run` turns each *pure exploration* command into
the ``grep`` / ``glob`` / ``read`` call that asks the same question, and takes its answer from what the run
saw: the recorded output, re-shaped and cut the way the live tool shapes and cuts its own
(``path:line:text`` sorted by path, repository-relative paths, ``cat -n`` numbering, the line/byte caps and
their notes, :mod:`codegrep.env.textops`). Calls are grouped into parallel turns (a call that needs a path
first shown by the current turn starts the next one), and the episode ends with ``submit`` of the run's
CATM target files (:func:`codegrep.mining.records.supervision_record`). No repository is needed, so every
repository's runs count.

Commands that are not pure exploration (they edit, run code, count with ``wc``, list with ``ls``...) are
not converted; :class:`ConversionStats` counts every command by outcome. How close a converted observation
is to what the live tool returns is measured, not assumed: :func:`replay_fidelity` runs the converted calls
on the real snapshot and compares line sets.

>>> call, out, cut = convert_command("grep -rn 'def foo' pkg/ | head -3",
...     "<returncode>0</returncode>\\n<output>\\n./pkg/b.py:9:def foo2():\\npkg/a.py:3:def foo():\\n</output>")
>>> call.name, call.arguments, out.splitlines(), cut
('grep', {'pattern': 'def foo', 'path': 'pkg'}, ['pkg/a.py:3:def foo():', 'pkg/b.py:9:def foo2():'], False)
>>> call, out, _ = convert_command("sed -n '10,11p' /testbed/pkg/a.py", "<returncode>0</returncode>\\n<output>\\nx = 1\\ny = 2\\n</output>")
>>> call.arguments, out.splitlines()
({'path': 'pkg/a.py', 'start_line': 10, 'end_line': 11}, ['    10\\tx = 1', '    11\\ty = 2'])
>>> convert_command("python reproduce.py", "<returncode>0</returncode>\\n<output>\\nok\\n</output>")
(None, 'not-exploration', False)
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from codegrep.agent.protocol import AgentConfig, build_messages, format_observation, turn_note
from codegrep.env import textops
from codegrep.env.tools import ToolCall, ToolConfig
from codegrep.mining.events import event_call, in_repo, repo_path
from codegrep.mining.shell import parse_shell
from codegrep.mining.shell_words import strip_heredocs, tokenize

_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_BLOCK = re.compile(r"<(output|output_head|output_tail)>\n?(.*?)\n?</\1>", re.S)
_GREP_LINE = re.compile(r"^(?P<path>[^\s:][^:]*?)(?P<sep>[:-])(?P<line>\d+)(?P=sep)(?P<text>.*)$")
_NUMBERED = re.compile(r"^\s*(\d+)\t(.*)$")
_FILTERS = {"head", "tail", "sort", "uniq", "grep", "egrep", "rg", "sed", "cut"}  # later pipeline stages allowed
_VIEW_FILTERS = {"head", "sed"}  # a view piped through these still shows a contiguous range


@dataclass
class ConvertConfig:
    """How recorded runs become demonstrations (the episode limits come from the profile's ``agent:``)."""

    max_calls: int = 12
    """Exploration calls kept per demonstration (the first read of each target file is always kept)."""
    resolved_only: bool = True
    """Only runs the SWE-bench harness judged resolved (their target files are trustworthy)."""
    min_calls: int = 1
    """Runs with fewer converted exploration calls before the first target edit are skipped."""


@dataclass
class Converted:
    """One recorded command as a protocol call with its recorded, re-cut answer."""

    step: int
    """Index of the run's acting model call."""
    command: str
    """The recorded command."""
    call: ToolCall
    """The equivalent grep/glob/read call."""
    output: str
    """The recorded output re-shaped and cut as the live tool would."""
    cut: bool
    """The recording itself was cut (mini-swe-agent elided the middle, or ``| head`` stopped it)."""


@dataclass
class ConversionStats:
    """Counts over every command of every run read."""

    runs: int = 0
    runs_excluded_eval: int = 0
    runs_not_useful: int = 0
    runs_too_few_calls: int = 0
    demonstrations: int = 0
    commands: Counter = field(default_factory=Counter)
    """Outcome per command: ``grep``/``glob``/``read`` (converted) or the reason it was not."""
    by_repo: Counter = field(default_factory=Counter)
    """Demonstrations per repository."""

    def to_dict(self) -> dict[str, Any]:
        total = sum(self.commands.values())
        converted = sum(self.commands[k] for k in ("grep", "glob", "read"))
        return {"runs": self.runs, "runs_excluded_eval": self.runs_excluded_eval,
                "runs_not_useful": self.runs_not_useful, "runs_too_few_calls": self.runs_too_few_calls,
                "demonstrations": self.demonstrations, "commands": total, "commands_converted": converted,
                "converted_share": converted / total if total else float("nan"),
                "outcomes": dict(self.commands.most_common()), "by_repo": dict(self.by_repo.most_common())}


def recorded_output(observation: str) -> tuple[int | None, str, bool]:
    """(return code, output text, cut) of a mini-swe-agent observation (``<output>`` or head/tail when long).

    >>> recorded_output("<returncode>1</returncode>\\n<output>\\n</output>")
    (1, '', False)
    >>> recorded_output("<returncode>0</returncode><warning>long</warning><output_head>\\na\\nb\\n</output_head>"
    ...                 "<elided_chars>9</elided_chars><output_tail>\\nz\\n</output_tail>")
    (0, 'a\\nb', True)
    """
    m = _RC.search(observation or "")
    rc = int(m.group(1)) if m else None
    blocks = {name: text for name, text in _BLOCK.findall(observation or "")}
    if "output" in blocks:
        return rc, blocks["output"].rstrip("\n"), False
    if "output_head" in blocks:  # the middle was elided: only the head is a prefix of the real output
        return rc, blocks["output_head"].rstrip("\n"), True
    return rc, (observation or "").strip(), False


def _pipeline(command: str) -> list[list[str]] | None:
    """The one pipeline of a command (``cd X &&`` prefixes dropped) as stages of words; None when the command
    holds several non-``cd`` commands, redirections or subshells."""
    tokens = tokenize(strip_heredocs(command))
    groups: list[list[str]] = [[]]
    for tok in tokens:
        if tok in ("&&", ";") or tok.strip("\n") == "":
            groups.append([])
        elif tok in ("||", "&", "(", ")", "<") or re.fullmatch(r"[0-9]*>>?&?", tok):
            if re.fullmatch(r"2>&?", tok):
                continue
            return None
        else:
            groups[-1].append(tok)
    groups = [g for g in groups if g and g[0] != "cd"]
    if len(groups) != 1:
        return None
    stages: list[list[str]] = [[]]
    for tok in groups[0]:
        if tok == "|":
            stages.append([])
        elif tok != "1":  # the "1" of 2>&1
            stages[-1].append(tok)
    return [s for s in stages if s] or None


_GREP_SHAPE = set("lLcoqhvwxz")  # flags that change what a line of output is, or which lines match


def _bre_to_ere(pattern: str) -> str:
    r"""A POSIX basic regex as the extended regex ripgrep reads: ``\(`` ``\|`` ``\+`` ... become operators, bare
    ``(`` ``|`` ``+`` ``?`` ``{`` ``}`` become literals.

    >>> _bre_to_ere(r"def foo(") , _bre_to_ere(r"a\|b"), _bre_to_ere("x+1")
    ('def foo\\(', 'a|b', 'x\\+1')
    """
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(nxt if nxt in "()|{}+?" else c + nxt)
            i += 2
            continue
        out.append("\\" + c if c in "()|{}+?" else c)
        i += 1
    return "".join(out)


def _grep_call(call: ToolCall, words: list[str]) -> tuple[ToolCall | None, str]:
    """The grep call with the recorded flags applied (-i -> ignore_case, -F -> escaped, basic regex -> extended);
    None with a reason when a flag changes the output's shape (-l, -c, -o, -v, -w ...)."""
    prog = words[0]
    short = {ch for w in words[1:] if w.startswith("-") and not w.startswith("--") for ch in w[1:]
             if not w[1:].isdigit()}
    long = {w.split("=")[0] for w in words[1:] if w.startswith("--")}
    if short & _GREP_SHAPE or long & {"--files-with-matches", "--count", "--only-matching", "--invert-match",
                                      "--word-regexp", "--files-without-match"}:
        return None, "grep-output-flags"
    if prog in ("rg", "ag", "ack"):
        return None, "grep-other-program"
    if "n" not in short and "--line-number" not in long:
        return None, "grep-without-line-numbers"  # the live tool always shows path:line:text
    if short & set("ABC") or long & {"--context", "--after-context", "--before-context"}:
        return None, "grep-context"  # context lines are shown differently by the live tool
    args = dict(call.arguments)
    include = [w.split("=", 1)[1] for w in words[1:] if w.startswith("--include=")]
    if len(include) == 1 and include[0]:
        args["include"] = include[0]
    elif include or "--include" in words:
        return None, "grep-include"
    if "i" in short or "--ignore-case" in long:
        args["ignore_case"] = True
    if "F" in short or prog == "fgrep" or "--fixed-strings" in long:
        args["pattern"] = re.escape(args["pattern"])
    elif not (short & set("EP") or prog == "egrep" or long & {"--extended-regexp", "--perl-regexp"}):
        args["pattern"] = _bre_to_ere(args["pattern"])
    if not args["pattern"]:
        return None, "grep-empty-pattern"
    return ToolCall("grep", args), ""


def _head_count(stages: list[list[str]]) -> int:
    """The smallest ``head``/``tail`` line count in a pipeline (10 when not given).

    >>> _head_count([["grep", "x"], ["head", "-n", "5"]]), _head_count([["grep", "x"], ["head", "-20"]])
    (5, 20)
    """
    counts = []
    for s in stages[1:]:
        if s[0] in ("head", "tail"):
            nums = [w.lstrip("-n") for w in s[1:] if w.lstrip("-n").isdigit()]
            counts.append(int(nums[0]) if nums else 10)
    return min(counts) if counts else 10 ** 9


def _grep_output(text: str, scope: str, tools: ToolConfig, cut: bool) -> tuple[str, bool] | None:
    """The live tool's ``path:line:text`` lines, sorted by path; None when a recorded line has no line number
    (``grep`` without ``-n``, ``-l``, ``-c``): the live answer cannot be rebuilt from it."""
    rows: list[tuple[list[str], int, str]] = []
    for raw in text.splitlines():
        if raw == "--":
            continue
        m = _GREP_LINE.match(raw)
        single = re.match(r"^(\d+)([:-])(.*)$", raw) if scope and "." in scope.rsplit("/", 1)[-1] else None
        if single:  # a single-file grep: no path column
            rows.append((scope.split("/"), int(single.group(1)),
                         textops.grep_row(scope, single.group(2), single.group(1), single.group(3), tools.max_line_chars)))
        elif m and in_repo(repo_path(m.group("path")) or ""):
            path, sep = repo_path(m.group("path")), m.group("sep")
            rows.append((path.split("/"), int(m.group("line")),
                         textops.grep_row(path, sep, m.group("line"), m.group("text"), tools.max_line_chars)))
        else:
            return None
    if not rows:
        return "No matches found.", False
    rows.sort(key=lambda r: (r[0], r[1]))  # ripgrep's --sort=path order
    lines = [r[2] for r in rows]
    return textops.cap_lines(lines, tools.max_output_lines, tools.max_output_bytes, more=cut, what="lines",
                             hint="narrow the pattern, path or include")


def _glob_output(text: str, tools: ToolConfig, cut: bool) -> tuple[str, bool]:
    paths = [p for p in (repo_path(x.strip()) for x in text.splitlines()) if p and in_repo(p)]
    dirs = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    files = sorted(dict.fromkeys(p for p in paths if p not in dirs), key=lambda p: p.split("/"))
    if not files:
        return "No files matched.", False
    return textops.cap_lines(files, tools.max_glob_results, tools.max_output_bytes, more=cut, what="paths",
                             hint="use a more specific pattern or path")


def _read_output(text: str, call: ToolCall, tools: ToolConfig, cut: bool) -> tuple[str, bool]:
    raw = text.split("\n")
    numbered = [_NUMBERED.match(x) for x in raw]
    start = int(call.arguments.get("start_line") or 1)
    if raw and all(numbered):  # nl -ba / cat -n output: keep its own numbering
        start, raw = int(numbered[0].group(1)), [m.group(2) for m in numbered]
    rel = call.arguments["path"]
    last = start + min(len(raw), tools.max_read_lines) - 1
    body = textops.fit_bytes(textops.numbered(raw[: last - start + 1], start, tools.max_line_chars),
                             tools.max_output_bytes)
    shown = start + len(body) - 1
    if shown < start + len(raw) - 1 or cut:
        total = f"more than {start + len(raw) - 1}" if cut else str(start + len(raw) - 1)
        body.append(f"[... truncated: showing lines {start}-{shown} of {total} in {rel}; "
                    "use start_line/end_line for more]")
        return "\n".join(body), True
    return "\n".join(body), False


def convert_command(command: str, observation: str, root: str = "/testbed",
                    tools: ToolConfig | None = None) -> tuple[ToolCall | None, str, bool]:
    """(call, live-shaped output, cut) for one recorded exploration command; (None, reason, False) otherwise."""
    tools = tools or ToolConfig()
    stages = _pipeline(command)
    if stages is None:
        return None, "compound-command", False
    events = [e for e in parse_shell(command, 0, root) if e.kind != "run" or e.command]
    if len(events) != 1 or events[0].kind not in ("search", "find", "view"):
        return None, "not-exploration" if all(e.kind in ("run",) for e in events) or not events \
            else "several-events" if len(events) > 1 else f"{events[0].kind}-not-converted", False
    event = events[0]
    later = {s[0] for s in stages[1:]}
    if event.kind == "view":
        progs = {s[0] for s in stages}
        if not later <= _VIEW_FILTERS or (progs & {"head", "tail", "awk", "less", "more"} and not event.lines):
            return None, "view-filtered", False  # e.g. nl | grep: not one contiguous range
        if stages[0][0] == "sed" and not event.lines:
            return None, "view-filtered", False  # sed -n '/regex/,/regex/p': not a line range
    elif not later <= _FILTERS:
        return None, "filtered-output", False
    elif event.kind == "find" and (set(stages[0]) & {"-not", "!", "-o", "-or", "-path", "-regex", "-exec"}
                                   or not set(stages[0]) & {"-name", "-iname"}):
        return None, "find-not-a-name-glob", False
    call = event_call(event, default_glob=None, skip_artifacts=False)  # see event_call: what differs and why
    if call is None:
        return None, f"{event.kind}-outside-repository", False
    if set(call.arguments.get("path", "")) & set("*?[{"):
        return None, "shell-glob-path", False  # the shell expanded it; the tools take one path
    if call.name == "grep":
        call, why = _grep_call(call, stages[0])
        if call is None:
            return None, why, False
    rc, text, cut = recorded_output(observation)
    if event.kind != "view" and later & {"head", "tail"}:  # stopped by head/tail only when it filled the count
        cut = cut or len(text.splitlines()) >= _head_count(stages)
    if call.name == "read":
        if rc not in (0, None) or not text:
            return None, "read-failed", False
        out, cut = _read_output(text, call, tools, cut)
    elif call.name == "grep":
        if rc not in (0, 1, None):
            return None, "grep-failed", False
        shaped = _grep_output(text if rc != 1 else "", call.arguments.get("path", ""), tools, cut)
        if shaped is None:
            return None, "grep-without-line-numbers", False
        out, cut = shaped
    else:
        if rc not in (0, None):
            return None, "find-failed", False
        out, cut = _glob_output(text, tools, cut)
    return call, out, cut


def convert_steps(run: Any, tools: ToolConfig | None = None, stats: ConversionStats | None = None) -> list[Converted]:
    """Every convertible command of a run (``codegrep.mining.formats.minisweagent.Run``), in order."""
    out: list[Converted] = []
    for i, step in enumerate(run.actions):
        for k, command in enumerate(step.commands):
            obs = step.observations[k] if k < len(step.observations) else ""
            call, text, cut = convert_command(command, obs, run.root, tools)
            if stats is not None:
                stats.commands[call.name if call else text] += 1
            if call is not None:
                out.append(Converted(i, command, call, text, cut))
    return out


def _first_target_write(run: Any, targets: set[str]) -> int:
    for e in run.events():
        if e.kind in ("edit", "create") and e.path in targets:
            return e.step
    return 10 ** 9


def select_calls(converted: Sequence[Converted], targets: Sequence[str], before_step: int,
                 limit: int) -> list[Converted]:
    """Distinct calls made before ``before_step``, at most ``limit``; the first read of each target is kept.

    >>> c = [Converted(0, "", ToolCall("grep", {"pattern": "x"}), "a.py:1:x", False),
    ...      Converted(1, "", ToolCall("grep", {"pattern": "x"}), "a.py:1:x", False),
    ...      Converted(2, "", ToolCall("read", {"path": "a.py"}), "     1\\tx", False)]
    >>> [x.step for x in select_calls(c, ["a.py"], 9, 1)]
    [2]
    """
    seen: dict[str, Converted] = {}
    for c in converted:
        if c.step < before_step:
            seen.setdefault(json.dumps([c.call.name, c.call.arguments], sort_keys=True), c)
    items = list(seen.values())
    must, done = [], set()
    for c in items:
        path = c.call.arguments.get("path")
        if c.call.name == "read" and path in targets and path not in done:
            must.append(c)
            done.add(path)
    rest = [c for c in items if c not in must][: max(0, limit - len(must))]
    return sorted(must[:limit] + rest, key=lambda c: c.step)


def group_turns(calls: Sequence[Converted], max_turns: int, per_turn: int) -> list[list[Converted]]:
    """Parallel turns: a turn closes when full or when a call needs a path first shown in the turn's own
    outputs; more turns than ``max_turns`` are merged into fixed-size chunks.

    >>> g = lambda p: Converted(0, "", ToolCall("grep", {"pattern": p}), "a.py:1:" + p, False)
    >>> r = lambda p: Converted(1, "", ToolCall("read", {"path": p}), "     1\\tx", False)
    >>> [[c.call.name for c in t] for t in group_turns([g("x"), g("y"), r("a.py"), r("b.py")], 3, 8)]
    [['grep', 'grep'], ['read', 'read']]
    """
    turns: list[list[Converted]] = []
    current: list[Converted] = []
    for c in calls:
        path = c.call.arguments.get("path", "")
        depends = bool(path) and any(path in x.output for x in current)
        if current and (len(current) >= per_turn or depends):
            turns.append(current)
            current = []
        current.append(c)
    if current:
        turns.append(current)
    if len(turns) > max_turns:
        size = -(-len(calls) // max_turns)
        if size > per_turn:
            calls = list(calls)[: max_turns * per_turn]
            size = per_turn
        turns = [list(calls[i:i + size]) for i in range(0, len(calls), size)]
    return turns


def _render(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def demonstration(problem_statement: str, turns: Sequence[Sequence[Converted]], targets: Sequence[str],
                  agent: AgentConfig) -> list[dict[str, str]]:
    """Chat messages: the opening, each turn's calls and their (protocol-cut) observation, then ``submit``."""
    from codegrep.env.tools import ToolResult

    messages = build_messages(problem_statement, agent)
    for t, turn in enumerate(turns):
        calls = [c.call for c in turn]
        results = [ToolResult(c.call.name, True, output=c.output, truncated=c.cut) for c in turn]
        messages.append({"role": "assistant", "content": "\n".join(_render(c.name, c.arguments) for c in calls)})
        messages.append({"role": "user", "content": format_observation(
            results, calls, max_tokens=agent.max_observation_tokens, note=turn_note(t + 2, agent.max_turns))})
    messages.append({"role": "assistant", "content": _render("submit", {"files": list(targets)[
        : agent.max_submit_files]})})
    return messages


def run_files(dirs: Iterable[str | Path]) -> list[Path]:
    """Every ``*.traj.json(.gz)`` under ``dirs``, sorted."""
    out: list[Path] = []
    for d in dirs:
        d = Path(d)
        out += sorted(d.glob("*.traj.json")) + sorted(d.glob("*.traj.json.gz")) if d.is_dir() else [d]
    return out


def recorded_demonstrations(paths: Iterable[str | Path], agent: AgentConfig, exclude: Iterable[str] = (),
                            config: ConvertConfig | None = None, tools: ToolConfig | None = None,
                            ) -> tuple[list[dict[str, Any]], ConversionStats]:
    """Demonstrations (``{"instance_id", "repo", "source", "targets", "n_calls", "messages"}``) from recorded
    mini-swe-agent runs; runs on ``exclude`` (the evaluation instances) never become one."""
    from codegrep.mining import inputs
    from codegrep.mining.formats import minisweagent
    from codegrep.mining.records import supervision_record

    config, tools = config or ConvertConfig(), tools or ToolConfig()
    excluded, stats, demos = set(exclude), ConversionStats(), []
    for path in run_files(paths):
        row = minisweagent.load(path)
        run = minisweagent.read(row, str(path))
        stats.runs += 1
        if run.instance_id in excluded:
            stats.runs_excluded_eval += 1
            continue
        record = supervision_record(minisweagent.parse(row, str(path), inputs.report_beside(str(path))))
        if not record.target_files or (config.resolved_only and not record.resolved):
            stats.runs_not_useful += 1
            continue
        converted = convert_steps(run, tools, stats)
        chosen = select_calls(converted, record.target_files,
                              _first_target_write(run, set(record.target_files)), config.max_calls)
        if len(chosen) < config.min_calls:
            stats.runs_too_few_calls += 1
            continue
        turns = group_turns(chosen, max(1, agent.max_turns - 1), agent.max_calls_per_turn)
        demos.append({"instance_id": run.instance_id, "repo": record.repo, "source": str(path),
                      "targets": record.target_files, "n_calls": len(chosen),
                      "messages": demonstration(run.problem_statement, turns, record.target_files, agent)})
        stats.demonstrations += 1
        stats.by_repo[record.repo] += 1
    return demos, stats


def _lines(text: str) -> set[str]:
    return {x for x in text.splitlines() if x and not x.startswith("[... truncated")}


def replay_fidelity(paths: Iterable[str | Path], resolver: Any, tasks: dict[str, Any], pool: Any = None,
                    tools: ToolConfig | None = None, max_runs: int | None = None) -> Any:
    """Replay the converted calls of runs whose snapshot exists and compare with the recorded answers.

    Only calls made before the run's first edit or deletion count (after it the recorded repository is no longer
    the base commit the live tools read), and recorded lines naming a file the run created itself are left out.

    One row per call: ``instance_id``, ``tool``, ``exact`` (same text), ``recall`` (share of the recorded
    lines the live tool also shows), ``precision`` (share of the live lines the recording shows), ``cut``.
    ``tasks`` maps instance id -> Task (repo, base commit); runs without a task or snapshot are skipped.
    """
    import pandas as pd

    from codegrep.env.tools import open_environment
    from codegrep.mining.formats import minisweagent

    tools = tools or ToolConfig()
    rows, runs = [], 0
    for path in run_files(paths):
        run = minisweagent.read(minisweagent.load(path), str(path))
        task = tasks.get(run.instance_id)
        if task is None:
            continue
        try:
            resolver.resolve(task.repo, task.base_commit)
        except (FileNotFoundError, ValueError, RuntimeError, OSError):
            continue
        events = run.events()
        first_write = next((e.step for e in events if e.kind in ("edit", "delete")), 10 ** 9)
        created = tuple(e.path for e in events if e.kind == "create" and e.path)  # the run's scratch files
        converted = [c for c in convert_steps(run, tools) if c.step < first_write]  # repository files are still
        if not converted:                                                            # at the base commit
            continue
        with open_environment(task, resolver, pool, "worktree" if pool is not None else "objects", tools) as env:
            live = env.run_turn([c.call for c in converted])
        for c, r in zip(converted, live):
            rec = {x for x in _lines(c.output) if not (created and x.startswith(created))}
            got = _lines(r.text() if r.ok else "")
            both = len(rec & got)
            rows.append({"instance_id": run.instance_id, "tool": c.call.name, "command": c.command[:200],
                         "exact": c.output == r.text(), "recall": both / len(rec) if rec else float(not got),
                         "precision": both / len(got) if got else float(not rec), "cut": c.cut,
                         "live_ok": r.ok})
        runs += 1
        if max_runs and runs >= max_runs:
            break
    return pd.DataFrame(rows)


def fidelity_summary(frame: Any) -> Any:
    """Per tool (and overall): calls, runs, exact-match share, mean line recall and precision."""
    import pandas as pd

    if frame is None or not len(frame):
        return pd.DataFrame(columns=["tool", "calls", "runs", "exact", "recall", "precision"])
    parts = [frame.assign(tool="all"), frame]
    both = pd.concat(parts, ignore_index=True)
    return (both.groupby("tool").agg(calls=("exact", "size"), runs=("instance_id", "nunique"),
                                     exact=("exact", "mean"), recall=("recall", "mean"),
                                     precision=("precision", "mean")).reset_index())
