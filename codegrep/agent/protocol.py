"""The agent protocol shared by rollouts, training and serving: prompt, call format, observations, caps.

The model answers every turn with one or more Qwen/Hermes tool calls, run in parallel::

    <tool_call>{"name": "grep", "arguments": {"pattern": "def parse_", "include": "*.py"}}</tool_call>
    <tool_call>{"name": "glob", "arguments": {"pattern": "**/config*.py"}}</tool_call>

and ends the episode with ``submit``, whose ``files`` are ranked best first. Observations go back as a
``user`` message of ``<tool_response>`` blocks: the exact text Qwen2.5's chat template renders for
``tool`` messages, but accepted by every chat template and OpenAI-compatible endpoint.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from codegrep.env.tools import ToolCall, ToolResult
from codegrep.env.textops import NOTE_PREFIXES

SUBMIT = "submit"
GREP_VIEWS = ("lines", "files")
CHARS_PER_TOKEN = 4  # tokenizer-free budget so env, trainer and endpoints truncate identically

# Compact on purpose: the smoke model is 135M parameters and RL prompts must stay under ~400 tokens.
SYSTEM_PROMPT = """\
Find the repository files to edit to resolve the issue. Call tools, several per turn:
<tool_call>{"name": "grep", "arguments": {"pattern": "regex", "include": "*.py"}}</tool_call>
<tool_call>{"name": "glob", "arguments": {"pattern": "**/*name*"}}</tool_call>
<tool_call>{"name": "read", "arguments": {"path": "a.py", "start_line": 1}}</tool_call>
Optional: grep path, ignore_case, context; read end_line. Finally submit files, best first:
<tool_call>{"name": "submit", "arguments": {"files": ["a.py"]}}</tool_call>"""


@dataclass
class AgentConfig:
    """Caps and prompt sizes of one episode (the ``agent:`` profile section, minus the policy)."""

    max_turns: int = 4
    """Model turns per episode: three to explore, one to answer (the last turn is told to submit)."""
    max_calls_per_turn: int = 8
    """Tool calls executed per turn; extra calls are dropped and reported as a format error."""
    max_observation_tokens: int = 1024
    """Budget of one turn's observation, in approximate tokens (4 characters each), split over its calls."""
    max_issue_chars: int = 1500
    """Issue text beyond this many characters is cut (keeps prompts short for small models)."""
    max_submit_files: int = 10
    """Submitted files beyond this rank are dropped."""
    grep_view: str = "lines"
    """How a grep result is shown: ``lines`` (the paper's ``path:line:text``, path order) or ``files`` (one line per
    file, ``path (N hits, def)``: files with a ``def``/``class`` hit first (where none of the grep's source files is
    Python, also the definitions of their languages), then source before tests, then by hits;
    a change from the paper's tool, made so a small model can choose by copying the first file)."""
    rank_files: int = 0
    """When > 0, the observation of a turn with grep/glob calls opens with the top ``rank_files`` files of one
    ranking over all its calls (the grep heuristic's turn-1 scoring: IDF-weighted hits, definition hits up, tests
    down, docs out) — a change from the paper's tools; 0 = none, the paper's."""
    rank_mentions: bool = True
    """With ``rank_files``: the ranking also multiplies files the shown issue points at (paths, traceback frames,
    dotted module names among the files the turn found) by the grep heuristic's ``1 + mention_boost * weight``, as
    the heuristic's own ranking does (``HeuristicRetriever.boost_mentions``). False: the turn's hits alone, the
    ranked line before 2026-12-06's second session."""
    rank_relevance: float = 0.0
    """With ``rank_files``: exponent of the issue-relevance factor the ranking multiplies each found file by
    (``HeuristicRetriever``'s :func:`~codegrep.retrievers.heuristic.weigh_relevance`: the file's BM25 score against
    the shown issue over the whole snapshot, relative to the best found file's), as the grep heuristic does with
    its ``relevance_weight``; 0 = off, the turn's hits alone. The agent's greps still choose which files rank."""
    max_call_tokens: int | None = None
    """Cap of one call's output in approximate tokens (None = the turn budget shared evenly among the calls, the
    paper's rule); the turn budget ``max_observation_tokens`` still bounds the whole observation."""

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, source: str = "agent") -> "AgentConfig":
        """Build from the ``agent:`` section; policy keys (``PolicyConfig``) are skipped, any other key fails.

        >>> AgentConfig.from_dict({"model": "smollm2", "max_turns": 2}).max_turns
        2
        >>> AgentConfig.from_dict({"max_turnz": 2}, "configs/ci.yaml: agent")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        codegrep.config.ConfigError: configs/ci.yaml: agent: unknown key 'max_turnz' (did you mean 'max_turns'?); ...
        """
        from codegrep.config import config_fields, from_mapping

        return from_mapping(cls, d, source, ignore=config_fields(PolicyConfig))

    def __post_init__(self) -> None:
        if self.grep_view not in GREP_VIEWS:
            raise ValueError(f"agent.grep_view must be one of {list(GREP_VIEWS)}, got {self.grep_view!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PolicyConfig:
    """The policy keys of the ``agent:`` profile section (the episode caps are ``AgentConfig``)."""

    policy: str = "hf"
    """hf (local transformers) | openai (endpoint) | scripted (tests); another word names a local model."""
    model: str | None = "smollm2"
    """'smollm2' (offline GGUF), a model directory or a hub id."""
    endpoint: str | None = None
    """OpenAI-compatible base URL; when set the policy is openai."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Environment variable holding the endpoint's key (unset = no key)."""
    device: str | None = "auto"
    """auto | cpu | cuda[:N] (hf)."""
    batch_size: int | None = 8
    """Histories per generate call (hf)."""
    cpu_threads: int | None = None
    """torch CPU threads (None = torch default)."""
    eval_processes: int = 1
    """hf on CPU: processes that share one evaluation of the agent on a task list (``codegrep.rl.policy_rows.
    agent_rows``: notebook 03's evaluations, the training-task check, ``codegrep bench policies``). The batches stay
    those of one process (same tasks, same order); they are dealt out in turn, each process decoding its share with
    ``cpu_threads`` threads (None: the usable cores split evenly). A decoding step of a small model is bound by
    per-operation overhead more than by arithmetic, so a second thread speeds it little where a second process
    decodes a second batch (measured: ``codegrep bench decode --processes``). Each process holds its own model and
    batch working set, so peak memory grows with them. 1 = in the calling process (the default)."""
    prefix_cache_mb: int | None = 4096
    """hf: memory for reusing earlier turns' key/value states, so each history token is prefilled once (0 = off)."""
    cpu_precision: str | None = "fp32"
    """hf on CPU: arithmetic of the prompt PREFILL (auto | fp32 | bf16; auto = bf16 autocast where the CPU has native
    bf16, as in training, ``codegrep.agent.precision``). Decoding follows ``decode_precision``; the prefilled
    key/value states are kept in the decoding's dtype. Recorded in each episode's ``policy``."""
    decode_precision: str | None = "fp32"
    """hf on CPU and GRPO's rollouts: arithmetic of DECODING (fp32 | auto | bf16; auto = bf16 where the CPU has
    native bf16). bf16 decodes through a bf16 copy of the model whose output head stays fp32
    (``prefix_cache.PrefixCache.decoder``); key/value states are then kept in bf16. A decoding step of the 135M model
    on 2 cores is bound by reading its weights and cached states, which bf16 halves (``codegrep bench decode
    --decode-precisions fp32 bf16`` measures time and how many episodes stay the same: bf16 rounds differently, so a
    greedy choice at a near tie can change). It paid on an Intel Xeon with AMX; on an AMD EPYC with native bf16 but
    no AMX a bf16 step measured slower (289 ms fp32 against 545 ms bf16, docs/training.md), and without native bf16
    it is emulated. Recorded in each episode's ``policy`` when not fp32."""
    stop_early: bool = True
    """hf and GRPO rollouts: a row stops generating once it has closed a submit call or ``max_calls_per_turn``
    calls (what ``apply_turn`` can still use; ``codegrep.agent.stopping``), so one long row no longer holds its
    batch."""
    distinct_greps: bool = False
    """hf: a decoding constraint — at the first content token of a grep pattern, no token may begin an earlier grep
    pattern of the same turn (``codegrep.agent.constraints``; the tools, their output and the parser are unchanged).
    GRPO rollouts decode under it too (``codegrep.agent.turn_controls``; not on TRL's vLLM path)."""
    copy_greps: bool = False
    """hf: a decoding constraint — inside a grep pattern only tokens that keep it a prefix of one of the issue's terms
    (the scripted expert's calls for them, anchored or not) not yet grepped in the turn may be written, a glob
    pattern likewise among the issue's file names, a submitted path among the files the observations listed: the
    policy chooses which terms, how many and which listed file, never an invented one (``codegrep.agent.constraints``).
    GRPO rollouts decode under it too, like ``distinct_greps``."""
    min_greps: int = 0
    """hf, with ``copy_greps``: a turn of greps may not end (its end-of-turn tokens are banned after a closed call)
    before it has written this many, while issue terms are left (0 = off). The scripted expert writes 6; on the 55
    real train tasks its first 3 terms reach P@1 14/55, its first 6 22/55 (docs/training.md)."""
    submit_ranked: bool = False
    """hf and GRPO rollouts, with ``copy_greps``: a decoding constraint — a submit's first file must be the first
    file of the last ranked line the observations showed (``rank_files``; where none was shown, only the listed-file
    rule holds); the files after it stay the policy's choice. The scripted expert submits that file; a policy that
    submits another listed file first loses what its own searches ranked (``codegrep.agent.constraints.ranked_first``,
    docs/training.md "The twenty-fifth cold run")."""
    argument_keys: bool = False
    """hf and GRPO rollouts: a decoding constraint on the call's shape — the first key of a call's ``arguments``
    object must be one of that tool's argument names (``tool_schemas()``), so ``{"arguments": {"arguments": ...``
    cannot be written (``codegrep.agent.constraints.ArgumentKeys``). Off by default, on in smoke and ci since the
    sixteenth cold run. With GRPO's loss on unconstrained probabilities it hid a drift toward the banned shape rather
    than preventing it (the seventeenth cold run); ``train.constrained_loss`` trains on the masked distribution instead.
    Either way, keep it on wherever a policy trained with it is decoded (docs/training.md, "The fifteenth cold run",
    "The seventeenth cold run")."""
    draft_tokens: int = 0
    """hf and GRPO rollouts: speculative decoding with prompt-lookup drafts — each step feeds up to this many tokens
    copied from what followed the row's last tokens earlier in its own text (the call syntax, the issue's terms, the
    listed paths) and keeps those the model's own choice confirms (greedy: the same tokens up to float rounding;
    sampling: the same distribution), so a step writes 1 to ``draft_tokens`` + 1 tokens (``prefix_cache.decode_rows``,
    measured by ``codegrep bench decode``; 0 = off)."""
    max_new_tokens: int | None = None
    """Generated tokens per turn (None = the policy's default)."""
    temperature: float | None = None
    """Sampling temperature; 0 = greedy (None = the policy's default)."""
    top_p: float | None = None
    """Nucleus sampling mass (None = the policy's default)."""
    outputs: list[str] = field(default_factory=list)
    """Scripted policy: the outputs replayed."""

    def __post_init__(self) -> None:
        from codegrep.agent.precision import PRECISIONS

        for key in ("cpu_precision", "decode_precision"):
            value = getattr(self, key)
            if value is not None and value not in PRECISIONS:
                raise ValueError(f"agent.{key} must be one of {list(PRECISIONS)}, got {value!r}")


def policy_config(spec: dict[str, Any], source: str = "agent") -> PolicyConfig:
    """``PolicyConfig`` from an ``agent:`` mapping; episode caps (``AgentConfig`` keys) are allowed, others fail.

    >>> policy_config({"policy": "openai", "max_turns": 2}).policy
    'openai'
    >>> policy_config({"modle": "x"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    codegrep.config.ConfigError: agent: unknown key 'modle' (did you mean 'model'?); known keys: ...
    """
    from codegrep.config import config_fields, from_mapping

    return from_mapping(PolicyConfig, spec, source, ignore=config_fields(AgentConfig))


@dataclass
class ParsedTurn:
    """What one model turn asked for."""

    calls: list[ToolCall] = field(default_factory=list)
    """Valid grep/glob/read calls, in the order written."""
    submit: list[str] | None = None
    """Files of the first valid ``submit`` call (ranked), or None when the turn did not submit."""
    errors: list[str] = field(default_factory=list)
    """One message per malformed block, unknown tool or bad argument (shown to the model, counted)."""
    repeated: bool = False
    """True when a call repeated an earlier call of the turn: the turn ended there (:func:`parse_tool_calls`)."""


@lru_cache(maxsize=1)
def tool_argument_types() -> dict[str, dict[str, Any]]:
    """Argument types per tool from ENV's function schemas (the single source of truth)."""
    out = {}
    for schema in tool_schemas():
        fn = schema.get("function", schema)
        params = fn.get("parameters", {})
        out[fn["name"]] = {"properties": {k: v.get("type", "string") for k, v in params.get("properties", {}).items()},
                           "required": list(params.get("required", []))}
    return out


def tool_schemas() -> list[dict[str, Any]]:
    """OpenAI/Qwen function schemas of grep/glob/read/submit (for chat templates' ``tools=``)."""
    from codegrep.env.tools import tool_schemas as env_schemas

    return env_schemas()


def build_messages(task_text: str, config: AgentConfig | None = None) -> list[dict[str, str]]:
    """The opening chat: system prompt, then the (truncated) issue and the turn budget.

    >>> m = build_messages("x" * 50, AgentConfig(max_issue_chars=10, max_turns=2))
    >>> [r["role"] for r in m], m[1]["content"]
    (['system', 'user'], 'Issue:\\nxxxxxxxxxx [...]\\n\\nTurn 1 of 2.')
    """
    config = config or AgentConfig()
    text = visible_issue(task_text, config)
    if len(text) < len(task_text.strip()):
        text += " [...]"
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Issue:\n{text}\n\n{turn_note(1, config.max_turns)}"}]


def visible_issue(task_text: str, config: AgentConfig) -> str:
    """The part of an issue the agent is shown (``max_issue_chars``); demonstrations take patterns only from it.

    >>> visible_issue("  abcdef ", AgentConfig(max_issue_chars=4))
    'abcd'
    """
    return task_text.strip()[: config.max_issue_chars]


def tool_call_text(calls: Sequence[ToolCall]) -> str:
    """Assistant text for a turn: one ``<tool_call>`` per line.

    >>> tool_call_text([ToolCall("submit", {"files": ["a.py"]})])
    '<tool_call>{"name": "submit", "arguments": {"files": ["a.py"]}}</tool_call>'
    """
    return "\n".join(f"<tool_call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</tool_call>"
                     for c in calls)


def turn_note(turn: int, max_turns: int) -> str:
    """The reminder closing each user message (1-based turn).

    >>> turn_note(4, 4)
    'Turn 4 of 4: last turn, call submit now.'
    """
    return f"Turn {turn} of {max_turns}" + (": last turn, call submit now." if turn >= max_turns else ".")


_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|(?=<tool_call>)|\Z)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def _decode(body: str) -> tuple[Any, str | None]:
    """JSON object at the start of ``body`` (trailing text ignored), or an error message."""
    body = _FENCE.sub("", body.strip())
    if not body:
        return None, "empty <tool_call> block"
    try:
        obj, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as exc:
        return None, f"{INVALID_JSON_ERROR} ({exc.msg} at char {exc.pos}): {body[:80]!r}"
    return obj, None


