// Dex-ZD web UI: plain JavaScript, no build step. Pages are routed by
// path: / (flows), /flows/ID (a run), /node. Data comes from the
// same-origin /api endpoints (package web).
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const state = { ready: Promise.resolve(), utc: localStorage.getItem("dex.utc") === "1", live: localStorage.getItem("dex.live") !== "0",
  timer: null, session: null, page: null, lastRun: null, selected: null, store: null };

// h builds an element: h("a", {href: "/"}, "text", child...).
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of kids.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}
function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, v);
  for (const c of kids) el.append(c);
  return el;
}

function pad(n, w = 2) { return String(n).padStart(w, "0"); }
function fmtTime(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  if (isNaN(d)) return ts;
  if (state.utc) return d.toISOString().replace("T", " ").replace(/\.(\d{3})Z$/, ".$1Z");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}
function timeEl(ts) { return ts ? h("time", { datetime: ts, title: ts }, fmtTime(ts)) : ""; }
function statusName(st) { return (st || "FLOW_STATUS_UNSPECIFIED").replace("FLOW_STATUS_", ""); }
function badge(st) { const n = statusName(st); return h("span", { class: "badge " + n }, n.toLowerCase()); }
function short(id) { return id && id.length > 14 ? id.slice(0, 12) + "…" : id || ""; }

function decodeValue(v) {
  if (!v) return "";
  let text = "";
  try { text = new TextDecoder().decode(Uint8Array.from(atob(v.data || ""), (c) => c.charCodeAt(0))); } catch { return "(undecodable)"; }
  if (v.encoding === "json") {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
  }
  return "base64:" + (v.data || "") + (v.type ? ` (${v.type})` : "");
}

// --- API ---------------------------------------------------------------------

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}
async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  if (method !== "GET") opts.headers["X-Dex-UI"] = "1";
  const r = await fetch(path, opts);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new APIError(r.status, data.code || String(r.status), data.message || r.statusText);
  return data;
}

function banner(msg, info) {
  const b = document.getElementById("banner");
  if (!msg) { b.hidden = true; b.textContent = ""; return; }
  b.hidden = false;
  b.className = info ? "info" : "";
  b.textContent = msg;
}
function showError(e) {
  if (e instanceof APIError && e.status === 401) { signInForm(e.message); return; }
  banner(e instanceof APIError ? `${e.code}: ${e.message}` : String(e));
}

// confirmAction asks, naming the run, before an action.
function confirmAction(text) {
  const d = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
    d.returnValue = "";
    d.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

// --- routing -----------------------------------------------------------------

function go(path, replace) {
  if (replace) history.replaceState(null, "", path); else history.pushState(null, "", path);
  route();
}
document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a");
  if (!a || a.target || a.origin !== location.origin || ev.ctrlKey || ev.metaKey || ev.shiftKey || a.hasAttribute("download")) return;
  if (a.pathname === "/metrics" || a.pathname.startsWith("/api/")) return;
  ev.preventDefault();
  go(a.pathname + a.search);
});
window.addEventListener("popstate", route);

function stopTimer() { if (state.timer) { clearTimeout(state.timer); state.timer = null; } }
function schedule(fn, ms) { stopTimer(); if (state.live) state.timer = setTimeout(fn, ms); }

async function route() {
  stopTimer();
  banner("");
  const p = location.pathname;
  for (const a of document.querySelectorAll("[data-nav]")) {
    const cur = (a.dataset.nav === "node") === (p === "/node");
    a.classList.toggle("current", cur);
    if (cur) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  const main = document.getElementById("main");
  if (p === "/node") { state.page = "node"; document.title = "Node · Dex-ZD"; return nodePage(main); }
  const m = p.match(/^\/flows\/(.+)$/);
  if (m) { state.page = "run"; const id = decodeURIComponent(m[1]); document.title = id + " · Dex-ZD"; return runPage(main, id); }
  state.page = "flows"; document.title = "Flows · Dex-ZD";
  return flowsPage(main);
}

// --- session -----------------------------------------------------------------

async function loadSession() {
  try { state.session = await api("GET", "/api/session"); } catch { state.session = null; }
  const who = document.getElementById("who");
  who.replaceChildren();
  const si = state.session;
  if (!si) return;
  if (si.signedIn) {
    who.append(`${si.identity} (${si.roles}) `, h("button", { class: "secondary", onclick: async () => {
      await api("DELETE", "/api/session"); state.ready = loadSession(); await state.ready; route();
    } }, "Sign out"));
  } else if (si.open) {
    who.append("open mode");
  }
}
function canAct() { return state.session && (state.session.open || state.session.canAct); }

function signInForm(msg) {
  stopTimer();
  const main = document.getElementById("main");
  const input = h("input", { type: "password", id: "token", autocomplete: "off", required: true });
  main.replaceChildren(h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, msg || "This server checks tokens. Sign in with a token of role reader (to look) or client (to act); it stays in the server's memory, never in the browser."),
    h("form", { class: "filters", onsubmit: async (ev) => {
      ev.preventDefault();
      try { await api("POST", "/api/session", { token: input.value }); state.ready = loadSession(); await state.ready; route(); } catch (e) { banner(e.message); }
    } }, h("label", { for: "token" }, "Token", input), h("button", { type: "submit" }, "Sign in")));
  input.focus();
}

// --- flows page --------------------------------------------------------------

const STATUSES = ["running", "completed", "failed", "canceled", "terminated"];

