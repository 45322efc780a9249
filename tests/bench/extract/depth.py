"""The depth test of the extraction benchmark's Rust candidates (README.md, "Rust candidates").

Usage: depth.py [--depths 100000] [--stack main,2048] [--timeout 600] [--mem-gib 4]
                [--only NAMES] [--fleetgate-bin BIN] [--candidates-bin BIN]

For each depth N, a page of N nested <div> elements with a paragraph of text at the bottom
(<body><div><div>...<p>text</p>...</div></div></body>, about 11 bytes per level) is handed to
each extractor in a subprocess of its own, with a wall-clock timeout and an address-space cap
(RLIMIT_AS), so that a stack overflow, an allocation failure or a hang ends that subprocess
only. Extractors: fleetgate-proxy convert (main content; its bounded tree caps the depth
before the tree builder) and the candidates' four crates (dom_smoothie, rs_trafilatura,
readability_rs, readability_kumabook; the -text variants run the same extraction). Stacks:
"main" runs the extraction on the main thread (8 MiB on Linux by default, `ulimit -s`), a
number N runs it on a thread with an N KiB stack (--stack-kib; 2048 is what tokio's worker
and blocking threads get); fleetgate's convert runs on the main thread only.

Outcomes: ok (with the output's characters and whether the paragraph's text is in it), stack
overflow (the runtime's "has overflowed its stack" message, SIGABRT), out of memory (an
allocation refused under the cap), timeout, or the exit status. Prints a markdown table.
"""
import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

CRATES = ['dom_smoothie', 'rs_trafilatura', 'readability_rs', 'readability_kumabook']
SENTENCE = 'The text at the bottom of a very deep tree of div elements. '


def page(n):
    return ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>deep</title></head><body>'
            + '<div>' * n + '<p>' + SENTENCE * 20 + '</p>' + '</div>' * n + '</body></html>')


def limits(mem_bytes):
    def f():
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return f


def run_one(cmd, timeout, mem_bytes):
    import json
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=limits(mem_bytes))
    except subprocess.TimeoutExpired:
        return f'timeout (> {timeout} s)', time.monotonic() - t0
    secs = time.monotonic() - t0
    if 'has overflowed its stack' in r.stderr:
        return 'stack overflow', secs
    if 'memory allocation of' in r.stderr or 'out of memory' in r.stderr.lower():
        return 'out of memory (cap)', secs
    if r.returncode < 0:
        return f'killed by {signal.Signals(-r.returncode).name}', secs
    line = next((x for x in r.stdout.split('\n') if x.strip()), None)
    if line is None:
        return f'no output (exit {r.returncode})', secs
    j = json.loads(line)
    if j.get('error'):
        return f'error: {j["error"]} {j.get("message", "")}'.strip(), secs
    text = j.get('markdown') or ''
    found = 'text found' if SENTENCE.strip() in text else 'text NOT found'
    return f'ok, {len(text):,} chars, {found}', secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--depths', default='100000')
    ap.add_argument('--stack', default='main,2048', help='main and/or KiB sizes, comma-separated')
    ap.add_argument('--timeout', type=float, default=600)
    ap.add_argument('--mem-gib', type=float, default=4)
    ap.add_argument('--only', help='comma-separated: fleetgate and/or crate names')
    ap.add_argument('--fleetgate-bin', default=os.environ.get('FLEETGATE_PROXY_BIN'))
    ap.add_argument('--candidates-bin', default=os.environ.get('FLEETGATE_CANDIDATES_BIN'))
    args = ap.parse_args()
    names = args.only.split(',') if args.only else ['fleetgate'] + CRATES
    mem = int(args.mem_gib * (1 << 30))
    print(f'| extractor | depth | stack | outcome | seconds |\n|---|---:|---|---|---:|', flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.depths.split(',')):
            path = os.path.join(tmp, f'deep-{n}.html')
            with open(path, 'w', encoding='utf-8') as f:
                f.write(page(n))
            for name in names:
                for stack in args.stack.split(','):
                    if name == 'fleetgate':
                        if stack != 'main' or not args.fleetgate_bin:
                            continue
                        cmd = [args.fleetgate_bin, 'convert', '--content-type', 'text/html; charset=utf-8', path]
                        label = 'fleetgate-proxy convert'
                    else:
                        if not args.candidates_bin:
                            raise SystemExit('depth.py: --candidates-bin (or FLEETGATE_CANDIDATES_BIN) is needed')
                        cmd = [args.candidates_bin, '--candidate', name]
                        if stack != 'main':
                            cmd += ['--stack-kib', stack]
                        cmd += [path]
                        label = name
                    outcome, secs = run_one(cmd, args.timeout, mem)
                    where = 'main thread (8 MiB)' if stack == 'main' else f'{stack} KiB thread'
                    print(f'| {label} | {n:,} | {where} | {outcome} | {secs:.1f} |', flush=True)


if __name__ == '__main__':
    sys.exit(main())
