"""Decoding constraints for the agent's turns: a grep may not start the way an earlier grep of the turn started
(``agent.distinct_greps``), or a grep must look for a term of the issue not yet grepped (``agent.copy_greps``).

A greedy 135M warm start loops: after its first grep it writes the same grep again (1-2 distinct calls in the first
turn on 15 of 15 held-out train tasks, docs/training.md), and the protocol ends the turn at the repeat. With
``agent.distinct_greps`` the decoder (``prefix_cache.decode_rows`` or ``generate``, as a transformers
``LogitsProcessor``) forbids, at the first content token of a grep pattern, every token that would begin an
earlier pattern of the same turn (after the ``\\b`` anchor both may share; case ignored, so ``Vector`` after
``vector`` is not written either), so the next best term is written instead. Like an inference server's guided
decoding it changes only which tokens may be chosen, never the tools, their output or the parser. Off by default.

``agent.copy_greps`` goes further: inside a grep pattern only the issue's own terms may be written (the scripted
expert's call for each, :func:`issue_patterns`), each once per turn, so an invented term (``mathSymbol`` after
``MatrixSymbol``) cannot be written and a repeat cannot end the turn; the policy still chooses which terms, in what
order, how many, and what to submit. ``agent.min_greps`` keeps a turn of greps from ending before that many.
``agent.submit_ranked`` narrows a submit's first file to the first file of the last ranked line shown
(:func:`ranked_first`), the file the scripted expert submits; the files after it stay the policy's choice.

``agent.argument_keys`` guards the call's shape: the first key of a call's ``arguments`` object must be one of that
tool's argument names (``tool_schemas()``), so a policy cannot nest ``{"arguments": {"arguments": ...`` (a GRPO
policy on CPU learned to, and stopped submitting; docs/training.md, "The fifteenth cold run").
"""
from __future__ import annotations

import functools
import json
import re
from typing import Any

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_ANCHOR = "\\\\b"  # the JSON text of the regex anchor \b: backslash, backslash, b


def content_start(value: str) -> int:
    r"""Characters of a grep pattern's JSON text before its content: the ``\b`` anchor's three, else 0.

    >>> content_start('\\\\bLaTeX\\\\b'), content_start('LaTeX')
    (3, 0)
    """
    return len(_ANCHOR) if value.startswith(_ANCHOR) else 0


def earlier_patterns(text: str) -> list[str]:
    r"""The JSON text of every grep pattern in the closed calls of ``text`` (a turn so far).

    >>> earlier_patterns('<tool_call>{"name": "grep", "arguments": {"pattern": "\\\\bx\\\\b"}}</tool_call><tool_call>{"na')
    ['\\\\bx\\\\b']
    """
    return earlier_values(text, "grep")


def banned_starts(text: str) -> list[str]:
    r"""Token texts a turn may not write next: when ``text`` ends inside a grep pattern that has no content yet (at
    most its ``\b`` anchor), every beginning of an earlier grep pattern's content that a token could write.

    >>> call = '<tool_call>{"name": "grep", "arguments": {"pattern": "%s"}}</tool_call>'
    >>> turn = call % '\\\\bLaTeX\\\\b' + '<tool_call>{"name": "grep", "arguments": {"pattern": "\\\\b'
    >>> banned_starts(turn)[:3]
    ['L', 'La', 'LaT']
    >>> banned_starts(turn + 'Lam'), banned_starts(call % 'x')  # content written already; not inside a pattern
    ([], [])
    """
    where = inside_value(text)
    if not where or where[0] != "grep":
        return []
    value, at = where[1], text.rfind(_OPEN)
    out: list[str] = []
    for p in earlier_patterns(text[:at]):
        start = content_start(p)
        if len(value) > start or not p.startswith(value):
            continue
        rest = p[len(value):]
        out += [rest[:k] for k in range(start - len(value) + 1, len(rest) + 1)]
    return out


_EXACT: dict[int, dict[str, list[int]]] = {}


def exact_token_strings(tokenizer: Any) -> dict[str, list[int]]:
    """Token ids by their decoded text (computed once per tokenizer)."""
    key = id(tokenizer)
    if key not in _EXACT:
        table: dict[str, list[int]] = {}
        for i in range(len(tokenizer)):
            table.setdefault(tokenizer.decode([i]), []).append(i)
        _EXACT[key] = table
    return _EXACT[key]


_LOWER: dict[int, dict[str, list[int]]] = {}


def token_strings(tokenizer: Any) -> dict[str, list[int]]:
    """Token ids by their decoded text, lower-cased (computed once per tokenizer)."""
    key = id(tokenizer)
    if key not in _LOWER:
        table: dict[str, list[int]] = {}
        for text, ids in exact_token_strings(tokenizer).items():
            table.setdefault(text.lower(), []).extend(ids)
        _LOWER[key] = table
    return _LOWER[key]


