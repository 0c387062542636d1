// engram inspector: draws the answers of engram.inspect.api with Plotly (inlined above; no network).
// A report file carries its answers (DATA.responses, by request key); the served page asks the server.
"use strict";

const DATA = JSON.parse(document.getElementById("engram-data").textContent);
const AGENT = DATA.agent;
let DISCUSSION = DATA.discussion;
const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };
const FACTOR_COLORS = {
  similarity: "#3366cc", activation: "#9467bd", strength: "#2ca02c", recency: "#ff7f0e", emotional: "#d62728",
  importance: "#8c564b",
};
const KIND_COLORS = {
  shared_entity: "#1f77b4", temporal_sequence: "#7f7f7f", same_topic: "#17becf", contradicts: "#d62728",
  supersedes: "#ff7f0e", caused_by: "#8c564b", co_activated: "#9467bd", schema_instance: "#2ca02c",
};
const TYPE_COLORS = {
  episodic: "#1f77b4", semantic: "#2ca02c", procedural: "#ff7f0e", prospective: "#9467bd", relational: "#17becf",
};

// ------------------------------------------------------------------ asking

function requestKey(view, params) {
  const names = Object.keys(params).filter((k) => params[k] !== null && params[k] !== undefined).sort();
  if (!names.length) return view;
  return view + "?" + names.map((k) => k + "=" + encodeURIComponent(String(params[k]))).join("&");
}

async function api(view, params) {
  const key = requestKey(view, params);
  if (DATA.mode === "file") {
    if (key in DATA.responses) return DATA.responses[key];
    return { unavailable: "This report file does not hold that answer (it was written with what its page shows first). " +
             "Open the inspector served by engram (/inspect) to ask anything." };
  }
  const res = await fetch(DATA.base + "/" + key, { headers: { Accept: "application/json" } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) return { unavailable: (body.error && body.error.message) || res.statusText };
  return body;
}

// ------------------------------------------------------------------ small helpers

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

function clip(text, n) {
  text = (text || "").replace(/\s+/g, " ").trim();
  return text.length <= n ? text : text.slice(0, n - 1) + "…";
}

function fmt(x, digits) {
  return x === null || x === undefined ? "–" : Number(x).toFixed(digits === undefined ? 3 : digits);
}

function table(target, head, rows, onPick) {
  const t = typeof target === "string" ? document.getElementById(target) : target;
  t.replaceChildren(el("tr", {}, ...head.map((h) => el("th", { text: h }))));
  rows.forEach((r, i) => {
    const tr = el("tr", { class: onPick ? "pick" : "" }, ...r.map((c) => el("td", {}, c)));
    if (onPick) tr.addEventListener("click", () => { t.querySelectorAll("tr.selected").forEach((x) => x.classList.remove("selected")); tr.classList.add("selected"); onPick(i); });
    t.append(tr);
  });
  return t;
}

function unavailable(target, answer) {
  const t = document.getElementById(target);
  t.replaceChildren(el("p", { class: "note", text: answer.unavailable }));
}

function messageBox(m) {
  return el("div", { class: "message " + m.role, "data-message-id": m.message_id, "data-seq": m.seq },
    el("div", { class: "meta", text: `seq ${m.seq} · ${m.message_id} · ${m.role}${m.name ? " (" + m.name + ")" : ""} · ${m.ts}` }),
    el("div", { text: m.content }));
}

function plot(id, traces, layout) {
  const base = { margin: { l: 60, r: 20, t: 30, b: 40 }, paper_bgcolor: "#fff", plot_bgcolor: "#fff", font: { size: 12 } };
  return Plotly.newPlot(id, traces, Object.assign(base, layout || {}), PLOT_CONFIG);
}

// ------------------------------------------------------------------ tabs

const RENDERERS = {};
const rendered = {};

function show(tab) {
  document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("active", b.dataset.tab === tab));
  document.querySelectorAll(".view").forEach((v) => v.classList.toggle("active", v.id === "view-" + tab));
  if (!rendered[tab]) rendered[tab] = RENDERERS[tab]().then(() => markReady(tab));
  else document.querySelectorAll("#view-" + tab + " .js-plotly-plot").forEach((p) => Plotly.Plots.resize(p));
  if (location.hash !== "#" + tab) history.replaceState(null, "", "#" + tab);
  return rendered[tab];
}

function markReady(tab) {
  document.getElementById("view-" + tab).setAttribute("data-ready", "1");
}

// ------------------------------------------------------------------ 1. timeline

