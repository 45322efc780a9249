"""Run the extractors on the benchmark pages, score them, write the report.

Usage: bench.py [--cache DIR] [--out DIR] [--subset FILE] [--datasets a,b] [--only NAMES]
                [--candidates] [--rescore] [--floor FILE] [--write-floor FILE]

Extractors (each on the same pages in the same run, outputs kept in OUT/extract-bench/):
  fleetgate-main   fleetgate's direct backend, main content (convert; extract until it exists)
  fleetgate-full   the same with --full-page
  trafilatura      trafilatura 2.0.0, extract(html) with defaults
  readability      Readability.js 0.6.0 on jsdom, textContent
  wholepage        whole-page text baseline (Resiliparse html2text, main_content=False)
Rust candidates, run only when asked (--candidates adds them all, or name them in --only;
the binary is candidates/'s fleetgate-extract-candidates: --candidates-bin or
FLEETGATE_CANDIDATES_BIN; run.sh builds it):
  dom_smoothie, dom_smoothie-text                 dom_smoothie 0.19, its markdown / raw text
  rs_trafilatura, rs_trafilatura-text             rs-trafilatura 0.2, its markdown / text
  readability_rs, readability_rs-text             readabilityrs 0.1, its markdown / text
  readability_kumabook                            readability 0.3, its text
  (the markdown ones are scored as returned and words read, as fleetgate is; the text ones as
  returned, as trafilatura and Readability.js are)
Scored views (rows of the report): fleetgate main as returned, fleetgate main words-read,
fleetgate full page as returned and words-read, and each other extractor's text.

Writes OUT/extract-bench.md (the tables) and OUT/extract-bench-pages.jsonl (one line per page:
dataset, file, and per view f1 / precision / recall, plus chars, ms and error per extractor).
"""
import argparse
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import score  # noqa: E402

ROOT = os.path.abspath(os.path.join(here, '..', '..', '..'))
EXTRACTORS = ['fleetgate-main', 'fleetgate-full', 'trafilatura', 'readability', 'wholepage']
# view name -> (extractor, normalise)
VIEWS = {
    'fleetgate main, as returned': ('fleetgate-main', False),
    'fleetgate main, words read': ('fleetgate-main', True),
    'fleetgate full page, as returned': ('fleetgate-full', False),
    'fleetgate full page, words read': ('fleetgate-full', True),
    'trafilatura 2.0.0': ('trafilatura', False),
    'Readability.js 0.6.0 (jsdom)': ('readability', False),
    'whole-page text (baseline)': ('wholepage', False),
}
# The Rust candidates (candidates/, run_candidates.py): name -> (view label, output is markdown)
CANDIDATES = {
    'dom_smoothie': ('dom_smoothie 0.19 (markdown)', True),
    'dom_smoothie-text': ('dom_smoothie 0.19 (text)', False),
    'rs_trafilatura': ('rs-trafilatura 0.2 (markdown)', True),
    'rs_trafilatura-text': ('rs-trafilatura 0.2 (text)', False),
    'readability_rs': ('readabilityrs 0.1 (markdown)', True),
    'readability_rs-text': ('readabilityrs 0.1 (text)', False),
    'readability_kumabook': ('readability 0.3 (kumabook, text)', False),
}
for _name, (_label, _md) in CANDIDATES.items():
    if _md:
        VIEWS[f'{_label}, as returned'] = (_name, False)
        VIEWS[f'{_label}, words read'] = (_name, True)
    else:
        VIEWS[_label] = (_name, False)