class DistinctGrepStarts:
    """The constraint as a transformers ``LogitsProcessor`` (``__call__(input_ids, scores) -> scores``): for each row,
    the new tokens (after ``prompt_width``) are decoded only when the last one could end a pattern's opening (it
    holds a quote, a backslash or a ``b``), and the tokens :func:`banned_starts` names, in any case, get ``-inf``."""

    def __init__(self, tokenizer: Any, prompt_width: int) -> None:
        self.tokenizer, self.width = tokenizer, prompt_width
        self.table = token_strings(tokenizer)
        self.openers = frozenset(i for s, ids in self.table.items() if any(c in s for c in '"\\b') for i in ids)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[1] <= self.width:
            return scores
        for row, last in enumerate(input_ids[:, -1].tolist()):
            if last not in self.openers:
                continue
            text = self.tokenizer.decode(input_ids[row, self.width:], skip_special_tokens=True)
            ids = [i for s in banned_starts(text) for i in self.table.get(s.lower(), ())]
            if ids:
                scores[row, ids] = float("-inf")
        return scores


_ISSUE = re.compile(r"Issue:\n(.*?)(?:\n\nTurn 1 of \d+[.:]|$)", re.DOTALL)  # build_messages' opening
_AFTER_ISSUE = re.compile(r"\n\nTurn 1 of \d+[.:]")


def issue_patterns(prompt: str, limit: int = 64, tool: str = "grep") -> list[str]:
    r"""The JSON text of every pattern a ``tool`` call (grep or glob) may write under ``agent.copy_greps``: the
    scripted expert's call (``compact_call``) for each term of the issue shown in ``prompt`` (``expert_terms``:
    file names as globs, identifiers, names written as calls, plain words as stems; up to ``limit``), greps also
    without their ``\b`` anchors.

    >>> issue = "<|im_start|>user\nIssue:\nMatrixSymbol breaks trigsimp(x) in simplify.py\n\nTurn 1 of 3."
    >>> issue_patterns(issue, 3)
    ['\\\\bMatrixSymbol\\\\b', 'MatrixSymbol', '\\\\btrigsimp\\\\b', 'trigsimp']
    >>> issue_patterns(issue, 3, "glob")
    ['**/simplify.py']
    """
    from codegrep.retrievers.terms import compact_call, expert_terms

    m = _ISSUE.search(prompt)
    if not m:
        return []
    out: dict[str, None] = {}
    for term, kind in expert_terms(m.group(1), limit):
        call = compact_call(term, kind)
        if call.name == tool:
            text = json.dumps(call.arguments["pattern"])[1:-1]
            out.update(dict.fromkeys([text, text.replace(_ANCHOR, "")] if tool == "grep" else [text]))
    return list(out)


def shown_files(prompt: str) -> list[str]:
    """The JSON text of every file the observations in ``prompt`` listed (after the opening issue), the files a
    submit may name under ``agent.copy_greps``.

    >>> shown_files("Issue:\\nsee x.py\\n\\nTurn 1 of 3.<tool_call>...</tool_call>\\nFiles ranked by this turn's "
    ...             "searches: b.py, a.py\\n<tool_response>\\ngrep pattern=\\"f\\"\\nb.py (2 hits, def)\\n</tool_response>")
    ['b.py', 'a.py']
    """
    from codegrep.agent.protocol import listed_files

    m = _AFTER_ISSUE.search(prompt)
    return [json.dumps(f)[1:-1] for f in listed_files(prompt[m.end():])] if m else []


def ranked_first(prompt: str) -> list[str]:
    """The JSON text of the first file of the last ranked line (``Files ranked by this turn's searches: ...``) the
    observations in ``prompt`` showed, the one file a first submit may name under ``agent.submit_ranked``; empty
    when no ranked line was shown (then the first submit is only held to the listed files).

    >>> ranked_first("Issue:\\nFiles ranked by this turn's searches: z.py\\n\\nTurn 1 of 3.<tool_call>...</tool_call>\\n"
    ...              "Files ranked by this turn's searches: b.py, a.py\\n<tool_response>...</tool_response>\\n"
    ...              "Files ranked by this turn's searches: c.py, b.py\\nTurn 3 of 3: last turn, call submit now.")
    ['c.py']
    >>> ranked_first("Issue:\\nsee x.py\\n\\nTurn 1 of 3.<tool_response>\\nb.py (2 hits)\\n</tool_response>")
    []
    """
    from codegrep.agent.protocol import ranked_lines

    m = _AFTER_ISSUE.search(prompt)
    lines = [line for line in ranked_lines(prompt[m.end():]) if line and line[0]] if m else []
    return [json.dumps(lines[-1][0])[1:-1]] if lines else []


