"""``grep-heuristic``: a non-learned agent on the agent's own tools, the baseline for "tools without learning".

Turn 1: one parallel grep per issue term (identifiers first: paths, CamelCase, dotted, snake_case, quoted;
then the longest plain words). Files are scored by IDF-weighted hits (a term found in few files weighs
more; a hit on a ``def``/``class`` line weighs more, and so does one in a file named after the term). Turn 2: read
the top files and re-rank them by how many distinct terms they contain. The ranking is then submitted.

Hits are kept and weighted by the file policy of :mod:`codegrep.retrievers.query` (source files, no doc
folders, tests down-weighted), and files the issue points at (paths, traceback frames, dotted module names
among the files the greps and globs found) get ``mention_boost``.
"""
from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Mapping

from codegrep.data.paths import suffix_alternation
from codegrep.data.tasks import Task
from codegrep.env.tools import ToolCall, ToolResult
from codegrep.retrievers.base import Retrieval
from codegrep.retrievers.corpus import STOPWORDS
from codegrep.retrievers.query import DOC_DIRS, SOURCE_SUFFIXES, line_definitions, mentioned_files, policy_from

# Tried only where a run of path characters starts, past its leading ``./-`` (the group is what ``findall`` returns):
# the same matches as ``\b[\w./-]+\.(?:...)\b``, whose leftmost greedy match is the only one in its run, in linear
# instead of quadratic time (a 20,000-character hex dump in an issue took seconds).
PROSE_SUFFIXES = (".m", ".mm", ".hh", ".r", ".f", ".pl", ".ml", ".ex", ".pm", ".fs")
"""Source suffixes an issue's prose writes as attribute access or units (astropy's ``u.m``, ``u.mm``, ``u.pm``,
``u.fs``; ``df.r``, ``self.f``): a name ending in one is not taken for a file name the issue gives."""
ISSUE_PATH_SUFFIXES = tuple(s for s in SOURCE_SUFFIXES if s not in PROSE_SUFFIXES) + (
    ".cfg", ".toml", ".yaml", ".yml", ".json", ".md", ".rst")
"""Suffixes of a file name the issue names that becomes a path term (a glob): every source language's but
:data:`PROSE_SUFFIXES`, and config/docs files. Before, Python's and seven other languages' alone: a ``.tsx``, ``.kt``
or ``.swift`` file the issue named was grepped as the identifier ``date.tsx`` and never globbed. On the 86 Verified
issues the wider list adds one path term (a wiki URL's ``index.php``); with ``PROSE_SUFFIXES`` too it added
``u.mm`` and ``u.m`` to an astropy issue, pushing out identifiers."""
_PATH = re.compile(r"(?<![\w./-])[./-]*(\b[\w./-]+\.(?:" + suffix_alternation(ISSUE_PATH_SUFFIXES) + r")\b)")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
_CAMEL = re.compile(r"\b[A-Z]?[a-z0-9]+[A-Z]\w*\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b|\b[A-Z]{2,}[a-z]{2,}\w*\b")
# (the last: a name opening with an acronym, HTTPError, IOException, URLSearchParams; not a plural one, APIs)
_SNAKE = re.compile(r"\b_*[A-Za-z][A-Za-z0-9]*_\w+\b")
_QUOTED = re.compile(r"[`'\"]([A-Za-z_][\w.]{2,})[`'\"]")
_WORD = re.compile(r"\b[A-Za-z]{5,}\b")
# Vocabulary of issue reports themselves (not of any code base): grepping it finds everything.
ISSUE_WORDS = frozenset("""
issue problem error errors exception bug bugs expected actual behaviour behavior following below above
described description docstring removed source code function functions method methods class classes
should would could returns return value values instead example examples please thanks works working
happens happen version versions using called calling passed passing given object objects string
""".split())
_SUFFIX = re.compile(r"(?:ing|ed|es|s|ly)$")
_HIT_SEP = re.compile(r"(?=:(\d+):)")
_TOTAL = re.compile(r"showing \d+ of (?:more than )?(\d+) lines")