def _coerce(value: Any, kind: str) -> tuple[Any, bool]:
    """Value converted to the JSON-schema ``kind`` when that is unambiguous; (value, ok)."""
    if kind == "string":
        return value, isinstance(value, str)
    if kind == "integer":
        if isinstance(value, bool):
            return value, False
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return int(value), True
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value), True
        return value, False
    if kind == "boolean":
        if isinstance(value, bool):
            return value, True
        lowered = str(value).strip().lower()
        return lowered == "true", lowered in ("true", "false")
    if kind == "array":
        value = [value] if isinstance(value, str) else value
        return value, isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value, True


def _validate(obj: Any, schemas: dict[str, dict[str, Any]]) -> tuple[ToolCall | None, str | None]:
    """A checked ToolCall from a decoded block, or an error message naming the problem."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None, 'a tool call must be {"name": ..., "arguments": {...}}'
    name, args = obj["name"], obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI style: arguments as a JSON string
        args, err = _decode(args or "{}")
        if err:
            return None, f"{name}: arguments are not a JSON object"
    if name not in schemas:
        return None, f"unknown tool {name!r}; use one of {', '.join(schemas)}"
    if not isinstance(args, dict):
        return None, f"{name}: arguments must be an object, got {type(args).__name__}"
    spec, clean = schemas[name], {}
    for key, value in args.items():
        if value is None and key not in spec["required"]:
            continue  # an explicit null means "use the default"
        if key not in spec["properties"]:
            return None, f"{name}: unknown argument {key!r} (allowed: {', '.join(spec['properties'])})"
        clean[key], ok = _coerce(value, spec["properties"][key])
        if not ok:
            return None, f"{name}: argument {key!r} must be {spec['properties'][key]}, got {value!r}"[:200]
    missing = [k for k in spec["required"] if k not in clean]
    if missing:
        return None, f"{name}: missing required argument(s) {', '.join(missing)}"
    return ToolCall(name, clean), None


def parse_tool_calls(text: str) -> ParsedTurn:
    """Parse one assistant turn; never raises. Unclosed last blocks (cut generations) are parsed too.

    A valid call that repeats an earlier call of the same turn (same tool, same arguments) ENDS the turn: it and
    every block after it are not read (``repeated``; a greedy policy that repeats a call is in a loop, and
    decoding stops a row at that block, :mod:`codegrep.agent.stopping`).

    >>> t = parse_tool_calls('look:<tool_call>{"name": "grep", "arguments": {"pattern": "foo"}}</tool_call>'
    ...                      '<tool_call>{"name": "read", "arguments": {"path": "a.py", "end_line": "9"}}</tool_call>')
    >>> [(c.name, c.arguments) for c in t.calls], t.submit, t.errors
    ([('grep', {'pattern': 'foo'}), ('read', {'path': 'a.py', 'end_line': 9})], None, [])
    >>> parse_tool_calls('<tool_call>{"name": "submit", "arguments": {"files": ["b.py", "a.py"]}}').submit
    ['b.py', 'a.py']
    >>> parse_tool_calls('<tool_call>{"name": "rm", "arguments": {}}</tool_call>').errors
    ["unknown tool 'rm'; use one of grep, glob, read, submit"]
    >>> parse_tool_calls('I think it is foo.py').errors
    ['no <tool_call> found: answer with <tool_call>{"name": ..., "arguments": {...}}</tool_call>']
    >>> g = '<tool_call>{"name": "grep", "arguments": {"pattern": "%s"}}</tool_call>'
    >>> sub = '<tool_call>{"name": "submit", "arguments": {"files": ["a.py"]}}</tool_call>'
    >>> t = parse_tool_calls(g % "x" + g % "y" + g % "x" + g % "z" + sub)
    >>> [c.arguments["pattern"] for c in t.calls], t.repeated, t.submit
    (['x', 'y'], True, None)
    """
    schemas, turn = tool_argument_types(), ParsedTurn()
    bodies = _BLOCK.findall(text or "")
    if not bodies:
        turn.errors.append('no <tool_call> found: answer with <tool_call>{"name": ..., "arguments": {...}}</tool_call>')
    seen: set[tuple[str, str]] = set()
    for body in bodies:
        obj, err = _decode(body)
        call, err = (None, err) if err else _validate(obj, schemas)
        if err:
            turn.errors.append(err)
        elif call.name != SUBMIT:
            key = call_key(call)
            if key in seen:
                turn.repeated = True
                break
            seen.add(key)
            turn.calls.append(call)
        elif turn.submit is None:
            turn.submit = list(dict.fromkeys(f.strip() for f in call.arguments["files"] if f.strip()))
    return turn


def call_key(call: ToolCall) -> tuple[str, str]:
    """What makes two calls the same call: the tool and its arguments.

    >>> call_key(ToolCall("grep", {"pattern": "x", "include": "*.py"})) == call_key(
    ...     ToolCall("grep", {"include": "*.py", "pattern": "x"}))
    True
    """
    return call.name, json.dumps(call.arguments, sort_keys=True, default=str)


def _clip(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` with a note saying how much was dropped: after the last whole line that fits
    (``[... N more lines truncated]``), so no row is shown cut (a file name cut inside its suffix,
    ``sympy/core/basic.p``, read as one); where not even the first line fits, inside it (``[... N more characters
    truncated]``: the line above was cut).

    >>> _clip("abcdefghij", 4)
    'abcd\\n[... 6 more characters truncated]'
    >>> _clip("a.py (2 hits)\\nsympy/core/basic.py (1 hit)\\nc.py (1 hit)", 20)
    'a.py (2 hits)\\n[... 2 more lines truncated]'
    """
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars + 1)
    if cut > 0:
        return text[:cut] + f"\n[... {text.count(chr(10), cut + 1) + 1} more lines truncated]"
    return text[:max_chars] + f"\n[... {len(text) - max_chars} more characters truncated]"


