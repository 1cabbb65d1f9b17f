"""Every relative link in README.md and docs/ points at a file that exists, and every #anchor at a
heading of that file (GitHub's anchor rule: lowercase, punctuation dropped, spaces to hyphens)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_the_pages_have_links_to_check():
    assert len(PAGES) >= 10 and sum(len(links(p)) for p in PAGES) >= 50


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_anchor_rule_matches_github():
    page = ROOT / "docs" / "results.md"
    assert "the-quick-start-by-the-steps-it-makes" in anchors(page)
    assert "the-tutorials-run" in anchors(page)
    assert "side-by-side-with-opennmt-py-35-fp32" in anchors(ROOT / "docs" / "benchmarks.md")


def test_readme_stays_a_front_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme) <= 10_000, f"README.md has {len(readme)} characters; move detail into docs/"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test.sh" in ci and "bash scripts/test.sh" in readme  # the command CI runs
    # a guide, a reference and one results page
    assert "](docs/tutorial.md)" in readme and "](docs/recipe-keys.md)" in readme
    assert "](docs/results.md)" in readme and "docs/lab/" not in readme


def test_code_layout_page_names_every_module():
    """docs/code.md lists every module of the package, so a newcomer finds each one there (and a
    new module is added to it); the README's code layout links to it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/code.md)" in readme[readme.index("## Code layout") :]
    layout = (ROOT / "docs" / "code.md").read_text(encoding="utf-8")
    package = ROOT / "nmt_cli"
    modules = [
        p
        for p in package.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts
    ]
    assert modules
    missing = [str(p.relative_to(package)) for p in modules if f"`{p.name}`" not in layout]
    assert not missing, f"docs/code.md does not name: {missing}"


def test_results_page_stays_within_its_budget():
    """docs/results.md keeps each experiment's conclusion and command; the rounds behind it live
    in git history, so the page stays readable in one sitting."""
    results = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert len(results) <= 30_000, (
        f"docs/results.md has {len(results)} characters (at most 30,000); condense an experiment "
        "to its conclusion table and command"
    )


def test_bench_readme_names_every_script():
    """bench/README.md has a table row for every script in bench/, saying what it measures and
    giving its command (`python bench/NAME.py ...`) wherever the script runs on its own."""
    bench = ROOT / "bench"
    readme = (bench / "README.md").read_text(encoding="utf-8")
    rows = {
        match.group(1): line
        for line in readme.splitlines()
        if (match := re.match(r"\| \[`([\w.]+\.py)`\]", line))
    }
    scripts = sorted(bench.glob("*.py"))
    assert len(scripts) >= 20
    unnamed = [p.name for p in scripts if p.name not in rows]
    assert not unnamed, f"bench/README.md has no row for: {unnamed}"
    no_command = [
        p.name
        for p in scripts
        if '__name__ == "__main__"' in p.read_text(encoding="utf-8")
        and f"python bench/{p.name}" not in rows[p.name]
    ]
    assert not no_command, f"bench/README.md gives no command for: {no_command}"
    stale = [name for name in rows if not (bench / name).exists()]
    assert not stale, f"bench/README.md names scripts that are gone: {stale}"


def test_quick_start_ends_with_its_model():
    """The quick start says where its model is and how to translate with it, in the README and in
    the script's last lines, and reads a local data mirror only where one exists."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start") : readme.index("## Commands")]
    assert ".venv/bin/nmt translate -m runs/quickstart-en-fr" in quick
    assert "~/.cache/nmt/data" in quick and "chromium-driver" in quick
    script = (ROOT / "scripts" / "quickstart.sh").read_text(encoding="utf-8")
    assert "RUN=runs/quickstart-en-fr" in script and "NMT=.venv/bin/nmt" in script
    last = script.rstrip().splitlines()[-4:]
    assert any("$NMT translate -m $RUN" in line and line.startswith("echo") for line in last)
    assert "[ -d ../shared/data ]" in script
