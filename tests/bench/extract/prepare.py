"""Derive the benchmark's pages and ground truth from the raw datasets in the cache.

Run by fetch_data.sh inside .tools/extract-venv (Resiliparse pinned in requirements.txt).

For every dataset folder <cache>/<dataset>/raw/{input,gold}/ this writes
  <cache>/<dataset>/pages/<name>.html   the page as UTF-8 text
  <cache>/<dataset>/truth.jsonl         {"file", "page_id", "plaintext"} per page, sorted by file

exactly as the WCEB benchmark's dataset readers (src/extraction_benchmark/dataset_readers.py of
chatnoir-eu/web-content-extraction-benchmark) build their "combined" dataset:
  - every file is read with Resiliparse's detect_encoding (first 100,000 bytes, not HTML5
    compatible) and bytes_to_str with UTF-8 and cp1252 as fallbacks;
  - page_id is the sha256 of the raw HTML file's bytes;
  - CleanEval / CleanPortalEval: the page loses its `<text ...>` wrapper lines; the gold file's
    `URL: ...` line is dropped and its text is the <body> text of the gold markup parsed as HTML,
    with `\\n +` collapsed to `\\n`;
  - Dragnet: the corrected text file as it is;
  - L3S-GN1: the text of the leaf elements carrying the annotation classes .x-nc-sel1/2/3, one
    line break before a leaf whose parent is a block element, leaves joined with a space;
  - Readability: the <body> text of expected.html.
"""
import hashlib
import json
import os
import re
import sys

from resiliparse.parse import bytes_to_str, detect_encoding
from resiliparse.parse.html import HTMLTree, NodeType

BLOCK_PARENTS = {'address', 'article', 'aside', 'blockquote', 'canvas', 'dd', 'div', 'dl', 'dt',
                 'fieldset', 'figcaption', 'figure', 'footer', 'form', 'h1', 'h2', 'h3', 'h4', 'h5',
                 'h6', 'header', 'hr', 'li', 'main', 'nav', 'noscript', 'ol', 'p', 'pre', 'section',
                 'table', 'tfoot', 'ul', 'video'}
TEXT_TAG_RE = re.compile(r'(?:^<text [^>]+>\s*|\s*</text>$)', flags=re.MULTILINE)


def read_file(path):
    with open(path, 'rb') as f:
        data = f.read()
    enc = detect_encoding(data, max_len=100000, html5_compatible=False) or 'utf-8'
    return data, bytes_to_str(data, encoding=enc, fallback_encodings=['utf-8', 'cp1252'])


def css_leaf_text(html, selector):
    tree = HTMLTree.parse(html)
    content = ''
    for e in tree.body.query_selector_all(selector):
        if len(e.child_nodes) != 1 or e.first_child.type != NodeType.TEXT:
            continue
        if e.parent.tag in BLOCK_PARENTS:
            content += '\n'
        content += e.text.strip() + ' '
    return content.strip()


def cleaneval_truth(text):
    text = HTMLTree.parse(text).body.text
    text = re.sub(r'\n +', '\n', text)
    return re.sub(r'^\s*URL:[^\n]+\s*', '', text)


def truth_of(dataset, gold_text):
    if dataset in ('cleaneval', 'cleanportaleval'):
        return cleaneval_truth(gold_text)
    if dataset == 'dragnet':
        return gold_text
    if dataset == 'l3s-gn1':
        return css_leaf_text(gold_text, '.x-nc-sel1, .x-nc-sel2, .x-nc-sel3')
    if dataset == 'readability':
        return HTMLTree.parse(gold_text).body.text
    raise ValueError(f'unknown dataset {dataset}')


def prepare(cache, dataset):
    raw = os.path.join(cache, dataset, 'raw')
    pages = os.path.join(cache, dataset, 'pages')
    os.makedirs(pages, exist_ok=True)
    rows = []
    for name in sorted(os.listdir(os.path.join(raw, 'gold'))):
        stem = name[:-len('.txt')]
        raw_html, html = read_file(os.path.join(raw, 'input', stem + '.html'))
        if dataset in ('cleaneval', 'cleanportaleval'):
            html = TEXT_TAG_RE.sub('', html)
        _, gold = read_file(os.path.join(raw, 'gold', name))
        truth = truth_of(dataset, gold)
        with open(os.path.join(pages, stem + '.html'), 'w', encoding='utf-8') as f:
            f.write(html)
        rows.append({'file': stem + '.html', 'page_id': hashlib.sha256(raw_html).hexdigest(),
                     'plaintext': truth})
    with open(os.path.join(cache, dataset, 'truth.jsonl'), 'w', encoding='utf-8') as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + '\n')
    return len(rows)


def datasets(cache):
    return sorted(d for d in os.listdir(cache) if os.path.isdir(os.path.join(cache, d, 'raw')))


def summary(cache):
    total = 0
    for ds in datasets(cache):
        with open(os.path.join(cache, ds, 'truth.jsonl'), encoding='utf-8') as f:
            rows = [json.loads(line) for line in f]
        size = sum(os.path.getsize(os.path.join(cache, ds, 'pages', r['file'])) for r in rows)
        empty = sum(1 for r in rows if not r['plaintext'].strip())
        total += len(rows)
        print(f'{ds:16} {len(rows):5} pages  {size / 1e6:6.1f} MB html  {empty} with empty ground truth')
    print(f'{"total":16} {total:5} pages in {cache}')


def main():
    if sys.argv[1] == '--summary':
        summary(sys.argv[2])
        return
    cache = sys.argv[1]
    for ds in datasets(cache):
        n = prepare(cache, ds)
        print(f'prepared {ds}: {n} pages', file=sys.stderr)


if __name__ == '__main__':
    main()
