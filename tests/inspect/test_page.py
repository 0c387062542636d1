"""The inspector in a real browser (Debian's chromium, headless, driven by Playwright) on the demo's agent.

The demo (`engram demo`'s sections) runs once on real Ray, as clients of the home's server; then
- the page that server serves at /inspect (loaded from it over HTTP, as `make demo`'s URL names it), and
- the file `engram inspect --out` wrote, opened from disk with the network off,
are checked view by view: what is drawn (points, nodes, edges, bars, cards) against what the projections
hold, and a click on a chunk memory shows the messages it covers. A screenshot of each view is saved under
test-artifacts/inspector/ (gitignored).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.ray

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "inspector"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWS = ("timeline", "forgetting", "graph", "recall", "working", "discussion")


@pytest.fixture(scope="module")
def demo(ray_session, tmp_path_factory):
    """The demo's home, made by the demo's own sections, with its engram still open."""
    import importlib

    from engram.cli.demo import SAMPLE, SECTIONS, Demo
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime
    from importlib import resources

    from tests.server.helpers import Served

    home = tmp_path_factory.mktemp("demo-home")
    config = load_service_config(home)
    embedded = Engram(RayRuntime(config).start())
    served = Served(embedded).__enter__()  # the demo's sections are clients of the home's server
    mem = served.client()
    d = Demo(mem, home, Path(str(resources.files("engram.samples").joinpath(SAMPLE))))
    umask = os.umask(0o022)  # a user's shell; the sections must not depend on a strict umask of their caller
    try:
        for entry in SECTIONS:
            module, _, name = entry.partition(":")
            if name != "replay":  # replay verifies the projections; nothing here depends on it
                getattr(importlib.import_module(module), name)(d)
    finally:
        os.umask(umask)
    mem.wait_idle()
    state = SimpleNamespace(home=home, config=config, mem=mem, embedded=embedded, agent=d.agent, discussion=d.discussion,
                            demo_file=getattr(d, "inspector_file", None), url=served.url)
    closed = []

    def close() -> None:  # the home's server stops: its files are free for readers of the files alone
        if not closed:
            closed.append(True)
            mem.close()
            served.__exit__(None, None, None)
            embedded.close()

    state.close = close
    yield state
    close()


@pytest.fixture(scope="module")
def browser_launcher():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        dirs = []

        def launch(**options):
            user_data = tempfile.mkdtemp(prefix="engram-chromium-")
            dirs.append(user_data)
            return p.chromium.launch_persistent_context(user_data, executable_path=CHROMIUM, args=FLAGS, headless=True,
                                                        viewport={"width": 1400, "height": 950}, **options)

        yield launch
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def expected_counts(sql, agent: str, discussion: str, memories_file: Path) -> dict:
    """What the projections (and the WilmerAI files) hold, independently of the inspector."""
    one = lambda q, *p: sql(q, list(p))[1][0][0]
    did = "pruned + edges + schemas + conflicts + reinforced > 0"
    active = one("SELECT count(*) FROM memory_traces WHERE agent = ? AND active", agent)
    return {
        "lanes": {
            "messages": one("SELECT messages FROM discussions WHERE discussion_id = ?", discussion),
            "chunk_memories": one("SELECT count(*) FROM discussion_memories WHERE discussion_id = ?", discussion),
            "summary_updates": one("SELECT count(*) FROM ev_rolling_summary_updated WHERE stream = ?", discussion),
            "observations_buffered": one("SELECT count(*) FROM ev_observations_recorded WHERE stream = ? AND buffered", discussion),
            "observations_active": one("SELECT count(*) FROM ev_observations_recorded WHERE stream = ? AND NOT buffered", discussion)
            + one("SELECT count(*) FROM ev_observations_activated WHERE stream = ?", discussion),
            "reflections": one("SELECT count(*) FROM reflections WHERE agent = ? AND stream = ?", agent, discussion),
            "compactions": one("SELECT count(*) FROM context_compactions WHERE discussion_id = ?", discussion),
            "consolidations": one(f"SELECT count(*) FROM ev_consolidation_ran WHERE agent = ? AND {did}", agent),
            "mood": one("SELECT count(*) FROM ev_mood_changed WHERE agent = ?", agent),
        },
        "active": active,
        "edges": dict(sql(
            "SELECT kind, count(*) FROM trace_edges e WHERE agent = ? AND src IN (SELECT trace_id FROM memory_traces WHERE "
            "agent = ? AND active) AND dst IN (SELECT trace_id FROM memory_traces WHERE agent = ? AND active) GROUP BY kind",
            [agent, agent, agent])[1]),
        "slots": one("SELECT count(*) FROM working_memory WHERE agent = ?", agent),
        "capacity": one("SELECT capacity FROM working_memory_state WHERE agent = ?", agent),
        "nodes": one("SELECT count(*) FROM context_compactions WHERE discussion_id = ?", discussion),
        "vector_memories": one("SELECT count(*) FROM vector_memories WHERE discussion_id = ?", discussion),
        "memories": [json.loads(line) for line in memories_file.read_text().splitlines() if line.strip()],
    }


def open_view(page, view: str) -> None:
    page.click(f"nav button[data-tab={view}]")
    page.wait_for_selector(f"#view-{view}[data-ready='1']", timeout=20_000)
    page.wait_for_timeout(150)  # Plotly's transitions


def shot(page, mode: str, view: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{mode}-{view}.png"), full_page=True)


def drawn(page, plot: str) -> list[dict]:
    """Per Plotly trace of `plot`: its meta, the points drawn in the DOM (each trace group knows its trace by the
    calcdata Plotly binds to it; a trace with no data gets no group), and its data length."""
    return page.evaluate(
        """(id) => { const gd = document.getElementById(id); const points = gd.data.map(() => 0);
        gd.querySelectorAll('.scatterlayer .trace, .barlayer .trace').forEach((g) => {
          const cd = g.__data__; const i = cd && cd[0] && cd[0].trace ? cd[0].trace.index : -1;
          if (i >= 0) points[i] += g.querySelectorAll('.point').length; });
        return gd.data.map((t, i) => ({ meta: t.meta, points: points[i], n: (t.x || []).length,
                                          visible: t.visible === undefined ? true : t.visible })); }""",
        plot,
    )


def check_views(page, mode: str, exp: dict, *, recall: bool) -> dict:
    found: dict = {}
    # 1. timeline: one point per item, lane by lane, as many as the projections hold.
    open_view(page, "timeline")
    lanes = {t["meta"]: t["points"] for t in drawn(page, "timeline-plot")}
    assert lanes == exp["lanes"]
    shot(page, mode, "timeline")
    # A click on a chunk memory's point: its lineage lists the messages it was made from.
    chunk = exp["memories"][-1]
    box = page.evaluate(
        """() => { const gd = document.getElementById('timeline-plot'); const i = gd.data.findIndex(t => t.meta === 'chunk_memories');
        const g = [...gd.querySelectorAll('.scatterlayer .trace')].find((x) => x.__data__[0].trace.index === i);
        const pts = g.querySelectorAll('path.point'); const r = pts[pts.length - 1].getBoundingClientRect();
        return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; }""")
    page.mouse.click(box["x"], box["y"])
    page.wait_for_selector("#lineage .lineage-messages .message", timeout=10_000)
    ids = page.eval_on_selector_all("#lineage .lineage-messages .message", "els => els.map(e => e.dataset.messageId)")
    assert ids == chunk["message_ids"]
    assert "offline-heuristic" in page.inner_text("#lineage .lineage-llm")
    # 2. forgetting curves: small multiples of the strongest and weakest, and one trace's curve with its retrievals.
    open_view(page, "forgetting")
    panels = page.eval_on_selector_all("#multiples-plot .cartesianlayer .subplot", "els => els.length")
    assert panels == 2 * min(6, exp["active"])
    assert page.eval_on_selector_all("#trace-list tr.pick", "els => els.length") == min(50, exp["active"])
    curve = {t["meta"]: t for t in drawn(page, "curve-plot")}
    found["curve_trace"] = page.get_attribute("#curve-plot", "data-trace")
    found["curve_marks"] = {k: curve[k]["points"] for k in ("retrieved", "reinforced")}
    threshold = page.evaluate("() => document.getElementById('curve-plot').layout.shapes[0].y0")
    assert threshold == 0.05
    shot(page, mode, "forgetting")
    # 3. trace graph: every active trace a node, every edge between them drawn, by kind.
    open_view(page, "graph")
    traces = drawn(page, "graph-plot")
    assert sum(t["points"] for t in traces if t["meta"] == "nodes") == exp["active"]
    assert {t["meta"][6:]: t["n"] // 3 for t in traces if (t["meta"] or "").startswith("edges:")} == exp["edges"]
    kind = next(iter(exp["edges"]))
    page.uncheck(f"#graph-filters input[data-kind={kind}]")  # filter an edge kind out
    hidden = next(t for t in drawn(page, "graph-plot") if t["meta"] == "edges:" + kind)
    assert hidden["visible"] == "legendonly"
    page.check(f"#graph-filters input[data-kind={kind}]")
    shot(page, mode, "graph")
    # 4. a recall explained: one stacked bar of six factors per hit, HyDE's steps.
    open_view(page, "recall")
    if recall:
        bars = drawn(page, "recall-plot")
        hits = page.eval_on_selector_all("#recall-hits tr", "els => els.length - 1")
        assert hits > 0 and [b["meta"] for b in bars] == ["similarity", "activation", "strength", "recency", "emotional", "importance"]
        assert all(b["n"] == hits for b in bars)
        assert page.eval_on_selector_all("#recall-hyde .hyde-steps tr", "els => els.length - 1") >= 1
        found["recall_hits"] = hits
    shot(page, mode, "recall")
    # 5. working memory slots and the context window block by block.
    open_view(page, "working")
    slots = {t["meta"]: t for t in drawn(page, "slots-plot")}
    assert slots["slots"]["points"] == exp["slots"] and slots["free"]["n"] == exp["capacity"] - exp["slots"]
    segments = [t["meta"] for t in drawn(page, "context-plot")]
    assert segments == ["working_memory", "rolling_summary", "chain", "recalled", "recent_turns"]
    assert page.eval_on_selector_all("#context-chain .card", "els => els.length") == exp["nodes"]
    shot(page, mode, "working")
    # 6. discussion memory: the three files side by side; a click on a chunk memory shows its messages.
    open_view(page, "discussion")
    assert page.eval_on_selector_all("#memories-file .card.chunk", "els => els.length") == len(exp["memories"])
    assert page.eval_on_selector_all("#vector-file .card", "els => els.length") == exp["vector_memories"]
    chunk = exp["memories"][1]
    page.click(f"#memories-file .card.chunk[data-memory-id='{chunk['memory_id']}']")
    page.wait_for_selector(f"#chunk-messages[data-memory='{chunk['memory_id']}']", timeout=10_000)
    ids = page.eval_on_selector_all("#chunk-messages .message", "els => els.map(e => e.dataset.messageId)")
    assert ids == chunk["message_ids"] and len(ids) == chunk["message_count"]
    shot(page, mode, "discussion")
    return found


def browse(ctx, url: str, mode: str, exp: dict, sql, agent: str, *, query: str, note: str) -> list[str]:
    """Open the inspector at `url`, check every view, then ask the recall view `query` and wait for a note
    containing `note`. Returns the page's script errors."""
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    found = check_views(page, mode, exp, recall=True)
    assert found["curve_marks"] == retrieval_marks(sql, agent, found["curve_trace"])
    page.click("nav button[data-tab=recall]")
    page.fill("#recall-query", query)
    page.click("#recall-form button")
    page.wait_for_function("(text) => document.getElementById('recall-note').textContent.includes(text)", arg=note)
    return errors