function flowsPage(main) {
  const q = new URLSearchParams(location.search);
  const field = (name, label, attrs) => h("label", { for: "f-" + name }, label, h("input", { id: "f-" + name, name, value: q.get(name) || "", ...attrs }));
  const status = h("select", { id: "f-status", name: "status" }, h("option", { value: "" }, "any"),
    STATUSES.map((st) => h("option", { value: st, selected: q.get("status") === st }, st)));
  const search = h("input", { id: "f-q", name: "q", value: q.get("q") || "", size: 80, spellcheck: "false", autocomplete: "off",
    placeholder: "OrderStatus = 'charged' AND cents > 1000 ORDER BY StartTime DESC", "aria-describedby": "search-help search-error" });
  const searchError = h("div", { id: "search-error", class: "failure", role: "alert", hidden: true });
  const form = h("form", { class: "filters", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    const f = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v.trim()) f.set(k, v.trim());
    go("/" + (f.toString() ? "?" + f : ""));
  } },
  h("label", { for: "f-q", class: "wide" }, "Search (built-in fields and indexed attributes)", search,
    h("span", { id: "search-help", class: "muted" }, "FlowType, FlowId, Status, StartTime, CloseTime, ActiveStepTypes, ParentFlowId and the indexed attributes' keys; = != < > IN BETWEEN STARTS_WITH, AND OR NOT, ORDER BY")),
  h("label", { for: "f-status" }, "Status", status),
  field("type", "Flow type", { placeholder: "order" }),
  field("prefix", "Flow ID prefix", { placeholder: "order-" }),
  field("since", "Started since", { placeholder: "1h or 2026-12-01T00:00:00Z", size: 26 }),
  h("button", { type: "submit" }, "Apply"),
  h("button", { type: "button", class: "secondary", onclick: () => go("/") }, "Clear"));
  const head = h("tr");
  const body = h("tbody");
  const info = h("span", { class: "muted", id: "flows-info" });
  const caption = h("caption", { class: "muted" }, /\border\s+by\b/i.test(q.get("q") || "") ? "In the query's order" : "Newest start first");
  const tokens = q.get("pageToken") ? [q.get("pageToken")] : [""];
  let page = 0;
  let next = "";
  const prev = h("button", { class: "secondary", disabled: true, onclick: () => { page--; load(); } }, "Previous page");
  const nextB = h("button", { class: "secondary", disabled: true, onclick: () => { tokens[page + 1] = next; page++; load(); } }, "Next page");
  main.replaceChildren(h("h1", {}, "Flows"), form, searchError,
    h("table", { id: "flows" }, caption, h("thead", {}, head), body),
    h("div", { class: "pager" }, prev, nextB, info));
  // showQueryError shows a malformed query's message with a caret under
  // the position the server names.
  function showQueryError(e) {
    const text = q.get("q") || "";
    const m = /at position (\d+)/.exec(e.message);
    searchError.replaceChildren(h("strong", {}, "The query is not valid: "), e.message,
      m ? h("pre", { class: "caret", "aria-hidden": "true" }, text + "\n" + " ".repeat(Math.max(0, Number(m[1]) - 1)) + "^") : "");
    searchError.hidden = false;
    body.replaceChildren(h("tr", {}, h("td", { class: "muted" }, "Fix the query to see flows.")));
    info.textContent = "";
    search.setAttribute("aria-invalid", "true");
  }
  async function load() {
    const f = new URLSearchParams(q);
    f.delete("pageToken");
    if (tokens[page]) f.set("pageToken", tokens[page]);
    try {
      const r = await api("GET", "/api/flows?" + f);
      if (state.page !== "flows") return;
      banner("");
      searchError.hidden = true;
      next = r.nextPageToken || "";
      // One column per indexed attribute key present on the page.
      const keys = [...new Set(r.flows.flatMap((fl) => Object.keys(fl.indexed || {})))].sort();
      const cols = ["Flow ID", "Type", "Status", "Started", "Closed", "Run", ...keys, "Error"];
      head.replaceChildren(...cols.map((c, i) => h("th", { scope: "col", class: i >= 6 && i < 6 + keys.length ? "indexed" : null,
        title: i >= 6 && i < 6 + keys.length ? "indexed attribute " + c : null }, c)));
      body.replaceChildren(...r.flows.map((row) => {
        const fl = row.summary || {};
        const href = "/flows/" + encodeURIComponent(fl.flowId) + "?runId=" + encodeURIComponent(fl.runId || "");
        return h("tr", {},
          h("td", {}, h("a", { href, "data-flow": fl.flowId }, fl.flowId)),
          h("td", {}, fl.flowType), h("td", {}, badge(fl.status)), h("td", {}, timeEl(fl.startTime)),
          h("td", {}, timeEl(fl.closeTime)), h("td", { class: "mono", title: fl.runId }, short(fl.runId)),
          keys.map((k) => h("td", { class: "indexed", "data-key": k }, k in (row.indexed || {}) ? indexedText(row.indexed[k]) : "")),
          h("td", {}, fl.error ? fl.error.message || "" : ""));
      }));
      if (!r.flows.length) body.append(h("tr", {}, h("td", { colspan: cols.length, class: "muted" }, "No flows match.")));
      info.textContent = `page ${page + 1} · ${r.flows.length} flow${r.flows.length === 1 ? "" : "s"}`;
      prev.disabled = page === 0;
      nextB.disabled = !next;
    } catch (e) {
      if (e instanceof APIError && e.status === 400 && /^query:/.test(e.message)) { showQueryError(e); return; } // no refresh: the query stays wrong
      showError(e);
    }
    schedule(load, 3000);
  }
  load();
}
function indexedText(v) { return typeof v === "string" ? v : Array.isArray(v) ? v.join(", ") : JSON.stringify(v); }

// --- run page: the graph model ------------------------------------------------