def load_pages(cache, datasets, subset):
    want = None
    if subset:
        want = {}
        for line in open(subset, encoding='utf-8'):
            line = line.strip()
            if line and not line.startswith('#'):
                name, page_sha, truth_sha = line.split()
                want[name] = (page_sha, truth_sha)
    pages = []
    for ds in sorted(os.listdir(cache)):
        tp = os.path.join(cache, ds, 'truth.jsonl')
        if not os.path.exists(tp) or (datasets and ds not in datasets):
            continue
        for line in open(tp, encoding='utf-8'):
            r = json.loads(line)
            name = f'{ds}/{r["file"]}'
            if want is not None and name not in want:
                continue
            path = os.path.join(cache, ds, 'pages', r['file'])
            pages.append({'dataset': ds, 'file': r['file'], 'path': path, 'truth': r['plaintext']})
    if want is not None:
        found = {f'{p["dataset"]}/{p["file"]}': p for p in pages}
        missing = sorted(set(want) - set(found))
        if missing:
            raise SystemExit(f'subset: {len(missing)} pages missing from the cache, e.g. {missing[0]}')
        for name, (page_sha, truth_sha) in want.items():
            p = found[name]
            if sha(open(p['path'], 'rb').read()) != page_sha or sha(p['truth'].encode()) != truth_sha:
                raise SystemExit(f'subset: {name} differs from the hashes in {subset}')
    return pages


def sha(b):
    return hashlib.sha256(b).hexdigest()


CHUNK = {'readability': 200}  # jsdom's heap grows over a long run: one node process per chunk


def run_extractor(name, pages, outdir, fleetgate_bin, candidates_bin=None):
    out = os.path.join(outdir, f'{name}.jsonl')
    tsv = os.path.join(outdir, 'pages.tsv')
    t0 = time.time()
    if name == 'fleetgate-full' and os.path.exists(os.path.join(outdir, 'fleetgate-main.jsonl')):
        main_rows = [json.loads(line) for line in open(os.path.join(outdir, 'fleetgate-main.jsonl'), encoding='utf-8')]
        if main_rows and main_rows[0].get('mode') == 'extract':
            # extract has no main-content mode: the full page is the very same output
            with open(out, 'w', encoding='utf-8') as f:
                for r in main_rows:
                    f.write(json.dumps(r, ensure_ascii=False) + '\n')
            return
    if name.startswith('fleetgate'):
        if not fleetgate_bin:
            raise SystemExit('bench.py: --fleetgate-bin (or FLEETGATE_PROXY_BIN) is needed for fleetgate')
        cmd = [sys.executable, os.path.join(here, 'run_fleetgate.py'), fleetgate_bin,
               'full' if name == 'fleetgate-full' else 'main']
    elif name in CANDIDATES:
        if not candidates_bin:
            raise SystemExit('bench.py: --candidates-bin (or FLEETGATE_CANDIDATES_BIN) is needed for ' + name)
        cmd = [sys.executable, os.path.join(here, 'run_candidates.py'), candidates_bin, name]
    elif name == 'readability':
        cmd = ['node', '--max-old-space-size=4096', os.path.join(here, 'readability.mjs')]
    else:
        cmd = [sys.executable, os.path.join(here, 'run_python.py'), name]
    lines = open(tsv, encoding='utf-8').read().splitlines(keepends=True)
    size = CHUNK.get(name, len(lines)) or 1
    with open(out, 'w', encoding='utf-8') as o:
        for i in range(0, len(lines), size):
            part_in, part_out = os.path.join(outdir, f'{name}.part.tsv'), os.path.join(outdir, f'{name}.part.jsonl')
            with open(part_in, 'w', encoding='utf-8') as f:
                f.writelines(lines[i:i + size])
            subprocess.run(cmd + [part_in, part_out], check=True)
            o.write(open(part_out, encoding='utf-8').read())
            os.remove(part_in)
            os.remove(part_out)
    print(f'  {name}: {len(pages)} pages in {time.time() - t0:.0f} s', file=sys.stderr)


