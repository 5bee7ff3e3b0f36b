"""What the README and the docs name in the repository exists under that
name: every path written in backticks (``withdrawals/sql.py``,
``accounts/admin/``), every dotted name of our packages
(``payments.tasks.poll_charge_statuses``), every link of the README into the
repository; and every docs page (and section) the code cites exists.

Issue 30 moved reconciliation, the admin modules, ``core/db.py``, the
adapters' registry and more while it carved the README into docs/, and names
in the docs were left pointing at nothing. ``mkdocs build --strict`` checks
the links between pages, not what a page names in the code, nor README.md,
which is outside docs/."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

# MkDocs' table of contents makes its anchors with Markdown's own slugify.
from markdown.extensions.toc import slugify

THIS = Path(__file__).resolve()
ROOT = THIS.parent.parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: Generated and third-party trees, caches, and what runs make under ./var: not ours.
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "var",
    "site",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
}
#: A span ending in one of these names a file.
FILE_SUFFIXES = (".py", ".json", ".yml", ".yaml", ".toml", ".txt", ".md", ".html", ".sql", ".png")
#: Paths the docs name that are not in the repository by design, with why.
NOT_IN_THE_REPOSITORY = {
    "var/demo-keys.json": "made by make run: the demo's secret key, git-ignored",
    "var/demo-admin.json": "made by make run: the demo admin's password, git-ignored",
    "var/demo-sandbox.json": "made by make run: the demo acquirers' notification secret, git-ignored",
}
#: Dotted names in backticks that begin like a package of ours and are not Python names.
NOT_PYTHON_NAMES = {
    "acquirers.N.priority": "the key of a validation error (N: the item's index)",
    "webhooks.handler()": "dj-stripe's registry, named for comparison",
}
#: System check ids (``acquirers.E001``), not Python names.
CHECK_ID = re.compile(r"^[a-z_]+\.[EWI]\d{3}$")

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
PATH_LIKE = re.compile(r"^[A-Za-z0-9_.\-/]+$")
DOTTED = re.compile(r"^([a-z_][a-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)(\(.*\))?$")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: A citation of a docs page in code: ``docs/design/decisions.md``, with the
#: section it names when one follows in quotes (``docs/x.md, "Heading"``,
#: ``docs/x.md ("Heading")``), wrapped over comment lines or not.
DOCS_CITATION = re.compile(r'(?<![\w./-])(docs/[a-z0-9_\-/]+\.md)(?:,?\s*(?:#:?\s*)?\(?"([^"]{1,120})")?')
#: What a citation wrapped over lines has between its words.
WRAP = re.compile(r"\s*\n\s*(?:#:?\s*)?")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def code_spans(page: Path) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of each inline code span of ``page``, fenced blocks left out."""
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            for match in CODE_SPAN.finditer(line):
                yield number, match.group(1).strip()


def repository_files() -> Iterator[Path]:
    for directory, subdirs, files in os.walk(ROOT):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        for name in files:
            yield Path(directory) / name


def top_level_folders() -> set[str]:
    return {p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in SKIPPED_DIRS}


def repository_path(span: str, tops: set[str]) -> str | None:
    """The path ``span`` names in the repository, or None when it names none:
    a URL path (``/api/docs/``), a placeholder (``tests/<app>/…``), a command."""
    if not PATH_LIKE.match(span) or span.startswith("/"):
        return None
    path = span.removeprefix("./")
    if path.endswith(FILE_SUFFIXES):
        return path
    if path.endswith("/") and path.split("/", 1)[0] in tops:
        return path
    return None


def test_every_path_the_docs_name_exists() -> None:
    tops = top_level_folders()
    # A bare file name (``fake_efi.py``, ``apis.py``) names a file somewhere in the tree.
    names = {path.name for path in repository_files()}
    missing = []
    checked = 0
    for page in pages():
        for line, span in code_spans(page):
            path = repository_path(span, tops)
            if path is None or path in NOT_IN_THE_REPOSITORY:
                continue
            checked += 1
            exists = (ROOT / path).exists() if "/" in path else path in names
            if not exists:
                missing.append(f"{page.relative_to(ROOT)}:{line}: `{span}`")
    # The docs name a hundred paths or more: finding few means the extraction broke.
    assert checked >= 100, f"only {checked} paths found in the docs"
    assert not missing, "paths named in README.md or docs/ that are not in the repository:\n" + "\n".join(missing)


