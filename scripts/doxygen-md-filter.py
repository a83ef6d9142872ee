#!/usr/bin/env python3
"""Doxygen's input filter for the Markdown pages (README.md, docs/**/*.md).

The guides are written for GitHub, whose heading anchors are slugs of the
heading text (`## Work queues` is `#work-queues`). Doxygen 1.9.4 gives a
heading an anchor only when it names one (`## Work queues {#id}`), which
GitHub would show as text. So this filter, run by Doxygen on each page
(docs/Doxyfile, FILTER_PATTERNS), and never on the files themselves:

- gives every heading below the title the anchor GitHub gives it, prefixed
  with its page so that anchors are unique across pages
  (`docs_executor-work-queues`);
- rewrites the links to such anchors, `(#work-queues)` and
  `(executor.md#work-queues)`, into links Doxygen resolves, `(#docs_executor-work-queues)`;
- points a link to a file of the repository that is not a page (an example,
  a directory) at that file from build/docs/html, so that it opens from a
  checkout;
- writes bold text that starts with a code span as HTML bold, which
  Doxygen renders (it shows `**`x`**` with its asterisks);
- drops the backticks from a page's title, which Doxygen would show as
  markup in the page tree.

Links to a page itself (`(executor.md)`) Doxygen resolves on its own. Fenced
code blocks and code spans are left alone, and no line is added or removed,
so Doxygen's warnings keep the page's line numbers.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the HTML lands (build/docs/html), as a path back to the repository root.
HTML_TO_ROOT = "../../../"

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{2,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
# Bold text that starts with a code span (`**`shutdown()`**`), which Doxygen
# 1.9.4 shows with its asterisks.
BOLD_CODE = re.compile(r"\*\*(`[^`\n]+`(?:`[^`\n]+`|[^*`\n])*?)\*\*")
# A code span or an image (both left alone; Doxygen copies an image from
# IMAGE_PATH), or an inline link's target.
SPAN_OR_LINK = re.compile(
    r"(?P<code>(?P<ticks>`+).+?(?P=ticks))|(?P<image>!\[[^\]]*\]\([^)]*\))|\]\((?P<target>[^()\s]+)\)", re.S)


def page_prefix(relpath):
    """docs/executor.md -> docs_executor: unique per page, a valid label start."""
    return re.sub(r"[^A-Za-z0-9]", "_", relpath[: -len(".md")])


def github_slug(text):
    """The anchor GitHub gives a heading: the text as rendered, lowercased,
    without punctuation, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def label(prefix, slug):
    """A Doxygen label (a letter, then [A-Za-z0-9_-]) for a page's slug."""
    safe = "".join(c if (c.isascii() and (c.isalnum() or c in "-_")) else "_%x" % ord(c) for c in slug)
    return prefix + "-" + safe


def slugs_of(text):
    """The slugs of a page's headings, in order, with GitHub's -1, -2 for repeats."""
    seen = {}
    result = []
    in_fence = False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
            result.append(None)
            continue
        m = None if in_fence else HEADING.match(line)
        if m:
            slug = github_slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            result.append(slug if n == 0 else "%s-%d" % (slug, n))
        else:
            result.append(None)
    return result


def rewrite_target(target, page_dir, prefix):
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
        return target
    path, _, anchor = target.partition("#")
    if not path:
        return "#" + label(prefix, anchor) if anchor else target
    repo_path = os.path.normpath(os.path.join(page_dir, path))
    if repo_path.startswith(".."):
        return target
    if repo_path.endswith(".md"):
        if anchor:
            return "#" + label(page_prefix(repo_path), anchor)
        return target
    if os.path.exists(os.path.join(ROOT, repo_path)):
        return HTML_TO_ROOT + repo_path + ("#" + anchor if anchor else "")
    return target


def filter_page(path):
    relpath = os.path.relpath(os.path.abspath(path), ROOT)
    prefix = page_prefix(relpath)
    page_dir = os.path.dirname(relpath)
    with open(path, encoding="utf-8") as f:
        text = f.read()

    def link(m):
        if m.group("code") or m.group("image"):
            return m.group(0)
        return "](" + rewrite_target(m.group("target"), page_dir, prefix) + ")"

    out = []
    in_fence = False
    prose = []  # the lines since the last fence boundary, rewritten together (a code span may span lines)

    def flush():
        if prose:
            out.append(SPAN_OR_LINK.sub(link, BOLD_CODE.sub(r"<b>\1</b>", "\n".join(prose))))
            prose.clear()

    for line, slug in zip(text.split("\n"), slugs_of(text)):
        if FENCE.match(line) or in_fence:
            if FENCE.match(line):
                flush()
                in_fence = not in_fence
            out.append(line)
            continue
        if slug is not None:
            line = line.rstrip() + " {#" + label(prefix, slug) + "}"
        elif line.startswith("# "):
            line = line.replace("`", "")  # the page's title: Doxygen shows a code span in it as markup
        prose.append(line)
    flush()
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    filter_page(sys.argv[1])
