"""Code comments and docstrings keep the measured *why* in words; the figures of a particular run (its timings, its
percentages and sizes on a session) live on reports/code_measurements.md with the command that produced them
(issue 48).

The check reads every comment (tokenize) and every string statement, docstrings included (ast), of profkit/**/*.py
and flags a number followed by a time unit, and a percentage or a size (kB, MiB, px, ...) near a session's name or
a word saying it was measured. Not flagged: quoted text ('...', "...", `...`: format examples and code), a figure
after "at least", "at most", "every", "≤", ... or before "or more" (a threshold's definition), a percentage before
"interval" or "confidence" (a confidence level), and exponents (2^53 ns). What else stays is in ALLOWED, each with
why."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests import REPO

NUMBER = r"\d+(?:[.,]\d+)*"
RUN_TIME = re.compile(rf"(?<![\w.^]){NUMBER}(?:\s*(?:-|–|to)\s*{NUMBER})?\s*(?:ns|µs|us|ms|s)\b")
SHARE_OR_SIZE = re.compile(rf"(?<![\w.^]){NUMBER}(?:\s*(?:-|–|to)\s*{NUMBER})?\s*(?:%|[kKMG]i?B\b|px\b)")
QUOTED = re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|\"[^\"\n]*\"|`[^`\n]*`")
THRESHOLD_BEFORE = re.compile(r"(?:\bat least|\bat most|\bevery|≥|≤|>=|<=|<|(?<![-=])>)\s*~?$")
THRESHOLD_AFTER = re.compile(r"^\s*(?:(?:or|and) (?:more|less|longer|shorter)|(?:confidence|interval)\b)")
MEASURED = re.compile(r"\b(?:measured|took|takes|read|reads|ran|was|were|faster|slower|on the H[12]00)\b")
SESSIONS = sorted((path.name for path in (REPO / "sessions").iterdir() if path.is_dir()), key=len, reverse=True)
SESSION = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, SESSIONS)) + r")(?![\w-])|\b(?:train-step|ladder)\b")
NEAR = 80  # characters either side of a percentage or size searched for a session's name or a measuring word

ALLOWED = {
    ("profkit/analyse/host.py", "100 µs slot"): "the definition of BIN_NS (100_000 ns), a setting, not a measurement",
}
"""(file, the flagged text and the words after it) -> why it may stay."""


def prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every string statement (docstrings, attribute docstrings) of a module."""
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    found += [(node.lineno, node.value.value) for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, str)]
    return found


def run_figures(text: str) -> list[str]:
    """The run figures in one comment or docstring, each with the words after it (the allow-list's key)."""
    flat = QUOTED.sub(lambda quoted: " " * len(quoted.group()), " ".join(text.split()))
    hits = []
    for pattern in (RUN_TIME, SHARE_OR_SIZE):
        for match in pattern.finditer(flat):
            before, after = flat[:match.start()], flat[match.end():]
            if THRESHOLD_BEFORE.search(before) or THRESHOLD_AFTER.search(after):
                continue
            if pattern is SHARE_OR_SIZE:
                near = flat[max(0, match.start() - NEAR):match.end() + NEAR]
                if not (SESSION.search(near) or MEASURED.search(near)):
                    continue
            hits.append(flat[match.start():match.end() + 16].strip())
    return hits


def offences(path: Path, name: str) -> list[str]:
    """'file:line: figure...' for each run figure in the module at `path` not on the allow-list under `name`."""
    out = []
    for line, text in prose(path.read_text()):
        for hit in run_figures(text):
            if not any(file == name and hit.startswith(snippet) for file, snippet in ALLOWED):
                out.append(f"{name}:{line}: {hit}")
    return out


def test_code_quotes_no_run_figures() -> None:
    files = sorted((REPO / "profkit").rglob("*.py"))
    assert len(files) > 50
    found = [hit for path in files for hit in offences(path, str(path.relative_to(REPO)))]
    assert not found, ("comments quote a run's figures: keep the reason in words and move the figure to "
                       f"reports/code_measurements.md with its command, {found}")


def test_every_allowed_entry_is_still_needed() -> None:
    for file, snippet in ALLOWED:
        hits = [hit for _, text in prose((REPO / file).read_text()) for hit in run_figures(text)]
        assert any(hit.startswith(snippet) for hit in hits), f"{file}: {snippet!r} is flagged no more; drop it"


@pytest.mark.parametrize("comment", [
    '# took 21.2 ms on train-step-guided\nx = 1\n',
    'def f():\n    """Per instance: 0.6 s of a show."""\n',
    'LIMIT = 3\n"""On train-step-graphs-guided it read 7 % faster than the others."""\n',
    '"""Module: the native calls were some 40 % of a reader child\'s time."""\n',
    '# a rank test called the eager -> compiled step, 21.2 -> 12.3 ms, "within noise"\n',
    '# train-step-guided\'s timeline data: 299 KB -> 85 KB\n',
])
def test_a_module_quoting_a_run_fails(tmp_path: Path, comment: str) -> None:
    module = tmp_path / "quoting.py"
    module.write_text(comment)
    assert offences(module, "quoting.py")


@pytest.mark.parametrize("comment", [
    '"""GPU idle gaps of at least 1 ms are grouped."""\n',
    '# nsys flags gaps of 500 ms or more\n',
    'def f():\n    """\'at 6.689 s, 6.716 s\': the format."""\n',
    '"""exact below 2^53 ns; a ratio at 95 % confidence."""\n',
    '# train-step-guided\'s steps: a few percent apart (reports/code_measurements.md)\n',
    '# the step time A -> B with its 95 % interval: faster, slower or within noise\n',
])
def test_thresholds_format_examples_and_words_pass(tmp_path: Path, comment: str) -> None:
    module = tmp_path / "fine.py"
    module.write_text(comment)
    assert not offences(module, "fine.py")
