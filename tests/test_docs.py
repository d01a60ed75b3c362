"""The documentation's cross-references hold: every relative link in README.md and docs/ reaches a file
(and, with a #fragment, a heading of it), every `docs/...` path named in the pages or the code exists, and
every `architecture.md §N` the code cites is a section of docs/architecture.md."""
from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
PAGES = [os.path.join(ROOT, "README.md")] + sorted(
    os.path.join(d, f) for d, _, files in os.walk(os.path.join(ROOT, "docs")) for f in files if f.endswith(".md"))
SOURCE_DIRS = ("provider", "python", "jvm-shim", "tests", "scripts", "conf")
SOURCE_EXTENSIONS = (".py", ".java", ".sh", ".conf", ".md")

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOCS_PATH = re.compile(r"\bdocs/[\w./-]*\w")
SECTION_CITE = re.compile(r"architecture\.md §(\d+)")


def _rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def _anchors(page: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    with open(page, encoding="utf-8") as f:
        in_code = False
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                title = line.lstrip("#").strip().lower()
                out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def _sources():
    for top in SOURCE_DIRS:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(SOURCE_EXTENSIONS):
                    yield os.path.join(d, f)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_resolve(page):
    with open(page, encoding="utf-8") as f:
        text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        path, _, fragment = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(resolved):
            broken.append(target)
        elif fragment and resolved.endswith(".md") and fragment not in _anchors(resolved):
            broken.append(target)
    assert not broken, f"{_rel(page)}: links that lead nowhere: {broken}"


def test_docs_paths_named_in_pages_and_code_exist():
    missing = []
    for path in PAGES + list(_sources()):
        with open(path, encoding="utf-8", errors="replace") as f:
            for name in DOCS_PATH.findall(f.read()):
                if not os.path.exists(os.path.join(ROOT, name)):
                    missing.append(f"{_rel(path)}: {name}")
    assert not missing, missing


def test_sections_the_code_cites_exist():
    sections = {m for m in re.findall(r"^## (\d+)\. ", open(os.path.join(ROOT, "docs", "architecture.md"),
                                                              encoding="utf-8").read(), flags=re.M)}
    numbers = [int(n) for n in sections]
    assert sorted(numbers) == list(range(1, len(numbers) + 1)), "sections are numbered 1, 2, 3, ..."
    cited = []
    for path in PAGES + list(_sources()):
        with open(path, encoding="utf-8", errors="replace") as f:
            cited += [(_rel(path), n) for n in SECTION_CITE.findall(f.read())]
    assert cited and not [c for c in cited if c[1] not in sections], cited
