#!/usr/bin/env python3
"""Check the relative links of README.md and docs/*.md, offline.

Every relative markdown link must name a file (or folder) that exists, and a `#anchor` must
name a heading of the target markdown file under GitHub's slug rules (lower case, punctuation
other than `-` and `_` dropped, spaces to `-`, a repeated slug gets `-1`, `-2`, ...).
Links inside fenced code blocks and inline code are not links. Absolute URLs are not fetched.

Usage: tests/docs_links.py [FILE.md ...]   (default: README.md docs/*.md)
Exit 0 when every link resolves, 1 otherwise; one line per broken link.
"""
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def prose_lines(text):
    """Yield (line number, line) outside fenced code blocks."""
    fenced = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fenced is None:
                fenced = m.group(1)
                continue
            if m.group(1) == fenced:
                fenced = None
                continue
        if fenced is None:
            yield n, line


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags go
    text = text.replace("`", "").lower()
    out = []
    for ch in text:
        if ch in " -_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            out.append("-" if ch == " " else ch)
    return "".join(out)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, found = {}, set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            for a in HTML_ANCHOR.findall(line):
                found.add(a)
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
        _anchors[path] = found
    return _anchors[path]


def check(md):
    problems, count = [], 0
    for n, line in prose_lines(md.read_text(encoding="utf-8")):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
                continue  # http:, https:, mailto: ...: not checked offline
            count += 1
            where = f"{md.relative_to(ROOT)}:{n}: {target}"
            file_part, _, anchor = target.partition("#")
            dest = (md.parent / file_part).resolve() if file_part else md
            if not dest.exists():
                problems.append(f"{where}: no such file {file_part}")
                continue
            if anchor:
                if dest.is_dir() or dest.suffix.lower() != ".md":
                    problems.append(f"{where}: an anchor into a file that is not markdown")
                elif anchor.lower() not in anchors(dest):
                    problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return problems, count


def main(argv):
    files = [Path(a).resolve() for a in argv] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems, total = [], 0
    for md in files:
        p, c = check(md)
        problems += p
        total += c
    for p in problems:
        print(p)
    print(f"{total} relative links in {len(files)} files, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
