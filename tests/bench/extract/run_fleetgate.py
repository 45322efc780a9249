"""fleetgate's extractor on the benchmark pages, timed per page.

Usage: run_fleetgate.py BIN main|full PAGES.tsv OUT.jsonl

Two ways to run, chosen by what the binary offers:
  convert  `fleetgate-proxy convert [--full-page] FILE...` (one JSON line per file:
           {"file", "title", "markdown", "micros", "error"}); micros is the binary's own
           in-process time for the page. Files are passed in batches. The pages are UTF-8 (the
           benchmark decodes every page once, as WCEB does) but many still carry their original
           `<meta charset=windows-1252>` or the like. So convert is told what a server would say,
           `--content-type "text/html; charset=utf-8"`, which outranks the meta prescan as in a
           browser; a convert without that option gets copies with a UTF-8 byte order mark, which
           outranks it too. FLEETGATE_EXTRACT_CONVERT_INPUT=header|bom|plain picks one.
  extract  until `convert` exists: `fleetgate-proxy extract --policy P --char-limit 2000000 URL`
           for each page, served by a loopback origin (127.0.0.1, port 0) with
           `Content-Type: text/html; charset=utf-8`; the policy is the `direct` backend with
           the cache off and loopback allowed. micros is the wall time of the whole call
           (process start, policy load, loopback fetch, conversion). The direct backend of
           that build has no main-content mode, so `main` and `full` are the same output.
The markdown (convert) or content (extract) is the text scored; the title is not added.
OUT.jsonl gets {"dataset", "file", "text", "micros", "error", "mode"} per page.
"""
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

BATCH = 64


def convert_help(binary):
    r = subprocess.run([binary, 'convert', '--help'], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def run_convert(binary, view, pages, helptext):
    out = {}
    how = os.environ.get('FLEETGATE_EXTRACT_CONVERT_INPUT') or ('header' if '--content-type' in helptext else 'bom')
    bom = how == 'bom'
    extra = ['--content-type', 'text/html; charset=utf-8'] if how == 'header' else []
    for i in range(0, len(pages), BATCH):
        batch = pages[i:i + BATCH]
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for n, (_, p) in enumerate(batch):
                if bom:
                    f = os.path.join(tmp, f'{n:03}-{os.path.basename(p)}')
                    with open(p, 'rb') as src, open(f, 'wb') as dst:
                        dst.write(b'\xef\xbb\xbf' + src.read())
                    files.append(f)
                else:
                    files.append(p)
            cmd = [binary, 'convert'] + (['--full-page'] if view == 'full' else []) + extra + files
            r = subprocess.run(cmd, capture_output=True, text=True)
        got = {}
        for line in r.stdout.split("\n"):  # not splitlines: U+2028 may sit inside a JSON string
            if line.strip():
                j = json.loads(line)
                got[j.get('file')] = j
        for f, (ds, p) in zip(files, batch):
            j = got.get(f) or got.get(os.path.basename(f))
            if j is None:
                out[p] = {'text': '', 'micros': None, 'error': f'no_output(exit {r.returncode})'}
            else:
                out[p] = {'text': j.get('markdown') or '', 'micros': j.get('micros'),
                          'error': j.get('error')}
    return out, 'convert'


class _Handler(http.server.BaseHTTPRequestHandler):
    root = '/'

    def do_GET(self):
        path = os.path.join(self.root, urllib.parse.unquote(self.path.lstrip('/')))
        try:
            with open(path, 'rb') as f:
                body = f.read()
        except OSError:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header('Content-Type', 'text/html; charset=utf-8')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def run_extract(binary, pages):
    root = os.path.commonpath([p for _, p in pages])
    if not os.path.isdir(root):
        root = os.path.dirname(root)
    handler = type('H', (_Handler,), {'root': root})
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        policy = os.path.join(tmp, 'policy.yaml')
        with open(policy, 'w') as f:
            f.write('version: v1\n'
                    'web:\n  extractBackend: direct\n  charLimit: 500000\n  rescue: []\n'
                    '  cache:\n    enabled: false\n'
                    'egress:\n  allowCIDRs: ["127.0.0.1/32"]\n'
                    f'store:\n  root: {tmp}/store\n')
        for ds, p in pages:
            url = f'http://127.0.0.1:{port}/' + urllib.parse.quote(os.path.relpath(p, root))
            t0 = time.perf_counter_ns()
            r = subprocess.run([binary, 'extract', '--policy', policy, '--char-limit', '2000000', url],
                               capture_output=True, text=True)
            micros = (time.perf_counter_ns() - t0) // 1000
            text, err = '', None
            try:
                body = json.loads(r.stdout)
                if 'results' in body and body['results']:
                    row = body['results'][0]
                    text = row.get('content') or ''
                    err = row.get('error')
                else:
                    err = body.get('code') or 'refused'
            except ValueError:
                err = f'exit_{r.returncode}'
            out[p] = {'text': text, 'micros': micros, 'error': err}
    srv.shutdown()
    return out, 'extract'


def main():
    binary, view, pages_file, out_file = sys.argv[1:5]
    pages = [tuple(line.rstrip('\n').split('\t')) for line in open(pages_file, encoding='utf-8') if line.strip()]
    helptext = convert_help(binary)
    if helptext is not None:
        res, mode = run_convert(binary, view, pages, helptext)
    else:
        res, mode = run_extract(binary, pages)
    with open(out_file, 'w', encoding='utf-8') as o:
        for ds, p in pages:
            r = res[p]
            o.write(json.dumps({'dataset': ds, 'file': os.path.basename(p), 'mode': mode, **r},
                               ensure_ascii=False) + '\n')


if __name__ == '__main__':
    main()
