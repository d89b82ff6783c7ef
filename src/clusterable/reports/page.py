"""One self-contained HTML page: sections of tables and figures, every image inline.

A report must open offline, be mailed as one file and never reach the network: figures and
thumbnails are PNG data URIs, the style sheet is inline, there is no JavaScript, and a
Content-Security-Policy forbids the page any request that is not a data URI. The template is the
standard library's :class:`string.Template`.
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

from clusterable._atomic import atomic_write
from clusterable.plots._figure import as_image, figure_png

#: Side of an item thumbnail, in pixels.
THUMBNAIL = 56

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d232b; margin: 0; background: #f5f6f8; }
header { background: #25364a; color: white; padding: 18px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; opacity: .85; }
nav a { color: #cfe3ff; margin-right: 14px; font-size: 13px; }
main { padding: 8px 32px 32px; max-width: 1200px; }
section { background: white; border-radius: 6px; padding: 12px 20px 18px; margin: 18px 0;
          box-shadow: 0 1px 2px rgba(0,0,0,.08); }
h2 { font-size: 17px; margin: 6px 0 10px; }
p.note { color: #56606b; font-size: 13px; margin: 4px 0 10px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e3e6ea; text-align: left;
         vertical-align: middle; }
th { background: #eef1f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fdecea; }
tr.good td { background: #eaf6ec; }
img.figure { max-width: 100%; }
img.thumb { width: 44px; height: 44px; image-rendering: pixelated; margin: 1px;
            border: 3px solid transparent; vertical-align: middle; }
img.query { border-color: #3a6fd8; }
img.hit, span.hit { border-color: #2e9a44; color: #1e7a32; }
img.miss, span.miss { border-color: #d93a2b; color: #b52a1d; }
span.hit, span.miss { border: 0; font-weight: 600; }
.strip { white-space: nowrap; overflow-x: auto; }
footer { color: #56606b; font-size: 12px; padding: 0 32px 24px; }
"""

_PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title</title>
<style>$style</style>
</head>
<body>
<header><h1>$title</h1><p>$subtitle</p><nav>$nav</nav></header>
<main>
$sections
</main>
<footer>$footer</footer>
</body>
</html>
""")


@dataclass(frozen=True)
class Section:
    """One panel of a report: an anchor, a heading and its HTML body (already escaped)."""

    anchor: str
    title: str
    body: str


def escape(value: object) -> str:
    """``value`` as text safe inside HTML."""
    return html.escape(str(value), quote=True)


def note(text: str) -> str:
    """A small explanatory paragraph."""
    return f'<p class="note">{escape(text)}</p>'


def table(
    header: Sequence[str], rows: Iterable[Sequence[object]], row_classes: Sequence[str] = ()
) -> str:
    """An HTML table; cells that are numbers are right-aligned, others escaped.

    A cell that is an :class:`Html` is inserted as it is (a thumbnail strip, a coloured span).
    """
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    lines = []
    for position, row in enumerate(rows):
        kind = row_classes[position] if position < len(row_classes) else ""
        cells = "".join(_cell(value) for value in row)
        lines.append(f'<tr class="{kind}">{cells}</tr>' if kind else f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


class Html(str):
    """Markup that :func:`table` inserts unescaped."""


def _cell(value: object) -> str:
    if isinstance(value, Html):
        return f"<td>{value}</td>"
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return f'<td class="num">{escape(value)}</td>'
    return f"<td>{escape(value)}</td>"


def figure_image(figure: Figure, alt: str) -> Html:
    """A matplotlib figure as an inline PNG ``<img>``; the figure is closed."""
    return Html(f'<img class="figure" alt="{escape(alt)}" src="{_png_uri(figure_png(figure))}">')


def thumbnail(item: np.ndarray, css: str = "", title: str = "") -> Html:
    """An item image (``(C, H, W)``, ``(H, W)`` or ``(H, W, C)``, in [0, 1]) as an ``<img>``."""
    pixels = as_image(item)
    low, high = float(pixels.min()), float(pixels.max())
    if low < 0.0 or high > 1.0:  # standardised inputs: show their range
        pixels = (pixels - low) / (high - low) if high > low else np.zeros_like(pixels)
    image = Image.fromarray((pixels * 255).round().astype(np.uint8))
    image = image.resize((THUMBNAIL, THUMBNAIL), Image.Resampling.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return Html(
        f'<img class="thumb {css}" title="{escape(title)}" alt="{escape(title)}" '
        f'src="{_png_uri(buffer.getvalue())}">'
    )


def _png_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def render(title: str, subtitle: str, sections: Sequence[Section], footer: str) -> str:
    """The whole page."""
    nav = "".join(f'<a href="#{escape(s.anchor)}">{escape(s.title)}</a>' for s in sections)
    body = "\n".join(
        f'<section id="{escape(s.anchor)}"><h2>{escape(s.title)}</h2>\n{s.body}\n</section>'
        for s in sections
    )
    return _PAGE.substitute(
        title=escape(title),
        subtitle=escape(subtitle),
        nav=nav,
        sections=body,
        footer=escape(footer),
        style=_STYLE,
    )


def write_page(page: str, path: str | os.PathLike[str]) -> Path:
    """Write ``page`` to ``path`` atomically (a temporary file renamed over it)."""
    return atomic_write(Path(path), lambda out: out.write(page.encode("utf-8")))