RENDERERS.timeline = async function () {
  const t = await api("timeline", { agent: AGENT, discussion: DISCUSSION });
  if (t.unavailable) return unavailable("timeline-plot", t);
  const lanes = t.lanes.slice().reverse();  // first lane on top
  const traces = lanes.map((lane) => ({
    type: lane.items.length > 4000 ? "scattergl" : "scatter", mode: "markers", name: `${lane.title} (${lane.total})`,
    x: lane.items.map((i) => i.ts), y: lane.items.map(() => lane.title), customdata: lane.items.map((i) => i.seq),
    text: lane.items.map((i) => `seq ${i.seq} · ${i.type}<br>${clip(i.label, 110)}`), hovertemplate: "%{x}<br>%{text}<extra></extra>",
    marker: { size: lane.key === "messages" ? 7 : 11, symbol: lane.key === "messages" ? "circle" : "diamond", line: { width: 1, color: "#fff" } },
    meta: lane.key,
  }));
  await plot("timeline-plot", traces, {
    xaxis: { type: "date", title: "event time" }, yaxis: { categoryorder: "array", categoryarray: lanes.map((l) => l.title), automargin: true },
    showlegend: false, hovermode: "closest", margin: { l: 170, r: 20, t: 20, b: 50 },
  });
  const shownNote = t.lanes.filter((l) => l.shown < l.total).map((l) => `${l.title}: latest ${l.shown} of ${l.total}`);
  document.getElementById("timeline-counts").textContent =
    t.lanes.map((l) => `${l.title} ${l.total}`).join(" · ") + ` · idle consolidation runs (not drawn) ${t.idle_consolidations}` +
    (shownNote.length ? ` — shown: ${shownNote.join(", ")}` : "");
  document.getElementById("timeline-plot").on("plotly_click", (ev) => {
    const p = ev.points && ev.points[0];
    if (p) showLineage(p.customdata);
  });
};

async function showLineage(seq) {
  const box = document.getElementById("lineage");
  const l = await api("lineage", { agent: AGENT, seq: seq });
  if (l.unavailable) return box.replaceChildren(el("p", { class: "note", text: l.unavailable }));
  const e = l.event;
  const parts = [el("h4", { text: `seq ${e.seq} · ${e.type} · ${e.ts} · stream ${e.stream}` })];
  if (l.cause) parts.push(el("div", { class: "meta", text: `caused by seq ${l.cause.seq} (${l.cause.type}): ${clip(l.cause.label, 120)}` }));
  if (l.llm.length) {
    parts.push(el("h4", { text: "LLM call" + (l.llm.length > 1 ? "s" : "") }));
    table(parts[parts.push(el("table", { class: "list lineage-llm" })) - 1], ["provider", "model", "task", "tokens in/out", "latency ms", "endpoint", "error"],
      l.llm.map((c) => [c.provider, c.model, c.task, `${c.input_tokens}/${c.output_tokens}`, fmt(c.latency_ms, 1), c.endpoint || "–", c.error || ""]));
  }
  if (l.related.length) {
    parts.push(el("h4", { text: "related" }));
    table(parts[parts.push(el("table", { class: "list lineage-related" })) - 1], ["what", "id", "text"], l.related.map((r) => [r.kind, r.id, clip(r.text, 200)]));
  }
  parts.push(el("h4", { text: `source messages (${l.messages_total})` }));
  const msgs = el("div", { class: "lineage-messages" }, ...l.messages.map(messageBox));
  if (l.messages_total > l.messages.length) msgs.append(el("p", { class: "note", text: `first ${l.messages.length} of ${l.messages_total}` }));
  parts.push(msgs);
  parts.push(el("h4", { text: "event" }), el("pre", { class: "json", text: JSON.stringify(e.payload, null, 1) }));
  box.replaceChildren(...parts);
  box.setAttribute("data-seq", seq);
}

// ------------------------------------------------------------------ 2. forgetting curves

let traceOrder = "strongest";
let traceOffset = 0;

