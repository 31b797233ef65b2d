"""benchmarks/timeline_page.py: its DevTools driver measures redraws on the real clock, not the virtual one."""

from pathlib import Path

import pytest

from benchmarks.timeline_page import CHROMIUM, DevTools

needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium binary (apt-get install chromium)")


@needs_chromium
def test_the_page_clock_runs_while_a_script_runs(tmp_path):
    """A 150 ms busy loop on performance.now() ends and reads as 150 ms or a little more: the clock the redraw
    timings read is the real one; and an awaited promise's value comes back."""
    page = tmp_path / "busy.html"
    page.write_text("<html><body><script>window.ready = Promise.resolve(7);</script></body></html>")
    browser = DevTools(tmp_path / "chrome")
    try:
        browser.open(page.resolve().as_uri())
        browser.wait_for("document.readyState === 'complete' && window.ready !== undefined")
        assert browser.evaluate("window.ready") == 7
        spent = browser.evaluate("(function () { var t = performance.now(); while (performance.now() - t < 150) {} "
                                 "return performance.now() - t; })()")
    finally:
        browser.close()
    assert 150 <= spent < 1000