// buildGraph turns the history and the live state into step executions
// (one per step execution ID, with its WaitFor and Execute apart) and the
// movements between them.
function buildGraph(st, events, flowId) {
  const ex = new Map(); // id -> execution
  const order = [];
  const get = (id, stepType) => {
    let e = ex.get(id);
    if (!e) {
      e = { id, stepType: stepType || "?", parent: null, children: [], wf: { done: false, failures: [], events: [] },
        exe: { done: false, failures: [], events: [] }, skipWaitFor: false, decision: null, wait: null, live: null, scheduledBy: null,
        canceled: null, subDone: new Map() };
      ex.set(id, e); order.push(e);
    }
    if (stepType && e.stepType === "?") e.stepType = stepType;
    return e;
  };
  const rpcs = [];
  let closed = null;
  // An Execute whose last attempt failed (no retry) schedules its
  // recovery step, if it has one; the history shows that step's events
  // only: they are joined to the failed execution.
  let exhausted = null;
  const seen = (id, stepType) => {
    const known = ex.has(id);
    const e = get(id, stepType);
    if (!known && exhausted && !e.parent) {
      const p = ex.get(exhausted.id);
      e.parent = p.id; e.recovery = true; e.scheduledBy = exhausted.eventId;
      p.children.push(e.id);
      exhausted = null;
    }
    return e;
  };
  const sched = (parentId, ids, movements, byEvent) => {
    (ids || []).forEach((id, i) => {
      const m = (movements || [])[i] || {};
      const c = get(id, m.stepType);
      c.parent = parentId; c.skipWaitFor = !!m.skipWaitFor; c.scheduledBy = byEvent;
      const p = parentId && ex.get(parentId);
      if (p) p.children.push(id);
    });
  };
  for (const ev of events) {
    if (ev.flowStarted) {
      const fs = ev.flowStarted;
      if (fs.startStepExecutionId) sched(null, [fs.startStepExecutionId], [fs.startStep || {}], ev.eventId);
    } else if (ev.waitForCompleted) {
      const e = seen(ev.waitForCompleted.stepExecutionId, ev.waitForCompleted.stepType);
      e.wf.done = true; e.wait = ev.waitForCompleted.wait; e.wf.events.push(ev.eventId);
    } else if (ev.waitForFailed) {
      const e = seen(ev.waitForFailed.stepExecutionId, ev.waitForFailed.stepType);
      e.wf.failures.push(Object.assign({ eventId: ev.eventId, time: ev.time }, ev.waitForFailed)); e.wf.events.push(ev.eventId);
    } else if (ev.executeCompleted) {
      const c = ev.executeCompleted;
      const e = seen(c.stepExecutionId, c.stepType);
      e.exe.done = true; e.decision = c.decision; e.exe.events.push(ev.eventId);
      const mv = c.decision && c.decision.movements ? c.decision.movements.movements : [];
      sched(e.id, c.scheduledStepExecutionIds, mv, ev.eventId);
    } else if (ev.executeFailed) {
      const e = seen(ev.executeFailed.stepExecutionId, ev.executeFailed.stepType);
      e.exe.failures.push(Object.assign({ eventId: ev.eventId, time: ev.time }, ev.executeFailed)); e.exe.events.push(ev.eventId);
      exhausted = ev.executeFailed.nextAttemptTime ? null : { id: e.id, eventId: ev.eventId };
    } else if (ev.rpcCompleted) {
      const r = ev.rpcCompleted;
      const id = "rpc#" + ev.eventId;
      rpcs.push({ id, name: r.rpcName, eventId: ev.eventId });
      sched(null, r.scheduledStepExecutionIds, r.movements, ev.eventId);
      for (const cid of r.scheduledStepExecutionIds || []) ex.get(cid).rpc = id;
    } else if (ev.stepCanceled) {
      // E29: a decision or an RPC canceled the execution.
      const c = ev.stepCanceled;
      const e = seen(c.stepExecutionId, c.stepType);
      e.canceled = Object.assign({ eventId: ev.eventId, time: ev.time }, c);
    } else if (ev.subFlowCompleted) {
      const c = ev.subFlowCompleted;
      const e = seen(c.stepExecutionId, c.stepType);
      e.subDone.set(c.subFlowConditionIndex || 0, Object.assign({ eventId: ev.eventId }, c));
      e.wf.events.push(ev.eventId);
    } else if (ev.flowClosed) {
      closed = ev;
    }
  }
  for (const se of st.stepExecutions || []) {
    const e = get(se.stepExecutionId, se.stepType);
    e.live = se;
  }
  const err = st.summary && st.summary.error;
  for (const e of order) {
    const phase = e.live ? e.live.phase : "";
    e.hasWF = !e.skipWaitFor && (e.wf.done || e.wf.failures.length > 0 || phase === "STEP_PHASE_WAIT_FOR" || phase === "STEP_PHASE_WAITING");
    const failedHere = err && err.stepExecutionId === e.id;
    const status = (part, isLive) => {
      if (part.done) return part.failures.length ? "retried" : "done";
      if (e.canceled) return "canceled";
      if (failedHere && part.failures.length) return "failed";
      if (isLive) return part.failures.length ? "active retried" : "active";
      if (closed) return part.failures.length ? "failed" : "canceled";
      return part.failures.length ? "retried" : "pending";
    };
    e.wfStatus = phase === "STEP_PHASE_WAITING" ? "active waiting" : status(e.wf, e.live && phase === "STEP_PHASE_WAIT_FOR");
    e.exeStatus = e.wf.done || !e.hasWF || e.skipWaitFor ? status(e.exe, e.live && phase === "STEP_PHASE_EXECUTE") : (closed ? "canceled" : "pending");
    if (e.hasWF && !e.wf.done && e.wfStatus === "failed") e.exeStatus = "canceled";
    // A canceled execution (E29) whose Execute never reported was still
    // waiting (or queued): its WaitFor is canceled too, not done.
    if (e.canceled && e.hasWF && !e.exe.events.length) e.wfStatus = "canceled";
  }
  for (const e of order) e.subflows = subflowsOf(e, flowId);
  return { ex, order, rpcs, closed };
}

// conditionsOf lists a Wait's conditions.
function conditionsOf(w) { return !w ? [] : w.until ? [w.until] : (w.allOf || w.anyOf || {}).conditions || []; }

// subflowsOf lists the children of an execution's SubFlow conditions
// (E31): their derived IDs (SubFlow:<parent>-<stepExecution>-<index>),
// with the run and status the live state or the history knows.
function subflowsOf(e, flowId) {
  const out = [];
  const w = e.wait || (e.live && e.live.wait && e.live.wait.wait);
  for (const c of conditionsOf(w)) {
    if (!c.subFlow) continue;
    const i = out.length;
    out.push({ index: i, conditionId: c.id || "", flowType: c.subFlow.flowType || "", flowId: `SubFlow:${flowId}-${e.id}-${i}`, runId: "", status: "" });
  }
  for (const sf of (e.live && e.live.wait && e.live.wait.subFlows) || []) {
    const o = out[sf.subFlowConditionIndex || 0];
    if (!o) continue;
    Object.assign(o, { flowId: sf.flowId || o.flowId, runId: sf.runId || o.runId, status: sf.status || o.status });
  }
  for (const [i, d] of e.subDone) {
    const o = out[i], r = d.result || {};
    if (o) Object.assign(o, { flowId: r.flowId || o.flowId, runId: r.runId || o.runId, status: r.status || o.status, doneEvent: d.eventId });
  }
  return out;
}

// subflowLinks links to an execution's children.
function subflowLinks(e) {
  return h("ul", { class: "subflows" }, e.subflows.map((sf) => h("li", {},
    h("a", { href: "/flows/" + encodeURIComponent(sf.flowId) + (sf.runId ? "?runId=" + encodeURIComponent(sf.runId) : ""), class: "subflow mono", "data-child": sf.flowId }, sf.flowId),
    " ", sf.flowType, sf.conditionId ? ` (condition ${sf.conditionId})` : "", " ", sf.status ? badge(sf.status) : h("span", { class: "muted" }, "not started"))));
}

// layoutGraph places one row per depth: each execution is a slot holding
// its WaitFor and its Execute side by side; a fan-out's children share the
// row below their parent, side by side.
const NW = 180, NH = 40, GAPX = 24, SLOTGAP = 36, ROWH = 72, PADX = 16, PADY = 16;
function layoutGraph(g) {
  const depth = new Map();
  const rows = [];
  const roots = g.order.filter((e) => !e.parent);
  const place = (e, d) => {
    depth.set(e.id, d);
    (rows[d] = rows[d] || []).push(e);
  };
  // breadth first, so siblings stay together
  const queue = [];
  for (const r of roots) { place(r, 1); queue.push(r); }
  while (queue.length) {
    const e = queue.shift();
    for (const cid of e.children) {
      const c = g.ex.get(cid);
      if (!depth.has(cid)) { place(c, depth.get(e.id) + 1); queue.push(c); }
    }
  }
  for (const e of g.order) if (!depth.has(e.id)) { place(e, 1); }
  const slotW = 2 * NW + GAPX;
  let width = 0;
  const pos = new Map();
  rows.forEach((row, d) => {
    if (!row) return;
    row.forEach((e, i) => {
      const x = PADX + i * (slotW + SLOTGAP);
      const y = PADY + d * ROWH;
      pos.set(e.id, { x, y });
      width = Math.max(width, x + slotW + PADX);
    });
  });
  return { pos, width: Math.max(width, 2 * PADX + slotW), height: PADY * 2 + (rows.length + 1) * ROWH };
}

