"""The scripted expert's search terms and calls for an issue text, below both the scripted strategies
(:mod:`codegrep.retrievers.scripted`) and the agent's copy constraint (:mod:`codegrep.agent.constraints`)."""
from __future__ import annotations

import re

from codegrep.env.tools import ToolCall
from codegrep.retrievers.heuristic import issue_terms, term_call


def compact_call(term: str, kind: str) -> ToolCall:
    """The heuristic's call for one term (``term_call``: a word-bounded literal for an identifier, a
    case-insensitive stem for a plain word, a glob for a file name) without its default-valued arguments, so a
    small model has less to write. (Dropping the ``\\b`` anchors too lowered the copier's P@1 on training tasks,
    0.239 -> 0.174 with 6 terms, so they stay.)

    >>> [compact_call(*t).arguments for t in [("parse_args", "ident"), ("monitors", "word"), ("cli.py", "path")]]
    [{'pattern': '\\\\bparse_args\\\\b'}, {'pattern': '\\\\bmonitor', 'ignore_case': True}, {'pattern': '**/cli.py'}]
    """
    call = term_call(term, kind)
    return ToolCall(call.name, {k: v for k, v in call.arguments.items() if v is not False})


_CALLED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]{2,})\(")
_COMMON_CALLS = frozenset("print len str int float list dict set tuple range type isinstance repr super".split())


def expert_terms(text: str, n: int) -> list[tuple[str, str]]:
    """The heuristic's ``issue_terms`` with one fix: a name written as a call (``trigsimp(f)``) is an identifier,
    not a plain word (builtins left out), so code names come before English words.

    >>> expert_terms("simplifying exponential -> trig identities: trigsimp(f) and print(x)", 3)
    [('trigsimp', 'ident'), ('exponential', 'word'), ('simplifying', 'word')]
    """
    base = issue_terms(text, max(n, 8) + 8)
    called = list(dict.fromkeys(m for m in _CALLED.findall(text) if m not in _COMMON_CALLS))
    kinds = {t: ("ident" if t in called and k == "word" else k) for t, k in base}
    for name in called:
        kinds.setdefault(name, "ident")
    rank = {"path": 0, "ident": 1, "word": 2}
    order = {t: i for i, (t, _) in enumerate(base)}
    return sorted(kinds.items(), key=lambda tk: (rank[tk[1]], order.get(tk[0], len(order))))[:n]
