"""Runs Hermes' own web_search tool once and prints its JSON result.

Usage: python hermes_web_search.py LIMIT QUERY
Hermes is configured by the environment the test sets: HERMES_HOME (config.yaml selecting the
searxng search backend) and SEARXNG_URL (the fleetgate api listener's /searxng prefix).
"""
import sys

from tools.web_tools import web_search_tool

print(web_search_tool(sys.argv[2], limit=int(sys.argv[1])))
