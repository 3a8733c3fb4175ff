"""python_client: drive an MCP server (here `toolwire gateway`) with the Python SDK's own client,
`mcp` 2.x (`mcp.Client`, 2026-07-28 with the 2025-11-25 fallback) or `mcp` 1.x (`ClientSession`,
2025-11-25 only), whichever the running interpreter has, and check what a plan file asks.

Usage:
    python python_client.py --plan PLAN.json --http URL           # Streamable HTTP
    python python_client.py --plan PLAN.json --stdio "CMD ARGS..."  # start the server, stdio
    --era auto|legacy   mcp 2.x only: probe server/discover first (auto, the SDK's default) or
                        initialize (legacy); mcp 1.x always initializes
    --timeout SECONDS   the most one step may take (default 20)

The plan (JSON, written by scripts/gateway-interop):
    {"era": "2026-07-28" | "2025-11-25",       the protocol version the connection must reach
     "tools": ["prefix__tool", ...],           names tools/list must show (every page)
     "absent": ["prefix__tool", ...],          names it must not show
     "calls": [{"name", "arguments",           each called; the result must not be isError, its
                "contains": [TEXT, ...],       text must contain every TEXT and, with
                "structured": {KEY: VALUE}}],  "structured", its structuredContent hold them
     "progress": [{"name", "arguments",        each called with a progress token: at least
                   "at_least": N, "contains"}], N progress notifications must arrive
     "list_changed": {"toggle": {"name",       called twice; each time a tools/list change must
                                 "arguments"}, be told (listen stream, or notification), and
                      "tool": NAME}}           NAME appear or go

Each step prints "PASS <step>: ..." or "FAIL <step>: ..."; the last line is
"python_client: N passed, M failed", and the exit status is 1 on any failure, 2 on a usage error.
A stdio server's stderr passes through to ours; it gets our whole environment.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from importlib.metadata import version as package_version
from typing import Any

import anyio
import anyio.lowlevel

import mcp
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

MODERN_SDK = hasattr(mcp, "Client")


class StepFailed(Exception):
    """A check of a step did not hold."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


def wire(model: Any) -> dict[str, Any]:
    """A result as it was on the wire (camelCase names), whichever SDK parsed it."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []) if block.get("type") == "text")


class Changes:
    """notifications/tools/list_changed as the SDK's message handler passes them (the
    2025-11-25 way: on the session's stream)."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def handler(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if type(root).__name__ == "ToolListChangedNotification":
            self.count += 1
            self.event.set()
            self.event = anyio.Event()
        await anyio.lowlevel.checkpoint()


class Session:
    """The few operations the steps need, over either SDK."""

    def __init__(self, inner: Any, protocol_version: str, server: str, changes: Changes) -> None:
        self.inner = inner
        self.protocol_version = protocol_version
        self.server = server
        self.changes = changes

    @contextlib.asynccontextmanager
    async def next_change(self) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """Yields a wait for the next tools/list change: a `subscriptions/listen` stream on a
        2026-07-28 connection, the session's notifications on a 2025-11-25 one."""
        if self.protocol_version == "2025-11-25":
            event = self.changes.event
            yield event.wait
            return
        async with self.inner.listen(tools_list_changed=True) as subscription:

            async def wait() -> None:
                await subscription.__anext__()

            yield wait

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        # mcp 2.x keeps lists for their ttlMs; the steps must see what the server lists now.
        fresh = {"cache_mode": "refresh"} if MODERN_SDK else {}
        for _ in range(100):
            page = wire(await self.inner.list_tools(cursor=cursor, **fresh))
            tools.extend(page.get("tools", []))
            cursor = page.get("nextCursor")
            if cursor is None:
                return tools
        raise StepFailed("tools/list: more than 100 pages")

    async def call_tool(
        self, name: str, arguments: dict[str, Any], progress: Callable[..., Awaitable[None]] | None = None
    ) -> dict[str, Any]:
        return wire(await self.inner.call_tool(name, arguments, progress_callback=progress))


@contextlib.asynccontextmanager
async def connect(args: argparse.Namespace) -> AsyncIterator[Session]:
    if args.stdio:
        argv = shlex.split(args.stdio)
        target: Any = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    else:
        target = args.http
    changes = Changes()
    if MODERN_SDK:
        async with mcp.Client(
            target, mode=args.era, read_timeout_seconds=args.timeout, message_handler=changes.handler
        ) as client:
            info = client.server_info
            server = f"{info.name} {info.version}" if info else "anonymous"
            yield Session(client, client.protocol_version, server, changes)
        return
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    @contextlib.asynccontextmanager
    async def streams() -> AsyncIterator[tuple[Any, Any]]:
        if args.stdio:
            async with stdio_client(target) as (read, write):
                yield read, write
        else:
            async with streamable_http_client(target) as (read, write, _session_id):
                yield read, write

    async with streams() as (read, write):
        async with ClientSession(
            read, write, read_timeout_seconds=timedelta(seconds=args.timeout), message_handler=changes.handler
        ) as session:
            result = await session.initialize()
            info = result.serverInfo
            yield Session(session, result.protocolVersion, f"{info.name} {info.version}", changes)