function curveTraces(c, threshold, axis) {
  const suffix = axis || "";
  const line = { type: "scatter", mode: "lines", x: c.x, y: c.y, name: "strength", line: { color: "#3366cc", width: 2 },
                 hovertemplate: "%{x}<br>S = %{y:.3f}<extra></extra>", xaxis: "x" + suffix, yaxis: "y" + suffix, showlegend: !axis };
  const marks = (change, symbol, color, name) => {
    const es = c.events.filter((e) => e.change === change);
    return { type: "scatter", mode: "markers", name, x: es.map((e) => e.ts), y: es.map((e) => e.after), xaxis: "x" + suffix, yaxis: "y" + suffix,
             marker: { symbol, size: axis ? 6 : 10, color, line: { width: 1, color: "#fff" } }, showlegend: !axis,
             text: es.map((e) => `${e.change}: ${fmt(e.before)} → ${fmt(e.after)}` + (e.gap_h !== undefined && e.gap_h !== null ? `<br>${fmt(e.gap_h, 2)} h after the previous` : "") + `<br>next interval ${fmt(e.interval_h, 2)} h` + (e.detail ? `<br>${clip(e.detail, 60)}` : "")),
             hovertemplate: "%{x}<br>%{text}<extra></extra>", meta: change };
  };
  const out = [line, marks("retrieved", "circle", "#ff7f0e", "retrieval"), marks("reinforced", "diamond", "#2ca02c", "review (spaced repetition)")];
  const other = c.events.filter((e) => !["retrieved", "reinforced"].includes(e.change));
  if (other.length) out.push({ type: "scatter", mode: "markers", name: "verified / pruned / superseded", x: other.map((e) => e.ts), y: other.map((e) => e.after),
    text: other.map((e) => e.change + (e.detail ? ": " + clip(e.detail, 60) : "")), hovertemplate: "%{x}<br>%{text}<extra></extra>",
    marker: { symbol: "x", size: axis ? 6 : 9, color: "#7f7f7f" }, xaxis: "x" + suffix, yaxis: "y" + suffix, showlegend: !axis });
  return out;
}

function thresholdShape(threshold, axis) {
  const suffix = axis || "";
  return { type: "line", xref: "x" + suffix + " domain", yref: "y" + suffix, x0: 0, x1: 1, y0: threshold, y1: threshold,
           line: { color: "#d62728", dash: "dash", width: 1.5 } };
}

async function showCurve(traceId) {
  const c = await api("curve", { agent: AGENT, trace: traceId });
  const facts = document.getElementById("curve-facts");
  if (c.unavailable) { facts.replaceChildren(el("p", { class: "note", text: c.unavailable })); return; }
  const k = c.curve;
  const shapes = [thresholdShape(c.prune_threshold)];
  if (k.next_due) shapes.push({ type: "line", xref: "x", yref: "y domain", x0: k.next_due, x1: k.next_due, y0: 0, y1: 1, line: { color: "#2ca02c", dash: "dot" } });
  await plot("curve-plot", curveTraces(k, c.prune_threshold), {
    title: { text: clip(k.content, 90), font: { size: 13 } }, xaxis: { type: "date", title: "event time" },
    yaxis: { title: "strength", rangemode: "tozero" }, shapes, legend: { orientation: "h", y: -0.25 },
    annotations: [{ xref: "paper", x: 1, yref: "y", y: c.prune_threshold, text: `prune threshold ${c.prune_threshold}`, showarrow: false, yanchor: "bottom", xanchor: "right", font: { color: "#d62728", size: 11 } }],
  });
  const plotEl = document.getElementById("curve-plot");
  plotEl.setAttribute("data-trace", k.trace_id);
  facts.replaceChildren(
    el("div", {}, el("b", { text: k.trace_id }), ` · ${k.trace_type}${k.category ? "/" + k.category : ""} · ${k.active ? "active" : "inactive (" + (k.deleted_reason || "") + ")"}`),
    el("div", { class: "meta", text: `encoded ${k.encoded} · strength now ${fmt(k.strength_now)} · ${k.retrievals} retrievals · ${k.verified} verifications · review interval ${fmt(k.interval_h, 2)} h` + (k.next_due ? ` · next review due ${k.next_due}` : "") }),
    el("div", { text: k.content }),
  );
}

async function loadTraceList() {
  const params = { agent: AGENT, order: traceOrder === "strongest" ? null : traceOrder, offset: traceOffset || null };
  const page = await api("traces", params);
  const pager = document.getElementById("trace-pager");
  if (page.unavailable) { pager.replaceChildren(el("span", { class: "note", text: page.unavailable })); return null; }
  table("trace-list", ["strength", "type", "retrievals", "trace"],
    page.rows.map((r) => [fmt(r.strength), r.trace_type, String(r.retrievals), clip(r.content, 80)]),
    (i) => showCurve(page.rows[i].trace_id));
  const last = Math.min(page.offset + page.rows.length, page.total);
  pager.replaceChildren(
    el("button", { text: "◀", disabled: page.offset > 0 ? null : "", onclick: () => { traceOffset = Math.max(0, page.offset - page.limit); loadTraceList(); } }),
    el("span", { text: `${page.rows.length ? page.offset + 1 : 0}–${last} of ${page.total}` }),
    el("button", { text: "▶", disabled: last < page.total ? null : "", onclick: () => { traceOffset = page.offset + page.limit; loadTraceList(); } }),
  );
  return page;
}