def describe_call(call: ToolCall) -> str:
    """One-line echo of a call heading its response.

    >>> describe_call(ToolCall("grep", {"pattern": "x", "include": "*.py"}))
    'grep pattern="x" include="*.py"'
    """
    return " ".join([call.name] + [f"{k}={json.dumps(v)}" for k, v in call.arguments.items()])


def format_observation(results: Sequence[ToolResult], calls: Sequence[ToolCall] | None = None,
                       errors: Sequence[str] = (), max_tokens: int = 1024, note: str = "",
                       call_tokens: int | None = None) -> str:
    """The user message answering one turn: a ``<tool_response>`` per call, format errors, a turn note.

    The budget (``max_tokens`` x 4 characters) is shared evenly among the calls, or, with ``call_tokens``, each
    call may use up to ``call_tokens`` x 4 characters of what the earlier calls left.

    >>> r = [ToolResult("glob", True, "a.py\\nb.py"), ToolResult("read", False, error="no such file")]
    >>> print(format_observation(r, [ToolCall("glob", {"pattern": "*.py"}), ToolCall("read", {"path": "c"})],
    ...                          errors=["bad JSON"], note="Turn 2 of 4."))
    <tool_response>
    glob pattern="*.py"
    a.py
    b.py
    </tool_response>
    <tool_response>
    read path="c"
    ERROR: no such file
    </tool_response>
    Format error: bad JSON
    Turn 2 of 4.
    """
    left = max_tokens * CHARS_PER_TOKEN
    budget = left // max(1, len(results))
    parts = []
    for i, result in enumerate(results):
        head = describe_call(calls[i]) + "\n" if calls is not None and i < len(calls) else ""
        if call_tokens:
            budget = max(0, min(call_tokens * CHARS_PER_TOKEN, left))
        body = _clip(result.text(), budget)
        left -= min(len(result.text()), budget)
        parts.append(f"<tool_response>\n{head}{body}\n</tool_response>")
    parts += [f"Format error: {e}" for e in errors]
    if note:
        parts.append(note)
    return "\n".join(parts)


