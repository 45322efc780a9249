"""The WCEB benchmark's metric, and the two views of fleetgate's markdown that are scored.

The metric (WCEB, src/extraction_benchmark/eval.py and util.py of
chatnoir-eu/web-content-extraction-benchmark), per page:

  ROUGE-LSum precision, recall and F1 between the ground truth text (target) and the
  extractor's output (prediction), as rouge_score 0.1.2 computes it with
  RougeScorer(['rougeLsum'], use_stemmer=False, split_summaries=True, tokenizer=ws):
  - both texts are split into sentences (nltk.sent_tokenize), each sentence into tokens by
    white space (WCEB's tokenize_ws: strip, then split on \\s+; case and punctuation kept);
  - for every target sentence, the union of the longest common subsequences between it and
    each predicted sentence (one LCS per pair, rouge_score's backtracking) is taken; a union
    token counts as a hit while both texts still have an unused occurrence of it;
  - precision = hits / predicted tokens, recall = hits / target tokens, F1 their harmonic mean;
    no sentence or no token on either side scores 0;
  - WCEB's override: an empty target scores recall 1, and precision = F1 = 1 if the prediction
    is empty too. An extractor that fails on a page is scored as the empty string.

  Averaging, as WCEB's aggregate: the mean of the per-page scores (not the F1 of the means) per
  dataset; overall, the mean over all pages of all datasets ("micro", WCEB's headline) and the
  mean of the dataset means ("macro").

  Sentence splitting: WCEB uses nltk's pretrained English Punkt model. That model is nltk data,
  not on a package registry; when it is installed (nltk.data finds tokenizers/punkt) it is used,
  otherwise Punkt with its default, untrained parameters (splits after every . ? ! followed by
  white space; it does not know abbreviations such as "Mr." and so splits after them). Which
  splitter ran is printed in the report.

The second metric, word shingles (shingles()): the article-body benchmarks' way of scoring, which
is stricter about anything inserted into the text (a link target in the middle of a sentence):
  - tokens are the runs of word characters (\w+, case kept), so punctuation and markdown marks
    are not tokens, but every word of a URL is;
  - a text's shingles are its 4-grams of consecutive tokens (a text of fewer than 4 tokens is one
    shingle; no token, none), counted as a multiset;
  - true positives are the shingles both texts have (the smaller count), false positives those
    only the prediction has, false negatives those only the truth has; the three counts of a page
    are divided by their sum, so every page weighs the same;
  - a page's precision is tp / (tp + fp), its recall tp / (tp + fn); a page with nothing on either
    side (no fp, no fn) scores 1 for both; precision is averaged over the pages with a prediction
    (tp + fp > 0), recall over the pages with a truth (tp + fn > 0);
  - F1 is the harmonic mean of the mean precision and the mean recall (not a mean of per-page F1).

The two views of fleetgate's markdown:
  (a) "as returned": the markdown exactly as the agent receives it.
  (b) "words read": the markdown with its syntax and link/image targets removed (words_read()):
      - `![alt](src "title")` -> `alt`; `[text](url "title")` -> `text` (images first, so a linked
        image becomes its alt text); reference links `[text][id]` -> `text`; reference
        definitions `[id]: url` and autolinks `<scheme://...>` dropped;
      - code fence lines (``` or ~~~, with any info string) dropped, the code kept; inline code
        backticks dropped;
      - ATX heading marks (`#`..`######` and closing #s), setext underlines (=== / ---),
        thematic breaks (---, ***, ___), blockquote marks (`>`) dropped;
      - list bullets (`-`, `*`, `+` at the start of a line) dropped; ordered-list numbers kept
        (they are words of the text, as in the ground truths);
      - emphasis and strike marks (`*`, `**`, `_`, `__`, `~~`) dropped where they open or close
        a span (at a word's edge; `snake_case` keeps its underscore);
      - table pipes dropped (cells separated by a space), table delimiter rows dropped;
      - backslash escapes unescaped (`\\*` -> `*`).
  The same normalisation is not applied to trafilatura or Readability.js: both return plain text.
"""
import argparse
import collections
import ctypes
import json
import os
import re
import sys

_WS = re.compile(r'\s+', flags=re.UNICODE | re.MULTILINE)


def tokenize_ws(text):
    text = text.strip()
    if not text:
        return []
    return _WS.split(text)


_SPLITTER = None
SPLITTER_NAME = None


def sentences(text):
    global _SPLITTER, SPLITTER_NAME
    if _SPLITTER is None:
        import nltk
        try:
            nltk.data.find('tokenizers/punkt')
            _SPLITTER = nltk.sent_tokenize
            SPLITTER_NAME = 'nltk punkt (English model), as WCEB'
        except LookupError:
            from nltk.tokenize.punkt import PunktSentenceTokenizer
            _SPLITTER = PunktSentenceTokenizer().tokenize
            SPLITTER_NAME = 'nltk 3.8.1 Punkt, untrained parameters (English model not installed)'
    return [s for s in _SPLITTER(text) if len(s)]