def retrieval_marks(sql, agent: str, trace: str) -> dict:
    rows = dict(sql("SELECT change, count(*) FROM trace_changes WHERE agent = ? AND trace_id = ? GROUP BY change",
                    [agent, trace])[1])
    return {"retrieved": rows.get("retrieved", 0), "reinforced": rows.get("reinforced", 0)}


def test_the_served_inspector_shows_each_view_of_the_demo_agent(demo, browser_launcher):
    from engram.inspect.web import page_url
    from engram.inspect.adapter import EngramReader

    # The demo's last section wrote the inspector file that `make demo` names, next to the served page's URL.
    assert demo.demo_file == Path(demo.home) / "inspector.html" and "plotly.js v" in demo.demo_file.read_text()
    # What the demo's sections write in the home themselves (the inspector, the agent's lowered config), with the
    # umask of a user's shell (the fixture's): its owner's alone, as the server's own files are.
    agent_dir = Path(demo.home) / "agents" / demo.agent
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in (demo.demo_file, agent_dir / "agent.config.json")} \
        == {"inspector.html": "0o600", "agent.config.json": "0o600"}
    assert oct(stat.S_IMODE(agent_dir.stat().st_mode)) == oct(stat.S_IMODE((agent_dir.parent).stat().st_mode)) == "0o700"
    # The test's own reads go to the engram the server serves, in this process (not over a kept-alive connection
    # that the server closes while the browser looks).
    reader = EngramReader(demo.embedded)
    files = Path(demo.config.home) / "projections" / "agents" / demo.agent / "Public"
    exp = expected_counts(reader.sql, demo.agent, demo.discussion, files / f"{demo.discussion}_memories.jsonl")
    _, before = reader.sql("SELECT type, count(*) FROM events_raw GROUP BY type ORDER BY type")
    elsewhere: list[str] = []
    answered: list[str] = []
    ctx = browser_launcher()
    try:
        # The page and every answer it asks for come from the home's running server; nothing else is reached.
        ctx.route(lambda u: not u.startswith(demo.url + "/"), lambda r: (elsewhere.append(r.request.url), r.abort()))
        ctx.on("response", lambda r: answered.append(urlsplit(r.url).path) if r.ok else None)
        # Any query recalls live: type one.
        errors = browse(ctx, page_url(demo.url, demo.agent, demo.discussion), "served", exp, reader.sql, demo.agent,
                        query="Who is Marco?", note='"Who is Marco?"')
        assert errors == [] and elsewhere == []
        assert {"/inspect", "/inspect/api/timeline", "/inspect/api/lineage", "/inspect/api/recall"} <= set(answered)
    finally:
        ctx.close()
    _, after = reader.sql("SELECT type, count(*) FROM events_raw GROUP BY type ORDER BY type")
    assert after == before  # looking (recall included) appended nothing: no retrieval recorded, nothing reinforced


def test_the_report_file_shows_the_same_views_offline(demo, browser_launcher, tmp_path, capsys):
    from engram.cli.main import main
    from engram.inspect.adapter import HomeFilesReader

    out = tmp_path / "report.html"
    # The command is a client of the home's server (recall included); then the server stops and the files alone
    # are read back.
    assert main(["--home", str(demo.home), "inspect", "--agent", demo.agent, "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    demo.close()
    html = out.read_text()
    assert "<script src" not in html and "<link" not in html
    reader = HomeFilesReader(demo.config)
    try:
        files = Path(demo.config.home) / "projections" / "agents" / demo.agent / "Public"
        exp = expected_counts(reader.sql, demo.agent, demo.discussion, files / f"{demo.discussion}_memories.jsonl")
        ctx = browser_launcher(offline=True)
        requested: list[str] = []
        try:
            ctx.route(lambda u: not u.startswith("file:"), lambda r: (requested.append(r.request.url), r.abort()))
            # A query the file holds no recall for: the page says so instead of showing nothing.
            errors = browse(ctx, out.as_uri(), "file", exp, reader.sql, demo.agent, query="something never asked",
                            note="does not hold")
            assert errors == [] and requested == []
        finally:
            ctx.close()
    finally:
        reader.close()
