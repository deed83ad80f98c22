"""The Markdown files' relative links resolve: every linked file exists, and
every ``#anchor`` names a heading of the page it points to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    path
    for path in [*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md"), *ROOT.glob("agents/zoo/*/*.md")]
    if ".venv" not in path.parts
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [m.group(1) for m in LINK.finditer(text)]


def test_the_anchor_rule() -> None:
    assert anchor("What `make run` prints") == "what-make-run-prints"
    assert anchor("Causal KV (the default) and the reference behaviour") == (
        "causal-kv-the-default-and-the-reference-behaviour"
    )
    assert anchor("1 s bursts") == "1-s-bursts"


def test_the_front_door_is_there() -> None:
    for name in ("README.md", "LICENSE", "CHANGELOG.md", "CONTRIBUTING.md", "docs/physics.md"):
        assert (ROOT / name).is_file(), name
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert len(PAGES) > 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target} (no heading #{fragment})")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


CITATION = re.compile(r"(docs/[\w/.-]+\.md)(?:, \"([^\"]+)\")?")
SOURCES = sorted(
    path
    for folder in ("envs", "baselines", "agents", "experiments", "conf", "examples")
    for path in (ROOT / folder).rglob("*")
    if path.suffix in (".py", ".yaml")
)


def test_docstrings_cite_pages_and_headings_that_exist() -> None:
    """A source file that cites ``docs/page.md`` (or ``docs/page.md, "Heading"``)
    points at a page, and a heading of it, that exist."""
    cited = 0
    broken = []
    for path in SOURCES:
        text = " ".join(path.read_text(encoding="utf-8").split())
        for page, heading in CITATION.findall(text):
            cited += 1
            target = ROOT / page
            if not target.is_file():
                broken.append(f"{path.relative_to(ROOT)}: {page}")
            elif heading and anchor(heading) not in anchors(target):
                broken.append(f"{path.relative_to(ROOT)}: {page}, {heading!r}")
    assert cited >= 5
    assert not broken, broken


def test_the_readme_names_real_make_targets_and_commands() -> None:
    """Every ``make X`` in the README is a Makefile target, and every
    ``python -m experiments.X`` a module of experiments/."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    made = set(re.findall(r"`?make ([a-z][a-z-]*[a-z])\b", readme))
    assert {"run", "test"} <= made
    assert made <= targets, made - targets
    commands = set(re.findall(r"python -m experiments\.(\w+)", readme))
    assert len(commands) >= 10
    missing = [name for name in commands if not (ROOT / "experiments" / f"{name}.py").is_file()]
    assert not missing, missing


def test_every_compiled_module_is_named_where_the_docs_list_them() -> None:
    """Each ``.pyx`` setup.py compiles has a row of benchmarks.md's table of the
    compiled core, and the count the page gives is the number of modules.
    CONTRIBUTING.md links to that table rather than keeping a list of its own
    (two lists of the twins drifted apart)."""
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    modules = sorted(set(re.findall(r"\"([\w/]+\.pyx)\"", setup)))
    assert len(modules) >= 9
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = page.split("## The compiled core", 1)[1].split("\n## ", 1)[0]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    named = {
        path for path in modules if f"`{path}`" in rows or f"`{path.rsplit('/', 1)[1]}`" in rows
    }
    assert named == set(modules), sorted(set(modules) - named)
    word = ("nine", "ten", "eleven", "twelve")[len(modules) - 9]  # nine in setup.py today
    assert f"compiles the {word} modules" in section
    assert section.split()[0] == word.capitalize()  # "Nine modules are ..."
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "(docs/benchmarks.md#the-compiled-core)" in contributing
    assert re.findall(r"[\w/]+\.pyx", contributing) == []  # (a `.pyx` file, but none named)