_CALL_VALUE = re.compile(r'^\s*\{\s*"name"\s*:\s*"(grep|glob)"\s*,\s*"arguments"\s*:\s*\{\s*"pattern"\s*:\s*"(.*)$',
                         re.DOTALL)
_SUBMIT_LIST = re.compile(r'^\s*\{\s*"name"\s*:\s*"submit"\s*,\s*"arguments"\s*:\s*\{\s*"files"\s*:\s*\[(.*)$',
                          re.DOTALL)
_QUOTE = re.compile(r'(?<!\\)"')


def inside_value(text: str) -> tuple[str, str, list[str]] | None:
    """Where ``text`` (a turn so far) ends inside a string the copy constraint governs: ``(tool, written so far,
    strings this call wrote before)`` for a grep or glob pattern or a submitted file, else None.

    >>> inside_value('<tool_call>{"name": "grep", "arguments": {"pattern": "\\\\bMat'), inside_value('x')
    (('grep', '\\\\bMat', []), None)
    >>> inside_value('<tool_call>{"name": "submit", "arguments": {"files": ["a.py", "b/')
    ('submit', 'b/', ['a.py'])
    """
    at = text.rfind(_OPEN)
    if at < 0:
        return None
    body = text[at + len(_OPEN):]
    m = _CALL_VALUE.match(body)
    if m:
        return None if _QUOTE.search(m.group(2)) else (m.group(1), m.group(2), [])
    m = _SUBMIT_LIST.match(body)
    if not m or "]" in m.group(1):
        return None
    parts = _QUOTE.split(m.group(1))
    if len(parts) % 2:  # an even number of quotes: between two files
        return None
    return "submit", parts[-1], parts[1:-1:2]


def earlier_values(text: str, tool: str) -> list[str]:
    r"""The JSON text of the patterns of the closed ``tool`` calls in ``text`` (a turn so far), read by the protocol's
    own parser.

    >>> earlier_values('<tool_call>{"name": "glob", "arguments": {"pattern": "**/a.py"}}</tool_call><tool_call>{"na', "glob")
    ['**/a.py']
    """
    from codegrep.agent.protocol import parse_tool_calls

    closed = text[:text.rfind(_CLOSE) + len(_CLOSE)] if _CLOSE in text else ""
    return [json.dumps(c.arguments["pattern"])[1:-1] for c in parse_tool_calls(closed).calls if c.name == tool]


_FIRST_KEY = re.compile(r'^\s*\{\s*"name"\s*:\s*"(\w+)"\s*,\s*"arguments"\s*:\s*\{\s*("[^"]*)?$', re.DOTALL)


def first_key(text: str) -> tuple[str, str] | None:
    """Where ``text`` (a turn so far) ends at the first key of a call's ``arguments`` object: ``(tool, the key's
    JSON text so far, its opening quote included; '' before it)``, else None.

    >>> first_key('<tool_call>{"name": "submit", "arguments": {'), first_key('<tool_call>{"name": "grep", "arguments": {"pat')
    (('submit', ''), ('grep', '"pat'))
    >>> first_key('<tool_call>{"name": "grep", "arguments": {"pattern": "x'), first_key('no call')
    (None, None)
    """
    at = text.rfind(_OPEN)
    if at < 0:
        return None
    m = _FIRST_KEY.match(text[at + len(_OPEN):])
    return (m.group(1), m.group(2) or "") if m else None


@functools.lru_cache(maxsize=None)
def argument_names(tool: str) -> tuple[str, ...]:
    """The argument names of ``tool`` in the protocol's schemas (``codegrep.env.tools.tool_schemas``), required ones
    first; none for an unknown tool. Cached: the schemas are fixed, and a decoder asks at every first-key step.

    >>> argument_names("submit"), argument_names("read"), argument_names("nope")
    (('files',), ('path', 'start_line', 'end_line'), ())
    """
    from codegrep.env.tools import tool_schemas

    for schema in tool_schemas():
        fn = schema["function"]
        if fn["name"] == tool:
            required = list(fn["parameters"].get("required", []))
            return tuple(required + [k for k in fn["parameters"]["properties"] if k not in required])
    return ()


class _TokenPrefixes:
    """Token ids that continue a string toward one of a few allowed strings (the vocabulary indexed once)."""

    def __init__(self, tokenizer: Any) -> None:
        import bisect

        self._bisect = bisect
        self.exact = exact_token_strings(tokenizer)
        self.sorted = sorted(self.exact)
        self.longest = max(map(len, self.exact))

    def allowed(self, value: str, patterns: list[str]) -> list[int]:
        """Token ids that keep ``value`` a prefix of some ``pattern + '"'``, or that write past that closing quote."""
        ids: set[int] = set()
        for p in patterns:
            full = p + '"'
            if len(full) <= len(value) or not full.startswith(value):
                continue
            rest = full[len(value):]
            for k in range(1, min(len(rest), self.longest) + 1):
                ids.update(self.exact.get(rest[:k], ()))
            i = self._bisect.bisect_left(self.sorted, rest)
            while i < len(self.sorted) and self.sorted[i].startswith(rest):
                ids.update(self.exact[self.sorted[i]])
                i += 1
        return sorted(ids)


