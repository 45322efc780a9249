"""The Python-side extractors of the benchmark, timed per page in process.

  trafilatura  trafilatura 2.0.0 with its default settings: trafilatura.extract(html)
  wholepage    a whole-page text baseline: Resiliparse's html2text with main_content=False
               (every visible text of the page, no boilerplate removal)

Usage: run_python.py EXTRACTOR PAGES.tsv OUT.jsonl
PAGES.tsv holds "dataset<TAB>path" lines; OUT.jsonl gets one
{"dataset", "file", "text", "micros", "error"} line per page (micros: the call alone, the page
already read into memory as text).
"""
import json
import os
import sys
import time
import warnings


def make(name):
    if name == 'trafilatura':
        import trafilatura

        return lambda html: trafilatura.extract(html)
    if name == 'wholepage':
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree

        return lambda html: extract_plain_text(HTMLTree.parse(html), main_content=False)
    raise SystemExit(f'unknown extractor {name}')


def main():
    name, pages, out = sys.argv[1:4]
    fn = make(name)
    warnings.simplefilter('ignore')
    import logging

    logging.disable(logging.CRITICAL)
    with open(pages, encoding='utf-8') as f, open(out, 'w', encoding='utf-8') as o:
        for line in f:
            ds, path = line.rstrip('\n').split('\t')
            with open(path, encoding='utf-8') as p:
                html = p.read()
            err = None
            t0 = time.perf_counter_ns()
            try:
                text = fn(html) or ''
            except Exception as e:  # scored as the empty string, as WCEB does
                text, err = '', type(e).__name__
            micros = (time.perf_counter_ns() - t0) // 1000
            o.write(json.dumps({'dataset': ds, 'file': os.path.basename(path), 'text': text,
                                'micros': micros, 'error': err}, ensure_ascii=False) + '\n')


if __name__ == '__main__':
    main()