function nodeEl(key, x, y, label, kind, cls, aria) {
  const g = s("g", { class: "node " + cls, transform: `translate(${x},${y})`, tabindex: "0", role: "button", "aria-label": aria, "data-key": key });
  g.append(s("rect", { width: NW, height: NH }));
  const t = s("text", { x: 8, y: 16 }); t.textContent = label.length > 22 ? label.slice(0, 21) + "…" : label;
  const k = s("text", { x: 8, y: 31, class: "kind" }); k.textContent = kind.length > 34 ? kind.slice(0, 33) + "…" : kind;
  const title = s("title"); title.textContent = aria + (kind ? " · " + kind : "");
  g.append(t, k, title);
  return g;
}

function renderGraph(g, onSelect) {
  const L = layoutGraph(g);
  const svg = s("svg", { class: "graph", width: L.width, height: L.height, viewBox: `0 0 ${L.width} ${L.height}`, role: "group", "aria-label": "Step graph" });
  const edges = s("g");
  const nodes = s("g");
  svg.append(edges, nodes);
  const edge = (x1, y1, x2, y2, from, to, cls) => {
    const my = (y1 + y2) / 2;
    const d = y1 === y2 ? `M${x1},${y1} L${x2},${y2}` : `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`;
    edges.append(s("path", { d, class: "edge " + (cls || ""), "data-from": from, "data-to": to }));
  };
  // the start and the end
  const startX = PADX, startY = PADY;
  nodes.append(nodeEl("start", startX, startY - 8, "flow started", "", "root", "Flow started"));
  for (const e of g.order) {
    const p = L.pos.get(e.id);
    const failures = (n) => (n ? ` · ${n} failed attempt${n > 1 ? "s" : ""}` : "") + (e.canceled ? " · canceled" : "");
    if (e.hasWF) {
      nodes.append(nodeEl(e.id + "/wf", p.x, p.y, e.id, "WaitFor" + (e.wfStatus === "active waiting" ? " · waiting" : "") + waitSummary(e) + failures(e.wf.failures.length), e.wfStatus,
        `${e.stepType} WaitFor (${e.id}), ${e.wfStatus}`));
      edge(p.x + NW, p.y + NH / 2, p.x + NW + GAPX, p.y + NH / 2, e.id, e.id, "wf");
    }
    const ex = e.hasWF ? p.x + NW + GAPX : p.x;
    nodes.append(nodeEl(e.id + "/exe", ex, p.y, e.id, (e.recovery ? "recovery · " : "") + "Execute" + decisionSummary(e) + failures(e.exe.failures.length), e.exeStatus,
      `${e.stepType} Execute (${e.id}), ${e.exeStatus}`));
    // movement into this execution
    const parent = e.parent && g.ex.get(e.parent);
    if (parent) {
      const pp = L.pos.get(parent.id);
      const px = (parent.hasWF ? pp.x + NW + GAPX : pp.x) + NW / 2;
      edge(px, pp.y + NH, p.x + NW / 2, p.y, parent.id, e.id, e.recovery ? "recovery" : "");
    } else {
      edge(startX + NW / 2, startY - 8 + NH, p.x + NW / 2, p.y, "start", e.id);
    }
  }
  if (g.closed) {
    const y = L.height - ROWH + 8;
    const fc = g.closed.flowClosed;
    nodes.append(nodeEl("end", PADX, y, "flow " + statusName(fc.status).toLowerCase(), fc.error ? fc.error.message || "" : "",
      "end " + (statusName(fc.status) === "FAILED" ? "failed" : statusName(fc.status) === "COMPLETED" ? "done" : "canceled"), "Flow closed: " + statusName(fc.status)));
  }
  const select = (key) => {
    for (const n of svg.querySelectorAll(".node")) n.classList.remove("selected", "before", "after");
    for (const p of svg.querySelectorAll(".edge")) p.classList.remove("hot");
    if (!key) { svg.classList.remove("sel"); onSelect(null); return; }
    svg.classList.add("sel");
    const id = key.split("/")[0];
    const mark = (eid, cls) => {
      for (const n of svg.querySelectorAll(`.node[data-key="${CSS.escape(eid)}/wf"], .node[data-key="${CSS.escape(eid)}/exe"]`)) n.classList.add(cls);
    };
    const e = g.ex.get(id);
    if (e) {
      // before: the chain of movements that led here; after: what this scheduled
      for (let a = e.parent && g.ex.get(e.parent); a; a = a.parent && g.ex.get(a.parent)) mark(a.id, "before");
      svg.querySelector(`.node[data-key="start"]`).classList.add("before");
      const stack = [...e.children];
      while (stack.length) { const c = stack.pop(); mark(c, "after"); stack.push(...g.ex.get(c).children); }
      if (key.endsWith("/exe") && e.hasWF) mark(id, "before");
      for (const p of svg.querySelectorAll(".edge")) {
        const f = p.dataset.from, t = p.dataset.to;
        const inA = (x) => x === id || x === "start" || svg.querySelector(`.node.before[data-key^="${CSS.escape(x)}/"]`);
        const inB = (x) => x === id || svg.querySelector(`.node.after[data-key^="${CSS.escape(x)}/"]`);
        if ((inA(f) && inA(t)) || (inB(f) && inB(t))) p.classList.add("hot");
      }
    }
    const n = svg.querySelector(`.node[data-key="${CSS.escape(key)}"]`);
    if (n) { n.classList.remove("before", "after"); n.classList.add("selected"); }
    onSelect(key);
  };
  svg.addEventListener("click", (ev) => {
    const n = ev.target.closest(".node");
    select(n ? n.dataset.key : null);
  });
  svg.addEventListener("keydown", (ev) => {
    const n = ev.target.closest(".node");
    if (!n) return;
    if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select(n.dataset.key); }
    if (ev.key === "Escape") select(null);
    // Arrows follow the movements: down to the first execution this one
    // scheduled, up to the one that scheduled it, left and right between
    // an execution's WaitFor and Execute.
    const [id, part] = n.dataset.key.split("/");
    const e = g.ex.get(id);
    let to = null;
    if (ev.key === "ArrowRight" && part === "wf") to = id + "/exe";
    else if (ev.key === "ArrowLeft" && part === "exe" && e && e.hasWF) to = id + "/wf";
    else if (ev.key === "ArrowDown" && e && e.children.length) { const c = g.ex.get(e.children[0]); to = c.id + (c.hasWF ? "/wf" : "/exe"); }
    else if (ev.key === "ArrowUp" && e && e.parent) to = e.parent + "/exe";
    const t = to && svg.querySelector(`.node[data-key="${CSS.escape(to)}"]`);
    if (t) { ev.preventDefault(); t.focus(); select(to); }
  });
  return { svg, select };
}

