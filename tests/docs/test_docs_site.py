"""The documentation site (``make docs``) opened in headless Chromium: the home page, the examples
gallery and an API page render, with their navigation, every image and every stylesheet and
script they load, and the API page shows a function's signature and its Parameters.

It tests the site ``make docs`` built and builds nothing itself (a build runs the examples, a few
minutes), so it skips where ``docs/_build/html`` is absent, or older than a source of the site
(a stale site shows the pages before the change). ``.ci/run`` runs it after ``make docs``
with ``CLUSTERABLE_DOCS_REQUIRED=1``, which turns that skip (and a missing Chromium) into a
failure: in CI a skip cannot hide a broken site.
"""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

SITE = Path(__file__).resolve().parents[2] / "docs" / "_build" / "html"
CHROMIUM = shutil.which("chromium")
REQUIRED = os.environ.get("CLUSTERABLE_DOCS_REQUIRED") == "1"
#: Flags of a headless run on a machine without network or display (as tests/reports/).
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


#: What the site is built from: a change to any of these leaves a built site stale.
SOURCES = ("README.md", "CHANGELOG.md", "docs/**/*.md", "docs/conf.py", "src/**/*.py")


def _newer_source() -> Path | None:
    """A source of the site changed after it was built (its ``index.html``); None if none."""
    root, built = SITE.parents[2], (SITE / "index.html").stat().st_mtime
    for pattern in SOURCES:
        for path in root.glob(pattern):
            if "_build" not in path.parts and path.stat().st_mtime > built:
                return path
    return None


def _missing() -> str | None:
    if not (SITE / "index.html").is_file():
        return f"no built site in {SITE} (run `make docs`)"
    newer = _newer_source()
    if newer is not None:  # the pages would be of the sources before it
        return f"the built site in {SITE} is older than {newer} (run `make docs`)"
    if CHROMIUM is None:
        return "Chromium not installed (as root: apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser() -> Any:
    reason = _missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"CLUSTERABLE_DOCS_REQUIRED=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


def open_page(browser: Any, relative: str) -> tuple[Any, list[str]]:
    """The page at ``relative`` in the site, loaded, and what failed while loading it: console
    errors, page errors and requests that failed (a missing stylesheet, script or image)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
    page.goto((SITE / relative).as_uri(), wait_until="load")
    return page, problems


def images_loaded(page: Any) -> list[bool]:
    """Whether each image of the page was decoded (a missing file has no natural width)."""
    return page.evaluate("Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)")


def screenshot(page: Any, path: Path) -> np.ndarray:
    """A full-page screenshot, saved to ``path`` and returned as grey levels ``(h, w)``."""
    png = page.screenshot(full_page=True)
    path.write_bytes(png)
    return np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float32)


def assert_drawn(pixels: np.ndarray) -> None:
    """Text on a background: varied grey levels and a share of dark pixels, not a blank page."""
    assert pixels.std() > 20
    assert 0.005 < (pixels < 128).mean() < 0.6


def test_the_home_page_renders_with_its_navigation(browser: Any, tmp_path: Path) -> None:
    page, problems = open_page(browser, "index.html")
    title = page.title()
    sidebar = page.locator(".sidebar-tree a").all_inner_texts()
    pixels = screenshot(page, tmp_path / "home.png")
    loaded = images_loaded(page)
    page.close()
    assert problems == []
    assert title.startswith("clusterable")
    for section in ["Getting started", "Losses", "Metrics", "API reference", "Changelog"]:
        assert section in sidebar, f"{section!r} missing from the navigation {sidebar}"
    assert all(loaded)
    assert_drawn(pixels)


def test_the_examples_gallery_shows_every_example_with_its_thumbnail(
    browser: Any, tmp_path: Path
) -> None:
    page, problems = open_page(browser, "auto_examples/index.html")
    examples = page.locator(".sphx-glr-thumbcontainer").count()
    loaded = images_loaded(page)
    pixels = screenshot(page, tmp_path / "gallery.png")
    page.close()
    assert problems == []
    assert examples == 6
    assert len(loaded) >= examples and all(loaded)
    assert_drawn(pixels)


def test_an_api_page_shows_a_signature_and_its_parameters(browser: Any, tmp_path: Path) -> None:
    page, problems = open_page(browser, "api/clusterable.evaluate.html")
    entry = page.locator("dl.py.function:has(> dt#clusterable\\.evaluate\\.evaluate_embeddings)")
    signature = entry.locator("> dt").inner_text()
    linked = entry.locator("> dt a.reference").all_inner_texts()  # the signature's own types
    fields = entry.locator("> dd > dl.field-list").first.text_content()  # as written, not styled
    sidebar = page.locator(".sidebar-tree a").all_inner_texts()
    pixels = screenshot(page, tmp_path / "api.png")
    loaded = images_loaded(page)
    page.close()
    assert problems == []
    assert signature.startswith("clusterable.evaluate.evaluate_embeddings(")
    assert "(emb: Any, labels: Any, *," in signature and "clustering: " in signature
    assert "Evaluation" in linked and "EvaluationOptions" in linked
    assert fields.strip().startswith("Parameters:")
    assert "emb (array-like)" in fields and "labels (array-like)" in fields
    assert "API reference" in sidebar
    assert all(loaded)
    assert_drawn(pixels)


def test_the_cli_reference_shows_flags_and_examples_as_typed(browser: Any) -> None:
    page, problems = open_page(browser, "cli.html")
    text = page.locator("article").inner_text()
    page.close()
    assert problems == []
    assert "clusterable train --data digits --loss lifted --loss-arg margin=1.0 --epochs 20" in text
    assert "unless --resume or --overwrite" in text
    dashed = sorted(set(re.findall(r"[\u2013\u2014]-?[a-z][\w-]*", text)))
    assert not dashed, f"flags typeset with a dash, which a shell does not take: {dashed}"
