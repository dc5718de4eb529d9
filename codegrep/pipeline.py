"""``codegrep reproduce``: run notebooks 01-06 headless with papermill, cached, then build the report.

Parameters come from the profile: each notebook gets ``profile`` (the path of the resolved profile
written for this run), ``artifacts_dir``, ``figures_dir`` and its own ``notebooks.<name>`` mapping.
A notebook is skipped when its cache key (parameters + notebook bytes + library source + profile)
matches its last successful run, unless ``force``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from codegrep.config import (check_keys, check_value, cli_profile, project_root,
                             seed_everything, where)
from codegrep.files import json_text, write_atomic

NOTEBOOKS = ("01_mining", "02_environment", "03_training", "04_ablation",
             "05_precision_threshold", "06_downstream_eval")
STAGES = {"01_mining": "codegrep.mining.stage", "02_environment": "codegrep.env.stage",
          "03_training": "codegrep.rl.training_stage", "04_ablation": "codegrep.rl.ablation_stage",
          "05_precision_threshold": "codegrep.downstream.threshold_stage",
          "06_downstream_eval": "codegrep.downstream.eval_stage"}
"""The stage module each notebook calls (``codegrep.Stage``: ``run``, ``figures``, ``headline``)."""


class NotebookFailed(RuntimeError):
    """A notebook raised; the message names the notebook, the cell and the executed copy."""


@dataclass
class ReproduceResult:
    """What one ``reproduce`` call did."""

    ran: list[str] = field(default_factory=list)
    """Notebooks executed in this call."""
    cached: list[str] = field(default_factory=list)
    """Notebooks skipped because their cache key matched."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time per executed notebook."""


def select_notebooks(only: str | Sequence[str] | None) -> list[str]:
    """``"01,03"`` -> the matching notebook names, in pipeline order.

    >>> select_notebooks("03,1")
    ['01_mining', '03_training']
    >>> select_notebooks(None)[-1]
    '06_downstream_eval'
    """
    if only is None:
        return list(NOTEBOOKS)
    wanted = [w.strip() for w in (only.split(",") if isinstance(only, str) else only) if w.strip()]
    if not wanted:  # '--only ""' ran all six, '--only ,' none (and wrote a run record of nothing)
        raise ValueError(f"--only {only!r}: names no notebook; give numbers or names, e.g. 01,03")
    picked = []
    for w in wanted:
        match = [n for n in NOTEBOOKS if n == w or n.split("_")[0] == w.zfill(2)]
        if not match:
            raise ValueError(f"--only: unknown notebook {w!r}; expected numbers or names from {NOTEBOOKS}")
        picked += match
    return [n for n in NOTEBOOKS if n in picked]


def read_cache(cache_file: Path) -> dict[str, dict[str, Any]]:
    """``<out>/artifacts/notebooks/cache.json`` (notebook -> key, seconds, cpu of its last successful run); {} when
    absent. A damaged one (edited, truncated) is one line naming it and the fix, not a traceback."""
    from codegrep.errors import UserError
    from codegrep.files import read_json

    if not cache_file.is_file():
        return {}
    fix = f"delete {cache_file} to rerun every notebook"
    try:
        cache = read_json(cache_file, "notebook cache")
    except UserError as exc:
        raise UserError(f"{exc}; {fix}") from None
    if not isinstance(cache, dict) or not all(isinstance(v, dict) for v in cache.values()):
        raise UserError(f"{cache_file}: not a notebook cache (a JSON object of one object per notebook); {fix}")
    return cache


def notebook_parameters(nb_path: Path) -> list[str]:
    """Names assigned in a notebook's cell tagged ``parameters`` (what ``notebooks.<name>`` may set)."""
    import ast

    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    names: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                    if isinstance(node, ast.AnnAssign) else []
                names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def stage_parameters(name: str) -> dict[str, tuple[Any, str | None]]:
    """``(type, range)`` of each annotated parameter of the notebook's ``stage.run``, read from the stage module's
    source (not imported: checking a value must not load torch); ranges from its ``PARAM_RANGES`` mapping.

    >>> stage_parameters("03_training")["ceiling_tasks"]
    (<class 'int'>, '>= 1')
    """
    import ast
    import importlib.util

    spec = importlib.util.find_spec(STAGES[name])
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    ranges: dict[str, str] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "PARAM_RANGES" and node.value is not None:
            ranges = ast.literal_eval(node.value)
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    names = {"int": int, "float": float, "bool": bool, "str": str, "None": None, "Path": Path, "Any": Any,
             "list": list, "dict": dict}
    out: dict[str, tuple[Any, str | None]] = {}
    for arg in run.args.args + run.args.kwonlyargs:
        if arg.annotation is not None:
            try:
                tp = eval(ast.unparse(arg.annotation), {"__builtins__": {}}, names)  # noqa: S307 (our own source)
            except Exception:  # an annotation naming another class: its owner checks the value
                continue
            out[arg.arg] = (tp, ranges.get(arg.arg))
    return out