@dataclass
class HeuristicConfig:
    """Settings of the ``grep-heuristic`` retriever (profile section ``retrievers.grep-heuristic``)."""

    max_terms: int = 8
    """Greps in the first turn (the agent's calls-per-turn cap)."""
    read_top: int = 3
    """Files read in the second turn to re-rank the leaders."""
    definition_bonus: float = 3.0
    """Multiplier for a hit on a line that defines the term (``def``/``class``/assignment)."""
    identifier_prior: float = 2.0
    """Weight of code identifiers relative to plain words."""
    top_n: int = 20
    """Length of the returned ranking."""
    suffixes: tuple[str, ...] = SOURCE_SUFFIXES
    """Only hits in files with these suffixes count (source code by default; empty = every file)."""
    exclude_dirs: tuple[str, ...] = DOC_DIRS
    """Hits under folders of these names (any depth) do not count."""
    test_weight: float = 0.5
    """Score multiplier of test files."""
    mention_boost: float = 0.5
    """Extra weight of found files the issue points at (paths, traceback frames, dotted module names)."""
    name_bonus: float = 3.0
    """Multiplier for a term's hits in a file named after the term (:func:`named_after`: ``latex`` in
    ``printing/latex.py``); 1 = off. 3 (a definition's weight): the grep heuristic 25 -> 28 of the 55 real train
    tasks (lite-train), 41 -> 44 of the transfer check's 106 rows off sympy; never chosen on the 86."""
    relevance_weight: float = 0.0
    """Exponent of the issue-relevance factor (:func:`weigh_relevance`): each found file's score is multiplied by
    ``(0.001 + r / r_max) ** relevance_weight``, ``r`` the file's BM25 score against the issue over the whole
    snapshot (the ``bm25`` retriever's default index) and ``r_max`` the highest among the found files; 0 = off
    (the grep hits alone). The grep terms still choose which files can rank; BM25 only orders them."""


def weigh_relevance(scores: Mapping[str, float], relevance: Mapping[str, float], weight: float) -> dict[str, float]:
    """``scores`` with each file multiplied by ``(0.001 + r / r_max) ** weight``, ``r`` its ``relevance`` (0 when
    absent) and ``r_max`` the highest relevance among the scored files; unchanged for weight 0 or no relevance.

    >>> out = weigh_relevance({"a.py": 2.0, "b.py": 1.0}, {"a.py": 3.0, "b.py": 9.0, "c.py": 99.0}, 1.0)
    >>> sorted(out, key=out.get, reverse=True), round(out["a.py"], 3), round(out["b.py"], 3)
    (['b.py', 'a.py'], 0.669, 1.001)
    >>> [max(o, key=o.get) for o in (weigh_relevance({"a.py": 4.0, "b.py": 1.0}, {"a.py": 3.0, "b.py": 9.0}, w)
    ...                              for w in (1.0, 3.0))]  # the exponent: more hits lose to far more relevance
    ['a.py', 'b.py']
    >>> weigh_relevance({"a.py": 2.0}, {}, 1.0), weigh_relevance({"a.py": 2.0}, {"a.py": 5.0}, 0.0)
    ({'a.py': 2.0}, {'a.py': 2.0})
    """
    top = max((relevance.get(p, 0.0) for p in scores), default=0.0)
    if not weight or top <= 0:
        return dict(scores)
    return {p: s * (0.001 + relevance.get(p, 0.0) / top) ** weight for p, s in scores.items()}


