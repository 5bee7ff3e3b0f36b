"""The docs the code points at exist: every "decisions §N" cited in code, tests,
templates and documents has its ``§N`` heading in docs/design/decisions.md,
and every page of the site's navigation is a file (issue 30: the decisions
were cited 49 times and lived outside the repository)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
DECISIONS = ROOT / "docs" / "design" / "decisions.md"
#: Where citations live. Generated and third-party trees are not ours to check.
SUFFIXES = {".py", ".html", ".md", ".txt"}
SKIPPED_DIRS = {".venv", "var", "site", "node_modules", "__pycache__"}

#: "decisions §4", also wrapped over comment lines ("decisions\n    # §4"),
#: and lists or ranges ("decisions §4, §5", "decisions §4-§6").
CITATION = re.compile(r"decisions[\s#:*]*(§\s*\d+(?:\s*(?:,|-|\u2013|and|e)\s*§\s*\d+)*)", re.IGNORECASE)
SECTION = re.compile(r"§\s*(\d+)")
HEADING = re.compile(r"^#{1,6}\s+§(\d+)\b", re.MULTILINE)


def cited_files() -> Iterator[Path]:
    # os.walk so the skipped trees (a virtualenv, the embedded engines' data)
    # are never entered, not merely filtered out afterwards.
    for directory, subdirs, files in os.walk(ROOT):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if Path(name).suffix in SUFFIXES:
                yield Path(directory) / name


def sections_of(run: str) -> set[int]:
    """The sections a citation names; a range names every section in it."""
    numbers = [int(n) for n in SECTION.findall(run)]
    found = set(numbers)
    for match in re.finditer(r"§\s*(\d+)\s*[-\u2013]\s*§\s*(\d+)", run):
        found.update(range(int(match.group(1)), int(match.group(2)) + 1))
    return found


def citations() -> dict[int, list[str]]:
    """Section number → the places (path:line) citing it."""
    cited: dict[int, list[str]] = {}
    for path in cited_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            for number in sections_of(match.group(1)):
                cited.setdefault(number, []).append(f"{path.relative_to(ROOT)}:{line}")
    return cited


def test_every_cited_decision_has_its_heading() -> None:
    headings = {int(n) for n in HEADING.findall(DECISIONS.read_text(encoding="utf-8"))}
    cited = citations()
    # The code cites decisions in dozens of places: finding none means the
    # pattern broke, not that the code stopped citing them.
    assert sum(len(places) for places in cited.values()) >= 40
    missing = {f"§{n}": places for n, places in sorted(cited.items()) if n not in headings}
    assert not missing, f"cited without a '## §N' heading in {DECISIONS.relative_to(ROOT)}: {missing}"


class _MkDocsLoader(yaml.SafeLoader):
    """mkdocs.yml may name Python objects (``!!python/name:…``, as Material's
    emoji extension does); the nav needs none of them, so they load as None."""


_MkDocsLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def nav_pages(node: object) -> Iterator[str]:
    """Every page path in mkdocs.yml's ``nav`` (strings, or titles mapping to pages or sections)."""
    if isinstance(node, str):
        if not re.match(r"^[a-z][a-z0-9+.-]*://", node):  # an external link is not a page
            yield node
    elif isinstance(node, list):
        for item in node:
            yield from nav_pages(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from nav_pages(value)


def test_every_nav_page_exists() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_MkDocsLoader)  # noqa: S506 - a SafeLoader
    docs_dir = ROOT / config.get("docs_dir", "docs")
    pages = list(nav_pages(config["nav"]))
    assert pages, "mkdocs.yml has no nav"
    missing = [page for page in pages if not (docs_dir / page).is_file()]
    assert not missing, f"pages in mkdocs.yml's nav with no file under {docs_dir.name}/: {missing}"