_LIB = None


def _lib():
    global _LIB
    if _LIB is None:
        path = os.environ.get('FLEETGATE_EXTRACT_LCS')
        _LIB = False
        if path and os.path.exists(path):
            lib = ctypes.CDLL(path)
            lib.rouge_lsum_hits.restype = ctypes.c_long
            _LIB = lib
    return _LIB


def _hits_python(ref_sent, can_sent):
    cnt_r = collections.Counter(t for s in ref_sent for t in s)
    cnt_c = collections.Counter(t for s in can_sent for t in s)
    hits = 0
    for r in ref_sent:
        marked = set()
        for c in can_sent:
            rows, cols = len(r), len(c)
            t = [[0] * (cols + 1) for _ in range(rows + 1)]
            for i in range(1, rows + 1):
                ri, ti, up = r[i - 1], t[i], t[i - 1]
                for j in range(1, cols + 1):
                    if ri == c[j - 1]:
                        ti[j] = up[j - 1] + 1
                    else:
                        ti[j] = up[j] if up[j] > ti[j - 1] else ti[j - 1]
            i, j = rows, cols
            while i > 0 and j > 0:
                if r[i - 1] == c[j - 1]:
                    marked.add(i - 1)
                    i -= 1
                    j -= 1
                elif t[i][j - 1] > t[i - 1][j]:
                    j -= 1
                else:
                    i -= 1
        for i in sorted(marked):
            tok = r[i]
            if cnt_c[tok] > 0 and cnt_r[tok] > 0:
                hits += 1
                cnt_c[tok] -= 1
                cnt_r[tok] -= 1
    return hits


def _hits(ref_sent, can_sent):
    lib = _lib()
    if not lib:
        return _hits_python(ref_sent, can_sent)
    ids = {}

    def flat(sents):
        toks, off = [], [0]
        for s in sents:
            toks.extend(ids.setdefault(t, len(ids)) for t in s)
            off.append(len(toks))
        return (ctypes.c_int32 * max(len(toks), 1))(*toks), (ctypes.c_int32 * len(off))(*off)

    r, ro = flat(ref_sent)
    c, co = flat(can_sent)
    hits = lib.rouge_lsum_hits(r, ro, len(ref_sent), c, co, len(can_sent), len(ids))
    if hits < 0:
        return _hits_python(ref_sent, can_sent)
    return hits


def rouge_lsum(target, pred):
    """(precision, recall, f1) of one page, WCEB's way."""
    target = target or ''
    pred = pred or ''
    ref_sent = [tokenize_ws(s) for s in sentences(target)]
    can_sent = [tokenize_ws(s) for s in sentences(pred)]
    m = sum(map(len, ref_sent))
    n = sum(map(len, can_sent))
    if not ref_sent or not can_sent or not m or not n:
        p = r = f = 0.0
    else:
        hits = _hits(ref_sent, can_sent)
        p, r = hits / n, hits / m
        f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    if target.strip() == '':
        r = 1.0
        if pred.strip() == '':
            p = f = 1.0
    return p, r, f


_WORD = re.compile(r'\w+', flags=re.UNICODE)


def _shingle_counts(text, n=4):
    toks = _WORD.findall(text or '')
    if not toks:
        return collections.Counter()
    if len(toks) < n:
        return collections.Counter([tuple(toks)])
    return collections.Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))


def shingles(target, pred):
    """(precision, recall) of one page on word 4-gram shingles; None where the page does not
    count towards that mean (see the module doc)."""
    t, p = _shingle_counts(target), _shingle_counts(pred)
    tp = sum((t & p).values())
    fp = sum((p - t).values())
    fn = sum((t - p).values())
    if fp == 0 and fn == 0:
        return 1.0, 1.0
    return (tp / (tp + fp) if tp + fp else None), (tp / (tp + fn) if tp + fn else None)


def shingle_f1(pairs):
    """(f1, mean precision, mean recall) over pages' shingles() results."""
    ps = [p for p, _ in pairs if p is not None]
    rs = [r for _, r in pairs if r is not None]
    p = sum(ps) / len(ps) if ps else 0.0
    r = sum(rs) / len(rs) if rs else 0.0
    return (2 * p * r / (p + r) if p + r else 0.0), p, r


# -- fleetgate's markdown, the words the agent reads ------------------------------------------