def issue_terms(text: str, max_terms: int = 8) -> list[tuple[str, str]]:
    """``(term, kind)`` pairs to grep for, most specific first; kind is path/ident/word.

    >>> issue_terms("QuerySet.bulk_create() in django/db/models/query.py breaks `ignore_conflicts` option")
    [('query.py', 'path'), ('QuerySet.bulk_create', 'ident'), ('QuerySet', 'ident'), ('bulk_create', 'ident'), ('ignore_conflicts', 'ident'), ('breaks', 'word'), ('option', 'word')]
    >>> issue_terms("Crash in src/utils/format-date.tsx and app/CartViewModel.kt when empty", 3)
    [('format-date.tsx', 'path'), ('CartViewModel.kt', 'path'), ('crash', 'word')]
    >>> issue_terms("HTTPError message drops the status; IOException too, and the APIs")
    [('HTTPError', 'ident'), ('IOException', 'ident'), ('message', 'word'), ('status', 'word'), ('drops', 'word')]
    >>> [t for t, kind in issue_terms("Converting u.mm to u.m fails") if kind == "path"]  # PROSE_SUFFIXES
    []
    """
    seen: dict[str, str] = {}
    full_paths = _PATH.findall(text)
    for m in full_paths:
        seen.setdefault(m.rsplit("/", 1)[-1], "path")
    paths = set(seen)
    for rx in (_DOTTED, _CAMEL, _SNAKE, _QUOTED):
        for m in rx.findall(text):
            if m in paths or any(m in p for p in paths) or m.lower() in STOPWORDS:
                continue
            seen.setdefault(m, "ident")
            if "." in m:  # the parts of a dotted name are identifiers too
                for part in m.split("."):
                    if len(part) > 2 and part.lower() not in STOPWORDS:
                        seen.setdefault(part, "ident")
    words = {w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS | ISSUE_WORDS}
    covered = " ".join([*seen, *full_paths]).lower()  # words already inside an identifier or path
    for w in sorted(words, key=lambda w: (-len(w), w)):
        if w not in covered:
            seen.setdefault(w, "word")
    return list(seen.items())[:max_terms]


def term_call(term: str, kind: str) -> ToolCall:
    """The call for one term: a glob for a file name, a word-bounded literal grep for an identifier, and a
    case-insensitive prefix grep of the crudely stemmed word for plain words (``monitors`` -> ``\\bmonitor``).

    >>> term_call("monitors", "word").arguments
    {'pattern': '\\\\bmonitor', 'ignore_case': True}
    """
    if kind == "path":
        return ToolCall("glob", {"pattern": f"**/{term}"})
    if kind == "word":
        return ToolCall("grep", {"pattern": rf"\b{re.escape(word_stem(term))}", "ignore_case": True})
    return ToolCall("grep", {"pattern": rf"\b{re.escape(term)}\b", "ignore_case": False})


def word_stem(word: str) -> str:
    """The crude stem a plain word is grepped by (:func:`term_call`), and the term its hits are scored under, by
    the heuristic and by the agent's ranked line alike (one ``ing``/``ed``/``es``/``s``/``ly`` off words over five
    letters).

    >>> word_stem("monitors"), word_stem("printing"), word_stem("class")
    ('monitor', 'print', 'class')
    """
    return _SUFFIX.sub("", word) if len(word) > 5 else word


def split_hit(line: str, names: Collection[str] = ()) -> tuple[str, str] | None:
    """``(path, text)`` of a grep ``path:line:text`` line (None for another line). With ``names`` (the names the
    result's lines start with, :attr:`ToolResult.files`) the path is the one of them the line starts with, so a file
    named ``v:12:core.go`` is read whole; without, it ends at the first ``:<digits>:``.

    >>> split_hit("a.py:3:x = {1:2:3}"), split_hit("v:12:core.go:3:func f()"), split_hit("--")
    (('a.py', 'x = {1:2:3}'), ('v', 'core.go:3:func f()'), None)
    >>> split_hit("v:12:core.go:3:func f()", {"v:12:core.go"})
    ('v:12:core.go', 'func f()')
    """
    for m in _HIT_SEP.finditer(line, 1):
        if not names or line[:m.start()] in names:
            return line[:m.start()], line[m.start() + len(m.group(1)) + 2:]
    return None


def parse_hits(result: ToolResult) -> tuple[dict[str, list[str]], int]:
    """``({file: [hit line text]}, total hit lines)`` from a grep or glob result (errors: nothing).

    >>> hits, total = parse_hits(ToolResult("grep", True, "a.py:3:def f():\\nb.py:9:f()\\n[... truncated: showing 2 of 40 lines]"))
    >>> sorted(hits), total
    (['a.py', 'b.py'], 40)
    """
    hits: dict[str, list[str]] = defaultdict(list)
    if not result.ok or result.output.startswith("No "):
        return {}, 0
    lines, names = result.output.splitlines(), frozenset(result.files)
    total = next((int(m.group(1)) for m in map(_TOTAL.search, lines[-1:]) if m), None)
    for line in lines:
        if line.startswith("[... truncated"):
            continue
        if result.name == "glob":
            hits[line].append("")
        elif (hit := split_hit(line, names)):
            hits[hit[0]].append(hit[1])
    return dict(hits), total or sum(map(len, hits.values()))