@dataclass
class TurnOutcome:
    """What applying one model turn did: the one definition shared by evaluation and training."""

    calls: list[ToolCall] = field(default_factory=list)
    """Calls that were run (valid calls up to ``max_calls_per_turn``; none when the turn ends the episode)."""
    results: list[ToolResult] = field(default_factory=list)
    """Their results, in order."""
    errors: list[str] = field(default_factory=list)
    """Format errors: malformed blocks, unknown tools, bad arguments, calls over the per-turn cap."""
    submit: list[str] | None = None
    """Submitted files: normalised, deduplicated, cut to ``max_submit_files``; None when the turn did not submit."""
    done: bool = False
    """True when the episode ends here (it submitted, or this was the last turn)."""
    observation: str | None = None
    """The user message answering the turn (None when ``done``)."""
    tool_s: float = 0.0
    """Wall time of the turn's tool calls."""


def apply_turn(output: str, number: int, config: AgentConfig,
               run_calls: Callable[[Sequence[ToolCall]], list[ToolResult]], issue: str = "",
               relevance: Callable[[str], Mapping[str, float]] | None = None) -> TurnOutcome:
    """Apply model turn ``number`` (1-based): parse, cap, submit handling, run the calls, render the observation;
    ``issue`` (the task's text; the part the agent is shown counts, :func:`visible_issue`) feeds the ranked line's
    mention boost (``rank_mentions``); ``relevance`` (each file's relevance to a text:
    ``codegrep.retrievers.lexical.environment_relevance`` of the episode's environment) its relevance factor
    (``rank_relevance``; required then, so no caller drops it unseen).

    Evaluation (``codegrep.agent.loop``) and training (``codegrep.rl.rollout``) both call this, so the policy
    is trained on exactly the episode it is evaluated on. ``run_calls`` runs one turn's calls in parallel
    (``ToolEnvironment.run_turn``); it is not called when there is nothing to run.

    >>> cfg = AgentConfig(max_turns=3, max_calls_per_turn=1)
    >>> run = lambda calls: [ToolResult(c.name, True, "a.py") for c in calls]
    >>> call = '<tool_call>{"name": "glob", "arguments": {"pattern": "%s"}}</tool_call>'
    >>> out = apply_turn(call % "*" + call % "*.py" + call % "*", 1, cfg, run)
    >>> print(out.observation)
    <tool_response>
    glob pattern="*"
    a.py
    </tool_response>
    Format error: a call repeated an earlier call of this turn: the turn ended there (it and what followed were not run)
    Format error: 1 calls over the limit of 1 per turn were not run
    Turn 2 of 3.
    >>> apply_turn('<tool_call>{"name": "submit", "arguments": {"files": ["./a.py", "a.py", "b.py"]}}', 2, cfg, run)
    TurnOutcome(calls=[], results=[], errors=[], submit=['a.py', 'b.py'], done=True, observation=None, tool_s=0.0)
    """
    from codegrep.metrics import dedupe, normalize_path

    parsed = parse_tool_calls(output)
    outcome = TurnOutcome(errors=list(parsed.errors))
    if parsed.submit is not None:
        outcome.submit = dedupe([normalize_path(f) for f in parsed.submit])[: config.max_submit_files]
        outcome.done = True
        return outcome
    if number >= config.max_turns:
        outcome.done = True  # out of turns without submitting: no files
        return outcome
    if parsed.repeated:  # a repeat would run the same search again and weigh its term twice; a greedy policy loops
        outcome.errors.append(REPEAT_ERROR)
    outcome.calls = parsed.calls[: config.max_calls_per_turn]  # distinct: parse_tool_calls ends a turn at a repeat
    if len(parsed.calls) > len(outcome.calls):
        outcome.errors.append(f"{len(parsed.calls) - len(outcome.calls)} calls over the limit of "
                              f"{config.max_calls_per_turn} per turn were not run")
    start = time.perf_counter()
    outcome.results = list(run_calls(outcome.calls)) if outcome.calls else []
    outcome.tool_s = time.perf_counter() - start
    shown = [shape_result(c, r, config.grep_view) for c, r in zip(outcome.calls, outcome.results)]
    outcome.observation = format_observation(shown, outcome.calls, outcome.errors, config.max_observation_tokens,
                                             note=turn_note(number + 1, config.max_turns),
                                             call_tokens=config.max_call_tokens)
    mentions = visible_issue(issue, config) if config.rank_mentions else ""
    prior = None
    if config.rank_files and config.rank_relevance and any(c.name in ("grep", "glob") for c in outcome.calls):
        if relevance is None:
            raise ValueError("agent.rank_relevance needs the environment's relevance (apply_turn(..., relevance=))")
        prior = relevance(visible_issue(issue, config))
    ranked = ranked_files(outcome.calls, outcome.results, config.rank_files, mentions, prior,
                          config.rank_relevance) if config.rank_files else []
    if ranked:
        outcome.observation = f"{ranked_line(ranked)}\n{outcome.observation}"
    return outcome