RENDERERS.forgetting = async function () {
  const f = await api("forgetting", { agent: AGENT });
  if (f.unavailable) return unavailable("multiples-plot", f);
  document.getElementById("trace-order").addEventListener("change", (ev) => { traceOrder = ev.target.value; traceOffset = 0; loadTraceList(); });
  const page = await loadTraceList();
  const first = (f.strongest[0] || f.weakest[0] || (page && page.rows[0]) || {}).trace_id;
  if (first) await showCurve(first);
  const panels = f.strongest.map((c) => ["strongest", c]).concat(f.weakest.map((c) => ["weakest", c]));
  if (!panels.length) { document.getElementById("multiples-plot").replaceChildren(el("p", { class: "note", text: "no active traces" })); return; }
  const cols = Math.max(f.strongest.length, f.weakest.length, 1);
  const rows = (f.strongest.length ? 1 : 0) + (f.weakest.length ? 1 : 0);
  const traces = [], shapes = [], annotations = [];
  const layout = { grid: { rows, columns: cols, pattern: "independent", ygap: 0.35, xgap: 0.12 }, showlegend: false, margin: { l: 40, r: 10, t: 40, b: 30 } };
  panels.forEach(([group, c], i) => {
    const row = group === "strongest" || !f.strongest.length ? 0 : 1;
    const col = group === "strongest" ? i : i - f.strongest.length;
    const n = row * cols + col + 1;
    const axis = n === 1 ? "" : String(n);
    traces.push(...curveTraces(c, f.prune_threshold, axis || "1").map((t) => Object.assign(t, { xaxis: "x" + axis, yaxis: "y" + axis })));
    shapes.push(Object.assign(thresholdShape(f.prune_threshold), { xref: "x" + axis + " domain", yref: "y" + axis }));
    layout["xaxis" + axis] = { type: "date", showticklabels: false };
    layout["yaxis" + axis] = { rangemode: "tozero", tickfont: { size: 9 } };
    annotations.push({ xref: "x" + axis + " domain", yref: "y" + axis + " domain", x: 0, y: 1.18, xanchor: "left", showarrow: false,
      text: `${group === "strongest" ? "▲" : "▼"} ${fmt(c.strength_now, 2)} ${clip(c.content, 28)}`, font: { size: 10 } });
  });
  layout.shapes = shapes;
  layout.annotations = annotations;
  await plot("multiples-plot", traces, layout);
  document.getElementById("multiples-plot").setAttribute("data-panels", panels.length);
  document.getElementById("multiples-plot").on("plotly_click", (ev) => {
    const p = ev.points && ev.points[0];
    if (!p) return;
    const n = p.data.xaxis === "x" ? 1 : Number(p.data.xaxis.slice(1));
    const row = Math.floor((n - 1) / cols), col = (n - 1) % cols;
    const c = row === 0 && f.strongest.length ? f.strongest[col] : f.weakest[col];
    if (c) showCurve(c.trace_id);
  });
};

// ------------------------------------------------------------------ 3. trace graph

