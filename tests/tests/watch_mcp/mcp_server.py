"""A real streamable-HTTP MCP server (the Python `mcp` SDK) for fleetgate's watch tests.

Usage: python mcp_server.py ITEMS_FILE

Binds 127.0.0.1 on a free port, prints `{"port": N}` on stdout, and serves one read tool,
`list_items`, that returns ITEMS_FILE's text as is (so the items arrive as JSON embedded in a
text block). While ITEMS_FILE + ".fail" exists the tool fails (an MCP `isError` result).
"""

import asyncio
import json
import os
import socket
import sys

import uvicorn

try:
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.server.fastmcp.exceptions import ToolError

ITEMS = sys.argv[1]
server = Server("fleetgate-watch-test")


@server.tool()
def list_items(folder: str = "inbox") -> str:
    """List the items of a folder (read-only)."""
    if os.path.exists(ITEMS + ".fail"):
        raise ToolError("upstream unavailable")
    with open(ITEMS, encoding="utf-8") as f:
        return f.read()


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # Listening before the port is printed: early connections queue until uvicorn accepts.
    sock.listen(128)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


asyncio.run(main())