def _score_one(args):
    truth, text, normalise = args
    if normalise:
        text = score.words_read(text)
    return score.rouge_lsum(truth, text) + score.shingles(truth, text)


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fmt(x, nd=3):
    return '—' if x is None else f'{x:.{nd}f}'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--cache', default=os.environ.get('FLEETGATE_EXTRACT_DATA',
                                                      os.path.expanduser('~/.cache/fleetgate/extract-data')))
    ap.add_argument('--out', default=os.path.join(ROOT, 'target'))
    ap.add_argument('--subset')
    ap.add_argument('--datasets')
    ap.add_argument('--only', help='comma-separated extractors to run (default: all)')
    ap.add_argument('--rescore', action='store_true', help='score the outputs of the last run again')
    ap.add_argument('--candidates', action='store_true',
                    help='also run the Rust candidate extractors (' + ', '.join(CANDIDATES) + ')')
    ap.add_argument('--fleetgate-bin', default=os.environ.get('FLEETGATE_PROXY_BIN'))
    ap.add_argument('--candidates-bin', default=os.environ.get('FLEETGATE_CANDIDATES_BIN'))
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--name', default='extract-bench', help='report file names: NAME.md, NAME-pages.jsonl')
    ap.add_argument('--floor', help='check fleetgate main against this floor file; exit 1 below it')
    ap.add_argument('--write-floor', help='write fleetgate main\'s figures as a floor file')
    args = ap.parse_args()

    datasets = set(args.datasets.split(',')) if args.datasets else None
    pages = load_pages(args.cache, datasets, args.subset)
    extractors = args.only.split(',') if args.only else list(EXTRACTORS)
    if args.candidates:
        extractors += [c for c in CANDIDATES if c not in extractors]
    unknown = [e for e in extractors if e not in EXTRACTORS and e not in CANDIDATES]
    if unknown:
        raise SystemExit(f'bench.py: unknown extractor(s) {", ".join(unknown)}')
    outdir = os.path.join(args.out, args.name)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, 'pages.tsv'), 'w', encoding='utf-8') as f:
        for p in pages:
            f.write(f'{p["dataset"]}\t{p["path"]}\n')
    if not args.rescore:
        print(f'extract bench: {len(pages)} pages, extractors {", ".join(extractors)}', file=sys.stderr)
        for name in extractors:
            run_extractor(name, pages, outdir, args.fleetgate_bin, args.candidates_bin)

    outputs, modes = {}, {}
    for name in extractors:
        rows = {}
        for line in open(os.path.join(outdir, f'{name}.jsonl'), encoding='utf-8'):
            r = json.loads(line)
            rows[(r['dataset'], r['file'])] = r
            modes[name] = r.get('mode')
        outputs[name] = rows

    views = {v: e for v, e in VIEWS.items() if e[0] in outputs}
    # Scores are cached by what they depend on (the scorer's code, the truth, the text, the view),
    # so a --rescore or a second run over unchanged outputs scores only what changed.
    cache_path = os.path.join(outdir, 'scores-cache.jsonl')
    code = sha(b''.join(open(os.path.join(here, f), 'rb').read() for f in ('score.py', 'lcs.c')))[:16]
    cached = {}
    if os.path.exists(cache_path):
        for line in open(cache_path, encoding='utf-8'):
            k, v = json.loads(line)
            cached[k] = tuple(v)
    jobs, keys, hashes = [], [], []
    for v, (ext, norm) in views.items():
        for p in pages:
            r = outputs[ext][(p['dataset'], p['file'])]
            h = sha(json.dumps([code, norm, p['truth'], r['text']]).encode())
            keys.append((v, p['dataset'], p['file']))
            hashes.append(h)
            if h not in cached:
                jobs.append((h, (p['truth'], r['text'], norm)))
    todo = {}
    for h, job in jobs:
        todo.setdefault(h, job)
    t0 = time.time()
    with multiprocessing.Pool(args.jobs) as pool:
        results = pool.map(_score_one, list(todo.values()), chunksize=8)
    with open(cache_path, 'a', encoding='utf-8') as f:
        for h, res in zip(todo, results):
            cached[h] = tuple(res)
            f.write(json.dumps([h, res]) + '\n')
    print(f'  scored {len(todo)} page outputs in {time.time() - t0:.0f} s '
          f'({len(keys) - len(jobs)} from the cache)', file=sys.stderr)
    scores = {k: cached[h] for k, h in zip(keys, hashes)}
    score.sentences('x')  # the splitter's name for the report

    # per-page dump
    dump = os.path.join(args.out, f'{args.name}-pages.jsonl')
    with open(dump, 'w', encoding='utf-8') as f:
        for p in pages:
            k = (p['dataset'], p['file'])
            row = {'dataset': p['dataset'], 'file': p['file'], 'truth_chars': len(p['truth'])}
            for v in views:
                pr, rc, f1, spr, src = scores[(v, *k)]
                row[v] = {'f1': round(f1, 4), 'precision': round(pr, 4), 'recall': round(rc, 4),
                          'shingles': {'precision': None if spr is None else round(spr, 4),
                                       'recall': None if src is None else round(src, 4)}}
            for e in outputs:
                r = outputs[e][k]
                row[e] = {'chars': len(r['text']), 'ms': None if r['micros'] is None else r['micros'] / 1000,
                          'error': r['error']}
            f.write(json.dumps(row, ensure_ascii=False) + '\n')

    # tables
    ds_list = sorted({p['dataset'] for p in pages})
    by_ds = {ds: [p for p in pages if p['dataset'] == ds] for ds in ds_list}

    def agg(v, sel):
        vals = [scores[(v, p['dataset'], p['file'])] for p in sel]
        return tuple(mean([x[i] for x in vals]) for i in (2, 0, 1))  # f1, p, r

    def agg_shingles(v, sel):
        return score.shingle_f1([scores[(v, p['dataset'], p['file'])][3:5] for p in sel])  # f1, p, r

    lines = ['# Content extraction benchmark', '',
             f'{len(pages)} pages ({", ".join(f"{ds} {len(by_ds[ds])}" for ds in ds_list)}); '
             f'metric: WCEB\'s ROUGE-LSum on whitespace tokens, per-page mean '
             f'(tests/bench/extract/score.py); sentence splitter: {score.SPLITTER_NAME or "n/a"}.',
             f'fleetgate ran through `{modes.get("fleetgate-main") or modes.get("fleetgate-full") or "—"}`'
             + (' (the direct backend of this build has no main-content mode: main = full page; '
                'time = the whole CLI call incl. process start and loopback fetch)'
                if 'extract' in (modes.get('fleetgate-main'), modes.get('fleetgate-full')) else '') + '.',
             '']
    overall = {}
    lines += ['## Overall', '',
              '| extractor | F1 (micro) | precision | recall | F1 (macro) | ' +
              ' | '.join(f'F1 {ds}' for ds in ds_list) + ' |',
              '|---|---:|---:|---:|---:|' + '---:|' * len(ds_list)]
    for v in views:
        f1, pr, rc = agg(v, pages)
        macro = mean([agg(v, by_ds[ds])[0] for ds in ds_list])
        overall[v] = (f1, pr, rc, macro)
        lines.append(f'| {v} | **{fmt(f1)}** | {fmt(pr)} | {fmt(rc)} | {fmt(macro)} | ' +
                     ' | '.join(fmt(agg(v, by_ds[ds])[0]) for ds in ds_list) + ' |')
    lines += ['', '## Overall, word 4-gram shingles', '',
              'The second metric (score.py\'s module doc): 4-grams of word tokens, F1 of the mean precision '
              'and the mean recall; a link target inside a sentence costs here what it costs a reader.', '',
              '| extractor | F1 | precision | recall | ' + ' | '.join(f'F1 {ds}' for ds in ds_list) + ' |',
              '|---|---:|---:|---:|' + '---:|' * len(ds_list)]
    for v in views:
        f1, pr, rc = agg_shingles(v, pages)
        lines.append(f'| {v} | **{fmt(f1)}** | {fmt(pr)} | {fmt(rc)} | ' +
                     ' | '.join(fmt(agg_shingles(v, by_ds[ds])[0]) for ds in ds_list) + ' |')
    with_cands = any(e in CANDIDATES for e in outputs)
    lines += ['', '## Cost per page', '',
              '| extractor | mean ms / page | median ms | mean chars of output | errors | empty output, truth not empty |'
              + (' panics (caught) | crashes |' if with_cands else ''),
              '|---|---:|---:|---:|---:|---:|' + ('---:|---:|' if with_cands else '')]
    for e in outputs:
        rows = [outputs[e][(p['dataset'], p['file'])] for p in pages]
        ms = sorted(r['micros'] / 1000 for r in rows if r['micros'] is not None)
        empty = sum(1 for r, p in zip(rows, pages) if not r['text'].strip() and p['truth'].strip())
        errors = sum(1 for r in rows if r['error'])
        line = (f'| {e} | {fmt(mean(ms), 1)} | {fmt(ms[len(ms) // 2] if ms else None, 1)} | '
                f'{mean([len(r["text"]) for r in rows]):,.0f} | {errors} | {empty} |')
        if with_cands:
            panics = sum(1 for r in rows if r['error'] == 'panic')
            crashes = sum(1 for r in rows if (r['error'] or '').startswith('crash'))
            line += f' {panics} | {crashes} |'
        lines.append(line)
    timing = {'fleetgate-main': modes.get('fleetgate-main'), 'fleetgate-full': modes.get('fleetgate-full')}
    lines += ['', 'Time: trafilatura, Readability.js (DOM parse included)'
              + (', the Rust candidates (UTF-8 decoding, parse, extraction, output conversion)' if with_cands else '')
              + ' and the baseline in process; fleetgate '
              + ('as `convert` reports it (in process)' if 'convert' in timing.values() else
                 'the whole `extract` CLI call (process start, policy load, loopback fetch, conversion)') + '.',
              'Ground truth: mean ' + f'{mean([len(p["truth"]) for p in pages]):,.0f} characters per page.']
    chars = {e: mean([len(outputs[e][(p['dataset'], p['file'])]['text']) for p in pages]) for e in outputs}
    if 'fleetgate-main' in chars and 'fleetgate-full' in chars and chars['fleetgate-full']:
        saved = f'fleetgate main content: {chars["fleetgate-main"] / chars["fleetgate-full"]:.0%} of the full page\'s characters'
        if 'trafilatura' in chars:
            saved += f'; trafilatura\'s text: {chars["trafilatura"] / chars["fleetgate-full"]:.0%} of them'
        lines.append(saved + ' (what main-content extraction saves the agent to read).')
    lines.append('')
    if 'fleetgate-main' in outputs:
        kept = [p for p in pages if outputs['fleetgate-main'][(p['dataset'], p['file'])]['text'].strip()]
        if 0 < len(kept) < len(pages):
            lines += [f'## The {len(kept)} pages fleetgate main did not return empty', '',
                      'Every extractor on the same pages: what the conversion is worth apart from empty outputs.', '',
                      '| extractor | F1 | precision | recall |', '|---|---:|---:|---:|']
            for v in views:
                f1, pr, rc = agg(v, kept)
                lines.append(f'| {v} | {fmt(f1)} | {fmt(pr)} | {fmt(rc)} |')
            lines.append('')
    for ds in ds_list:
        lines += [f'## {ds} ({len(by_ds[ds])} pages)', '', '| extractor | F1 | precision | recall |',
                  '|---|---:|---:|---:|']
        for v in views:
            f1, pr, rc = agg(v, by_ds[ds])
            lines.append(f'| {v} | {fmt(f1)} | {fmt(pr)} | {fmt(rc)} |')
        lines.append('')
    md = '\n'.join(lines)
    with open(os.path.join(args.out, f'{args.name}.md'), 'w', encoding='utf-8') as f:
        f.write(md)
    print(md)
    print(f'\nwritten: {os.path.join(args.out, args.name + ".md")}, {dump}', file=sys.stderr)

    main_views = ('fleetgate main, as returned', 'fleetgate main, words read')
    if args.write_floor:
        floor = {'pages': len(pages), 'subset': os.path.basename(args.subset or ''),
                 'tolerance': 0.01,
                 'f1_as_returned': round(overall[main_views[0]][0], 4),
                 'f1_words_read': round(overall[main_views[1]][0], 4),
                 'fleetgate_mode': modes.get('fleetgate-main')}
        with open(args.write_floor, 'w') as f:
            json.dump(floor, f, indent=2)
            f.write('\n')
        print(f'wrote {args.write_floor}: {floor}', file=sys.stderr)
    if args.floor:
        floor = json.load(open(args.floor))
        bad = []
        for key, v in (('f1_as_returned', main_views[0]), ('f1_words_read', main_views[1])):
            got = overall[v][0]
            ok = got >= floor[key] - floor.get('tolerance', 0.01)
            print(f'extract floor: {v}: F1 {got:.4f} (floor {floor[key]:.4f} - {floor.get("tolerance", 0.01)}) '
                  f'{"ok" if ok else "BELOW"}', file=sys.stderr)
            if not ok:
                bad.append(key)
        if bad:
            sys.exit(1)


if __name__ == '__main__':
    main()
