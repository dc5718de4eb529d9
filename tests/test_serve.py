"""The MCP server through a real MCP client session over stdio, on real temporary git repositories."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from codegrep.serve.bench import server_parameters
from codegrep.serve.mcp_server import TOOL_NAME
from conftest import git_out as git

CART = '''"""Shopping cart totals."""


def apply_discount_code(cart, code):
    """Subtract the coupon's amount; expired coupons must be refused."""
    coupon = COUPONS[code]
    return cart.total - coupon.amount


def cart_total(cart):
    return sum(item.price for item in cart.items)
'''
PAYMENT = '''"""Card payments."""


def charge_card(card, amount):
    if amount <= 0:
        raise ValueError("amount must be positive")
    return card.gateway.charge(amount)
'''
SHIPPING_UNCOMMITTED = '''def estimate_freight_weight(parcel):
    return parcel.kg * 1.2
'''
DISCOUNT_QUERY = "apply_discount_code accepts expired coupons: the discount is applied even after the coupon expired"


@pytest.fixture
def shop_repo(tmp_path: Path, monkeypatch) -> Path:
    """A committed repository plus one untracked file (the live tree differs from HEAD)."""
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = tmp_path / "shop"
    for rel, text in {"src/shop/cart.py": CART, "src/shop/payment.py": PAYMENT, "src/shop/__init__.py": "",
                      "README.md": "# Shop\nA toy shop with carts and payments.\n"}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "shop")
    (repo / "src/shop/shipping.py").write_text(SHIPPING_UNCOMMITTED)  # uncommitted: only the live tree has it
    return repo


async def _session(params, calls: list[dict]) -> tuple[list, list]:
    """Initialize (the handshake every MCP client does), list tools, then make each call in order."""
    from mcp import Client

    async with Client(params, mode="legacy") as client:
        tools = (await client.list_tools()).tools
        results = [await client.call_tool(TOOL_NAME, args) for args in calls]
    return tools, results


def run_session(params, calls: list[dict]) -> tuple[list, list]:
    return asyncio.run(asyncio.wait_for(_session(params, calls), timeout=120))


def error_text(result) -> str:
    assert result.is_error, f"expected a tool error, got {result.structured_content}"
    return result.content[0].text


def test_stdio_session_answers_and_refuses_bad_arguments(shop_repo: Path, tmp_path: Path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    calls = [
        {"query": DISCOUNT_QUERY, "max_files": 3},
        {"query": "estimate_freight_weight is wrong for heavy parcels"},  # in an uncommitted file
        {"query": "   "},
        {"query": DISCOUNT_QUERY, "repo_path": str(outside)},
        {"query": DISCOUNT_QUERY, "repo_path": "../elsewhere"},
        {"query": DISCOUNT_QUERY, "repo_path": "src/missing"},
        {"query": DISCOUNT_QUERY, "max_files": 0},
        {"query": DISCOUNT_QUERY, "max_files": 1000},
        {"query": DISCOUNT_QUERY, "max_files": "many"},
        {"query": DISCOUNT_QUERY, "commit": "--output=/tmp/x"},
        {"query": DISCOUNT_QUERY, "commit": "no-such-branch"},
        {"query": DISCOUNT_QUERY, "repo_path": "src"},  # still serving after every error above
    ]
    tools, results = run_session(server_parameters(shop_repo, "grep-heuristic"), calls)

    assert [t.name for t in tools] == [TOOL_NAME]
    schema = tools[0].input_schema
    assert schema["required"] == ["query"]
    assert {"query", "repo_path", "max_files", "commit"} <= set(schema["properties"])
    assert tools[0].annotations.read_only_hint is True

    found = results[0]
    assert not found.is_error, found.content
    answer = found.structured_content
    paths = [f["path"] for f in answer["files"]]
    assert paths[0] == "src/shop/cart.py" and len(paths) <= 3
    assert answer["files"][0]["reason"], "each file comes with a one-line reason"
    assert answer["commit"] == "WORKTREE" and answer["head"] == git(shop_repo, "rev-parse", "HEAD")
    assert set(answer["cost"]) >= {"rounds", "tool_calls", "seconds"} and answer["cost"]["seconds"] > 0
    assert "1. src/shop/cart.py" in found.content[0].text

    live = results[1]
    assert not live.is_error and live.structured_content["files"][0]["path"] == "src/shop/shipping.py"

    assert "query is empty" in error_text(results[2])
    assert "outside the served repository" in error_text(results[3])
    assert "outside the served repository" in error_text(results[4])
    assert "does not exist" in error_text(results[5])
    assert "between 1 and 50" in error_text(results[6]) and "got 1000" in error_text(results[7])
    assert "max_files" in error_text(results[8])
    assert "not a revision" in error_text(results[9])
    assert "not a commit" in error_text(results[10])

    sub = results[11]
    assert not sub.is_error and sub.structured_content["files"][0]["path"] == "shop/cart.py"


def test_server_without_repo_needs_an_absolute_repo_path(shop_repo: Path):
    calls = [{"query": DISCOUNT_QUERY}, {"query": DISCOUNT_QUERY, "repo_path": "shop"},
             {"query": DISCOUNT_QUERY, "repo_path": str(shop_repo)}]
    _, results = run_session(server_parameters(None, "grep-heuristic"), calls)
    assert "repo_path is required" in error_text(results[0])
    assert "is relative" in error_text(results[1])
    assert results[2].structured_content["files"][0]["path"] == "src/shop/cart.py"


SCRIPTED_AGENT_PROFILE = """\
profile: scripted-agent
agent:
  policy: scripted
  outputs:
    - '<tool_call>{"name": "grep", "arguments": {"pattern": "apply_discount_code"}}</tool_call>
       <tool_call>{"name": "read", "arguments": {"path": "src/shop/cart.py", "start_line": 1, "end_line": 8}}</tool_call>'
    - '<tool_call>{"name": "submit", "arguments": {"files": ["src/shop/cart.py", "src/shop/payment.py"]}}</tool_call>'
"""


def test_agent_retriever_over_stdio_reports_its_greps_reads_and_cost(shop_repo: Path, tmp_path: Path):
    """The agent path end to end with a scripted policy (no model): reasons come from its own tool calls."""
    profile = tmp_path / "scripted.yaml"
    profile.write_text(SCRIPTED_AGENT_PROFILE)
    params = server_parameters(shop_repo, "agent", "--profile", str(profile))
    _, (result,) = run_session(params, [{"query": DISCOUNT_QUERY}])
    assert not result.is_error, result.content
    answer = result.structured_content
    assert [f["path"] for f in answer["files"]] == ["src/shop/cart.py", "src/shop/payment.py"]
    assert answer["files"][0]["reason"] == ('grep pattern="apply_discount_code" (1 hit); '
                                            'read path="src/shop/cart.py" start_line=1 end_line=8')
    assert "without a tool call" in answer["files"][1]["reason"]
    assert answer["cost"]["rounds"] == 2 and answer["cost"]["tool_calls"] == 2 and answer["cost"]["tokens"] > 0


def test_unreachable_endpoint_is_a_tool_error_and_the_server_keeps_serving(shop_repo: Path):
    from codegrep.serve.mcp_server import ServeConfig, build_server

    async def calls():
        from mcp import Client

        server = build_server(ServeConfig(repo=shop_repo, retriever="agent", endpoint="http://127.0.0.1:9/v1"))
        async with Client(server) as client:
            return [await client.call_tool(TOOL_NAME, {"query": DISCOUNT_QUERY}) for _ in range(2)]

    first, second = asyncio.run(asyncio.wait_for(calls(), timeout=120))
    assert "retrieval failed" in error_text(first) and "retrieval failed" in error_text(second)


def test_an_unknown_argument_is_a_tool_error_naming_it_and_the_accepted_ones(shop_repo: Path, tmp_path: Path):
    """The SDK's argument model took extra keys and dropped them: ``repo`` (for ``repo_path``) searched the served
    repository as if nothing had been said. Now a tool error names it, a close match and the accepted arguments,
    and the input schema says ``additionalProperties: false``; the server keeps serving."""
    from codegrep.serve.mcp_server import ServeConfig, build_server

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def calls():
        from mcp import Client

        async with Client(build_server(ServeConfig(repo=shop_repo))) as client:
            schema = (await client.list_tools()).tools[0].input_schema
            results = [await client.call_tool(TOOL_NAME, args) for args in (
                {"query": DISCOUNT_QUERY, "repo": str(elsewhere)}, {"query": DISCOUNT_QUERY, "maxfiles": 1},
                {"query": DISCOUNT_QUERY, "max_files": 1})]
            return schema, results

    schema, (repo, maxfiles, good) = asyncio.run(asyncio.wait_for(calls(), timeout=120))
    assert schema["additionalProperties"] is False and schema["required"] == ["query"]
    text = error_text(repo)
    assert "unknown argument 'repo'" in text and "did you mean 'repo_path'" in text
    assert "query, repo_path, max_files, commit" in text
    assert "unknown argument 'maxfiles'" in error_text(maxfiles) and "'max_files'" in error_text(maxfiles)
    assert not good.is_error and [f["path"] for f in good.structured_content["files"]] == ["src/shop/cart.py"]