INVALID_JSON_ERROR = "invalid JSON in <tool_call>"
"""How a format error for a block that is not valid JSON begins (:func:`_decode`; counted by
``codegrep.replicates.call_habits``)."""

REPEAT_ERROR = "a call repeated an earlier call of this turn: the turn ended there (it and what followed were not run)"


def _defines(pattern: str, line: str, path: str = "") -> bool:
    """Whether a hit line defines a name the grep pattern matches (a name of
    :func:`~codegrep.retrievers.heuristic.defined_names`: a ``def``/``class`` line; with ``path``, in a file of
    another language, its definition keywords too).

    >>> _defines(r"\\bfoo", "def foo_bar(x):"), _defines("foo", "def bar(foo):"), _defines("tot", "fn total()", "a.rs")
    (True, False, True)
    """
    from codegrep.retrievers.heuristic import defined_names

    try:
        return any(re.search(pattern, name) for name in defined_names(line, path))
    except re.error:
        return False


_RANKED = "Files ranked by this turn's searches: "
_FILE_ROW = re.compile(r"^(\S+) \(\d+ hits?")
_HIT_LINE = re.compile(r"^([\w./-]+\.\w+)(?::\d+[:-]|$)")
# Inside a grep or glob response: a row or a listed path whose name has characters beyond [\w./-] (a space,
# Next.js' `[id].tsx` or `(group)/`, `@scope/`); names of only those characters match the two rules above alike.
_SPACED_ROW = re.compile(r"^(\S.*?) \(\d+ hits?(?:, def)?\)$")
# a glob response's path, suffix-less ones too (``Makefile``, ``bin/run``), not its notes (``[... truncated``)
_ANY_PATH = re.compile(r"^(?!ERROR: |No files matched\.$|\[)(\S(?:.*\S)?)$")
_ENDED_HIT = re.compile(r"^([\w./-]+\.\w+):\d+[:-]")  # a hit row: the name ended (the line may be cut after it)
_ANY_HIT = re.compile(r"^([^\s\[:][^:]*):\d+:")  # inside a grep response: any name before :N:, suffix-less too
_CLIP_NOTE = re.compile(r"^\[\.\.\. \d+ more characters truncated\]$")  # _clip's note: the line above was cut


