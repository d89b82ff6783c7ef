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


def section(page: str, anchor: str) -> str:
    """The HTML of the section ``anchor`` of a page."""
    return page.split(f'<section id="{anchor}">')[1].split("</section>")[0]


def table_rows(html: str) -> dict[str, list[str]]:
    """The rows of the first table of ``html``, by their first cell: the other cells' text."""
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in body.split("</tr>") if row]
    return {cells[0]: cells[1:] for cells in rows}