RENDERERS.graph = async function () {
  const g = await api("graph", { agent: AGENT });
  if (g.unavailable) return unavailable("graph-plot", g);
  const pos = Object.fromEntries(g.nodes.map((n) => [n.id, n]));
  const traces = [];
  g.clusters.forEach((c) => traces.push({
    type: "scatter", mode: "lines", fill: "toself", x: c.hull.map((p) => p[0]), y: c.hull.map((p) => p[1]), name: "schema: " + clip(c.label, 40),
    line: { color: "rgba(44,160,44,0.5)", width: 1 }, fillcolor: "rgba(44,160,44,0.10)", hoverinfo: "text",
    text: `schema cluster (${c.members.length} members): ${clip(c.label, 100)}`, meta: "cluster", showlegend: false,
  }));
  const kinds = g.kinds.filter((k) => k.shown > 0);
  kinds.forEach((k) => {
    const x = [], y = [];
    g.edges.filter((e) => e.kind === k.kind).forEach((e) => { x.push(pos[e.src].x, pos[e.dst].x, null); y.push(pos[e.src].y, pos[e.dst].y, null); });
    traces.push({ type: "scatter", mode: "lines", x, y, name: `${k.kind} (${k.shown})`, hoverinfo: "skip", meta: "edges:" + k.kind,
                  line: { color: KIND_COLORS[k.kind] || "#999", width: k.kind === "schema_instance" ? 2 : 1, dash: k.kind === "contradicts" ? "dot" : "solid" }, opacity: 0.6 });
  });
  const types = [...new Set(g.nodes.map((n) => n.trace_type))].sort();
  types.forEach((ty) => {
    const ns = g.nodes.filter((n) => n.trace_type === ty);
    traces.push({
      type: ns.length > 3000 ? "scattergl" : "scatter", mode: "markers", name: `${ty} traces (${ns.length})`, x: ns.map((n) => n.x), y: ns.map((n) => n.y),
      customdata: ns.map((n) => n.id), meta: "nodes",
      text: ns.map((n) => `${n.trace_type}${n.category ? "/" + n.category : ""} · strength ${fmt(n.strength)}<br>${clip(n.content, 90)}`),
      hovertemplate: "%{text}<extra></extra>",
      marker: { color: TYPE_COLORS[ty] || "#444", size: ns.map((n) => 7 + 14 * Math.min(1, n.strength)), opacity: ns.map((n) => (n.active ? 0.95 : 0.35)),
                line: { width: ns.map((n) => (n.cluster ? 2 : 0.5)), color: ns.map((n) => (n.cluster ? "#2ca02c" : "#fff")) } },
    });
  });
  await plot("graph-plot", traces, {
    xaxis: { visible: false }, yaxis: { visible: false, scaleanchor: "x" }, hovermode: "closest", legend: { orientation: "h", y: -0.02 },
    margin: { l: 10, r: 10, t: 10, b: 10 },
  });
  const gd = document.getElementById("graph-plot");
  const filters = document.getElementById("graph-filters");
  filters.replaceChildren(el("b", { text: "edges: " }), ...g.kinds.map((k) => {
    const box = el("input", { type: "checkbox", "data-kind": k.kind, disabled: k.shown ? null : "" });
    box.checked = k.shown > 0;
    box.addEventListener("change", () => {
      const idx = gd.data.findIndex((t) => t.meta === "edges:" + k.kind);
      if (idx >= 0) Plotly.restyle(gd, { visible: box.checked ? true : "legendonly" }, [idx]);
    });
    return el("label", {}, box, ` ${k.kind} (${k.shown}${k.total !== k.shown ? " of " + k.total : ""})`);
  }));
  document.getElementById("graph-counts").textContent =
    `${g.nodes.length} of ${g.total_nodes} ${g.include_inactive ? "" : "active "}traces` + (g.nodes.length < g.total_nodes ? ` (the ${g.nodes.length} strongest)` : "") +
    ` · ${g.edges.length} edges · ${g.clusters.length} schema cluster${g.clusters.length === 1 ? "" : "s"}`;
  gd.on("plotly_click", (ev) => {
    const p = ev.points && ev.points[0];
    if (p && p.data.meta === "nodes") showNode(pos[p.customdata], g);
  });
};

function showNode(n, g) {
  const links = g.edges.filter((e) => e.src === n.id || e.dst === n.id);
  const box = document.getElementById("graph-node");
  box.replaceChildren(
    el("h4", { text: `${n.id} · ${n.trace_type}${n.category ? "/" + n.category : ""} · strength ${fmt(n.strength)}${n.active ? "" : " · inactive"}` }),
    el("div", { text: n.content }),
    el("div", { class: "meta", text: `importance ${fmt(n.importance, 2)} · ${n.retrievals} retrievals · source ${n.source_type}` + (n.cluster ? ` · schema cluster ${n.cluster}` : "") }),
    el("div", {}, ...links.map((e) => el("span", { class: "tag", text: `${e.kind} ${e.src === n.id ? "→" : "←"} ${e.src === n.id ? e.dst : e.src}` }))),
    el("button", { text: "forgetting curve", onclick: () => { show("forgetting").then(() => showCurve(n.id)); } }),
  );
}

// ------------------------------------------------------------------ 4. recall explained

