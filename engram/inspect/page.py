"""The inspector page: one HTML file with everything inlined — Plotly (the `plotly.min.js` shipped in the
`plotly` package), the page's script and style, and its data — so it opens from disk with no network.

- `report_html`: a report file; its data carry the answers its page asks for (`api.snapshot`).
- `served_html`: the page a server returns at `/inspect`; it asks `<base>/<view>?…` for its answers (and the
  server may hand Plotly out as an asset of its own, which the browser caches).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources

from engram.inspect.api import Inspector, snapshot

PLOTLY_JS = "package_data/plotly.min.js"


@lru_cache(maxsize=None)
def _asset(name: str) -> str:
    return resources.files("engram.inspect").joinpath("assets", name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js as the `plotly` package ships it (a declared dependency: nothing is fetched)."""
    return resources.files("plotly").joinpath(PLOTLY_JS).read_text(encoding="utf-8")


def _json_for_script(data: dict) -> str:
    """JSON that cannot end the <script> element it sits in."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("\u2028", "\\u2028").replace(
        "\u2029", "\\u2029")


@lru_cache(maxsize=1)
def plotly_bytes() -> bytes:
    return plotly_js().encode("utf-8")


def plotly_version() -> str:
    import plotly

    return plotly.__version__


def _html(title: str, data: dict, *, plotly_src: str | None = None) -> str:
    """`plotly_src`: load Plotly from that URL (a served page: the browser caches it) instead of inlining it."""
    page = _asset("page.html")
    if plotly_src is not None:
        page = page.replace("<script>\n__PLOTLY__\n</script>", f'<script src="{_escape(plotly_src)}"></script>', 1)
    # Replace the data last: it may contain any text, the placeholders included.
    for marker, value in (("__CSS__", _asset("inspector.css")), ("__PLOTLY__", plotly_js()),
                          ("__APP__", _asset("inspector.js")), ("__TITLE__", _escape(title))):
        page = page.replace(marker, value, 1)
    return page.replace("__DATA__", _json_for_script(data), 1)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def report_html(inspector: Inspector, agent: str, discussion: str | None, queries: list[str], *, home: str,
                written: datetime | None = None) -> str:
    overview, responses = snapshot(inspector, agent, discussion, queries)
    written = written or datetime.now(timezone.utc)
    data = {
        "mode": "file", "agent": agent, "discussion": overview["discussion"], "overview": overview, "queries": queries,
        "home": home, "written": written.strftime("%Y-%m-%d %H:%M UTC"), "responses": responses,
    }
    return _html(f"{agent}", data)


def served_html(inspector: Inspector, agent: str, discussion: str | None, *, base: str, home: str,
                queries: list[str] | None = None, plotly_src: str | None = None) -> str:
    """`queries`: offered in the recall view (default: the discussion's latest user message, explained at once);
    `plotly_src`: where the page loads Plotly from (default: inlined)."""
    from engram.inspect.recall import default_queries

    overview = inspector.get("overview", {"agent": agent, **({"discussion": discussion} if discussion else {})})
    if queries is None:
        queries = default_queries(inspector.reader, agent, overview["discussion"])
    data = {"mode": "served", "agent": agent, "discussion": overview["discussion"], "overview": overview,
            "queries": list(queries), "home": home, "base": base.rstrip("/")}
    return _html(f"{agent}", data, plotly_src=plotly_src)
