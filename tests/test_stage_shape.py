"""Every notebook calls its area's stage the same way (issue 26): ``result = stage.run(cfg, out, ...)``,
``stage.figures(result, out, ...)``, ``out.headline(stage.NOTEBOOK, **stage.headline(result))``; the stage module
satisfies ``codegrep.Stage``; no notebook draws with raw matplotlib or spells its headline keys."""
from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from codegrep import Stage
from codegrep.pipeline import NOTEBOOKS, STAGES

ROOT = Path(__file__).resolve().parent.parent


def code_cells(name: str) -> list[str]:
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
            and "parameters" not in (c.get("metadata", {}).get("tags") or [])]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_calls_its_stage_through_the_three_functions(name):
    module = importlib.import_module(STAGES[name])
    assert isinstance(module, Stage) and module.NOTEBOOK == name
    code = "\n".join(code_cells(name))
    package, _, leaf = STAGES[name].rpartition(".")
    assert re.search(rf"from {re.escape(package)} import {leaf}( as stage)?\b", code), "imports its stage as `stage`"
    assert re.search(r"^result = stage\.run\(cfg, out\b", code, re.M), "result = stage.run(cfg, out, ...)"
    assert "stage.figures(result, out" in code
    assert "out.headline(stage.NOTEBOOK, **stage.headline(result))" in code_cells(name)[-1]
    assert not re.search(r"\bplt\.|import matplotlib", code), "figures go through the stage (codegrep.plots)"
    assert code.count("notebook_profile(") == 1 and "_source" not in code  # one way in; the profile is passed down
    logic = re.findall(r"^\s*(?:if|for|while|def|class|with|try|elif|else)\b.*$", code, re.M)
    assert not logic, f"logic belongs in the stage, not the notebook: {logic}"


def test_notebooks_are_held_to_the_librarys_lint():
    """``make lint`` runs ruff over the notebooks as over the library (``import a; import b`` setup lines and the
    like are errors there too)."""
    import shutil
    import subprocess
    import sys

    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"ruff check codegrep tests notebooks", makefile)
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed here")
    proc = subprocess.run([ruff, "check", "notebooks"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
