"""Reading a report page back: its images, its sections."""

from __future__ import annotations

import base64
import io
import re

from PIL import Image


def image_sources(page: str) -> list[str]:
    """The ``src`` of every ``<img>`` of a page."""
    return re.findall(r'<img[^>]*\ssrc="([^"]*)"', page)


def decoded_png(source: str) -> Image.Image:
    """The image of a ``data:image/png;base64,`` URI; fails on anything else."""
    prefix = "data:image/png;base64,"
    assert source.startswith(prefix), source[:60]
    image = Image.open(io.BytesIO(base64.b64decode(source[len(prefix) :])))
    image.load()
    return image


def section_ids(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', page)
