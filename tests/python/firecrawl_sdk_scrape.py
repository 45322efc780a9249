"""Scrapes URLs with the firecrawl SDK against a Firecrawl-compatible API and prints JSON lines.

Usage: python firecrawl_sdk_scrape.py API_URL URL...
Each line is {"url", "ok": true, "markdown", "title", "sourceURL", "statusCode"} or
{"url", "ok": false, "error": <the SDK's exception text>}.
"""
import json
import sys

from firecrawl import Firecrawl

client = Firecrawl(api_key="fc-fleetgate-test", api_url=sys.argv[1])
for url in sys.argv[2:]:
    try:
        doc = client.scrape(url, formats=["markdown"])
        meta = doc.metadata
        print(json.dumps({
            "url": url,
            "ok": True,
            "markdown": doc.markdown,
            "title": getattr(meta, "title", None),
            "sourceURL": getattr(meta, "source_url", None) or getattr(meta, "sourceURL", None),
            "statusCode": getattr(meta, "status_code", None) or getattr(meta, "statusCode", None),
        }))
    except Exception as exc:  # the SDK raises typed errors; the text is what Hermes shows
        print(json.dumps({"url": url, "ok": False, "error": str(exc)}))
