"""Runs Hermes' own web_extract tool once and prints its JSON result.

Usage: python hermes_web_extract.py CHAR_LIMIT URL...
Hermes is configured by the environment the test sets: HERMES_HOME (with a config.yaml that
selects the firecrawl extract backend) and FIRECRAWL_API_URL (the fleetgate api listener).
"""
import asyncio
import sys

from tools.web_tools import web_extract_tool

char_limit = int(sys.argv[1])
urls = sys.argv[2:]
print(asyncio.run(web_extract_tool(urls, char_limit=char_limit)))