function waitSummary(e) {
  const w = e.wait || (e.live && e.live.wait && e.live.wait.wait);
  if (!w) return "";
  const conds = w.until ? [w.until] : (w.allOf || w.anyOf || {}).conditions || [];
  const parts = conds.map((c) => c.channel ? "ch " + c.channel.channel : c.timer ? "timer" : c.subFlow ? "sub " + c.subFlow.flowType : "?");
  return parts.length ? ` (${w.anyOf ? "any" : w.allOf ? "all" : ""}${w.anyOf || w.allOf ? ": " : ""}${parts.join(", ")})` : "";
}
function decisionSummary(e) {
  const d = e.decision;
  if (!d) return "";
  if (d.movements) return ` → ${(d.movements.movements || []).length}`;
  if (d.gracefulComplete) return " · complete";
  if (d.forceComplete) return " · force complete";
  if (d.forceFail) return " · force fail";
  if (d.deadEnd) return " · dead end";
  return "";
}

// --- run page ----------------------------------------------------------------

function eventKind(ev) {
  for (const k of ["flowStarted", "waitForCompleted", "waitForFailed", "executeCompleted", "executeFailed", "rpcCompleted",
    "channelPublished", "attributesSet", "timerSkipped", "subFlowCompleted", "stepCanceled", "flowClosed", "user"]) if (ev[k]) return k;
  return "unknown";
}
function eventExec(ev) {
  const k = eventKind(ev);
  return ev[k] && ev[k].stepExecutionId;
}

function failureBlock(f, nextAttempt) {
  const fl = f.failure || f;
  return h("div", { class: "failure" },
    h("div", {}, h("strong", {}, (fl.errorType || (fl.kind || "").replace("ATTEMPT_FAILURE_KIND_", "").toLowerCase() || "failure")),
      ` · attempt ${fl.attempt || "?"}`, fl.method ? ` · ${fl.method.replace("TASK_KIND_", "").toLowerCase()}` : "",
      f.time ? [" · ", timeEl(f.time)] : "", (f.nextAttemptTime || nextAttempt) ? [" · next retry ", timeEl(f.nextAttemptTime || nextAttempt)] : ""),
    h("div", { class: "message" }, fl.message || ""),
    fl.stack ? h("pre", { class: "stack" }, fl.stack) : "");
}

function runPage(main, id) {
  const q = new URLSearchParams(location.search);
  const runId = q.get("runId") || "";
  state.selected = null;
  state.lastRun = null;
  main.replaceChildren(h("h1", {}, "Flow ", h("span", { class: "mono" }, id)), h("p", { class: "muted", id: "loading" }, "Loading…"));
  let sig = "";
  let graph = null;
  async function load() {
    const t0 = performance.now();
    try {
      const r = await api("GET", `/api/flows/${encodeURIComponent(id)}` + (runId ? "?runId=" + encodeURIComponent(runId) : ""));
      await state.ready;
      if (state.page !== "run") return;
      banner("");
      const next = JSON.stringify([r.state, r.history.length]);
      if (next !== sig) {
        sig = next;
        graph = render(r);
        if (state.selected) graph.select(state.selected);
        main.dataset.renderMs = String(Math.round(performance.now() - t0));
        // Milliseconds from the navigation's start to the first frame
        // with the graph (performance.now counts from the navigation).
        requestAnimationFrame(() => { main.dataset.paintedAt = String(Math.round(performance.now())); });
      }
      const closed = statusName(r.state.summary && r.state.summary.status) !== "RUNNING";
      schedule(load, closed ? 10000 : 2000);
      return;
    } catch (e) { showError(e); }
    schedule(load, 3000);
  }
  function render(r) {
    const st = r.state, sum = st.summary || {};
    const run = sum.runId;
    state.lastRun = { id, run, status: statusName(sum.status) };
    const g = buildGraph(st, r.history, id);
    const detail = h("div", { id: "detail", class: "panel", "aria-live": "polite" }, h("p", { class: "muted" }, "Select a step in the graph (click, or Tab and Enter) to see its attempts, failures and conditions."));
    const timeline = h("ol", { id: "timeline" });
    const byId = new Map(r.history.map((ev) => [ev.eventId, ev]));
    const gr = renderGraph(g, (key) => {
      showDetail(detail, g, key, st, run);
      const eid = key && key.split("/")[0];
      for (const li of timeline.children) li.classList.toggle("hl", !!eid && li.dataset.exec === eid);
    });
    // timeline with causes
    const causeOf = (ev) => {
      const ex = eventExec(ev) && g.ex.get(eventExec(ev));
      const k = eventKind(ev);
      if (!ex) return null;
      if (k === "stepCanceled") {
        const by = g.ex.get(ev.stepCanceled.causedBy);
        return by && by.exe.events.length ? by.exe.events[by.exe.events.length - 1] : null;
      }
      if (k === "executeCompleted" || k === "executeFailed") {
        if (ex.hasWF && ex.wf.events.length) return ex.wf.events[ex.wf.events.length - 1];
      }
      return ex.scheduledBy;
    };
    for (const ev of r.history) {
      const k = eventKind(ev);
      const cause = causeOf(ev);
      const raw = h("pre", { hidden: true }, JSON.stringify(ev, null, 2));
      const exid = eventExec(ev);
      const ex = exid && g.ex.get(exid);
      timeline.append(h("li", { id: "ev-" + ev.eventId, "data-exec": exid || "" },
        h("span", { class: "mono" }, "#" + ev.eventId), " ", timeEl(ev.time), " ", h("strong", {}, k),
        k === "user" ? [" ", h("span", { class: "mono" }, ev.user.name || "")] : "",
        ex ? [" ", h("a", { href: "#", onclick: (e) => { e.preventDefault(); gr.select(exid + (k.startsWith("waitFor") ? "/wf" : "/exe")); } }, ex.stepType)] : "",
        k === "subFlowCompleted" && ev.subFlowCompleted.result ? [" · child ", h("a", { href: "/flows/" + encodeURIComponent(ev.subFlowCompleted.result.flowId || "") +
          (ev.subFlowCompleted.result.runId ? "?runId=" + encodeURIComponent(ev.subFlowCompleted.result.runId) : "") }, ev.subFlowCompleted.result.flowId || ""), " ", badge(ev.subFlowCompleted.result.status)] : "",
        cause && byId.get(cause) ? [" · caused by ", h("a", { href: "#ev-" + cause, onclick: (e) => { e.preventDefault(); const t = document.getElementById("ev-" + cause); t.scrollIntoView({ block: "nearest" }); t.classList.add("hl"); } }, "#" + cause)] : "",
        " ", h("button", { class: "secondary", "aria-expanded": "false", onclick: (e) => { raw.hidden = !raw.hidden; e.target.setAttribute("aria-expanded", String(!raw.hidden)); } }, "JSON"),
        raw));
    }
    if (r.historyTruncated) timeline.append(h("li", { class: "muted" }, "(the history is longer; the first events are shown)"));
    const err = sum.error;
    main.replaceChildren(
      h("h1", {}, "Flow ", h("span", { class: "mono", id: "flow-id" }, id), " ", h("span", { id: "flow-status" }, badge(sum.status))),
      h("p", { class: "muted" }, `type ${sum.flowType} · run `, h("span", { class: "mono", id: "run-id" }, run), " · started ", timeEl(sum.startTime),
        sum.closeTime ? [" · closed ", timeEl(sum.closeTime)] : "",
        st.resetFromRunId ? [" · reset from run ", h("a", { id: "reset-from", class: "mono", href: `/flows/${encodeURIComponent(id)}?runId=${encodeURIComponent(st.resetFromRunId)}` }, short(st.resetFromRunId))] : "",
        st.resetRunId ? [" · reset to run ", h("a", { id: "reset-to", class: "mono", href: `/flows/${encodeURIComponent(id)}?runId=${encodeURIComponent(st.resetRunId)}` }, short(st.resetRunId))] : "",
        sum.parentFlowId ? [" · subflow of ", h("a", { href: "/flows/" + encodeURIComponent(sum.parentFlowId), id: "parent-link", class: "mono" }, sum.parentFlowId)] : ""),
      err ? h("div", { class: "failure", id: "flow-error" }, h("strong", {}, (err.type || "").replace("FLOW_ERROR_TYPE_", "").toLowerCase()), " ", err.message || "",
        err.lastAttemptFailure && err.lastAttemptFailure.stack ? h("pre", {}, err.lastAttemptFailure.stack) : "") : "",
      h("div", { class: "grid" },
        h("section", { "aria-labelledby": "graph-h" }, h("h2", { id: "graph-h" }, `Step graph (${g.order.length} step executions)`),
          h("p", { class: "legend" }, h("span", {}, h("i", { class: "l-done" }), "done"), h("span", {}, h("i", { class: "l-active" }), "running"),
            h("span", {}, h("i", { class: "l-retried" }), "failed attempts"), h("span", {}, h("i", { class: "l-failed" }), "failed"),
            h("span", {}, h("i", { class: "l-canceled" }), "canceled")),
          h("div", { class: "graphbox" }, gr.svg), detail),
        h("section", { "aria-labelledby": "state-h" }, h("h2", { id: "state-h" }, "Live state"), liveState(st, run, id, g, r.names || {}),
          h("h2", {}, "Actions"), actions(st, id, run, g))),
      h("section", { class: "timeline", "aria-labelledby": "tl-h" }, h("h2", { id: "tl-h" }, `Timeline (${r.history.length} events)`), timeline));
    return gr;
  }
  load();
}

