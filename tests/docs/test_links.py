"""Every relative link of the README, docs/ and reports/ pages leads somewhere: the file exists, and an anchor is a
heading of the target page (as GitHub makes heading anchors) or an explicit ``<a id>`` (runs.md's rows). The
results pages link to each other's sections by heading; renaming a heading breaks those links silently."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from tests import REPO

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def heading_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case; letters, marks, digits, connectors, spaces and hyphens kept (so
    "×" and "," go, "³" and "µ" stay); spaces become hyphens."""
    kept = "".join(c for c in heading.strip().lower()
                   if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a page offers: its headings' (a repeated one numbered -1, -2, … as GitHub does) and its
    ``<a id="…">`` tags."""
    counts: dict[str, int] = {}
    found = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#{1,6}\s+(.+)$", FENCE.sub("", text), flags=re.MULTILINE):
        anchor = heading_anchor(heading)
        found.add(anchor if anchor not in counts else f"{anchor}-{counts[anchor]}")
        counts[anchor] = counts.get(anchor, 0) + 1
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of one page (outside code blocks) whose file or anchor is missing."""
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = page.parent / file if file else page
        if not dest.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            broken.append(f"{page.name}: {target} (no such heading or anchor in {dest.name})")
    return broken


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "reports").glob("*.md")), *sorted((REPO / "docs").rglob("*.md"))]


def test_every_relative_link_resolves():
    assert len(pages()) > 10
    problems = [problem for page in pages() for problem in broken_links(page)]
    assert not problems, "\n".join(problems)


def test_heading_anchors_follow_github():
    assert heading_anchor("The 64 × 128 and 64 × 64 pointer tiles, timed (NVIDIA H100 80GB HBM3, 12-07 23:53)") == \
        "the-64--128-and-64--64-pointer-tiles-timed-nvidia-h100-80gb-hbm3-12-07-2353"
    assert heading_anchor("bf16: 2-CTA clusters with TMA multicast") == "bf16-2-cta-clusters-with-tma-multicast"
    assert heading_anchor("Every shape: 24 per dtype") == "every-shape-24-per-dtype"
    assert anchors("# A\n## A\n```\n# B\n```\n<a id=\"run-x\"></a>") == {"a", "a-1", "run-x"}


def test_a_missing_file_or_heading_is_reported(tmp_path):
    (tmp_path / "other.md").write_text("# Results\n\n## Every shape\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#every-shape) [gone](missing.md) [renamed](other.md#all-shapes) "
                    "[here](#top) [web](https://example.com/x#y)\n\n# Top\n\n```\n[code](nowhere.md)\n```\n")
    assert broken_links(page) == ["page.md: missing.md (no such file)",
                                  "page.md: other.md#all-shapes (no such heading or anchor in other.md)"]
