"""The notebook pipeline: selection, cache, failure messages, and the committed notebooks' shape."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest

from codegrep.pipeline import NOTEBOOKS, NotebookFailed, reproduce, select_notebooks

ROOT = Path(__file__).resolve().parent.parent
COMMON_PARAMS = ("profile", "artifacts_dir", "figures_dir")


def _notebook(tmp: Path, body: str) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('profile = "ci"\nartifacts_dir = "a"\nfigures_dir = "f"\n')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp / "nbs" / "01_mining.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


WRITE_HEADLINE = ("from codegrep.artifacts import Outputs\n"
                  "Outputs(artifacts_dir, figures_dir).headline('01_mining', {'n_records': 3})\n")


def test_select_notebooks_rejects_unknown():
    assert select_notebooks("2,04") == ["02_environment", "04_ablation"]
    with pytest.raises(ValueError, match="unknown notebook '9'"):
        select_notebooks("9")


def test_reproduce_caches_and_force_reruns(tmp_path, monkeypatch):
    # Pin the library hash: other processes may be editing the source tree while this runs.
    monkeypatch.setattr("codegrep.pipeline.code_hash", lambda root=None: "pinned")
    _notebook(tmp_path, WRITE_HEADLINE)
    kw = dict(profile="ci", only="01", out=tmp_path / "run", notebooks_dir=tmp_path / "nbs")
    first = reproduce(**kw)
    assert first.ran == ["01_mining"] and not first.cached
    head = json.loads((tmp_path / "run/artifacts/headlines/01_mining.json").read_text())
    assert head["numbers"] == {"n_records": 3}
    assert reproduce(**kw).cached == ["01_mining"]
    assert reproduce(**kw, force=True).ran == ["01_mining"]
    assert reproduce(**kw, seed=7).ran == ["01_mining"], "a new seed is a new cache key"
    monkeypatch.setattr("codegrep.pipeline.code_hash", lambda root=None: "edited")
    assert reproduce(**kw, seed=7).ran == ["01_mining"], "a library change is a new cache key"
    run = json.loads((tmp_path / "run/artifacts/run.json").read_text())
    assert run["seed"] == 7 and run["versions"]["torch"]
    assert run["cpu_precision"]["setting"] == "auto"  # configs/train/ci.yaml; the CPU's features and the choice
    assert run["cpu_precision"]["precision"] in ("fp32", "bf16") and "flags" in run["cpu_precision"]["cpu"]
    assert (tmp_path / "run/artifacts/report.md").read_text().startswith("# CodeGrep reproduction report")


def test_headless_kernel_is_quiet_and_draws_no_progress_bars(tmp_path, capfd):
    """Kernels listen on IPC sockets (no 'running over TCP without encryption' warning on every start), and
    a progress bar in a headless notebook is not drawn (issue 30: an executed notebook is read afterwards)."""
    from codegrep.pipeline import _run_one

    body = ("import codegrep, os, time\nfrom tqdm.auto import tqdm\nprint(os.environ['TQDM_MININTERVAL'])\n"
            "for _ in tqdm(range(40), desc='items'):\n    time.sleep(0.01)\n")
    nb_path = _notebook(tmp_path, body)
    _run_one(nb_path, tmp_path / "out.ipynb", {})
    assert "without encryption" not in capfd.readouterr().err
    cell = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[-1]
    stdout = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
    bars = [o for o in cell.outputs if o.get("name") == "stderr" and "items" in o.get("text", "")]
    assert stdout.strip() == "30" and not bars, [o.get("text") for o in bars]
    assert not any("IProgress" in o.get("text", "") for o in cell.outputs), "tqdm's IProgress warning shown"


def test_failing_notebook_names_notebook_and_cell(tmp_path):
    _notebook(tmp_path, "raise ValueError('boom in cell')")
    with pytest.raises(NotebookFailed, match=r"01_mining failed in cell \d+.*ValueError: boom in cell"):
        reproduce(profile="ci", only="01", out=tmp_path / "run", notebooks_dir=tmp_path / "nbs")
    cache = json.loads((tmp_path / "run/artifacts/notebooks/cache.json").read_text())
    assert "01_mining" not in cache, "a failed run must not be cached"


def test_a_killed_kernel_is_one_clear_line_and_is_not_cached(tmp_path):
    """A kernel the operating system kills (the out-of-memory killer: a cold run's notebook 04 beside another job)
    raises no Python error: ``reproduce`` names the notebook and the likely cause, the CLI's error boundary prints it
    as one line without a traceback (``user_message``, exit 2), and the notebook is not cached."""
    from codegrep.errors import user_message

    _notebook(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(NotebookFailed, match=r"01_mining: its kernel died without a Python error.*out-of-memory") as got:
        reproduce(profile="ci", only="01", out=tmp_path / "run", notebooks_dir=tmp_path / "nbs")
    line = user_message(got.value)
    assert line and "\n" not in line and "01_mining" in line and "rerun resumes" in line
    cache = tmp_path / "run/artifacts/notebooks/cache.json"
    assert not cache.exists() or "01_mining" not in json.loads(cache.read_text())


CTRL_C_DRIVER = ("import functools, sys; from pathlib import Path; from codegrep import cli, pipeline; "
                 "pipeline.reproduce = functools.partial(pipeline.reproduce, notebooks_dir=Path(sys.argv[1])); "
                 "sys.exit(cli.main(['reproduce', '--profile', 'ci', '--only', '01', '--out', sys.argv[2]]))")
"""``codegrep reproduce --profile ci --only 01`` on a test notebook (the command line, its error boundary included)."""


@pytest.mark.parametrize("signum,delay", [("SIGINT", 0.0), ("SIGINT", 0.5), ("SIGTERM", 0.0)])
def test_ctrl_c_during_a_notebook_is_interrupted_exit_130_and_the_kernels_group_ends_silently(tmp_path, signum,
                                                                                             delay):
    """Ctrl-C (SIGINT to the terminal's foreground process group: ``reproduce``, not the kernel, which leads its own
    session) while a cell runs, as a mining cell does, a Python child process. The kernel's shutdown interrupted its
    group with SIGINT (the child printed its KeyboardInterrupt traceback) and the abandoned cell's error came after
    ``interrupted`` (asyncio's "Task exception was never retrieved", the kernel's traceback). Now: ``interrupted``,
    exit 130, nothing else, the child ended, not cached; SIGTERM: exit 143, silently, the child ended too."""
    import os
    import signal
    import subprocess
    import sys
    import time

    mark = tmp_path / "child.pid"
    _notebook(tmp_path, "import pathlib, subprocess, sys, time\n"
                        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
                        f"pathlib.Path({str(mark)!r}).write_text(str(child.pid))\ntime.sleep(120)\n")
    # SIGINT as a terminal's foreground job has it: a background job (CI started with '&', nohup) ignores it, and
    # Python then leaves it ignored, so the Ctrl-C would never arrive
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_DRIVER, str(tmp_path / "nbs"), str(tmp_path / "run")],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not (mark.exists() and mark.read_text()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None and mark.exists(), proc.communicate()
        time.sleep(delay)
        os.killpg(proc.pid, getattr(signal, signum))  # SIGINT: what a terminal's Ctrl-C does
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    child = int(mark.read_text())
    for _ in range(50):  # the child is in the kernel's group: ended with it
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the kernel's child process outlived the interrupted run")
    assert proc.returncode == 128 + getattr(signal, signum), err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "Kernel died" not in err, err
    if signum == "SIGINT":
        assert err.strip().splitlines()[-1] == "interrupted", err
    assert not out.strip()
    cache = tmp_path / "run/artifacts/notebooks/cache.json"
    assert not cache.exists() or "01_mining" not in json.loads(cache.read_text())


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_has_no_outputs_and_one_parameters_cell(name):
    path = ROOT / "notebooks" / f"{name}.ipynb"
    if not path.is_file():
        pytest.fail(f"{path} is missing")
    nb = nbformat.read(path, as_version=4)
    # every cell has an id: nbformat warns on every execution of a notebook without them
    assert all(c.get("id") for c in nb.cells), f"{name}: cells without an id (nbformat.validator.normalize)"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), f"{name} committed with outputs"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{name}: expected exactly one cell tagged 'parameters'"
    names = [line.split("=")[0].strip() for line in tagged[0].source.splitlines() if "=" in line]
    assert tuple(names[:3]) == COMMON_PARAMS, f"{name}: parameters must start with {COMMON_PARAMS}"
    for cell in code:  # a save call as a cell's last statement would echo its PosixPath into the executed notebook
        body = ast.parse(cell.source).body
        last = body[-1] if body else None
        saves = (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                 and isinstance(last.value.func, ast.Attribute) and isinstance(last.value.func.value, ast.Name)
                 and last.value.func.value.id == "out")
        assert not saves or cell.source.rstrip().endswith(";"), \
            f"{name}: end the cell's last call 'out.{last.value.func.attr}(...)' with ';' (no raw path echo)"
    for cell in code:  # logic lives in codegrep/, notebooks only call it and plot
        assert not any(line.startswith(("def ", "class ")) for line in cell.source.splitlines()), name
        for line in cell.source.splitlines():
            if line.startswith(("import ", "from ")):
                mod = line.split()[1].split(".")[0]
                assert mod in {"codegrep", "matplotlib", "pandas", "numpy", "json", "pathlib", "IPython"}, \
                    f"{name} imports {mod}: notebooks import from the library (and plotting) only"


def test_environment_yml_mirrors_pyproject():
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = (ROOT / "environment.yml").read_text()
    missing = [d for d in deps if f"- {d}" not in env]
    assert not missing, f"environment.yml lacks {missing}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_applies_parameters_one_way(name):
    """Parameters reach the profile only through ``codegrep.config.notebook_profile`` (checked like ``--set``)."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert code.count("notebook_profile(profile") == 1, f"{name}: build cfg with notebook_profile(profile, ...)"
    assert "load_profile(" not in code, f"{name} calls load_profile directly"
    for line in (raw.strip() for raw in code.splitlines()):
        mutates = line.startswith(("cfg.setdefault(", "cfg.update(", "cfg.pop(")) or (
            line.startswith("cfg[") and "] =" in line)
        assert not mutates, f"{name} changes the profile outside notebook_profile: {line}"


def test_notebook_profile_applies_and_checks_parameters():
    from codegrep.config import ConfigError, notebook_profile

    cfg = notebook_profile("ci", {"mining.workers": 3, "mining.inputs": None})
    assert cfg["mining"]["workers"] == 3 and cfg["_notebook_params"] == {"mining.workers": 3}
    with pytest.raises(ConfigError, match=r"unknown key 'workerz' \(did you mean 'workers'\?\)"):
        notebook_profile("ci", {"mining.workerz": 3})


def test_unknown_override_fails_before_anything_is_written(tmp_path):
    from codegrep.config import ConfigError

    with pytest.raises(ConfigError, match=r"--set train.max_stepz: unknown key 'max_stepz' \(did you mean 'max_steps'"):
        reproduce(profile="ci", only="01", out=tmp_path / "run", overrides=["train.max_stepz=3"])
    assert not (tmp_path / "run").exists()


def test_notebook_parameters_are_checked_against_the_parameters_cell(tmp_path):
    from codegrep.config import ConfigError
    from codegrep.pipeline import notebook_parameters

    nb = _notebook(tmp_path, WRITE_HEADLINE)
    assert notebook_parameters(nb) == list(COMMON_PARAMS)
    with pytest.raises(ConfigError, match=r"notebooks.01_mining: unknown key 'artifact_dir' \(did you mean "
                                          r"'artifacts_dir'"):
        reproduce(profile="ci", only="01", out=tmp_path / "run", notebooks_dir=tmp_path / "nbs",
                  overrides=["notebooks.01_mining.artifact_dir=x"])
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_shipped_profiles_pass_notebook_parameters_that_exist(name):
    from codegrep.config import load_profile
    from codegrep.pipeline import notebook_params

    for profile in sorted(p.stem for p in (ROOT / "configs").glob("*.yaml")):
        notebook_params(load_profile(profile), name, ROOT / "notebooks" / f"{name}.ipynb")


def test_run_record_keeps_cpu_steal_and_the_measured_time_says_so(tmp_path):
    """A run timed on a host that steals CPU says so beside its time (reproduce --help); an idle one does not."""
    import json

    from codegrep.pipeline import cpu_shares, cpu_ticks, measured_times
    from codegrep.report import write_run_record

    ticks = cpu_ticks()
    assert ticks is None or len(ticks) == 8
    for name, steal in (("busy", 0.25), ("idle", 0.0)):
        runs = tmp_path / name / "docs" / "results" / "smoke"
        runs.mkdir(parents=True)
        cpu = {"03_training": cpu_shares([0] * 8, [60, 0, 15, 0, 0, 0, 0, int(100 * steal)])}
        write_run_record(runs, {"profile": "smoke"}, {"03_training": 600.0}, cpu)
        assert json.loads((runs / "run.json").read_text())["notebook_cpu"] == cpu
        machine = measured_times(tmp_path / name)["smoke"]["machine"]
        assert ("stolen by the host" in machine) == (steal > 0), machine


def test_each_notebooks_peak_memory_goes_from_its_headline_to_run_json(tmp_path):
    """A notebook's headline record carries its kernel's peak resident memory, and ``run.json`` collects it per
    notebook (a notebook without a headline, or with an unreadable one, is left out, not guessed)."""
    import json

    from codegrep.artifacts import Outputs
    from codegrep.report import write_run_record

    import psutil

    out = Outputs(tmp_path / "artifacts", tmp_path / "figures")
    ballast = b"x" * (64 << 20)  # 64 MB written, so resident now
    now_mb = psutil.Process().memory_info().rss / 2**20
    record = json.loads(out.headline("03_training", {"x": 1.0}).read_text())
    ram_mb = psutil.virtual_memory().total / 2**20
    assert now_mb * 0.98 <= record["peak_rss_mb"] <= ram_mb and record["numbers"] == {"x": 1.0}  # MB, not KB or GB
    del ballast
    (out.artifacts / "headlines" / "04_ablation.json").write_text("{broken")
    run = json.loads(write_run_record(out.artifacts, {"profile": "smoke"},
                                      {"03_training": 1.0, "04_ablation": 2.0, "05_precision_threshold": None})
                     .read_text())
    assert run["notebook_peak_rss_mb"] == {"03_training": record["peak_rss_mb"]}


def test_a_replicate_run_is_not_a_profiles_measured_time(tmp_path):
    """``docs/results/replicates/<name>/run.json`` (a run kept beside the committed one) is not read as a profile."""
    from codegrep.pipeline import measured_times
    from codegrep.report import write_run_record

    for where, seconds in (("smoke", 600.0), ("replicates/smoke_fp32", 1200.0)):
        runs = tmp_path / "docs" / "results" / where
        runs.mkdir(parents=True)
        write_run_record(runs, {"profile": "smoke"}, {"03_training": seconds})
    times = measured_times(tmp_path)
    assert list(times) == ["smoke"] and times["smoke"]["total_s"] == 600.0


def test_a_run_starts_by_saying_what_the_committed_run_took_and_on_which_machine(tmp_path):
    """``reproduce`` opens with the committed run's time and machine beside this machine in the same words (the time
    follows the CPU); the same machine gets no warning, another one does, a profile without a committed run no line."""
    import json

    from codegrep.agent.precision import precision_record
    from codegrep.config import load_profile
    from codegrep.pipeline import expectation, precision_setting
    from codegrep.report import write_run_record

    runs = tmp_path / "docs" / "results" / "smoke"
    runs.mkdir(parents=True)
    record = json.loads(write_run_record(runs, {"profile": "smoke"}, {"03_training": 1800.0, "04_ablation": 300.0})
                        .read_text())
    record.update(git_commit="abcdef1234", cpu_precision=precision_record(precision_setting(load_profile("smoke"))))
    (runs / "run.json").write_text(json.dumps(record))
    line = expectation(load_profile("smoke"), tmp_path)
    assert line.startswith("[reproduce] smoke: the committed run took 35 min on ") and "(commit abcdef1)" in line
    assert "another machine" not in line
    record["cpu_precision"]["cpu"]["cpu_model"] = "Some Other CPU"
    (runs / "run.json").write_text(json.dumps(record))
    line = expectation(load_profile("smoke"), tmp_path)
    assert "Some Other CPU" in line and line.endswith("(another machine: expect another time)")
    assert expectation(load_profile("ci"), tmp_path) is None