function showDetail(box, g, key, st, run) {
  if (!key) { box.replaceChildren(h("p", { class: "muted" }, "Nothing selected.")); return; }
  const [id, part] = key.split("/");
  if (id === "start" || id === "end") { box.replaceChildren(h("p", {}, id === "start" ? "The flow's start." : "The flow's end.")); return; }
  const e = g.ex.get(id);
  if (!e) return;
  const p = part === "wf" ? e.wf : e.exe;
  const live = e.live;
  const kids = [h("h3", {}, `${e.stepType} · ${part === "wf" ? "WaitFor" : "Execute"}`),
    h("dl", { class: "facts" }, h("dt", {}, "Step execution"), h("dd", { class: "mono" }, e.id),
      h("dt", {}, "Status"), h("dd", { id: "detail-status" }, part === "wf" ? e.wfStatus : e.exeStatus),
      e.parent ? [h("dt", {}, "Scheduled by"), h("dd", { class: "mono" }, e.parent)] : "",
      e.children.length ? [h("dt", {}, "Scheduled"), h("dd", { class: "mono" }, e.children.join(", "))] : "",
      live && live.attempt ? [h("dt", {}, "Attempt"), h("dd", {}, `${live.attempt.attempt} (${(live.attempt.status || "").replace("ATTEMPT_STATUS_", "").toLowerCase()})`,
        live.attempt.nextAttemptTime ? [" · next ", timeEl(live.attempt.nextAttemptTime)] : "", live.attempt.workerId ? " · worker " + live.attempt.workerId : "")] : "")];
  if (e.canceled) kids.push(h("p", { class: "canceled-note", id: "detail-canceled" }, "Canceled (event #" + e.canceled.eventId + ") by ",
    h("span", { class: "mono" }, e.canceled.causedBy || "?"), e.canceled.siblingsOnly ? " (sibling steps)" : " (flow-wide)"));
  if (e.subflows.length) kids.push(h("h4", {}, `Subflows (${e.subflows.length})`), subflowLinks(e));
  if (part === "wf" && (e.wait || (live && live.wait))) kids.push(h("h4", {}, "Conditions"), h("pre", {}, JSON.stringify(live && live.wait ? live.wait : e.wait, null, 2)));
  if (p.failures.length) {
    kids.push(h("h4", {}, `Failures (${p.failures.length})`));
    for (const f of p.failures.slice().reverse()) kids.push(failureBlock(f));
  }
  if (live && live.lastFailure && !p.failures.length) kids.push(h("h4", {}, "Last failure"), failureBlock(live.lastFailure));
  if (part === "exe" && e.decision) kids.push(h("h4", {}, "Decision"), h("pre", {}, JSON.stringify(e.decision, null, 2)));
  box.replaceChildren(...kids);
}

// nameCell is the header cell of an attribute or channel: an instance of
// a map (E33) as names (from the server) shows it, map["key"], with its
// wire name as the title; any other name as it is.
function nameCell(names, wire, suffix) {
  const shown = Object.hasOwn(names, wire) ? names[wire] : null;
  return h("th", { scope: "row", title: shown ? wire : null, "data-wire": wire }, (shown || wire) + (suffix || ""));
}

