"""A run's report opened in headless Chromium: it renders, raises no console error, and makes no
request beyond its own file.

Chromium is Debian's package (``make test`` installs it where it runs as root) driven by
Playwright's Python client, which uses that browser and downloads none of its own.
"""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
from PIL import Image

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium not installed (as root: apt-get install chromium)"
)

#: Flags of a headless run on a machine without network or display (see Chromium's own list).
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_the_report_renders_offline_without_errors(digits_run, tmp_path):
    from playwright.sync_api import sync_playwright

    page_file = digits_run / "report.html"
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto(page_file.as_uri(), wait_until="load")
        loaded = page.evaluate(
            "Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)"
        )
        shot = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("L")
        browser.close()
    assert errors == []
    assert requests == [page_file.as_uri()]
    assert len(loaded) > 30 and all(loaded)  # every image decoded in the browser
    pixels = np.asarray(shot, dtype=np.float32)
    assert shot.size[1] > 3000  # the whole page, not one screen
    assert pixels.std() > 20 and (pixels < 128).mean() > 0.02  # text and figures, not blank
