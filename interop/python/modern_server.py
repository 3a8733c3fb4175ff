"""modern_server: an MCP 2026-07-28 server built only from the PyPI `mcp` SDK (2.x, MCPServer),
for Toolwire's client interop tests.

Usage:
    python modern_server.py --stdio
    python modern_server.py HOST PORT        # stateless Streamable HTTP at /mcp
"""

from __future__ import annotations

import argparse
import sys
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve

mcp = MCPServer("modern-interop", version="0.1.0", log_level="WARNING")


class Sum(BaseModel):
    sum: int


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@mcp.tool(description="Echo the message back as text", structured_output=False)
def echo(message: str) -> str:
    return message


@mcp.tool(description="Add two integers; structured output")
def add(a: int, b: int) -> Sum:
    return Sum(sum=a + b)


@mcp.tool(description="Greet someone whose name is asked from the user (elicitation)", structured_output=False)
def greet(name: Annotated[Name, Resolve(ask_name)]) -> str:
    return f"Hello, {name.name}!"


@mcp.tool(description="Count to n, reporting progress", structured_output=False)
async def count(n: int, ctx: Context) -> str:
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return f"counted to {n}"


@mcp.tool(description="Fail on purpose", structured_output=False)
def fail() -> str:
    raise ValueError("this tool always fails")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("host", nargs="?")
    parser.add_argument("port", nargs="?", type=int)
    args = parser.parse_args()
    if args.stdio:
        mcp.run("stdio")
        return

    import uvicorn

    app = mcp.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, host=args.host)
    print(f"modern_server listening on http://{args.host}:{args.port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, workers=1, access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