def shape_result(call: ToolCall, result: ToolResult, view: str = "lines") -> ToolResult:
    """A result as the model sees it. ``lines`` leaves it; ``files`` turns a grep's ``path:line:text`` lines into
    one row per file (``path (N hits, def)``): files with a hit on a line that defines a name the pattern matches
    first (:func:`_defines`: a ``def``/``class`` line; where no source file is Python, :func:`_foreign`, also the
    definitions of their languages), then source before tests, then most hits, then path. Counts are of the lines
    the tool returned (its own cap applies).

    >>> r = ToolResult("grep", True, "tests/test_a.py:1:f()\\na.py:3:x = f()\\nb.py:9:def f():\\nb.py:12:f()")
    >>> print(shape_result(ToolCall("grep", {"pattern": "f"}), r, "files").output)
    b.py (2 hits, def)
    a.py (1 hit)
    tests/test_a.py (1 hit)
    """
    if view not in GREP_VIEWS:
        raise ValueError(f"grep_view must be one of {GREP_VIEWS}, got {view!r}")
    if view == "lines" or call.name != "grep" or not result.ok or result.output.startswith("No "):
        return result
    from codegrep.retrievers.heuristic import parse_hits
    from codegrep.data.paths import is_test_path
    from codegrep.retrievers.query import FilePolicy

    hits, total = parse_hits(result)
    if not hits:
        return result
    shown = sum(map(len, hits.values()))
    policy = FilePolicy()
    pattern, foreign = call.arguments.get("pattern", ""), _foreign(hits, policy)
    has_def = {p: any(_defines(pattern, s, p if foreign and policy.keeps(p) else "") for s in lines)
               for p, lines in hits.items()}
    order = sorted(hits, key=lambda p: (not policy.keeps(p), not has_def[p], is_test_path(p), -len(hits[p]), p))
    rows = [f"{p} ({len(hits[p])} hit{'s' * (len(hits[p]) > 1)}{', def' * has_def[p]})" for p in order]
    if total > shown:
        rows.append(f"[hits counted in the first {shown} of {total} lines]")
    rows += [line for line in result.output.splitlines() if line.startswith(NOTE_PREFIXES)]  # files not searched/shown
    return ToolResult(result.name, True, "\n".join(rows), truncated=result.truncated)


