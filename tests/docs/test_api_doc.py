"""The user documentation runs: docs/api.md's examples execute against the committed sessions, docs/columns.md is
what the code generates, every table column is documented, the public API's docstrings say what each argument
is and what comes back, and `import profkit` stays cheap."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys

import pytest

from tests import REPO
API = REPO / "docs" / "api.md"


def _blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_every_api_example_runs(monkeypatch, tmp_path, capsys):
    pytest.importorskip("plotly", reason="the examples draw a figure and write a report (plotly)")
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PROFKIT_CACHE", str(tmp_path / "cache"))
    blocks = _blocks(API.read_text())
    assert len(blocks) >= 6
    namespace: dict = {}
    for number, block in enumerate(blocks):
        exec(compile(block, f"docs/api.md block {number}", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "% of steady-state GPU time was profiled" in printed and "only kernel" in printed
    assert namespace["roof"].ceilings["value"].gt(0).all()


def test_the_glossary_is_current_and_complete():
    from profkit.render.glossary import render_glossary, undocumented

    assert undocumented() == []
    assert (REPO / "docs" / "columns.md").read_text() == render_glossary(), \
        "regenerate: python -m profkit.render.glossary > docs/columns.md"


@pytest.mark.slow  # ~5 s: every table of four committed sessions
def test_every_printed_column_is_in_the_glossary():
    """Not only the declared columns: what the tables really print on the committed sessions."""
    import profkit
    from profkit.analyse.columns import COLUMNS

    seen = set()
    for name in ("ladder-n4096", "train-step-guided", "fa2-n4096-d64", "triton-matmul-fp32-n4096-serpentine"):
        profile = profkit.load(REPO / "sessions" / name)
        for table in profile.tables():
            seen |= set(profile.table(table).columns)
    assert sorted(seen - set(COLUMNS)) == []


def test_import_profkit_is_fast_and_loads_no_heavy_module():
    code = ("import sys, time; t = time.perf_counter(); import profkit; took = time.perf_counter() - t; "
            "heavy = [m for m in ('pandas', 'plotly', 'torch', 'numpy', 'ncu_report') if m in sys.modules]; "
            "print(took, heavy)")
    took = min(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                                    env={**os.environ, "PYTHONPATH": str(REPO)}, check=True).stdout.split()[0])
               for _ in range(3))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip().endswith("[]"), out
    assert took <= 0.3, f"import profkit took {took:.3f} s"


def _documented_callables():
    """(qualified name, function) of everything profkit and profkit.api export, and of the public methods and
    properties of the exported classes."""
    import profkit
    from profkit import api

    exported = sorted((set(profkit.__all__) - {"__version__"}) | set(api.__all__))
    for name in exported:
        obj = getattr(api, name)
        yield name, obj
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if not member.startswith("_"):
                    yield f"{name}.{member}", value


def _section(doc: str, title: str) -> str:
    """The body of one Google-style section (indented lines after "Title:"), '' without it."""
    match = re.search(rf"^{title}:\n((?:[ ]{{4}}.*\n?|\n)+)", doc, re.M)
    return match.group(1) if match else ""


def test_the_public_api_documents_every_argument_and_what_it_returns():
    """Google style: an Args section naming each parameter, Returns unless the function returns None; classes and
    properties say what they are."""
    gaps = []
    for name, obj in _documented_callables():
        doc = inspect.getdoc(obj.fget if isinstance(obj, property) else obj) or ""
        if not doc.strip():
            gaps.append(f"{name}: no docstring")
        if inspect.isclass(obj) or isinstance(obj, property) or not callable(obj):
            continue
        signature = inspect.signature(obj)
        params = [p for p in signature.parameters.values() if p.name != "self"]
        args = _section(doc, "Args")
        for p in params:
            label = "*" * (p.kind == p.VAR_POSITIONAL) + "**" * (p.kind == p.VAR_KEYWORD) + p.name
            if not re.search(rf"^    {re.escape(label)}:", args, re.M):
                gaps.append(f"{name}: Args does not describe {label}")
        if signature.return_annotation not in ("None", None, inspect.Signature.empty) and not _section(doc, "Returns"):
            gaps.append(f"{name}: no Returns section")
        if signature.return_annotation is inspect.Signature.empty:
            gaps.append(f"{name}: no return annotation")
    assert not gaps, "\n".join(gaps)