function liveState(st, run, id, g, names) {
  const out = h("div", { id: "live-state" });
  const active = st.stepExecutions || [];
  out.append(h("h3", {}, `Active steps (${active.length})`));
  for (const se of active) {
    const a = se.attempt || {};
    out.append(h("div", { class: "panel" },
      h("div", {}, h("strong", {}, se.stepType), " ", h("span", { class: "mono muted" }, se.stepExecutionId), " · ",
        (se.phase || "").replace("STEP_PHASE_", "").toLowerCase(), a.attempt ? ` · attempt ${a.attempt} ${(a.status || "").replace("ATTEMPT_STATUS_", "").toLowerCase()}` : "",
        a.nextAttemptTime ? [" · next retry ", timeEl(a.nextAttemptTime)] : ""),
      se.lastFailure ? failureBlock(se.lastFailure, a.nextAttemptTime) : "",
      se.waitForFailure ? failureBlock(se.waitForFailure) : "",
      timersOf(se, id, run),
      g.ex.get(se.stepExecutionId) && g.ex.get(se.stepExecutionId).subflows.length ? subflowLinks(g.ex.get(se.stepExecutionId)) : ""));
  }
  const attrs = st.attributes || [];
  out.append(h("h3", {}, `Attributes (${attrs.length})`), attrs.length ? h("table", {}, h("tbody", {}, attrs.map((a) =>
    h("tr", {}, nameCell(names, a.name), h("td", {}, h("pre", {}, decodeValue(a.value))))))) : h("p", { class: "muted" }, "none"));
  const chans = st.channels || [];
  out.append(h("h3", {}, "Queued messages"), chans.length ? h("table", {}, h("tbody", {}, chans.map((c) =>
    h("tr", {}, nameCell(names, c.channel, ` (${c.size})`), h("td", {}, (c.messages || []).map((m) => h("div", {}, timeEl(m.publishTime), h("pre", {}, decodeValue(m.value))))))))) : h("p", { class: "muted" }, "none"));
  const outs = st.outputs || [];
  out.append(h("h3", {}, `Outputs (${outs.length})`), outs.length ? h("div", {}, outs.map((o) => h("div", {}, h("strong", {}, o.stepType), " ", timeEl(o.time), h("pre", {}, decodeValue(o.output))))) : h("p", { class: "muted" }, "none"));
  const tasks = st.pendingTasks || [];
  if (tasks.length) out.append(h("h3", {}, `Pending tasks (${tasks.length})`), h("ul", {}, tasks.map((t) => h("li", {},
    (t.kind || "").replace("TASK_KIND_", "").toLowerCase(), " ", t.stepType || t.rpcName || "", ` attempt ${t.attempt || 1}`, " ready ", timeEl(t.readyTime), t.noWorker ? " · no worker connected" : ""))));
  return out;
}

function timersOf(se, id, run) {
  const timers = (se.wait && se.wait.timers) || [];
  if (!timers.length) return "";
  return h("table", { class: "timers" }, h("thead", {}, h("tr", {}, h("th", {}, "Timer"), h("th", {}, "Due"), h("th", {}, "Status"), h("th", {}, ""))),
    h("tbody", {}, timers.map((t) => {
      const pending = t.status === "TIMER_STATUS_PENDING";
      return h("tr", {}, h("td", {}, t.conditionId || "#" + (t.timerIndex || 0)), h("td", {}, timeEl(t.fireTime)),
        h("td", {}, (t.status || "").replace("TIMER_STATUS_", "").toLowerCase()),
        h("td", {}, pending && canAct() ? h("button", { class: "secondary", onclick: async () => {
          if (!await confirmAction(`Skip timer ${t.conditionId || "#" + (t.timerIndex || 0)} of ${se.stepType} in run ${run} of flow ${id}?`)) return;
          try {
            await api("POST", `/api/flows/${encodeURIComponent(id)}/skip-timer`, Object.assign({ runId: run, stepExecutionId: se.stepExecutionId },
              t.conditionId ? { conditionId: t.conditionId } : { timerIndex: t.timerIndex || 0 }));
            banner("Timer skipped.", true); route();
          } catch (e) { showError(e); }
        } }, "Skip") : ""));
    })));
}

function actions(st, id, run, g) {
  const sum = st.summary || {};
  if (!canAct()) return h("p", { class: "muted" }, "Sign in with a token of role client to act on this run.");
  if (statusName(sum.status) !== "RUNNING") return h("div", { id: "actions" }, h("p", { class: "muted" }, "The run is closed."), resetForm(st, id, run, g));
  const post = async (path, body, what, done) => {
    if (!await confirmAction(`${what} — run ${run} of flow ${id}?`)) return;
    try { await api("POST", `/api/flows/${encodeURIComponent(id)}/${path}`, Object.assign({ runId: run }, body)); banner(done, true); route(); } catch (e) { showError(e); }
  };
  const stopType = h("select", { id: "stop-type" }, ["cancel", "terminate", "fail"].map((t) => h("option", { value: t }, t)));
  const reason = h("input", { id: "stop-reason", placeholder: "why", size: 24 });
  const ch = h("input", { id: "pub-channel", placeholder: "approve", size: 12 });
  const val = h("input", { id: "pub-value", placeholder: "{\"ok\": true}", size: 18 });
  const an = h("input", { id: "attr-name", placeholder: "name", size: 12 });
  const av = h("input", { id: "attr-value", placeholder: "\"value\"", size: 18 });
  return h("div", { id: "actions" },
    h("form", { class: "act", onsubmit: (e) => { e.preventDefault(); post("stop", { type: stopType.value, reason: reason.value }, `Stop (${stopType.value})`, "Stop requested."); } },
      h("label", { for: "stop-type" }, "Stop", stopType), h("label", { for: "stop-reason" }, "Reason", reason), h("button", { class: "danger", id: "stop-btn" }, "Stop…")),
    h("form", { class: "act", onsubmit: (e) => { e.preventDefault(); post("publish", { channel: ch.value, value: val.value }, `Publish ${val.value} to channel ${ch.value}`, "Published."); } },
      h("label", { for: "pub-channel" }, "Channel", ch), h("label", { for: "pub-value" }, "Message (JSON)", val), h("button", { id: "pub-btn" }, "Publish…")),
    h("form", { class: "act", onsubmit: (e) => { e.preventDefault(); post("attributes", { name: an.value, value: av.value }, `Set attribute ${an.value} = ${av.value}`, "Attribute set."); } },
      h("label", { for: "attr-name" }, "Attribute", an), h("label", { for: "attr-value" }, "Value (JSON)", av), h("button", { id: "attr-btn" }, "Set…")),
    resetForm(st, id, run, g));
}

// resetRequestIds holds the request ID of each run's reset form ("flow
// ID\nrun ID" → ID) until a reset of that run is answered.
const resetRequestIds = new Map();