_IMG = re.compile(r'!\[([^\]]*)\]\((?:[^()\s]|\([^()]*\))*(?:\s+"[^"]*")?\s*\)')
_LINK = re.compile(r'\[([^\]]*)\]\((?:[^()\s]|\([^()]*\))*(?:\s+"[^"]*")?\s*\)')
_REF_LINK = re.compile(r'\[([^\]]+)\]\[[^\]]*\]')
_REF_DEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s+\S+.*$', re.M)
_AUTOLINK = re.compile(r'<(?:[a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>]+)>')
_FENCE = re.compile(r'^\s{0,3}(?:`{3,}|~{3,}).*$', re.M)
_HEADING = re.compile(r'^\s{0,3}#{1,6}(?:[ \t]+|$)(.*?)(?:[ \t]+#+)?[ \t]*$', re.M)
_SETEXT_OR_RULE = re.compile(r'^\s{0,3}(?:=+|-{3,}|\*{3,}|_{3,}|(?:[-*_][ \t]*){3,})\s*$', re.M)
_QUOTE = re.compile(r'^\s{0,3}(?:>[ \t]?)+', re.M)
_BULLET = re.compile(r'^(\s*)[-*+][ \t]+', re.M)
_TABLE_DELIM = re.compile(r'^\s*\|?\s*:?-{1,}:?\s*(?:\|\s*:?-{1,}:?\s*)+\|?\s*$', re.M)
_EMPH_OPEN = re.compile(r'(?<![\w\\])(?:\*{1,3}|_{1,3}|~~)(?=\S)')
_EMPH_CLOSE = re.compile(r'(?<=[^\s\\])(?:\*{1,3}|_{1,3}|~~)(?!\w)')
_ESCAPE = re.compile(r'\\([\\`*_{}\[\]()#+\-.!|>~<"\'])')


def words_read(md):
    """The markdown with its syntax and link/image targets removed (see the module doc)."""
    md = md or ''
    md = _FENCE.sub('', md)
    md = _REF_DEF.sub('', md)
    md = _IMG.sub(r'\1', md)
    md = _LINK.sub(r'\1', md)
    md = _REF_LINK.sub(r'\1', md)
    md = _AUTOLINK.sub('', md)
    md = _TABLE_DELIM.sub('', md)
    md = _SETEXT_OR_RULE.sub('', md)
    md = _HEADING.sub(r'\1', md)
    md = _QUOTE.sub('', md)
    md = _BULLET.sub(r'\1', md)
    md = md.replace('`', '')
    md = re.sub(r'[ \t]*\|[ \t]*', ' ', md)
    md = _EMPH_OPEN.sub('', md)
    md = _EMPH_CLOSE.sub('', md)
    md = _ESCAPE.sub(r'\1', md)
    return md


# -- self-test and CLI --------------------------------------------------------------------------

def _self_test(cache, limit):
    """The fast scorer against rouge_score itself, on real pages and their ground truth."""
    from rouge_score import rouge_scorer, tokenizers

    class Ws(tokenizers.Tokenizer):
        def tokenize(self, text):
            return tokenize_ws(text)

    ref = rouge_scorer.RougeScorer(['rougeLsum'], use_stemmer=False, split_summaries=False,
                                   tokenizer=Ws())
    checked = 0
    for ds in sorted(os.listdir(cache)):
        path = os.path.join(cache, ds, 'truth.jsonl')
        if not os.path.exists(path):
            continue
        rows = [json.loads(line) for line in open(path, encoding='utf-8')][:limit]
        for a, b in zip(rows, rows[1:] + rows[:1]):
            target = a['plaintext']
            # a prediction that shares much with the target but not all: half of it plus another page
            pred = target[: len(target) // 2] + '\n' + b['plaintext'][: len(b['plaintext']) // 3]
            rs = [tokenize_ws(s) for s in sentences(target)]
            cs = [tokenize_ws(s) for s in sentences(pred)]
            want = rouge_scorer._summary_level_lcs(rs, cs)
            # rouge_score's own function, on the very same sentences
            if rs and cs and sum(map(len, rs)) and sum(map(len, cs)):
                got = _hits(rs, cs)
                n = sum(map(len, cs))
                if abs(got / n - want.precision) > 1e-12:
                    raise SystemExit(f'self-test: {ds}/{a["file"]}: {got / n} != {want.precision}')
            checked += 1
    del ref
    print(f'self-test: {checked} pages, fast scorer == rouge_score ({SPLITTER_NAME}; '
          f'{"C helper" if _lib() else "pure Python"})')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--self-test', metavar='CACHE')
    ap.add_argument('--limit', type=int, default=15)
    ap.add_argument('--words-read', action='store_true', help='print words_read(stdin)')
    args = ap.parse_args()
    if args.self_test:
        _self_test(args.self_test, args.limit)
    elif args.words_read:
        sys.stdout.write(words_read(sys.stdin.read()))
    else:
        ap.print_help()


if __name__ == '__main__':
    main()