def notebook_params(cfg: dict[str, Any], name: str, nb_path: Path, overridden: Iterable[str] = ()) -> dict[str, Any]:
    """``notebooks.<name>`` of the profile, each key checked against the notebook's parameters cell, and each value
    its stage takes against ``stage.run``'s annotation and range (a value given by ``--set`` is named so)."""
    params = dict((cfg.get("notebooks") or {}).get(name) or {})
    check_keys(params, notebook_parameters(nb_path), where(cfg, f"notebooks.{name}"))
    if params and name in STAGES:
        rules, given = stage_parameters(name), set(overridden)
        for key, value in params.items():
            if key in rules:
                dotted = f"notebooks.{name}.{key}"
                check_value(value, *rules[key], f"--set {dotted}" if dotted in given else where(cfg, dotted))
    return params


def code_hash(root: Path | None = None) -> str:
    """Hash of every library source file: a code change invalidates the cache."""
    root = root or Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".yaml", ".json", ".txt", ".md") and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(notebook: Path, params: dict[str, Any], profile_text: str, library: str) -> str:
    h = hashlib.sha256()
    for part in (notebook.read_bytes(), json.dumps(params, sort_keys=True).encode(),
                 profile_text.encode(), library.encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


KERNEL_PROGRESS_INTERVAL_S = 30
"""Seconds between progress-bar refreshes inside headless notebook kernels (``TQDM_MININTERVAL``), for a bar
that is still drawn (one whose code passes ``disable`` explicitly)."""


KERNEL_QUIET_BARS = ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS", "TQDM_DISABLE")
"""Progress bars hidden in headless kernels: an executed notebook is read after the fact, where a bar is noise
(issue 30); ``TQDM_DISABLE`` sets tqdm's default, so a bar whose code passes ``disable`` explicitly must be turned
off by its caller (``progress=False``). ``reproduce`` itself still shows one bar per notebook."""


def _ipc_kernel_manager(socket_dir: str, kernel_groups: list[int] | None = None) -> type:
    """A kernel manager whose kernel listens on IPC sockets in ``socket_dir`` (a private temporary folder).

    The default TCP transport is unencrypted on localhost and ipykernel warns about it on every start;
    IPC sockets are files only this user can reach, so the warning (and the open ports) go away. The
    kernel's progress bars refresh at most every ``KERNEL_PROGRESS_INTERVAL_S`` (the executed copy keeps
    a start, an end and a line per interval of each bar, not hundreds of redraws) and third-party bars
    (``KERNEL_QUIET_BARS``) are off; an interactive JupyterLab kernel is not affected. Each kernel's process group
    is appended to ``kernel_groups`` (for :func:`_stop_kernels`).
    """
    import os

    from jupyter_client.manager import AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.transport = "ipc"
            self.ip = str(Path(socket_dir) / "kernel")

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            if isinstance(kw.get("env"), dict):
                kw["env"].setdefault("TQDM_MININTERVAL", str(KERNEL_PROGRESS_INTERVAL_S))
                for name in KERNEL_QUIET_BARS:
                    kw["env"].setdefault(name, "1")
            await super()._async_launch_kernel(kernel_cmd, **kw)
            pgid = getattr(self.provisioner, "pgid", None)  # the kernel leads its own session (jupyter_client)
            if kernel_groups is not None and pgid and pgid != os.getpgrp():  # never this process's own group
                kernel_groups.append(pgid)

    return IpcKernelManager


KERNEL_STOP_GRACE_S = 5.0
"""Seconds a Ctrl-C'd kernel's process group has after SIGTERM before SIGKILL (:func:`_stop_kernels`)."""


def _stop_kernels(groups: list[int], done: Any, wait_s: float = 30.0) -> None:
    """End the kernels' process groups (the kernel and what it started) without a word: SIGTERM, SIGKILL after
    ``KERNEL_STOP_GRACE_S``; until the notebook's thread says ``done`` (a ``threading.Event``; ``wait_s`` at most).
    A kernel that starts meanwhile is ended too. SIGINT would be the polite signal, but every Python process in the
    group then prints its own KeyboardInterrupt traceback (what jupyter_client's shutdown sends first)."""
    import logging
    import os
    import signal

    log = logging.getLogger("papermill")  # nbclient's, through papermill: "Kernel died while waiting ..." is ours
    was_disabled, log.disabled = log.disabled, True
    try:
        start = time.monotonic()
        while not done.is_set() and time.monotonic() - start < wait_s:
            late = time.monotonic() - start > KERNEL_STOP_GRACE_S
            for pgid in groups:
                try:
                    os.killpg(pgid, signal.SIGKILL if late else signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
            done.wait(0.2)
    finally:
        log.disabled = was_disabled


def _run_one(nb_path: Path, executed: Path, params: dict[str, Any]) -> None:
    """Execute one notebook with papermill, in a worker thread: Ctrl-C is this (main) thread's ``KeyboardInterrupt``,
    raised after the kernel's process group was ended silently (:func:`_stop_kernels`): ``interrupted``, exit 130
    (SIGTERM: exit 143, and the kernel's group is ended too, where it was left to notice its parent was gone).
    Run here, Ctrl-C stopped papermill mid-cell: nbclient's clean-up shut the kernel down, which interrupts its
    process group with SIGINT first (each Python process the cell started printed its KeyboardInterrupt traceback),
    and the abandoned cell's error was printed at exit after ``interrupted`` (asyncio's "Task exception was never
    retrieved": ~80 lines, the kernel's traceback)."""
    import signal
    import tempfile
    import threading

    import papermill as pm
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    groups: list[int] = []
    failure: list[BaseException] = []
    done = threading.Event()  # not Thread.join: a join that Ctrl-C interrupts marks a running thread ended (3.11)

    def execute() -> None:
        try:
            with tempfile.TemporaryDirectory(prefix="codegrep-kernel-") as sockets:
                pm.execute_notebook(str(nb_path), str(executed), parameters=params, kernel_name="python3",
                                    progress_bar=True, cwd=str(nb_path.parent),
                                    kernel_manager_class=_ipc_kernel_manager(sockets, groups))
        except BaseException as exc:  # re-raised in the main thread
            failure.append(exc)
        finally:
            done.set()

    def terminated(signum: int, frame: Any) -> None:  # SIGTERM (a job's time limit): end the kernel's group too
        raise SystemExit(128 + signum)

    main = threading.current_thread() is threading.main_thread()  # signal handlers: the main thread's only
    previous = signal.signal(signal.SIGTERM, terminated) if main else None
    notebook = threading.Thread(target=execute, name=f"notebook-{nb_path.stem}", daemon=True)
    try:
        notebook.start()
        done.wait()
    except (KeyboardInterrupt, SystemExit):
        _stop_kernels(groups, done)
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    try:
        if failure:
            raise failure[0]
    except PapermillExecutionError as exc:
        raise NotebookFailed(f"notebook {nb_path.stem} failed in cell {exc.cell_index} "
                             f"(execution count {exc.exec_count}): {exc.ename}: {exc.evalue}\n"
                             f"executed copy with the traceback: {executed}") from None
    except DeadKernelError:  # no Python error: the kernel process was killed (on Linux most often for memory)
        raise NotebookFailed(f"notebook {nb_path.stem}: its kernel died without a Python error, killed by the "
                             "operating system (most often the out-of-memory killer: `dmesg` says; each notebook's "
                             "peak memory is `notebook_peak_rss_mb` in docs/results/*/run.json); notebooks that "
                             f"finished before it stay cached, so a rerun resumes here; executed copy: {executed}") \
            from None


def cpu_ticks() -> list[int] | None:
    """The machine's aggregate CPU time counters from ``/proc/stat`` (user nice system idle iowait irq softirq
    steal, in clock ticks), or None where there is no such file (not Linux)."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    return [int(x) for x in fields[1:9]] if fields and fields[0] == "cpu" and len(fields) >= 9 else None


def cpu_shares(before: list[int] | None, after: list[int] | None) -> dict[str, float] | None:
    """How the machine's CPU time went between two :func:`cpu_ticks` readings: ``busy`` (user+nice+system+irq),
    ``idle`` (idle+iowait) and ``steal`` (taken by the hypervisor for other guests: wall times measured under steal
    are not comparable with an idle machine's). None when either reading is missing.

    >>> cpu_shares([0] * 8, [50, 0, 10, 25, 5, 0, 0, 10])
    {'busy': 0.6, 'idle': 0.3, 'steal': 0.1}
    """
    if before is None or after is None:
        return None
    d = [b - a for a, b in zip(before, after)]
    total = sum(d)
    if total <= 0:
        return None
    busy, idle = d[0] + d[1] + d[2] + d[5] + d[6], d[3] + d[4]
    return {"busy": round(busy / total, 3), "idle": round(idle / total, 3), "steal": round(d[7] / total, 3)}


def reproduce(profile: str = "smoke", only: str | Sequence[str] | None = None, out: Path | None = None,
              force: bool = False, seed: int | None = None, overrides: Sequence[str] = (),
              notebooks_dir: Path | None = None) -> ReproduceResult:
    """Execute the selected notebooks in order, then write ``run.json`` and the report."""
    from codegrep.report import build_report, write_run_record

    root = project_root()
    notebooks_dir = Path(notebooks_dir or root / "notebooks")
    out = Path(out or root).resolve()
    from codegrep.files import output_dir

    for d in (out, out / "artifacts" / "notebooks", out / "figures"):  # a file in the way fails before any work
        output_dir(d, "--out")
    artifacts, figures = out / "artifacts", out / "figures"
    # profile and --set keys are checked before anything is written (an unknown key names itself)
    given = list(overrides) + ([f"seed={seed}"] if seed is not None else [])
    cfg = cli_profile(profile, given)  # a wrong --set value is named as the --set it came from
    overridden = cfg.pop("_overrides")  # the resolved profile.yaml holds the values, not where they came from
    check_keys(cfg.get("notebooks"), NOTEBOOKS, where(cfg, "notebooks"))
    selected = select_notebooks(only)
    if {"03_training", "04_ablation"} & set(selected):  # their train YAML (train.config) exists, before any notebook
        from codegrep.rl.training_run import profile_train_yaml

        profile_train_yaml(cfg)
    for name in selected:  # every notebook's parameters are checked before the first one runs
        if (notebooks_dir / f"{name}.ipynb").is_file():
            notebook_params(cfg, name, notebooks_dir / f"{name}.ipynb", overridden)
    (artifacts / "notebooks").mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    seed_everything(int(cfg["seed"]))
    resolved = artifacts / "profile.yaml"  # every notebook reads this one resolved profile
    profile_text = yaml.safe_dump({k: v for k, v in cfg.items() if k != "_source"}, sort_keys=True)
    write_atomic(resolved, profile_text)
    cache_file = artifacts / "notebooks" / "cache.json"
    cache = read_cache(cache_file)
    library = code_hash()
    result = ReproduceResult()
    if (line := expectation(cfg)) is not None:
        print(line, file=sys.stderr)
    for name in selected:
        nb_path = notebooks_dir / f"{name}.ipynb"
        if not nb_path.is_file():
            raise FileNotFoundError(f"notebook not found: {nb_path}")
        params = {"profile": str(resolved), "artifacts_dir": str(artifacts), "figures_dir": str(figures),
                  **notebook_params(cfg, name, nb_path)}
        key = cache_key(nb_path, params, profile_text, library)
        executed = artifacts / "notebooks" / f"{name}.ipynb"
        if not force and cache.get(name, {}).get("key") == key and executed.is_file():
            print(f"[reproduce] {name}: unchanged since its last successful run, skipped (use --force)",
                  file=sys.stderr)
            result.cached.append(name)
            continue
        print(f"[reproduce] {name}: running ({cfg['profile']} profile)", file=sys.stderr)
        start, ticks = time.perf_counter(), cpu_ticks()
        cache.pop(name, None)
        write_atomic(cache_file, json.dumps(cache, indent=2))
        _run_one(nb_path, executed, params)
        result.seconds[name] = round(time.perf_counter() - start, 2)
        result.ran.append(name)
        cache[name] = {"key": key, "seconds": result.seconds[name], "finished": time.time(),
                       "cpu": cpu_shares(ticks, cpu_ticks())}
        write_atomic(cache_file, json.dumps(cache, indent=2))
    record_precision(write_run_record(artifacts, cfg, {n: cache.get(n, {}).get("seconds") for n in NOTEBOOKS},
                                      {n: cache.get(n, {}).get("cpu") for n in NOTEBOOKS}), cfg)
    build_report(artifacts)
    return result


def precision_setting(cfg: dict[str, Any]) -> str:
    """The ``cpu_precision`` setting of the profile's training (its train YAML's, default ``auto``)."""
    from codegrep.rl.training_run import train_config_path

    train = (cfg.get("train") or {}).get("config")
    if train:
        try:
            path = Path(train) if Path(train).is_absolute() else project_root() / train
            return str((yaml.safe_load(train_config_path(path).read_text()) or {}).get("cpu_precision", "auto"))
        except (OSError, ValueError, yaml.YAMLError, AttributeError):  # the notebooks report a broken train YAML
            pass
    return "auto"


def record_precision(run_json: Path, cfg: dict[str, Any]) -> None:
    """Adds ``cpu_precision`` to ``run.json``: the CPU's features and the precision the profile's training
    chose on it (:func:`precision_setting`; see codegrep/agent/precision.py)."""
    from codegrep.agent.precision import precision_record

    record = json.loads(run_json.read_text())
    record["cpu_precision"] = precision_record(precision_setting(cfg))
    write_atomic(run_json, json.dumps(record, indent=2, sort_keys=True, default=str))


def expectation(cfg: dict[str, Any], root: Path | None = None) -> str | None:
    """The line a run starts with: how long the committed run of this profile took, on which machine, and this
    machine in the same words (threads, CPU, training precision), since the time follows the CPU (on 2 cores an
    fp32-only CPU took about 1.7x a native-bf16 one: docs/training.md); None without a committed run."""
    from codegrep.agent.precision import precision_record
    from codegrep.report import run_machine

    committed = measured_times(root).get(str(cfg.get("profile")))
    if not committed:
        return None
    here = run_machine({"cpu_precision": precision_record(precision_setting(cfg))})
    same = "" if here == committed["machine"] else " (another machine: expect another time)"
    return (f"[reproduce] {cfg.get('profile')}: the committed run took {_minutes(committed['total_s'])} on "
            f"{committed['machine']} (commit {str(committed['git_commit'])[:7]}); this machine: {here}{same}")


def _cmd_reproduce(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    res = reproduce(args.profile, args.only, args.out, args.force, args.seed, args.set or ())
    print(json_text({"ran": res.ran, "cached": res.cached, "seconds": res.seconds,
                      "total_seconds": round(time.perf_counter() - start, 1)}))
    return 0


NOTEBOOK_GUIDE = {
    "01_mining": "CATM: file-access supervision mined from real coding-agent runs",
    "02_environment": "the Docker-free environment (objects mode, pooled worktrees): cost per rollout, latency, load",
    "03_training": "SFT warm start + GRPO of the retrieval agent; held-out retrieval vs BM25 on real Verified",
    "04_ablation": "efficiency signal at the reward vs the advantage layer: paired seeds, probe KL",
    "05_precision_threshold": "retrievers on real Verified; the precision threshold as a bracket (model, fit)",
    "06_downstream_eval": "the frozen agent with and without retrieval (model + fit; hint experiment if run)",
}
"""One line per notebook, shown by ``codegrep reproduce --help``."""

PROFILE_GUIDE = {
    "ci": "plumbing check: 5 real instances, 2 training steps",
    "smoke": "default: the 86 real Verified instances, SmolLM2-135M trained on CPU (target: 35 min cold)",
    "paper": "the paper's settings: 14B model on GPUs, 500 Verified instances (days; not run here)",
}
"""One line per profile, shown by ``codegrep reproduce --help`` with its measured time (:func:`measured_times`)."""

COMMITTED_RUNS = Path("docs") / "results"
"""Committed runs, ``<profile>/run.json`` + ``headlines/`` (``codegrep report --save-results``): the README's headline
table and the measured times ``reproduce --help`` shows are both read from them."""


def measured_times(root: Path | None = None) -> dict[str, Any]:
    """``{profile: {"seconds": {notebook: s}, "total_s", "measured_at", "git_commit", "machine"}}`` from the
    committed runs' ``run.json`` (profiles without one are left out)."""
    from codegrep.report import run_machine

    out: dict[str, Any] = {}
    for path in sorted((Path(root or project_root()) / COMMITTED_RUNS).glob("*/run.json")):
        try:
            run = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        seconds = run.get("notebook_seconds") if isinstance(run, dict) else None
        if not isinstance(seconds, dict):
            continue
        machine = run_machine(run)
        total = sum(v for v in seconds.values() if isinstance(v, (int, float)))
        shares = run.get("notebook_cpu") if isinstance(run.get("notebook_cpu"), dict) else {}
        stolen = sum(seconds.get(n, 0) * (c or {}).get("steal", 0) for n, c in shares.items()
                     if isinstance(seconds.get(n), (int, float)) and isinstance(c, dict))
        if stolen >= 0.05 * total > 0:  # a busy host: say so beside the time
            machine += f", {stolen / total:.0%} of CPU time stolen by the host"
        out[path.parent.name] = {"seconds": seconds, "total_s": total,
                                 "measured_at": str(run.get("finished_at", "?"))[:10],
                                 "git_commit": run.get("git_commit", "?"), "machine": machine,
                                 "cold": run.get("cold")}
    return out


def _minutes(seconds: Any) -> str:
    """``'44 min'`` / ``'35 s'`` / ``'?'``.

    >>> _minutes(2640), _minutes(35.2), _minutes(None)
    ('44 min', '35 s', '?')
    """
    if not isinstance(seconds, (int, float)):
        return "?"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def reproduce_description(times: dict[str, Any] | None = None) -> str:
    """The text of ``codegrep reproduce --help``: notebooks with their measured time per profile, then profiles."""
    times = measured_times() if times is None else times
    measured = [p for p in ("ci", "smoke") if p in times]
    width = 9 * len(measured)
    lines = [f"  {'':<24}" + "".join(f"{p:>7}  " for p in measured)] if measured else []
    for name, what in NOTEBOOK_GUIDE.items():
        cols = "".join(f"{_minutes(times[p].get('seconds', {}).get(name)):>7}  " for p in measured)
        lines.append(f"  {name:<24}{cols:<{width}}{what}")
    profiles = []
    for name, what in PROFILE_GUIDE.items():
        t = times.get(name)
        how = {True: "measured cold", False: "measured with a warm cache"}.get(t.get("cold") if t else None, "measured")
        note = (f" ({how}: {_minutes(t.get('total_s'))} on {t.get('machine', '?')}, {t.get('measured_at', '?')}, "
                f"commit {str(t.get('git_commit', '?'))[:7]})" if t else " (not measured)")
        profiles.append(f"  {name:<8}{what}{note}")
    return ("Run the six notebooks in order with papermill (headless; executed copies in <out>/artifacts/notebooks), "
            "skip those unchanged since their last successful run, then write run.json and report.md/report.html.\n\n"
            "notebooks (measured wall time per profile, 2 CPU cores; README, 'Hardware'):\n" + "\n".join(lines)
            + "\n\nprofiles:\n" + "\n".join(profiles))


def register(sub: argparse._SubParsersAction) -> None:
    from codegrep.argtypes import non_negative_int

    p = sub.add_parser("reproduce", help="run notebooks 01-06 with papermill and build the report",
                       description=reproduce_description(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default="smoke", help="ci | smoke | paper, or a profile YAML path (default: smoke)")
    p.add_argument("--only", default=None, help="comma-separated notebook numbers or names, e.g. 01,03")
    p.add_argument("--out", type=Path, default=None, help="directory for artifacts/ and figures/ (default: project root)")
    p.add_argument("--force", action="store_true", help="rerun notebooks even when their cache key matches")
    p.add_argument("--seed", type=non_negative_int, default=None, help="one seed for every random source (overrides the profile)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="profile override, e.g. train.max_steps=3; KEY= (empty) is null, taken only where the key "
                        "takes null (tasks.limit= : every task)")
    p.set_defaults(func=_cmd_reproduce)