async function runRecall(query) {
  const note = document.getElementById("recall-note");
  const r = await api("recall", { agent: AGENT, query, discussion: DISCUSSION });
  if (r.unavailable) {
    note.textContent = r.unavailable;
    Plotly.purge("recall-plot");
    document.getElementById("recall-hits").replaceChildren();
    document.getElementById("recall-hyde").replaceChildren();
    return;
  }
  const w = r.weights;
  note.textContent = `"${r.query}": ${r.hits.length} of ${r.candidates} candidates · similarity ${r.similarity} · weights ` +
    r.factor_order.map((f) => `${f} ${fmt(w[f], 2)}`).join(", ") + ` · mood v ${fmt(r.mood.valence, 2)} a ${fmt(r.mood.arousal, 2)} d ${fmt(r.mood.dominance, 2)}`;
  const labels = r.hits.map((h) => `${h.rank}. ${clip(h.content, 48)}`);
  const traces = r.factor_order.map((f) => ({
    type: "bar", orientation: "h", name: `${f} (×${fmt(w[f], 2)})`, y: labels, x: r.hits.map((h) => h.contributions[f]), meta: f,
    marker: { color: FACTOR_COLORS[f] }, text: r.hits.map((h) => `${f} ${fmt(h.factors[f])} × ${fmt(w[f], 2)} = ${fmt(h.contributions[f], 4)}`),
    hovertemplate: "%{text}<extra></extra>", textposition: "none",
  }));
  const height = Math.max(300, 40 * r.hits.length + 140);
  document.getElementById("recall-plot").style.height = height + "px";
  await plot("recall-plot", traces, {
    barmode: "stack", yaxis: { autorange: "reversed", automargin: true }, xaxis: { title: "composite score (weighted factors)" },
    legend: { orientation: "h", y: -0.12 }, margin: { l: 20, r: 20, t: 10, b: 60 }, height,
  });
  const hyde = document.getElementById("recall-hyde");
  if (r.hyde) {
    const viaHyde = r.hits.filter((h) => h.via === "hyde").length;
    hyde.replaceChildren(
      el("h4", { text: "HyDE: searching near a hypothetical memory" }),
      el("div", { text: `hypothetical memory (what the "hyde" memory task answered): "${r.hyde.text}"` }),
      table(el("table", { class: "list hyde-steps" }), ["step", "threshold", "traces at or above it", ""],
        r.hyde_steps.map((s, i) => [String(i + 1), fmt(s.threshold, 2), String(s.hits), s.kept ? "kept: these join the candidates" : (i === r.hyde_steps.length - 1 ? "nothing cleared the lowest threshold" : "none: lower the threshold")])),
      el("div", { class: "meta", text: `${(r.hyde.hits || []).length} trace(s) found through HyDE; ${viaHyde} of the results became candidates only through it` }),
    );
  } else {
    hyde.replaceChildren(el("div", { class: "meta", text: "HyDE was not used for this recall" }));
  }
  table("recall-hits", ["rank", "score", "via", "trace", "source messages"], r.hits.map((h) => [
    String(h.rank), fmt(h.score, 4), h.via, el("span", {}, el("b", { text: h.trace_id }), ` ${h.trace_type}${h.category ? "/" + h.category : ""} · ${h.content}`),
    el("span", {}, ...h.sources.map((s) => el("div", { class: "meta", text: `seq ${s.seq} · ${s.role}: ${clip(s.content, 90)}` }))),
  ]));
}

RENDERERS.recall = async function () {
  const list = document.getElementById("recall-queries");
  (DATA.queries || []).forEach((q) => list.append(el("option", { value: q })));
  const input = document.getElementById("recall-query");
  document.getElementById("recall-form").addEventListener("submit", (ev) => { ev.preventDefault(); if (input.value.trim()) runRecall(input.value.trim()); });
  if (DATA.mode === "file") {
    document.getElementById("recall-note").textContent = DATA.queries.length
      ? `This report file holds the recalls of ${DATA.queries.length} quer${DATA.queries.length === 1 ? "y" : "ies"} (pick one from the list); the inspector served by engram recalls any query.`
      : "This report file holds no recall; the inspector served by engram recalls any query.";
  }
  if ((DATA.queries || []).length) {
    input.value = DATA.queries[0];
    await runRecall(DATA.queries[0]);
  }
};

// ------------------------------------------------------------------ 5. working memory and context

