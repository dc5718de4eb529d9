"""``codegrep bench mcp`` end to end on a small repository (numbers are printed, never asserted)."""
from __future__ import annotations

import json

from codegrep.cli import main


def test_bench_mcp_runs_a_real_stdio_session_and_reports_ratios(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "bench.json"
    assert main(["bench", "mcp", "--files", "60", "--queries", "3", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == json.loads(out.read_text())
    assert result["repo_files"] == 60 and result["queries"] == 3 and result["tool_errors"] == 0
    assert result["tools"] == ["find_relevant_files"]
    assert result["stdio_call_s"]["n"] == 2 and result["in_process_retriever_s"]["n"] == 2
    for name, ratio in result["ratios"].items():
        assert ratio is None or ratio > 0, name
    assert 0 <= result["hit_at_max_files"] <= 1
    assert result["within_budget"] == (result["stdio_call_s"]["p95"] < result["budget_s"])
