"""``codegrep curves``: training runs' per-step curves from metrics.jsonl, overlaid; torn or bad rows."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from codegrep.cli import main
from codegrep.rl.training_stage import curves_figure, metrics_frame


def _run(root: Path, name: str, kl: list[float], extra: dict | None = None, tail: str = "") -> Path:
    run = root / name
    run.mkdir(parents=True)
    rows = [{"step": i + 1, "kl": k, "rounds": 2 + i % 2, "tokens": 100.0 + i, **(extra or {})} for i, k in enumerate(kl)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return run


def test_runs_overlay_per_panel_and_a_panel_no_run_logged_says_so(tmp_path):
    a = _run(tmp_path, "reward", [0.01, 0.03, 0.06], {"time_generation_s": 40.0})
    b = _run(tmp_path, "advantage", [0.01, 0.02])
    fig = curves_figure({"reward": metrics_frame(a), "advantage": metrics_frame(b)},
                        ["kl", "time_generation_s", "kl_exact"])
    kl, gen, exact = fig.axes
    assert [line.get_label() for line in kl.get_lines()] == ["reward", "advantage"]
    assert list(kl.get_lines()[0].get_ydata()) == [0.01, 0.03, 0.06]
    assert [line.get_label() for line in gen.get_lines()] == ["reward"]  # only the run that logged it
    assert "n = 1 run" in gen.get_title() and "n = 2 runs" in kl.get_title()
    assert not exact.get_lines() and "'kl_exact' was not logged by these runs" in " ".join(t.get_text() for t in exact.texts)
    plt.close(fig)


def test_values_that_are_not_numbers_are_left_out_and_said_not_drawn_as_categories(tmp_path, capsys):
    """A column of strings was plotted as categories (or an empty-looking panel) without a word."""
    a = _run(tmp_path, "s0", [0.01, 0.02, 0.03], {"rounds": "two"})
    b = _run(tmp_path, "s1", [0.02, 0.01])
    rows = [json.loads(line) for line in (b / "metrics.jsonl").read_text().splitlines()]
    rows[1]["kl"] = "n/a"
    (b / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fig = curves_figure({"s0": metrics_frame(a), "s1": metrics_frame(b)}, ["kl", "rounds"])
    kl, rounds = fig.axes
    assert [list(line.get_ydata()) for line in kl.get_lines()][0] == [0.01, 0.02, 0.03]
    assert "s1: 'kl' is not a number at step 2 (e.g. 'n/a')" in " ".join(t.get_text() for t in kl.texts)
    assert [line.get_label() for line in rounds.get_lines()] == ["s1"]  # s0's strings are not drawn
    assert "s0: 'rounds' is not a number at steps 1, 2, 3" in " ".join(t.get_text() for t in rounds.texts)
    plt.close(fig)
    only = curves_figure({"s0": metrics_frame(a)}, ["rounds"]).axes[0]
    assert not only.get_lines() and "'rounds' holds no number in this run" in " ".join(t.get_text() for t in only.texts)
    plt.close("all")
    assert main(["curves", str(a), "--out", str(tmp_path / "r.png"), "--panels", "kl,rounds"]) == 0
    assert f"{a / 'metrics.jsonl'}: 'rounds' is not a number at steps 1, 2, 3" in capsys.readouterr().err


def test_cli_writes_the_figure_and_skips_a_torn_last_row(tmp_path, capsys):
    a = _run(tmp_path, "s0", [0.01, 0.02], tail='{"step": 3, "kl": 0.0')  # killed while writing step 3
    b = _run(tmp_path, "s1", [0.02, 0.01])
    out = tmp_path / "kl.png"
    assert main(["curves", str(a), str(b), "--out", str(out), "--panels", "kl,rounds"]) == 0
    captured = capsys.readouterr()
    assert "metrics.jsonl:3: an incomplete last row" in captured.err and f"wrote {out}" in captured.out
    with Image.open(out) as image:
        assert image.format == "PNG" and image.width > 400


@pytest.mark.parametrize("argv, message", [
    (["--panels", "kl,nope"], "unknown column(s) ['nope']"),
    (["--out", "{tmp}/kl.pdf"], "give a .png or .svg file"),
    (["--bad-row"], "metrics.jsonl:1: not a JSON row of training metrics"),
    (["--missing"], "not a training run directory"),
    (["--bool-step"], "metrics.jsonl:1: a row of training metrics needs an integer 'step'"),
])
def test_bad_curves_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, message):
    run = _run(tmp_path, "r", [0.01, 0.02])
    if argv == ["--bad-row"]:
        (run / "metrics.jsonl").write_text('{"step": 1, "kl": 0.1\n{"step": 2, "kl": 0.2}\n')
        argv = []
    if argv == ["--bool-step"]:  # json's true is a Python int subclass: it was read as step 1
        (run / "metrics.jsonl").write_text('{"step": true, "kl": 0.1}\n{"step": 2, "kl": 0.2}\n')
        argv = []
    runs = [str(tmp_path / "absent")] if argv == ["--missing"] else [str(run)]
    argv = [] if argv == ["--missing"] else [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "kl.png")]
    try:
        rc = main(["curves", *runs, *argv])
    except SystemExit as exc:  # argparse's own refusal
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not list(tmp_path.glob("kl.*"))


def test_a_resumed_run_appends_after_a_torn_row_not_onto_it(tmp_path):
    from types import SimpleNamespace

    from codegrep.rl.trainer import MetricsJsonlCallback, read_metrics

    run = _run(tmp_path, "r", [0.01, 0.02], tail='{"step": 3, "kl": 0.0')  # killed while writing step 3
    callback = MetricsJsonlCallback(run / "metrics.jsonl")  # the resumed run's writer
    callback.on_log(None, SimpleNamespace(is_world_process_zero=True, global_step=3), None, logs={"reward": 0.5})
    assert [r["step"] for r in read_metrics(run)] == [1, 2, 3]


def test_a_metrics_file_a_windows_editor_saved_with_a_byte_order_mark_reads(tmp_path):
    """A UTF-8 byte-order mark before the first row made row 1 "not a JSON row" (it was read as part of it)."""
    run = _run(tmp_path, "r", [0.01, 0.02])
    (run / "metrics.jsonl").write_bytes(b"\xef\xbb\xbf" + (run / "metrics.jsonl").read_bytes())
    assert list(metrics_frame(run)["step"]) == [1, 2]
