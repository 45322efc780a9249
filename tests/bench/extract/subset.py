"""Write subset.txt: the regression subset of the extraction benchmark (floor.sh).

12 pages of each dataset in the cache, picked by a fixed hash order of their names (so the pick
is stable and spread), skipping pages whose ground truth is empty or under 200 characters.
Each line: <dataset>/<file> <sha256 of the UTF-8 page> <sha256 of the ground truth text>;
bench.py --subset refuses to run when a page or its truth differs from these hashes.

Usage: subset.py CACHE > subset.txt
"""
import hashlib
import json
import os
import sys

PER_DATASET = 12


def main():
    cache = sys.argv[1]
    print('# The extraction benchmark\'s regression subset (tests/bench/extract/subset.py).')
    print('# <dataset>/<file> <sha256 of pages/<file>> <sha256 of its ground truth text>')
    for ds in sorted(os.listdir(cache)):
        tp = os.path.join(cache, ds, 'truth.jsonl')
        if not os.path.exists(tp):
            continue
        rows = [json.loads(line) for line in open(tp, encoding='utf-8')]
        rows = [r for r in rows if len(r['plaintext'].strip()) >= 200]
        rows.sort(key=lambda r: hashlib.sha256(f'fleetgate-extract-subset/{ds}/{r["file"]}'.encode()).hexdigest())
        for r in sorted(rows[:PER_DATASET], key=lambda r: r['file']):
            page = open(os.path.join(cache, ds, 'pages', r['file']), 'rb').read()
            print(f'{ds}/{r["file"]} {hashlib.sha256(page).hexdigest()} '
                  f'{hashlib.sha256(r["plaintext"].encode()).hexdigest()}')


if __name__ == '__main__':
    main()
