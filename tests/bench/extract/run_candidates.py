"""The Rust candidate extractors on the benchmark pages (candidates/, "Rust candidates" in README.md).

Usage: run_candidates.py BIN CANDIDATE PAGES.tsv OUT.jsonl

BIN is candidates/'s release binary, fleetgate-extract-candidates; it has the contract of
`fleetgate-proxy convert` (one JSON line per file: {"file", "title", "markdown", "micros",
"error"}, micros the in-process time of the page) and is called the same way as
run_fleetgate.py calls convert: files in batches, `--content-type "text/html; charset=utf-8"`.
A panic inside a crate is caught by the binary per page (error "panic", empty output). A crash
it cannot catch (a stack overflow aborts the process) loses the rest of that batch: those files
are run again one by one, and a file that still gets no line is recorded with error
"crash(<exit status>)" and an empty output.
OUT.jsonl gets {"dataset", "file", "text", "micros", "error", "mode"} per page, as
run_fleetgate.py writes it (mode: "candidates").
"""
import json
import os
import subprocess
import sys

BATCH = 64
CONTENT_TYPE = ['--content-type', 'text/html; charset=utf-8']


def call(binary, candidate, files):
    r = subprocess.run([binary, '--candidate', candidate] + CONTENT_TYPE + files,
                       capture_output=True, text=True)
    got = {}
    for line in r.stdout.split('\n'):  # not splitlines: U+2028 may sit inside a JSON string
        if line.strip():
            j = json.loads(line)
            got[j.get('file')] = j
    return got, r.returncode


def main():
    binary, candidate, pages_file, out_file = sys.argv[1:5]
    pages = [tuple(line.rstrip('\n').split('\t')) for line in open(pages_file, encoding='utf-8') if line.strip()]
    with open(out_file, 'w', encoding='utf-8') as o:
        for i in range(0, len(pages), BATCH):
            batch = pages[i:i + BATCH]
            files = [p for _, p in batch]
            got, rc = call(binary, candidate, files)
            for ds, p in batch:
                j = got.get(p)
                if j is None:
                    # the process died before this file's line: run it alone
                    alone, rc1 = call(binary, candidate, [p])
                    j = alone.get(p) or {'markdown': '', 'micros': None, 'error': f'crash(exit {rc1})'}
                    if j['error'] and j['error'].startswith('crash'):
                        print(f'  {candidate}: {os.path.basename(p)}: {j["error"]}', file=sys.stderr)
                row = {'dataset': ds, 'file': os.path.basename(p), 'mode': 'candidates',
                       'text': j.get('markdown') or '', 'micros': j.get('micros'), 'error': j.get('error')}
                o.write(json.dumps(row, ensure_ascii=False) + '\n')


if __name__ == '__main__':
    main()