def defined_names(line: str, path: str = "") -> list[str]:
    """The names a hit line defines (:func:`codegrep.retrievers.query.line_definitions`, the one rule bm25's
    definition boost reads too): a Python ``def``/``class`` that opens the line (a Python file, or no ``path``); in a
    file of another language its languages' definitions. The rule of "this line defines a name"
    of the agent's grep view (:func:`codegrep.agent.protocol.shape_result`) and :func:`is_definition`.

    >>> defined_names("    async def run(self):"), defined_names("x = 1  # def y"), defined_names("let f = 1", "a.py")
    (['run'], [], [])
    >>> defined_names("func (s *S) Validate(t string) error {", "s.go"), defined_names("export class Cart {", "c.ts")
    (['Validate'], ['Cart'])
    """
    return line_definitions(line, path)


def is_definition(term: str, line: str, path: str = "") -> bool:
    """Whether a hit line defines the term rather than uses it: the term is one of :func:`defined_names`, or (the
    scoring's looser Python rule) follows ``def``/``class`` anywhere in the line or is assigned at its start. So a
    repository of another language gets its definition file ahead of the files that only call the name; Python files
    keep the Python rule alone (their docstrings say "let x be ...").

    >>> is_definition("bulk_create", "    def bulk_create(self, objs):"), is_definition("x", "y = x + 1")
    (True, False)
    >>> [is_definition("Validate", s, "a.go") for s in ("func Validate(t string) error {", "func (s *S) Validate() {",
    ...                                                  "if err := Validate(t); err != nil {")]
    [True, True, False]
    >>> [is_definition("total", s, "cart.ts") for s in ("export function total(a) {", "export const total = (a) => a;",
    ...                                                   "pub fn total(x: u8)", "return total(items);")]
    [True, True, True, False]
    >>> is_definition("f", "Let f be a function", "doc.py"), is_definition("f", "let f = 1", "a.py")
    (False, False)
    """
    name = term.rsplit(".", 1)[-1]
    t = re.escape(name)
    return name in defined_names(line, path) or \
        re.search(rf"\b(?:def|class|async def)\s+{t}\b|^\s*{t}\s*[:=]", line) is not None


def named_after(term: str, path: str, kind: str = "ident") -> bool:
    """Whether a file is named after a grep term: its name before the first dot is the term (its last dotted part),
    case-insensitively; for a plain word (a crude stem, :func:`term_call`) the name may add up to three letters.
    A glob's term is a file name already, so never.

    >>> named_after("latex", "sympy/printing/latex.py"), named_after("Mod", "sympy/core/mod.py")
    (True, True)
    >>> named_after("sympy.core.Mod", "core/mod.py"), named_after("monitor", "a/monitors.go", "word")
    (True, True)
    >>> named_after("monitor", "a/monitors.go"), named_after("latex", "latex/printer.py"), named_after("x.py", "x.py", "path")
    (False, False, False)
    >>> named_after("", ".gitignore"), named_after("sympy.", "a/.env")
    (False, False)
    """
    name = term.rsplit(".", 1)[-1].lower()
    if kind == "path" or not name:  # an empty pattern's term would name every dot-file (``.gitignore``)
        return False
    stem = path.rsplit("/", 1)[-1].split(".", 1)[0].lower()
    return stem == name or (kind == "word" and stem.startswith(name) and len(stem) - len(name) <= 3)