// resetForm resets the run (E37) to its beginning, before the first
// execution of a step type, or before a step execution's WaitFor or
// Execute; the new run opens once it is durable.
function resetForm(st, id, run, g) {
  if (st.resetRunId) return h("p", { class: "muted" }, "This run was reset: ", h("a", { href: `/flows/${encodeURIComponent(id)}?runId=${encodeURIComponent(st.resetRunId)}` }, "the new run"), ".");
  const types = [...new Set(g.order.map((e) => e.stepType))];
  const execs = g.order.map((e) => e.id);
  const point = h("select", { id: "reset-point" }, h("option", { value: "beginning" }, "the beginning"),
    h("option", { value: "stepType" }, "a step type"), h("option", { value: "stepExecution" }, "a step execution"));
  const stepType = h("select", { id: "reset-step-type", disabled: true }, types.map((t) => h("option", { value: t }, t)));
  const exec = h("select", { id: "reset-exec", disabled: true }, execs.map((x) => h("option", { value: x }, x)));
  const beforeExecute = h("input", { type: "checkbox", id: "reset-before-execute", disabled: true });
  const skip = h("input", { type: "checkbox", id: "reset-skip" });
  const reason = h("input", { id: "reset-reason", placeholder: "fix deployed", size: 18 });
  const sync = () => {
    stepType.disabled = point.value !== "stepType";
    exec.disabled = beforeExecute.disabled = point.value !== "stepExecution";
  };
  point.addEventListener("change", sync);
  const describe = () => point.value === "beginning" ? "its beginning" : point.value === "stepType" ? `the first execution of step type ${stepType.value}` :
    `step execution ${exec.value}, before its ${beforeExecute.checked ? "Execute" : "WaitFor"}`;
  // One request ID per run until a reset of it is answered, kept across
  // the page's re-renders (live refresh rebuilds the form): submitting
  // again after a lost answer is the same reset, answered the run the
  // first submission made (E37).
  const key = `${id}\n${run}`;
  if (!resetRequestIds.has(key)) {
    resetRequestIds.set(key, "ui-" + (crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(36).slice(2)}`));
  }
  const requestId = resetRequestIds.get(key);
  return h("form", { class: "act", id: "reset-form", "data-request-id": requestId, onsubmit: async (e) => {
    e.preventDefault();
    if (!await confirmAction(`Reset run ${run} of flow ${id} to ${describe()}? A new run starts there${statusName((st.summary || {}).status) === "RUNNING" ? "; this run is terminated" : ""}` +
      (skip.checked ? ", without the client writes made after that point." : ", re-applying the client writes made after that point."))) return;
    try {
      const r = await api("POST", `/api/flows/${encodeURIComponent(id)}/reset`, { runId: run, point: point.value, stepType: stepType.value,
        stepExecutionId: exec.value, beforeExecute: beforeExecute.checked, skipReapply: skip.checked, reason: reason.value, requestId });
      resetRequestIds.delete(key);
      // The new run's page, whose header links back to this run.
      go(`/flows/${encodeURIComponent(id)}?runId=${encodeURIComponent(r.runId)}`);
    } catch (err) { showError(err); }
  } },
  h("label", { for: "reset-point" }, "Reset to", point), h("label", { for: "reset-step-type" }, "Step type", stepType),
  h("label", { for: "reset-exec" }, "Step execution", exec),
  h("label", { for: "reset-before-execute", class: "check" }, beforeExecute, "before Execute"),
  h("label", { for: "reset-skip", class: "check" }, skip, "skip later client writes"),
  h("label", { for: "reset-reason" }, "Reason", reason), h("button", { class: "danger", id: "reset-btn" }, "Reset…"));
}

// --- node page ---------------------------------------------------------------

function nodePage(main) {
  main.replaceChildren(h("h1", {}, "Node"), h("p", { class: "muted" }, "Loading…"));
  async function load() {
    try {
      const n = await api("GET", "/api/node");
      if (state.page !== "node") return;
      banner("");
      const rates = {};
      const now = new Date(n.now).getTime();
      if (state.store && state.store.at < now) {
        for (const [op, v] of Object.entries(n.storeRequests || {})) rates[op] = ((v - (state.store.req[op] || 0)) * 1000 / (now - state.store.at)).toFixed(1);
      }
      state.store = { at: now, req: n.storeRequests || {} };
      const age = n.lastSnapshot ? Math.round((now - new Date(n.lastSnapshot).getTime()) / 1000) + " s ago" : "none written by this process";
      const fact = (k, v, id) => [h("dt", {}, k), h("dd", id ? { id } : {}, v)];
      const ls = n.lease || {};
      main.replaceChildren(h("h1", {}, "Node ", h("span", { class: "mono" }, n.nodeId)),
        n.serving ? "" : h("div", { class: "standby", id: "standby" }, h("strong", {}, "This process does not serve: " + n.role + ". "), n.notServingReason || "",
          n.activeUrl ? [" ", h("a", { href: n.activeUrl, id: "active-link" }, "Go to the active process")] : " (set web.activeURL to link to the active process)"),
        h("dl", { class: "facts", id: "node-facts" },
          fact("Role", n.role, "role"), fact("Mode", n.mode), fact("This process", n.processId, "process-id"), fact("Epoch held", n.epoch || "none"),
          fact("API", n.apiAddr), fact("Started", timeEl(n.startedAt)),
          fact("Lease holder", ls.error ? ls.error : (ls.holder || "") + (ls.holder === n.processId ? " (this process)" : ""), "lease-holder"),
          fact("Lease epoch", ls.epoch || ""), fact("Lease renewed", timeEl(ls.renewedAt)),
          fact("Lease expires", ls.released ? "released" : timeEl(ls.expiresAt)),
          fact("Standby state", n.standbyState + (n.lagSeconds ? ` · lag ${n.lagSeconds.toFixed(1)} s` : "")),
          fact("Standbys", n.standbys),
          fact("Log position", n.logNextSeq ? `next batch ${n.logNextSeq}` : "no writer (not active)"),
          fact("Log written", `${n.logBatches} batches · ${n.logRecords} records · ${n.logBytes} bytes · ${n.leaseRenewals} lease renewals (${n.leaseRenewalFailures} failed)`),
          fact("Snapshots", `${n.snapshots} written, ${n.snapshotFailures} failed · last ${age}` + (n.lastSnapshotBytes ? ` (${n.lastSnapshotBytes} bytes)` : "")),
          fact("Store requests", h("span", {}, Object.entries(n.storeRequests || {}).map(([op, v]) => `${op} ${v}` + (rates[op] !== undefined ? ` (${rates[op]}/s)` : "")).join(" · "))),
          fact("Metrics", n.metricsUrl ? h("a", { href: n.metricsUrl }, n.metricsUrl) : "metrics.listen is off")),
        h("h2", {}, "Takeovers and step downs"),
        (n.events || []).length ? h("table", { id: "node-events" }, h("thead", {}, h("tr", {}, h("th", {}, "Time"), h("th", {}, "What"), h("th", {}, "Epoch"), h("th", {}, ""))),
          h("tbody", {}, n.events.slice().reverse().map((e) => h("tr", {}, h("td", {}, timeEl(e.time)), h("td", {}, e.kind), h("td", {}, e.epoch), h("td", {}, e.detail || ""))))) :
          h("p", { class: "muted" }, "none since this process started"));
    } catch (e) { showError(e); }
    schedule(load, 2000);
  }
  load();
}

// --- start -------------------------------------------------------------------

function init() {
  const utc = document.getElementById("utc"), live = document.getElementById("live");
  utc.checked = state.utc; live.checked = state.live;
  utc.addEventListener("change", () => { state.utc = utc.checked; localStorage.setItem("dex.utc", utc.checked ? "1" : "0"); for (const t of document.querySelectorAll("time")) t.textContent = fmtTime(t.getAttribute("datetime")); });
  live.addEventListener("change", () => { state.live = live.checked; localStorage.setItem("dex.live", live.checked ? "1" : "0"); route(); });
  // The session (who is signed in) and the page load side by side; the
  // run page waits for it before it offers actions.
  state.ready = loadSession();
  route();
}
init();
