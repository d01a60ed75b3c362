"""The documentation's cross-references hold: every relative link in README.md and docs/ reaches a file
(and, with a #fragment, a heading of it), every `docs/...` path named in the pages or the code exists, and
every heading the code and the pages cite as `docs/internals/<page>.md, "<Heading>"` is a `##` or `###`
heading of that page."""
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
HEADING_CITE = re.compile(r'docs/internals/([\w-]+\.md), ("[^"\n]+"(?: and "[^"\n]+")*)')
NUMBERED_CITE = re.compile(r"architecture\.md §\d+")


def _rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def _headings(page: str) -> list[tuple[int, str]]:
    """The page's headings outside code blocks, as (level, title)."""
    out = []
    with open(page, encoding="utf-8") as f:
        in_code = False
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                out.append((len(line) - len(line.lstrip("#")), line.lstrip("#").strip()))
    return out


def _anchors(page: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for _, title in _headings(page)}


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


def _unknown_cited_headings(text: str) -> list[str]:
    """The citations in `text` that name no `##`/`###` heading of their docs/internals page."""
    unknown = []
    for page, names in HEADING_CITE.findall(text):
        path = os.path.join(ROOT, "docs", "internals", page)
        titles = {title for level, title in _headings(path) if level in (2, 3)} if os.path.exists(path) else set()
        unknown += [f'{page}, "{name}"' for name in re.findall(r'"([^"]+)"', names) if name not in titles]
    return unknown


def test_headings_the_code_cites_exist():
    cited, unknown, numbered = 0, [], []
    for path in PAGES + list(_sources()):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        cited += len(HEADING_CITE.findall(text))
        unknown += [f"{_rel(path)}: {c}" for c in _unknown_cited_headings(text)]
        numbered += [f"{_rel(path)}: {c}" for c in NUMBERED_CITE.findall(text)]
    assert cited, "HEADING_CITE matches no citation in the code"
    assert not unknown, f"cited headings that the page lacks: {unknown}"
    assert not numbered, f"architecture.md has no numbered sections to cite: {numbered}"


def test_a_wrong_cited_heading_is_reported():
    internals = "docs" + "/internals/"  # split, so this file cites nothing itself
    assert _unknown_cited_headings(f'see {internals}bridge.md, "Data frames"') == []
    assert _unknown_cited_headings(f'see {internals}bridge.md, "Data frame"') == ['bridge.md, "Data frame"']
    assert _unknown_cited_headings(f'{internals}bridge.md, "Data frames" and "shm"') == ['bridge.md, "shm"']
    assert _unknown_cited_headings(f'{internals}nowhere.md, "Data frames"') == ['nowhere.md, "Data frames"']