def _foreign(hits: dict[str, list[str]], policy: Any) -> bool:
    """Whether none of a grep's source files (those ``policy`` keeps) is Python: then the files view marks the
    definitions of their languages too. Where one is, it marks Python's alone, so a Python repository's vendored
    JavaScript or C does not head the view (``var input`` in a jQuery copy: docs/results/grep_view_languages_27.json;
    a grep whose capped output is mostly such a copy still finds a Python file).

    >>> from codegrep.retrievers.query import FilePolicy
    >>> policy = FilePolicy()
    >>> _foreign({"a.go": [], "b.ts": [], "README.md": []}, policy), _foreign({"a.py": [], "x.js": [], "y.js": []}, policy)
    (True, False)
    """
    from codegrep.retrievers.query import PYTHON_SUFFIXES

    return not any(p.endswith(PYTHON_SUFFIXES) for p in hits if policy.keeps(p))


def call_term(call: ToolCall) -> str:
    r"""The literal a grep/glob call looks for (``\b`` anchors and escapes removed; a glob's file name).

    >>> call_term(ToolCall("grep", {"pattern": r"\bparse_args\b"})), call_term(ToolCall("glob", {"pattern": "**/cli.py"}))
    ('parse_args', 'cli.py')
    """
    raw = call.arguments.get("pattern", "")
    if call.name == "glob":
        return raw.rsplit("/", 1)[-1]
    return re.sub(r"\\(.)", r"\1", raw.replace(r"\b", ""))


def relevance_of(env: Any) -> Callable[[str], Mapping[str, float]] | None:
    """``apply_turn``'s ``relevance`` for an episode's environment (``environment_relevance`` of its snapshot); None
    for an environment that cannot list its files (a test's fake), which ``rank_relevance`` then refuses."""
    if not hasattr(env, "file_contents"):
        return None
    from codegrep.retrievers.lexical import environment_relevance

    return lambda text: environment_relevance(env, text)


