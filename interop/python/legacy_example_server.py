"""legacy_example_server: a reference MCP server that speaks only 2025-11-25 (PyPI `mcp` 1.x,
low-level Server), offering the parts of Toolwire's example tools that the legacy clients of
scripts/legacy-clients exercise: `echo`, `greet` (elicitation) and `toggle_shout` (adds or removes
`shout` and announces it with notifications/tools/list_changed). It stands in for
`toolwire serve` so that the harness can be validated against a server that is known to be right.

Usage:
    python legacy_example_server.py                       # stdio
    python legacy_example_server.py --http PORT [--host HOST]
                                                          # stateful Streamable HTTP at /mcp;
                                                          # PORT 0 picks a free port
    --notify-on-request   send list_changed on the tools/call's own response stream (HTTP) rather
                          than as an unrelated message (the GET stream on HTTP)

On HTTP it prints "legacy_example_server: serving at http://HOST:PORT/mcp" on stderr once it is
listening. The `shout` tool's presence is process-wide state, shared by every session.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio

import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions


class ListChangedServer(Server):
    """A low-level Server whose capabilities say tools.listChanged: true (FastMCP cannot)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
        )


server = ListChangedServer("legacy-example", version="1.0.0")
state = {"shout": False, "notify_on_request": False}

NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}

ECHO = types.Tool(
    name="echo",
    description="Echo the message back as text",
    inputSchema={
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
)
GREET = types.Tool(
    name="greet",
    description="Greet the user, asking their name by elicitation",
    inputSchema={"type": "object", "properties": {}},
)
TOGGLE_SHOUT = types.Tool(
    name="toggle_shout",
    description="Add the shout tool, or remove it if present",
    inputSchema={"type": "object", "properties": {}},
)
SHOUT = types.Tool(
    name="shout",
    description="Upper-case the text",
    inputSchema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
)


def text(value: str) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=value)]


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    tools = [ECHO, GREET, TOGGLE_SHOUT]
    if state["shout"]:
        tools.append(SHOUT)
    return tools


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
    ctx = server.request_context
    if name == "echo":
        return text(arguments["message"])
    if name == "greet":
        answer = await ctx.session.elicit_form(
            "What is your name?", NAME_SCHEMA, related_request_id=ctx.request_id
        )
        if answer.action != "accept" or not answer.content:
            return text(f"no name ({answer.action})")
        return text(f"Hello, {answer.content['name']}!")
    if name == "toggle_shout":
        state["shout"] = not state["shout"]
        related = ctx.request_id if state["notify_on_request"] else None
        await ctx.session.send_notification(
            types.ServerNotification(types.ToolListChangedNotification()),
            related_request_id=related,
        )
        return text("shout added" if state["shout"] else "shout removed")
    if name == "shout" and state["shout"]:
        return text(arguments["text"].upper())
    return types.CallToolResult(content=text(f"unknown tool: {name}"), isError=True)


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(host: str, port: int) -> None:
    import socket

    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Route

    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=server)

    class Endpoint:
        """The ASGI app at /mcp (a class, so that Starlette passes it every method)."""

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await manager.handle_request(scope, receive, send)

    # Bind first, so that port 0 works and the printed address is the real one.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            print(f"legacy_example_server: serving at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
            yield

    app = Starlette(routes=[Route("/mcp", endpoint=Endpoint())], lifespan=lifespan)
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", metavar="PORT", type=int, help="serve Streamable HTTP on PORT")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--notify-on-request", action="store_true")
    args = parser.parse_args()
    state["notify_on_request"] = args.notify_on_request
    if args.http is None:
        anyio.run(serve_stdio)
    else:
        serve_http(args.host, args.http)


if __name__ == "__main__":
    main()
