"""legacy_client: drive an MCP server as a legacy (2025-11-25, initialize-based) client would,
with the Python SDK `mcp` 1.x (ClientSession), and check the behaviour of Toolwire's example tools.

Usage:
    python legacy_client.py --stdio "CMD ARGS..."   # spawn the server, talk over its stdin/stdout
    python legacy_client.py --http URL              # Streamable HTTP, e.g. http://127.0.0.1:8080/mcp
    --timeout SECONDS   the most one step may take (default 10); --notify-timeout SECONDS how long
                        to wait for notifications/tools/list_changed (default 5)
    --no-list-changed   stop after greet: behind a load balancer each instance has its own tool
                        list, so toggle_shout's change is not seen by the next tools/list

Steps, each printed as "PASS <step>: ..." or "FAIL <step>: ...":
    initialize    the handshake; the server must answer protocolVersion 2025-11-25
    tools/list    echo, greet and toggle_shout are listed
    echo          echo {message: "hi"} returns the text "hi"
    greet         greet {} asks for a name by form elicitation (requestedSchema with a string
                  `name`); the client accepts with {name: "Ada"} and the result mentions "Ada"
    toggle_shout  toggle_shout {} brings notifications/tools/list_changed within the notify
                  timeout, and a new tools/list shows `shout` added or removed
    shout         (when `shout` is now listed) shout {text: "hi"} returns "HI"
    toggle_shout again
                  toggles back, with its own notification, so the server ends as it started
The last line is "legacy_client: N passed, M failed"; the exit status is 1 on any failure, 2 on a
usage error, 128 + the signal after SIGINT or SIGTERM (the stdio server is stopped first either
way). The stdio server's own stderr passes through to ours, and gets our whole environment.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel

import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from mcp.shared.session import RequestResponder

EXPECTED_VERSION = "2025-11-25"
EXPECTED_TOOLS = ("echo", "greet", "toggle_shout")


class StepFailed(Exception):
    """A check of a step did not hold."""


class Observer:
    """What the server sent us outside of responses: notifications and elicitation requests."""

    def __init__(self) -> None:
        self.list_changed = 0
        self.list_changed_event = anyio.Event()
        self.elicitations: list[types.ElicitRequestParams] = []
        self.errors: list[Exception] = []

    def expect_list_changed(self) -> tuple[int, anyio.Event]:
        """A fresh event, set by the next notifications/tools/list_changed; and the count now."""
        self.list_changed_event = anyio.Event()
        return self.list_changed, self.list_changed_event

    async def message_handler(
        self,
        message: RequestResponder[types.ServerRequest, types.ClientResult] | types.ServerNotification | Exception,
    ) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)
            print(f"legacy_client: transport error: {message!r}", file=sys.stderr)
        elif isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self.list_changed += 1
            self.list_changed_event.set()
        await anyio.lowlevel.checkpoint()

    async def elicitation_callback(
        self,
        context: RequestContext[ClientSession, Any],
        params: types.ElicitRequestParams,
    ) -> types.ElicitResult | types.ErrorData:
        self.elicitations.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada"})


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


async def call_ok(session: ClientSession, name: str, arguments: dict[str, Any]) -> str:
    """Calls a tool that must succeed; returns its text."""
    result = await session.call_tool(name, arguments)
    check(not result.isError, f"{name} returned isError: {text_of(result)!r}")
    return text_of(result)


async def tool_names(session: ClientSession) -> list[str]:
    return [tool.name for tool in (await session.list_tools()).tools]


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
            detail, ok = f"{type(error).__name__}: {error}", False
        else:
            ok = True
        elapsed = time.monotonic() - started
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail} ({elapsed:.2f}s)", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok


async def run_steps(
    session: ClientSession, observer: Observer, runner: Runner, notify_timeout: float, list_changed: bool
) -> None:
    async def initialize() -> str:
        result = await session.initialize()
        check(
            result.protocolVersion == EXPECTED_VERSION,
            f"server answered protocolVersion {result.protocolVersion}, want {EXPECTED_VERSION}",
        )
        tools_cap = result.capabilities.tools
        return (
            f"sent {types.LATEST_PROTOCOL_VERSION}, server {result.serverInfo.name} "
            f"{result.serverInfo.version} answered {result.protocolVersion}, "
            f"tools.listChanged={tools_cap.listChanged if tools_cap else None}"
        )

    if not await runner.step("initialize", initialize):
        return

    async def list_tools() -> str:
        names = await tool_names(session)
        missing = [name for name in EXPECTED_TOOLS if name not in names]
        check(not missing, f"missing {missing} in {names}")
        return f"{len(names)} tools: {', '.join(names)}"

    async def echo() -> str:
        text = await call_ok(session, "echo", {"message": "hi"})
        check(text == "hi", f"echo returned {text!r}, want 'hi'")
        return "echo {message: hi} -> 'hi'"

    async def greet() -> str:
        before = len(observer.elicitations)
        text = await call_ok(session, "greet", {})
        asked = observer.elicitations[before:]
        check(len(asked) == 1, f"{len(asked)} elicitation requests during greet, want 1 (result {text!r})")
        params = asked[0]
        check(isinstance(params, types.ElicitRequestFormParams), f"not a form elicitation: {params!r}")
        assert isinstance(params, types.ElicitRequestFormParams)
        prop = params.requestedSchema.get("properties", {}).get("name", {})
        check(prop.get("type") == "string", f"requestedSchema has no string `name`: {params.requestedSchema}")
        check("Ada" in text, f"greet returned {text!r}, want it to contain 'Ada'")
        return f"asked {params.message!r}, answered Ada, got {text!r}"

    await runner.step("tools/list", list_tools)
    await runner.step("echo", echo)
    await runner.step("greet", greet)
    if not list_changed:
        return

    listed = {"shout": False}

    async def toggle() -> str:
        had_shout = "shout" in await tool_names(session)
        count, event = observer.expect_list_changed()
        text = await call_ok(session, "toggle_shout", {})
        waited = time.monotonic()
        with anyio.move_on_after(notify_timeout):
            await event.wait()
        check(
            observer.list_changed > count,
            f"no notifications/tools/list_changed within {notify_timeout:g}s of the result {text!r}",
        )
        waited = time.monotonic() - waited
        has_shout = listed["shout"] = "shout" in await tool_names(session)
        check(has_shout != had_shout, f"shout listed before and after toggle_shout: {had_shout} (result {text!r})")
        change = "added" if has_shout else "removed"
        return f"{text!r}; list_changed after {waited:.2f}s more; shout {change} in tools/list"

    async def shout() -> str:
        text = await call_ok(session, "shout", {"text": "hi"})
        check(text == "HI", f"shout returned {text!r}, want 'HI'")
        return "shout {text: hi} -> 'HI'"

    if await runner.step("toggle_shout", toggle):
        if listed["shout"]:
            await runner.step("shout", shout)
        await runner.step("toggle_shout again", toggle)


@contextlib.asynccontextmanager
async def connect(args: argparse.Namespace) -> AsyncIterator[tuple[Any, Any]]:
    if args.stdio:
        argv = shlex.split(args.stdio)
        # The whole environment, not the SDK's short default list, so RUST_LOG and the like pass.
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            yield read, write
    else:
        async with streamable_http_client(args.http) as (read, write, _session_id):
            yield read, write


async def main_async(args: argparse.Namespace) -> int:
    observer = Observer()
    runner = Runner(args.timeout)
    target = f"stdio {args.stdio!r}" if args.stdio else f"http {args.http}"
    print(f"legacy_client: mcp {version('mcp')} against {target}", flush=True)
    started = time.monotonic()
    # SIGINT and SIGTERM, and the overall deadline, stop the steps but not the connection's
    # closing, which must run uncancelled: the SDK starts a stdio server in its own session, so
    # only its own shutdown sequence (close stdin, SIGTERM, SIGKILL) stops it.
    steps = anyio.CancelScope()
    signals: list[int] = []

    async def watch_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
            async for signum in received:
                signals.append(signum)
                steps.cancel()

    try:
        async with anyio.create_task_group() as watcher:
            watcher.start_soon(watch_signals)
            try:
                async with connect(args) as (read, write):
                    async with ClientSession(
                        read,
                        write,
                        elicitation_callback=observer.elicitation_callback,
                        message_handler=observer.message_handler,
                        client_info=types.Implementation(name="toolwire-legacy-client", version="1.0.0"),
                    ) as session:
                        total = args.timeout * 4 + args.notify_timeout * 2
                        with steps, anyio.move_on_after(total) as deadline:
                            await run_steps(session, observer, runner, args.notify_timeout, not args.no_list_changed)
                        if deadline.cancelled_caught:
                            print(f"FAIL all steps: not done within {total:g}s", flush=True)
                            runner.failed += 1
            finally:
                watcher.cancel_scope.cancel()
    except Exception as error:  # noqa: BLE001 - a failed connection is a failed run, reported plainly
        print(f"FAIL connection: {describe(error)}", flush=True)
        runner.failed += 1
    if signals:
        print(f"FAIL interrupted by {signal.Signals(signals[0]).name}", flush=True)
        runner.failed += 1
    print(
        f"legacy_client: {runner.passed} passed, {runner.failed} failed "
        f"({time.monotonic() - started:.2f}s)",
        flush=True,
    )
    if signals:
        return 128 + signals[0]
    return 1 if runner.failed else 0


def describe(error: BaseException) -> str:
    """The innermost errors of an exception group, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


def version(package: str) -> str:
    from importlib.metadata import version as package_version

    return package_version(package)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stdio", metavar="COMMAND", help="the server command line, one string")
    target.add_argument("--http", metavar="URL", help="the server's Streamable HTTP endpoint")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds one step may take")
    parser.add_argument("--notify-timeout", type=float, default=5.0, help="seconds to wait for list_changed")
    parser.add_argument("--no-list-changed", action="store_true", help="stop after greet (no toggle_shout)")
    args = parser.parse_args()
    if args.stdio is not None and not shlex.split(args.stdio):
        parser.error("--stdio needs a command")
    sys.exit(anyio.run(main_async, args))


if __name__ == "__main__":
    main()
