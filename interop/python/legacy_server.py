"""legacy_server: an MCP server that speaks only 2025-11-25 (PyPI `mcp` 1.x, FastMCP),
for Toolwire's dual-era interop tests.

Usage:
    python legacy_server.py --stdio
    python legacy_server.py HOST PORT        # stateful Streamable HTTP at /mcp
"""

from __future__ import annotations

import argparse

from pydantic import BaseModel

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("legacy-interop", log_level="WARNING")


class Sum(BaseModel):
    sum: int


class Name(BaseModel):
    name: str


@mcp.tool(description="Echo the message back as text")
def echo(message: str) -> str:
    return message


@mcp.tool(description="Add two integers; structured output")
def add(a: int, b: int) -> Sum:
    return Sum(sum=a + b)


@mcp.tool(description="Greet someone whose name is asked from the user (elicitation)")
async def greet(ctx: Context) -> str:
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action != "accept":
        return f"no name ({answer.action})"
    return f"Hello, {answer.data.name}!"


@mcp.tool(description="Count to n, reporting progress")
async def count(n: int, ctx: Context) -> str:
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return f"counted to {n}"


@mcp.tool(description="Fail on purpose")
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
    else:
        mcp.settings.host = args.host
        mcp.settings.port = args.port
        mcp.run("streamable-http")


if __name__ == "__main__":
    main()
