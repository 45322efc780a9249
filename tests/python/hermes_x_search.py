"""Hermes Agent's own x_search tool, run once: prints its JSON result on the last line.

Usage: python hermes_x_search.py QUERY   (XAI_API_KEY and XAI_BASE_URL from the environment)
"""
import json
import sys

from tools.x_search_tool import x_search_tool

print(json.dumps(json.loads(x_search_tool(sys.argv[1]))))