class ArgumentKeys(_TokenPrefixes):
    """``agent.argument_keys`` as a transformers ``LogitsProcessor``: where a row is at the first key of a call's
    ``arguments`` object, only tokens that write (toward) one of the tool's argument names, quoted, may be chosen;
    an unknown tool name is left alone (the parser reports it). Like the copy constraint it changes which tokens may
    be written, never the tools, their output or the parser."""

    def __init__(self, tokenizer: Any, prompt_width: int) -> None:
        super().__init__(tokenizer)
        self.tokenizer, self.width = tokenizer, prompt_width

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[1] <= self.width:
            return scores
        for row in range(input_ids.shape[0]):
            text = self.tokenizer.decode(input_ids[row, self.width:], skip_special_tokens=True)
            where = first_key(text)
            if where is None:
                continue
            names = argument_names(where[0])
            ids = self.allowed(where[1], ['"' + n for n in names]) if names else []
            if ids:
                keep = scores[row, ids].clone()
                scores[row] = float("-inf")
                scores[row, ids] = keep
        return scores


class CopiedGrepPatterns(_TokenPrefixes):
    """``agent.copy_greps`` as a transformers ``LogitsProcessor``: inside a grep or glob pattern, only tokens that keep
    it (closing quote included) a prefix of one of the issue's patterns of that tool (:func:`issue_patterns`) not yet
    written in this turn may be chosen, and inside a submitted file, one of the files the observations listed
    (:func:`shown_files`) not yet submitted; so every search looks for a term of the issue, none twice, and every
    submitted path is one the tools showed. Where nothing fits (a glob when the issue names no file; banning the
    closing quote of a repeat there made the model write junk until the token cap), nothing is banned. With
    ``min_greps``, a turn that has closed fewer greps than that (and no submit) may not end while terms are left.
    With ``submit_ranked``, a submit's first file is the first file of the last ranked line shown
    (:func:`ranked_first`), where one was shown."""

    def __init__(self, tokenizer: Any, prompt_width: int, min_greps: int = 0, submit_ranked: bool = False) -> None:
        super().__init__(tokenizer)
        self.tokenizer, self.width, self.min_greps = tokenizer, prompt_width, min_greps
        self.submit_ranked = submit_ranked
        vocab = tokenizer.get_vocab()
        self.enders = sorted({i for i in (tokenizer.eos_token_id, vocab.get("<|im_end|>")) if isinstance(i, int)})
        self._options: dict[tuple[bytes, str], list[str]] = {}

    def options(self, prompt_ids: Any, tool: str) -> list[str]:
        """What one row's ``tool`` string may be (cached per prompt): the issue's grep or glob patterns
        (:func:`issue_patterns`), for a submit the files its observations listed (:func:`shown_files`), for a first
        submitted file under ``submit_ranked`` (``tool`` ``"ranked"``) the last ranked line's first (:func:`ranked_first`)."""
        key = (prompt_ids.cpu().numpy().tobytes(), tool)
        if key not in self._options:
            prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
            self._options[key] = shown_files(prompt) if tool == "submit" else ranked_first(prompt) \
                if tool == "ranked" else issue_patterns(prompt, tool=tool)
        return self._options[key]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[1] <= self.width:
            return scores
        for row in range(input_ids.shape[0]):
            prompt = input_ids[row, :self.width]
            text = self.tokenizer.decode(input_ids[row, self.width:], skip_special_tokens=True)
            where = inside_value(text)
            if where is None:  # after a closed call, fewer greps than min_greps: the turn goes on while terms are left
                if self.min_greps and text.rstrip().endswith(_CLOSE) and "submit" not in text:
                    done = earlier_values(text, "grep")
                    if len(done) < self.min_greps and set(self.options(prompt, "grep")) - set(done):
                        scores[row, self.enders] = float("-inf")
                continue
            tool, value, before = where
            done = set(before if tool == "submit" else earlier_values(text[:text.rfind(_OPEN)], tool))
            first = tool == "submit" and not before and self.submit_ranked and self.options(prompt, "ranked")
            ids = self.allowed(value, first or [p for p in self.options(prompt, tool) if p not in done])
            if ids:
                keep = scores[row, ids].clone()
                scores[row] = float("-inf")
                scores[row, ids] = keep
        return scores