RENDERERS.working = async function () {
  const w = await api("working", { agent: AGENT, discussion: DISCUSSION });
  if (w.unavailable) return unavailable("slots-plot", w);
  const wm = w.working_memory;
  if (wm) {
    const free = Math.max(0, wm.capacity - wm.slots.length);
    const names = wm.slots.map((s) => `${s.rank}. ${clip(s.content, 26)}`);
    const freeNames = Array.from({ length: free }, (_, i) => `${wm.slots.length + i + 1}. (free)`);
    await plot("slots-plot", [
      { type: "bar", x: names, y: wm.slots.map((s) => s.activation), name: "activation", marker: { color: "#3366cc" }, meta: "slots",
        text: wm.slots.map((s) => `${s.tag} · entered turn ${s.entered_turn} · ${s.rehearsals} rehearsals<br>${clip(s.content, 90)}`), hovertemplate: "%{text}<br>activation %{y:.3f}<extra></extra>", textposition: "none" },
      { type: "bar", x: freeNames, y: freeNames.map(() => 0), name: "free", meta: "free", hoverinfo: "skip" },
    ], { yaxis: { title: "activation", range: [0, 1.05] }, xaxis: { tickangle: -25, automargin: true }, showlegend: false,
         title: { text: `${wm.slots.length} of ${wm.capacity} slots in use · turn ${wm.turn}`, font: { size: 13 } } });
    table("slots-table", ["rank", "tag", "activation", "entered turn", "rehearsals", "trace"],
      wm.slots.map((s) => [String(s.rank), s.tag, fmt(s.activation), String(s.entered_turn), String(s.rehearsals), clip(s.content, 120)]));
    document.getElementById("wm-file").textContent = wm.file || "(no working-memory.md yet)";
  } else {
    document.getElementById("slots-plot").replaceChildren(el("p", { class: "note", text: "no working memory yet" }));
  }
  const c = w.context;
  if (!c) {
    document.getElementById("context-plot").replaceChildren(el("p", { class: "note", text: "no discussion chosen" }));
    return;
  }
  const colors = { working_memory: "#9467bd", rolling_summary: "#17becf", chain: "#2ca02c", recalled: "#ff7f0e", recent_turns: "#3366cc" };
  const traces = c.segments.map((s) => ({ type: "bar", x: ["context now"], y: [s.tokens], name: `${s.title} ${s.tokens}`, meta: s.name,
                                          marker: { color: colors[s.name] || "#999" }, hovertemplate: `${s.title}: ${s.tokens} tokens` + (s.budget !== null ? ` (budget ${s.budget})` : "") + "<extra></extra>" }));
  await plot("context-plot", traces, {
    barmode: "stack", yaxis: { title: "tokens", range: [0, Math.max(c.window_tokens, c.tokens) * 1.08] }, legend: { x: 1.02, y: 0.5 },
    margin: { l: 60, r: 20, t: 40, b: 30 },
    shapes: [
      { type: "line", xref: "paper", x0: 0, x1: 1, y0: c.window_tokens, y1: c.window_tokens, line: { color: "#1d2330", width: 2 } },
      { type: "line", xref: "paper", x0: 0, x1: 1, y0: c.threshold_tokens, y1: c.threshold_tokens, line: { color: "#d62728", dash: "dash" } },
    ],
    annotations: [
      { xref: "paper", x: 0, y: c.window_tokens, text: `window ${c.window_tokens}`, showarrow: false, xanchor: "left", yanchor: "bottom" },
      { xref: "paper", x: 0, y: c.threshold_tokens, text: `compaction threshold ${c.threshold_tokens}`, showarrow: false, xanchor: "left", yanchor: "bottom", font: { color: "#d62728" } },
    ],
    title: { text: `${c.tokens} tokens, ${fmt(100 * c.tokens / c.window_tokens, 1)}% of the window`, font: { size: 13 } },
  });
  const blocks = c.blocks.concat([{ name: "recent_turns", title: "recent turns", tokens: c.recent_tokens, budget: null, note: `${c.turns_total} raw turns`, text: "" }]);
  table("context-blocks", ["block", "tokens", "budget", "", "text"], blocks.map((b) => [b.title, String(b.tokens), b.budget === null ? "–" : String(b.budget), b.note || "", clip(b.text, 160)]));
  const chain = document.getElementById("context-chain");
  chain.replaceChildren(el("h4", { text: `compaction chain: ${c.nodes.filter((n) => n.in_chain).length} node(s) in the chain, ${c.nodes.length} made` }),
    ...c.nodes.map((n) => el("div", { class: "card" + (n.in_chain ? "" : " muted") },
      el("div", { class: "meta", text: `${n.node_id} · L${n.level} ${n.strategy} · turns ${n.first_turn}–${n.last_turn} · ${n.input_tokens} → ${n.output_tokens} tokens${n.in_chain ? "" : " · merged into a higher node"}` }),
      el("div", { text: clip(n.summary, 300) }))));
};

// ------------------------------------------------------------------ 6. discussion memory

let messageRange = null;

async function showMessages(range, offset) {
  messageRange = range;
  const params = { agent: AGENT, discussion: DISCUSSION, first_seq: range ? range.first_seq : null, last_seq: range ? range.last_seq : null, offset: offset || null };
  const page = await api("messages", params);
  const box = document.getElementById("chunk-messages");
  const pager = document.getElementById("messages-pager");
  if (page.unavailable) { box.replaceChildren(el("p", { class: "note", text: page.unavailable })); pager.replaceChildren(); return; }
  box.setAttribute("data-memory", range ? range.memory_id : "");
  box.replaceChildren(el("div", { class: "meta", text: range ? `${range.memory_id}: messages ${range.first_seq}–${range.last_seq} (${page.total})` : `all messages (${page.total})` }),
    ...page.rows.map(messageBox));
  const last = page.offset + page.rows.length;
  pager.replaceChildren();
  if (page.total > page.rows.length) pager.append(
    el("button", { text: "◀", disabled: page.offset > 0 ? null : "", onclick: () => showMessages(range, Math.max(0, page.offset - page.limit)) }),
    el("span", { text: `${page.offset + 1}–${last} of ${page.total}` }),
    el("button", { text: "▶", disabled: last < page.total ? null : "", onclick: () => showMessages(range, page.offset + page.limit) }));
}

