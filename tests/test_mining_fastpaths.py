"""The mining speed-ups change nothing: each fast path against the plain mechanism it replaces, on real runs
(the 400 shipped mini-swe-agent runs, else the package's embedded ones) and on generated edge cases, and the
whole output (records, demonstrations, stats) with every fast path switched off vs on."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from codegrep.mining.formats.base import exit_code_in
from codegrep.mining import inputs, shell, shell_words
from codegrep.mining.bench import real_runs
from codegrep.mining.formats import minisweagent as msa
from codegrep.mining.runner import MineOptions, mine_files


def _strip_heredocs_by_lines(command: str) -> str:
    """The line-by-line heredoc stripper the single-search one replaced (the reference)."""
    if "<<" not in command:
        return command
    out, lines, i = [], command.split("\n"), 0
    while i < len(lines):
        line, markers = lines[i], shell_words._HEREDOC.findall(lines[i])
        out.append(shell_words._HEREDOC.sub("", line) if markers else line)
        i += 1
        for _, marker in markers:
            while i < len(lines) and lines[i].strip() != marker:
                i += 1
            i += 1
    return "\n".join(out)


@pytest.fixture(scope="module")
def runs() -> list[msa.Run]:
    return [msa.read(msa.load(f), str(f)) for f in real_runs()[::3]]


def test_bash_blocks_equal_the_action_regex_on_real_and_generated_texts():
    texts = [m["content"] for f in real_runs()[:60] for m in msa.load(f)["messages"]
             if m.get("role") == "assistant" and isinstance(m.get("content"), str)]
    rnd, pieces = random.Random(0), ["```bash", "```", "\n", " ", "\t", "\u00a0", "\r", "x", "\n```", "```bash\n"]
    texts += ["".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 12))) for _ in range(20000)]
    for text in texts:
        full = msa._ACTION.findall(text)
        assert msa._bash_blocks(text) == full[:2], repr(text)


def test_strip_heredocs_equals_the_line_by_line_reference():
    rnd = random.Random(1)
    parts = ["cat <<EOF > a.py", "cat <<'EOF' >b", 'x <<-"END" y <<EOF', "EOF", " EOF ", "EOF\r", "\tEND",
             "END", "EOFX", "line", "", "<<", "a << EOF"]
    for _ in range(20000):
        c = "\n".join(rnd.choice(parts) for _ in range(rnd.randrange(1, 8))) + rnd.choice(["", "\n"])
        assert shell_words.strip_heredocs(c) == _strip_heredocs_by_lines(c), repr(c)


def _uncached(root: str):
    """A run's commands parsed one by one with no remembered command or path; only what the run wrote to files
    (a script it runs later, a patch it applies) is shared, as the shell's files are."""
    files: dict = {}
    return lambda c, i, output=None, exit_code=None: shell._parse_shell(c, i, root, "", None, files, output=output,
                                                                       exit_code=exit_code)[0]


def _outputs(step) -> list:
    """A call's observations, one per command (the output each command is read with), else none."""
    return step.observations if len(step.observations) == len(step.commands) else [None] * len(step.commands)


def test_run_scoped_shell_parser_equals_parse_shell_per_command(runs):
    """Commands and paths remembered within one run give the events a fresh parse of each command gives."""
    for run in runs:
        parse = _uncached(run.root)
        fresh = [e.to_dict() for i, s in enumerate(run.actions) for c, o in zip(s.commands, _outputs(s))
                 for e in parse(c, i, o, exit_code_in(o))]  # the status read eagerly: events() reads it lazily
        assert [e.to_dict() for e in run.events()] == fresh, run.instance_id


def test_plain_word_commands_skip_the_tokeniser_with_the_same_stages(runs):
    commands = [c for run in runs for s in run.actions for c in s.commands]
    commands += ["ls", "  cat  a.py\tb.py ", "", "2 3", "a=b c", "echo $HOME `x`"]
    for c in commands:
        fast = [[(st.words, st.writes, st.stdin) for st in p] for p in shell._pipelines(c)[0]]
        slow = [[(st.words, st.writes, st.stdin) for st in p] for p in _slow_pipelines(c)[0]]
        assert fast == slow, repr(c)


def _slow_pipelines(command: str):
    lines, bodies = shell_words._heredocs(command, placeholder=True)
    return shell_words._split(shell_words.tokenize(lines)), bodies


def _mine(tmp: Path) -> tuple[bytes, bytes, dict]:
    stats = mine_files([str(f) for f in real_runs()[::3]], tmp / "r.jsonl", tmp / "d.jsonl", MineOptions(),
                       workers=1, progress=False)
    for k in ("seconds", "trajectories_per_s"):
        stats.pop(k)
    return (tmp / "r.jsonl").read_bytes(), (tmp / "d.jsonl").read_bytes(), stats


def test_outputs_identical_with_every_fast_path_off(tmp_path, monkeypatch):
    fast = _mine(tmp_path)
    monkeypatch.setattr(msa, "_bash_blocks", lambda text: msa._ACTION.findall(text))
    monkeypatch.setattr(shell_words, "strip_heredocs", _strip_heredocs_by_lines)
    monkeypatch.setattr(shell, "_pipelines", _slow_pipelines)
    monkeypatch.setattr(msa, "ShellParser", _uncached)
    monkeypatch.setattr(inputs, "report_beside", lambda path: _report_by_stdlib(path))
    slow = _mine(tmp_path)
    assert fast[2] == slow[2] and fast[2]["records"] > 0
    assert fast[0] == slow[0] and fast[1] == slow[1]


def _report_by_stdlib(path: str):
    p = Path(path)
    cand = p.parent / (p.name.split(".traj")[0] + ".report.json")
    return json.loads(cand.read_text()) if cand.is_file() else _REPORT_BESIDE(path)


_REPORT_BESIDE = inputs.report_beside  # before the test's monkeypatch
