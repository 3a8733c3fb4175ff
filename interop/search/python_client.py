"""python_client: tool search through `toolwire gateway` with the Python SDK's own client, `mcp`
2.x (2026-07-28) or `mcp` 1.x (2025-11-25), whichever the running interpreter has: the steps of
interop/search/plan.py (tools/list, search_tools, call_tool, direct calls), each answer held
to the plan by its judge. The connection and the step runner are interop/gateway/python_client.py's.

Usage:
    python python_client.py --plan PLAN.json --phase before|after --era 2026-07-28|2025-11-25 --http URL
    --timeout SECONDS   the most one step may take (default 20)

Each step prints "PASS <step>: ..." or "FAIL <step>: ..."; the last line is
"python_client: N passed, M failed", and the exit status is 1 on any failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent


def load_module(name: str, path: Path) -> Any:
    """A module from its file (this one has the same name as the gateway's client)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


search_plan = load_module("search_plan", HERE / "plan.py")
gateway_client = load_module("gateway_client", HERE.parent / "gateway" / "python_client.py")


async def answer(session: Any, step: dict[str, Any]) -> dict[str, Any]:
    """The step's request, its answer as the judge takes it: a result, or a JSON-RPC error."""
    if step["tool"] is None:
        return {"result": {"tools": await session.list_tools()}}
    try:
        return {"result": await session.call_tool(step["tool"], step["arguments"])}
    except Exception as error:  # noqa: BLE001 - the SDKs raise their own McpError/MCPError
        inner = getattr(error, "error", None)
        if inner is None or not hasattr(inner, "code"):
            raise
        return {"error": {"code": inner.code, "message": inner.message}}


async def main_async(args: argparse.Namespace) -> int:
    plan = search_plan.load(args.plan)
    runner = gateway_client.Runner(args.timeout)
    print(f"python_client: mcp {package_version('mcp')} against {args.http}, {args.phase}", flush=True)
    started = time.monotonic()
    saved: dict[str, dict[str, Any]] = {}
    connected = False
    try:
        async with gateway_client.connect(args) as session:
            connected = True
            print(f"PASS connect: {session.server}, protocol {session.protocol_version}", flush=True)
            runner.passed += 1
            if session.protocol_version != args.want_era:
                print(f"FAIL era: negotiated {session.protocol_version}, want {args.want_era}", flush=True)
                runner.failed += 1
            for _, step in search_plan.in_phase(plan, args.phase):

                async def one(step: dict[str, Any] = step) -> str:
                    got = await answer(session, step)
                    try:
                        said = search_plan.judge(step, got, saved)
                    except search_plan.Mismatch as mismatch:
                        raise gateway_client.StepFailed(str(mismatch)) from None
                    saved[step["name"]] = got
                    return said

                await runner.step(step["name"], one)
    except Exception as error:  # noqa: BLE001 - a failed connection is a failed run, reported plainly
        print(f"FAIL {'close' if connected else 'connect'}: {gateway_client.describe(error)}", flush=True)
        runner.failed += 1
    print(
        f"python_client: {runner.passed} passed, {runner.failed} failed ({time.monotonic() - started:.2f}s)",
        flush=True,
    )
    return 1 if runner.failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", required=True, metavar="URL", help="the gateway's Streamable HTTP endpoint")
    parser.add_argument("--plan", required=True, help="the plan file (JSON)")
    parser.add_argument("--phase", required=True, choices=("before", "after"))
    parser.add_argument("--era", dest="want_era", required=True, help="the protocol version to reach")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds one step may take")
    args = parser.parse_args()
    # What interop/gateway/python_client.py's connect reads.
    args.stdio, args.era = None, "auto"
    sys.exit(anyio.run(main_async, args))


if __name__ == "__main__":
    main()