def ranked_files(calls: Sequence[ToolCall], results: Sequence[ToolResult], top: int, issue: str = "",
                 relevance: Mapping[str, float] | None = None, weight: float = 0.0) -> list[str]:
    """The top files of one ranking over a turn's grep/glob results: the grep heuristic's turn-1 score
    (``HeuristicRetriever.score``; a case-insensitive grep counts as a plain word, a glob as a path), with the files
    ``issue`` points at boosted as the heuristic boosts them (``HeuristicRetriever.boost_mentions``; no text, none),
    then weighed by each file's ``relevance`` to the issue to the power ``weight`` (``weigh_relevance``; 0, none).

    >>> calls = [ToolCall("grep", {"pattern": "f"}), ToolCall("grep", {"pattern": "g"})]
    >>> res = [ToolResult("grep", True, "a.py:1:f()\\nb.py:2:def f():"), ToolResult("grep", True, "b.py:5:g")]
    >>> ranked_files(calls, res, 5)
    ['b.py', 'a.py']
    >>> tie = [ToolResult("grep", True, "a.py:1:f()\\nb.py:2:f()"), ToolResult("grep", True, "No matches.")]
    >>> ranked_files(calls, tie, 5), ranked_files(calls, tie, 5, 'File "src/b.py", line 2, in main')
    (['a.py', 'b.py'], ['b.py', 'a.py'])
    >>> ranked_files(calls, res, 5, relevance={"a.py": 8.0, "b.py": 1.0}, weight=1.0)
    ['a.py', 'b.py']
    """
    from codegrep.retrievers.heuristic import HeuristicRetriever, weigh_relevance

    terms, kept = [], []
    for call, result in zip(calls, results):
        if call.name in ("grep", "glob"):
            term = call_term(call)
            kind = "path" if call.name == "glob" else "word" if call.arguments.get("ignore_case") else "ident"
            terms.append((term, kind))
            kept.append(result)
    heuristic = HeuristicRetriever()
    scores, why = heuristic.score(terms, kept)
    if issue:
        scores = heuristic.boost_mentions(issue, scores, why)
    if relevance and weight:
        scores = weigh_relevance(scores, relevance, weight)
    return sorted(scores, key=lambda p: (-scores[p], p))[:top]


def ranked_line(files: Sequence[str]) -> str:
    """The line that opens an observation with the turn's ranked files (``agent.rank_files``), joined by ``", "``;
    a name that holds ``", "`` or starts with ``"`` is written as a JSON string, so :func:`ranked_lines` reads back
    every name whole (other names as they are).

    >>> print(ranked_line(["b.py", "notes, draft.py", "a,b.py"]))
    Files ranked by this turn's searches: b.py, "notes, draft.py", a,b.py
    """
    return _RANKED + ", ".join(json.dumps(f, ensure_ascii=False) if ", " in f or f.startswith('"') else f
                               for f in files)


_RANKED_ITEM = re.compile(r'("(?:[^"\\]|\\.)*")(?=, |$)|((?:(?!, ).)*)')


def _ranked_names(text: str) -> list[str]:
    """The names of one ranked line after its prefix (:func:`ranked_line`'s inverse)."""
    names, pos = [], 0
    while True:
        m = _RANKED_ITEM.match(text, pos)
        try:
            names.append(json.loads(m.group(1)) if m.group(1) else m.group(2))
        except ValueError:  # not JSON after all: the text as written
            names.append(m.group(1))
        if m.end() >= len(text):
            return names
        pos = m.end() + 2


def ranked_lines(observation: str) -> list[list[str]]:
    """The ranked lines (``Files ranked by this turn's searches: ...``, :func:`ranked_line`) an observation shows,
    each as its files in rank order.

    >>> ranked_lines("Files ranked by this turn's searches: b.py, a.py\\n<tool_response>...</tool_response>")
    [['b.py', 'a.py']]
    >>> ranked_lines(ranked_line(["x,, y.py", "notes, draft.py", '"q".py', ""]))
    [['x,, y.py', 'notes, draft.py', '"q".py', '']]
    """
    return [_ranked_names(line[len(_RANKED):]) for line in observation.splitlines() if line.startswith(_RANKED)]


def listed_files(observation: str) -> list[str]:
    """Files an observation shows, in order of first appearance (``files`` rows, ``path:line:`` hits, glob lines).

    Inside a grep or glob response a name without a suffix counts (``Makefile``, ``bin/run``). A name on the line
    the observation's budget cut (the line before :func:`_clip`'s note) counts only where its row shows the name
    ended (``path:N:``, ``path (N hits``): ``sympy/core/basic.p`` cut from ``basic.py`` is no file.

    >>> listed_files("<tool_response>\\ngrep pattern=\\"f\\"\\nb.py (2 hits, def)\\na.py (1 hit)\\n</tool_response>")
    ['b.py', 'a.py']
    >>> listed_files("<tool_response>\\nglob pattern=\\"*\\"\\napp/(shop)/[id].tsx\\nmy notes.md\\nbin/run\\n</tool_response>")
    ['app/(shop)/[id].tsx', 'my notes.md', 'bin/run']
    >>> listed_files("<tool_response>\\ngrep pattern=\\"f\\"\\nMakefile:3:f\\na.py (1 hit)\\nb/c.p\\n"
    ...              "[... 9 more characters truncated]\\n</tool_response>")
    ['Makefile', 'a.py']
    """
    out: dict[str, None] = {}
    tool = None
    lines = observation.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(_RANKED):
            out.update(dict.fromkeys(ranked_lines(line)[0]))
            continue
        if line.startswith(("<tool_response>", "</tool_response>")):
            tool = None
            continue
        if tool is None and line.startswith(("grep ", "glob ")):  # the call's header line
            tool = line[:4]
            continue
        cut = i + 1 < len(lines) and _CLIP_NOTE.match(lines[i + 1]) is not None
        m = _FILE_ROW.match(line) or _ENDED_HIT.match(line) or \
            (tool == "grep" and (_SPACED_ROW.match(line) or _ANY_HIT.match(line)))
        if not m and not cut:
            m = _HIT_LINE.match(line) or (tool == "glob" and _ANY_PATH.match(line))
        if m:
            out.setdefault(m.group(1), None)
    return list(out)
