"""profkit's tests, laid out like the package: parse/, analyse/, capture/, session/, render/, cli/, build/,
bench/ (the shared harness), kernels/ (the kernel families), benchmarks/ (profkit's measurements of itself).

tests/conftest.py decides once per process how the Triton kernels run and applies the ``gpu``, ``slow`` and
``interpreter`` markers; committed_sessions.py holds the fixtures over the committed sessions/.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root: sessions/, reports/, cuda/ and the packages beside tests/."""