def test_the_paths_not_in_the_repository_by_design_are_still_named() -> None:
    named = {span.removeprefix("./") for page in pages() for _, span in code_spans(page)}
    stale = sorted(set(NOT_IN_THE_REPOSITORY) - named)
    assert not stale, f"NOT_IN_THE_REPOSITORY lists paths the docs no longer name, drop them: {stale}"


def module_file(parts: list[str]) -> Path | None:
    path = ROOT.joinpath(*parts)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def top_level_names(tree: ast.Module) -> set[str]:
    """What a module defines at its top level, inside ``if``/``try`` blocks too."""
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):
            pending.extend(node.body + node.orelse + getattr(node, "finalbody", []))
    return names


def python_name_problem(span: str, packages: set[str]) -> str | None:
    """Why the dotted name ``span`` (``pkg.module``, ``pkg.module.name``,
    ``pkg.module.func(…)``) does not resolve in the tree; None when it does
    or when it is no name of our packages."""
    match = DOTTED.match(span)
    if match is None or match.group(1) not in packages or CHECK_ID.match(span):
        return None
    parts = [match.group(1), *match.group(2).lstrip(".").split(".")]
    for length in range(len(parts), 0, -1):
        found = module_file(parts[:length])
        if found is None:
            continue
        rest = parts[length:]
        if not rest:
            return None
        if rest[0] in top_level_names(ast.parse(found.read_text(encoding="utf-8"))):
            return None
        if module_file([*parts[:length], rest[0]]) is not None:  # a subpackage's module
            return None
        return f"{found.relative_to(ROOT)} defines no {rest[0]}"
    return "no such module"


def test_every_python_name_the_docs_give_resolves() -> None:
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    wrong = []
    checked = 0
    for page in pages():
        for line, span in code_spans(page):
            if span in NOT_PYTHON_NAMES:
                continue
            if DOTTED.match(span) and span.split(".")[0] in packages:
                checked += 1
            problem = python_name_problem(span, packages)
            if problem is not None:
                wrong.append(f"{page.relative_to(ROOT)}:{line}: `{span}`: {problem}")
    assert checked >= 40, f"only {checked} Python names found in the docs"
    assert not wrong, "Python names in README.md or docs/ that do not resolve:\n" + "\n".join(wrong)


def headings(page: Path) -> set[str]:
    """The anchors of ``page``'s headings, as MkDocs' table of contents makes them."""
    anchors = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6}\s+(.+?)\s*#*$", line)):
            anchors.add(slugify(match.group(1).replace("`", ""), "-"))
    return anchors


def test_every_link_of_the_readme_into_the_repository_resolves() -> None:
    """mkdocs --strict checks the links of pages under docs/; README.md is not one."""
    broken = []
    for target in MARKDOWN_LINK.findall(README.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path
        if not page.exists():
            broken.append(target)
        elif anchor and anchor not in headings(page):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"README.md links to what is not there: {broken}"


#: Where code, tests, templates and configs may cite a docs page.
CITING_SUFFIXES = {".py", ".html", ".toml", ".yml", ".txt", ".example"}
CITING_NAMES = {"Makefile", "Procfile"}


def citing_files() -> Iterator[Path]:
    """Every file that may cite a docs page (this test's examples aside)."""
    for path in repository_files():
        if path != THIS and (path.suffix in CITING_SUFFIXES or path.name in CITING_NAMES):
            yield path


def test_every_docs_page_the_code_cites_exists_with_its_section() -> None:
    """Code, tests and configs cite docs pages ("docs/api/refunds.md,
    "Refusals""); a page renamed or a section retitled must take its
    citations along."""
    wrong = []
    for path in citing_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in DOCS_CITATION.finditer(text):
            page, section = ROOT / match.group(1), match.group(2)
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
            if not page.is_file():
                wrong.append(f"{where}: {match.group(1)}")
            elif section and slugify(WRAP.sub(" ", section), "-") not in headings(page):
                wrong.append(f'{where}: {match.group(1)} has no section "{WRAP.sub(" ", section)}"')
    assert not wrong, "citations of docs pages that are not there:\n" + "\n".join(wrong)