class HeuristicRetriever:
    """The grep → weighted hits → read → submit baseline (no model)."""

    name = "grep-heuristic"
    fixed_size = True  # returns a ranking; the harness cuts it at k

    def __init__(self, config: HeuristicConfig | None = None, env_config: dict[str, Any] | None = None):
        self.config = config or HeuristicConfig()
        self.env_config = env_config or {}

    def score(self, terms: list[tuple[str, str]], results: list[ToolResult]) -> tuple[dict[str, float], dict]:
        """File scores from the first turn, and the hits behind them (for ``reasons``)."""
        scores: dict[str, float] = defaultdict(float)
        why: dict[str, list[str]] = defaultdict(list)
        policy = policy_from(self.config)
        for (term, kind), result in zip(terms, results):
            hits, total = parse_hits(result)
            hits = {p: lines for p, lines in hits.items() if policy.keeps(p)}
            if not hits:
                continue
            shown = sum(map(len, hits.values())) or 1
            df = max(len(hits), len(hits) * total / shown)  # files hit, extrapolated when output was cut
            weight = (self.config.identifier_prior if kind != "word" else 1.0) / (1.0 + math.log(df))
            weight *= 3.0 if kind == "path" else 1.0
            for path, lines in hits.items():
                defines = any(is_definition(term, s, path) for s in lines)
                named = self.config.name_bonus != 1.0 and named_after(term, path, kind)
                bonus = (self.config.definition_bonus if defines else 1.0) * (self.config.name_bonus if named else 1.0)
                scores[path] += weight * bonus * (1.0 + math.log(len(lines))) * policy.weight(path)
                why[path].append(f"{term!r}x{len(lines)}" + (" (def)" if defines and self.config.definition_bonus > 1
                                                              else "") + (" (named)" if named else ""))
        return dict(scores), why

    def boost_mentions(self, text: str, scores: dict[str, float], why: dict) -> dict[str, float]:
        """Scores with files the issue points at multiplied by ``1 + mention_boost * weight``."""
        if not self.config.mention_boost:
            return scores
        out = dict(scores)
        for path, w in mentioned_files(text, sorted(scores)).items():
            out[path] *= 1.0 + self.config.mention_boost * w
            why[path].append("named in the issue")
        return out

    def rerank(self, ranked: list[str], terms: list[tuple[str, str]], reads: list[ToolResult]) -> list[str]:
        """Move read files that contain more distinct terms ahead (stable otherwise)."""
        coverage = {}
        for path, result in zip(ranked, reads):
            text = result.output.lower() if result.ok else ""
            coverage[path] = sum(term.lower().rsplit(".", 1)[-1] in text for term, _ in terms)
        head = sorted(ranked[:len(reads)], key=lambda p: -coverage.get(p, 0))
        return head + ranked[len(reads):]

    def retrieve(self, task: Task, checkout: Path) -> Retrieval:
        from codegrep.env.tools import ToolConfig
        from codegrep.env.workdir import RepoToolEnvironment

        start = time.perf_counter()
        terms = issue_terms(task.problem_statement, self.config.max_terms)
        with RepoToolEnvironment(Path(checkout), ToolConfig.from_dict(self.env_config)) as env:
            results = env.run_turn([term_call(t, kind) for t, kind in terms]) if terms else []
            # scored under what each call searched (a plain word: its stem), as the agent's ranked line scores them
            scores, why = self.score([(word_stem(t) if kind == "word" else t, kind) for t, kind in terms], results)
            scores = self.boost_mentions(task.problem_statement, scores, why)
            if self.config.relevance_weight:
                from codegrep.retrievers.lexical import environment_relevance

                relevance = environment_relevance(env, task.problem_statement)
                scores = weigh_relevance(scores, relevance, self.config.relevance_weight)
                for p in scores:
                    why[p].append(f"bm25 {relevance.get(p, 0.0):.1f}")
            ranked = sorted(scores, key=lambda p: (-scores[p], p))[:self.config.top_n]
            reads = env.run_turn([ToolCall("read", {"path": p}) for p in ranked[:self.config.read_top]])
        ranked = self.rerank(ranked, terms, reads)
        return Retrieval(files=ranked, rounds=int(bool(results)) + int(bool(reads)),
                         tool_calls=len(results) + len(reads), seconds=time.perf_counter() - start,
                         reasons={p: f"score {scores[p]:.2f}: " + ", ".join(why[p]) for p in ranked},
                         extra={"terms": [t for t, _ in terms]})