RENDERERS.discussion = async function () {
  if (!DISCUSSION) { document.getElementById("memories-file").replaceChildren(el("p", { class: "note", text: "the agent has no discussion" })); return; }
  const d = await api("discussion", { agent: AGENT, discussion: DISCUSSION });
  if (d.unavailable) return unavailable("memories-file", d);
  const base = (p) => (p || "").split("/").pop();
  document.getElementById("memories-title").textContent = base(d.paths["_memories.jsonl"]);
  document.getElementById("summary-title").textContent = base(d.paths["_summary.jsonl"]);
  document.getElementById("vector-title").textContent = base(d.paths["_vector_memory.db"]);
  const memories = d.memories || [];
  const mem = document.getElementById("memories-file");
  mem.replaceChildren(...(d.memories === null ? [el("p", { class: "note", text: "no memory file yet" })] : memories.map((m, i) => {
    const card = el("div", { class: "card chunk" + (d.absorbed && i < d.absorbed ? " absorbed" : ""), "data-memory-id": m.memory_id, "data-message-count": m.message_count },
      el("div", { class: "meta", text: `${m.memory_id} · ${m.message_count} messages (seq ${m.first_seq}–${m.last_seq}) · ${m.token_count} tokens · ${m.trigger || m.mode} · ${m.llm ? m.llm.model : ""}` }),
      el("div", { text: m.summary }));
    card.addEventListener("click", () => {
      mem.querySelectorAll(".selected").forEach((x) => x.classList.remove("selected"));
      card.classList.add("selected");
      showMessages({ memory_id: m.memory_id, first_seq: m.first_seq, last_seq: m.last_seq }, 0);
    });
    return card;
  })));
  const s = d.summary;
  document.getElementById("summary-file").replaceChildren(...(s ? [el("div", { class: "card" },
    el("div", { class: "meta", text: `absorbed through ${s.absorbed_through} (${d.absorbed} of ${memories.length} chunk memories, green) · updated at seq ${s.updated_seq} · ${s.llm ? s.llm.model : ""}` }),
    el("div", { text: s.summary }))] : [el("p", { class: "note", text: "no rolling summary yet" })]));
  document.getElementById("vector-file").replaceChildren(...(d.vector_memories === null ? [el("p", { class: "note", text: "no vector memory store yet" })] : d.vector_memories.map((v) => el("div", { class: "card", "data-memory-id": v.memory_id },
    el("div", { class: "meta", text: `${v.memory_id} · seq ${v.first_seq}–${v.last_seq} · ${v.message_count} messages` }),
    el("b", { text: v.title || "" }), el("div", { text: v.summary }),
    el("div", {}, ...(v.entities || []).map((e) => el("span", { class: "tag", text: e })), ...(v.key_phrases || []).map((k) => el("span", { class: "tag muted", text: k })))))));
  // Which messages each chunk and each vector memory covers, on the seq axis.
  const bars = (rows, name, color) => ({ type: "bar", orientation: "h", name, meta: name, base: rows.map((r) => r.first_seq - 0.4), x: rows.map((r) => r.last_seq - r.first_seq + 0.8),
    y: rows.map(() => name), marker: { color, line: { color: "#fff", width: 1 } }, text: rows.map((r) => `${r.memory_id}: seq ${r.first_seq}–${r.last_seq}`), hovertemplate: "%{text}<extra></extra>", textposition: "none" });
  await plot("coverage-plot", [bars(memories, "chunk memories", "#3366cc"), bars(d.vector_memories || [], "vector memories", "#ff7f0e")],
    { barmode: "overlay", xaxis: { title: `message seq (${d.messages} messages, ${d.message_tokens} tokens)` }, yaxis: { automargin: true }, showlegend: false, margin: { l: 120, r: 20, t: 10, b: 45 } });
  await showMessages(null, 0);
};

// ------------------------------------------------------------------ start

(function start() {
  const o = DATA.overview;
  const subject = document.getElementById("subject");
  subject.append(`agent ${AGENT} · ${o.active_traces} active traces of ${o.traces} · ${o.events} events · `);
  if (DATA.mode === "served" && o.discussions.length > 1) {
    const pick = el("select", { id: "discussion-pick" }, ...o.discussions.map((d) => el("option", { value: d.discussion, text: `${d.discussion} (${d.messages} messages)` })));
    pick.value = DISCUSSION;
    pick.addEventListener("change", () => { const u = new URL(location.href); u.searchParams.set("discussion", pick.value); location.href = u.toString(); });
    subject.append("discussion ", pick);
  } else {
    subject.append(DISCUSSION ? `discussion ${DISCUSSION}` : "no discussion");
  }
  document.getElementById("origin").textContent = DATA.mode === "file"
    ? `report file written ${DATA.written} from ${DATA.home}; works offline`
    : `served by engram from ${DATA.home}`;
  document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => show(b.dataset.tab)));
  const first = (location.hash || "#timeline").slice(1);
  show(RENDERERS[first] ? first : "timeline");
})();
