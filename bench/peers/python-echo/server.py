"""python-echo: a peer MCP server built only from the PyPI `mcp` SDK (2.x).

Serves one tool `echo` either statelessly over Streamable HTTP with JSON
responses (MCPServer, the 2.x name of FastMCP; uvicorn, one worker, no access
log) at /mcp, or over stdio.

Usage:
    python server.py [--schema simple|realistic] HOST PORT
    python server.py [--schema simple|realistic] --stdio
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from enum import Enum
from typing import Annotated

from pydantic import BaseModel, EmailStr, Field

from mcp.server.mcpserver import MCPServer


# --------------------------------------------------------------- realistic schema
# Mirrors RealisticEchoArgs in ../rmcp-echo/src/main.rs: the tool's arguments are
# these ~10 top-level fields (not one nested "args" object).


class Priority(str, Enum):
    low = "low"
    normal = "normal"
    high = "high"
    urgent = "urgent"


class Channel(str, Enum):
    email = "email"
    sms = "sms"
    push = "push"
    webhook = "webhook"


class Address(BaseModel):
    street: Annotated[str, Field(description="Street and number.")]
    city: str
    country: Annotated[str, Field(min_length=2, max_length=2, description="ISO 3166-1 alpha-2 country code.")]
    postal_code: str | None = None


def build_server(realistic: bool) -> MCPServer:
    # structured_output=False: reply with text content only, like the rmcp peer
    # (the default would add outputSchema and structuredContent for `-> str`).
    mcp = MCPServer("python-echo", version="0.1.0", log_level="WARNING")

    if not realistic:

        @mcp.tool(description="Echo the message back as text content", structured_output=False)
        def echo(message: Annotated[str, Field(description="The text to echo back.")]) -> str:
            return message

    else:

        @mcp.tool(
            description="Echo the message back as text content (realistic argument schema)",
            structured_output=False,
        )
        def echo(
            message: Annotated[str, Field(min_length=1, max_length=4096, description="The text to echo back.")],
            recipient: Annotated[EmailStr, Field(description="Recipient e-mail address.")],
            send_at: Annotated[datetime, Field(description="When to deliver (RFC 3339 date-time).")],
            priority: Priority,
            channel: Channel,
            max_retries: Annotated[int, Field(ge=0, le=10, description="How many times to retry delivery.")],
            ttl_seconds: Annotated[int, Field(ge=1, le=86400, description="Time to live in seconds.")],
            address: Annotated[Address, Field(description="Delivery address.")],
            tags: Annotated[list[str] | None, Field(description="Free-form tags.")] = None,
            require_ack: Annotated[bool, Field(description="Whether the recipient must acknowledge.")] = False,
        ) -> str:
            # Every server in the benchmark answers with the message alone, so one check fits all.
            return message

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stdio", action="store_true", help="serve over stdio instead of HTTP")
    parser.add_argument("--schema", choices=["simple", "realistic"], default="simple")
    parser.add_argument("host", nargs="?", default="127.0.0.1")
    parser.add_argument("port", nargs="?", type=int, default=8000)
    args = parser.parse_args()

    mcp = build_server(args.schema == "realistic")

    if args.stdio:
        mcp.run("stdio")
        return

    import uvicorn

    app = mcp.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        host=args.host,
    )
    print(f"python-echo listening on http://{args.host}:{args.port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, workers=1, access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