class Runner:
    """Runs the steps, printing one line each, and counts the outcomes."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.passed = 0
        self.failed = 0

    async def step(self, name: str, body: Callable[[], Awaitable[str]]) -> bool:
        started = time.monotonic()
        try:
            with anyio.fail_after(self.timeout):
                detail = await body()
        except TimeoutError:
            detail, ok = f"no answer within {self.timeout:g}s", False
        except StepFailed as error:
            detail, ok = str(error), False
        except Exception as error:  # noqa: BLE001 - any error fails the step, with its text
            detail, ok = describe(error), False
        else:
            ok = True
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail} ({time.monotonic() - started:.2f}s)", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok


def check_result(call: dict[str, Any], result: dict[str, Any]) -> str:
    """Holds `result` to the plan's `contains` and `structured`; says what it saw."""
    text = text_of(result)
    check(not result.get("isError"), f"isError: {text[:500]!r}")
    for want in call.get("contains", []):
        check(want in text, f"the text does not contain {want!r}: {text[:500]!r}")
    structured = result.get("structuredContent")
    for key, want in call.get("structured", {}).items():
        check(isinstance(structured, dict), f"no structuredContent: {json.dumps(result)[:500]}")
        check(structured.get(key) == want, f"structuredContent[{key!r}] is {structured.get(key)!r}, want {want!r}")
    shown = " ".join(text.split())
    return repr(shown[:80] + ("..." if len(shown) > 80 else ""))


async def run_steps(session: Session, plan: dict[str, Any], runner: Runner) -> None:
    async def list_tools() -> str:
        tools = await session.list_tools()
        names = [tool["name"] for tool in tools]
        missing = [name for name in plan["tools"] if name not in names]
        check(not missing, f"missing {missing} in {names}")
        listed = [name for name in plan.get("absent", []) if name in names]
        check(not listed, f"listed, and must not be: {listed}")
        bad = [t["name"] for t in tools if t.get("inputSchema", {}).get("type") != "object"]
        check(not bad, f"an inputSchema that is not an object schema: {bad}")
        return f"{len(names)} tools, {len(plan['tools'])} wanted all there"

    await runner.step("tools/list", list_tools)
    for call in plan["calls"]:

        async def call_one(call: dict[str, Any] = call) -> str:
            return check_result(call, await session.call_tool(call["name"], call["arguments"]))

        await runner.step(f"call {call['name']}", call_one)
    for call in plan.get("progress", []):

        async def with_progress(call: dict[str, Any] = call) -> str:
            seen: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append(value)

            said = check_result(call, await session.call_tool(call["name"], call["arguments"], progress))
            check(
                len(seen) >= call["at_least"],
                f"{len(seen)} progress notifications, want at least {call['at_least']}",
            )
            check(seen == sorted(seen), f"progress went backwards: {seen}")
            return f"{len(seen)} progress notifications {seen}, then {said}"

        await runner.step(f"progress {call['name']}", with_progress)
    change = plan.get("list_changed")
    if change is None:
        return

    async def toggle() -> str:
        toggled = change["toggle"]
        had = change["tool"] in [tool["name"] for tool in await session.list_tools()]
        async with session.next_change() as next_change:
            await session.call_tool(toggled["name"], toggled["arguments"])
            waited = time.monotonic()
            await next_change()
            waited = time.monotonic() - waited
        has = change["tool"] in [tool["name"] for tool in await session.list_tools()]
        check(has != had, f"{change['tool']} listed before and after {toggled['name']}: {had}")
        return f"{change['tool']} {'added' if has else 'removed'}, told {waited:.2f}s after the call"

    # Twice, so that the upstream ends as it started.
    await runner.step(f"list_changed {change['toggle']['name']}", toggle)
    await runner.step(f"list_changed {change['toggle']['name']} again", toggle)


async def main_async(args: argparse.Namespace) -> int:
    with open(args.plan, encoding="utf-8") as file:
        plan = json.load(file)
    runner = Runner(args.timeout)
    target = f"stdio {args.stdio!r}" if args.stdio else f"http {args.http}"
    era = args.era if MODERN_SDK else "legacy"
    print(f"python_client: mcp {package_version('mcp')} ({era}) against {target}", flush=True)
    started = time.monotonic()
    connected = False
    try:
        async with connect(args) as session:
            connected = True
            print(f"PASS connect: {session.server}, protocol {session.protocol_version}", flush=True)
            runner.passed += 1
            if session.protocol_version != plan["era"]:
                print(f"FAIL era: negotiated {session.protocol_version}, want {plan['era']}", flush=True)
                runner.failed += 1
            total = args.timeout * (5 + len(plan["calls"]) + len(plan.get("progress", [])))
            with anyio.move_on_after(total) as deadline:
                await run_steps(session, plan, runner)
            if deadline.cancelled_caught:
                print(f"FAIL all steps: not done within {total:g}s", flush=True)
                runner.failed += 1
    except Exception as error:  # noqa: BLE001 - a failed connection is a failed run, reported plainly
        print(f"FAIL {'close' if connected else 'connect'}: {describe(error)}", flush=True)
        runner.failed += 1
    print(
        f"python_client: {runner.passed} passed, {runner.failed} failed ({time.monotonic() - started:.2f}s)",
        flush=True,
    )
    return 1 if runner.failed else 0


def describe(error: BaseException) -> str:
    """The innermost errors of an exception group, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stdio", metavar="COMMAND", help="the server command line, one string")
    target.add_argument("--http", metavar="URL", help="the server's Streamable HTTP endpoint")
    parser.add_argument("--plan", required=True, help="the plan file (JSON)")
    parser.add_argument("--era", choices=("auto", "legacy"), default="auto", help="mcp 2.x: how to connect")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds one step may take")
    args = parser.parse_args()
    if args.stdio is not None and not shlex.split(args.stdio):
        parser.error("--stdio needs a command")
    sys.exit(anyio.run(main_async, args))


if __name__ == "__main__":
    main()
