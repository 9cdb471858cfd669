// membench view: polls the JSON API and renders its views (run sets, one run set, one run or unit,
// one trap and seed under several conditions side by side).
// Every text from the logs goes into the page through textContent, never as HTML.
"use strict";

const POLL_MS = 1500;
const app = document.getElementById("app");
const crumbs = document.getElementById("crumbs");
const statusLine = document.getElementById("status");
let timer = null;
let generation = 0;     // bumped on every navigation, so a stale answer is dropped
let lastRunKey = null;  // the run view re-renders only when the run changed (keeps <details> open)

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("data-")) node.setAttribute(key, String(value));
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const fmt = {
  pct: (x) => (x === null || x === undefined ? "—" : (100 * x).toFixed(1) + "%"),
  ci: (ci) => (!ci || ci[0] === null ? "—" : `${(100 * ci[0]).toFixed(1)}–${(100 * ci[1]).toFixed(1)}%`),
  time: (iso) => (iso ? new Date(iso).toLocaleTimeString() : "—"),
  usd: (x) => (x === null || x === undefined ? "—" : "$" + Number(x).toFixed(4)),  // null: no priced call
  text: (bounded) => (bounded && typeof bounded === "object" ? bounded.text : bounded ?? ""),
};

function badge(text, cls) { return el("span", { class: `badge ${cls || ""}`, text }); }
function stateBadge(state) { return badge(state || "—", state || ""); }
function verdictBadge(passed) {
  if (passed === null || passed === undefined) return badge("—", "muted");
  return passed ? badge("pass", "pass") : badge("fail", "fail");
}
// a run set's log: damaged, a chain broken, events the processors rejected (it would fail
// `membench replay --verify`: not verified), or ok
function logBadge(rs, breaks, okText) {
  if (rs.log_error) return badge("log damaged", "broken");
  if (!rs.chain_ok) return badge(breaks === undefined ? "broken" : `chain broken (${breaks})`, "broken");
  if (rs.dead_letter_count) {
    const b = badge(`not verified · ${rs.dead_letter_count} events the processors rejected`, "broken");
    b.setAttribute("data-verified", "false");
    return b;
  }
  return badge(okText, "ok");
}
function liveBadge(rs) {
  if (rs.live) return badge("live", "running");
  if (rs.running) return badge(`${rs.running} open, no write for ${Math.round(rs.quiet_for_s || 0)} s`, "warn");
  return badge("idle", "muted");
}
function card(key, value, id) {
  return el("div", { class: "card" }, el("div", { class: "v", id, text: value }), el("div", { class: "k", text: key }));
}
function table(headers, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.num ? "num" : "", text: h.label ?? h })))),
    el("tbody", {}, rows));
}
function kv(pairs) {
  return el("div", { class: "kv" }, pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => el("span", {}, el("b", { text: k + ": " }), String(v))));
}
function details(summary, body, open) {
  return el("details", { open: open ? "open" : null }, el("summary", { text: summary }), body);
}
function pre(text, cls) { return el("pre", { class: cls || "" }, text ?? ""); }
function diffBlock(text) {
  const node = el("pre", { class: "diff" });
  for (const line of (text || "").split("\n")) {
    const cls = line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "";
    node.append(el("span", { class: cls, text: line + "\n" }));
  }
  return node;
}

// A static export (`membench export site`) marks its page and holds the API's answers as script
// files, since a page opened from disk cannot fetch(): each assigns its answer to MEMBENCH_DATA
// under its own path, and is loaded with <script src> (the page's CSP allows 'self' scripts only).
const STATIC_INDEX = (document.querySelector('meta[name="membench-static"]') || {}).content || null;
const MAX_PAIR_CONDITIONS = 6;
const staticFiles = new Map();  // path -> promise of its answer
let siteIndex = null;           // data/site.js: the run set, its runs, units' cells, pairs, blobs

function loadData(path) {
  if (!staticFiles.has(path)) {
    staticFiles.set(path, new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = path;
      script.onload = () => {
        script.remove();
        const store = window.MEMBENCH_DATA || {};
        if (Object.hasOwn(store, path)) { resolve(store[path]); delete store[path]; }
        else reject(new Error(`${path} holds no answer`));
      };
      script.onerror = () => { script.remove(); staticFiles.delete(path); reject(new Error(`${path}: not in this export`)); };
      document.head.append(script);
    }));
  }
  return staticFiles.get(path);
}

function notExported(what) { throw new Error(`${what}: not in this export`); }

// the answer the live server gives to `url`, from the export's files
async function staticAnswer(url) {
  const site = siteIndex = await loadData(STATIC_INDEX);
  const at = url.indexOf("?");
  const params = new URLSearchParams(at < 0 ? "" : url.slice(at + 1));
  const parts = (at < 0 ? url : url.slice(0, at)).split("/").filter(Boolean).map(decodeURIComponent);
  const own = (object, key) => (Object.hasOwn(object, key) ? object[key] : null);
  if (parts[0] !== "api") notExported(url);
  if (parts.length === 2 && parts[1] === "run_sets") return loadData("data/run_sets.js");
  if (parts[1] === "runs" && parts.length === 3) return own(site.runs, parts[2]) ? loadData(site.runs[parts[2]]) : notExported(`run ${parts[2]}`);
  if (parts[1] !== "run_sets" || parts[2] !== site.run_set) notExported(`run set ${parts[2]}`);
  if (parts.length === 3) return loadData("data/run_set.js");
  if (parts.length >= 5 && parts[3] === "units") {
    const id = parts.slice(4).join("/");
    const file = own(site.runs, own(site.units, id) ?? "");
    return file ? loadData(file) : notExported(`unit ${id}`);
  }
  if (parts.length === 6 && parts[3] === "pair") return staticPair(site, parts[4], parts[5], params.get("conditions") || "");
  if (parts.length === 4 && parts[3] === "search") return staticSearch(site, params.get("q") || "");
  return notExported(url);
}

// the paired view from the export's (trap, seed) file: columns follow the ladder (the export holds
// the patch diffs of every two conditions in that order), then conditions that did not run it
async function staticPair(site, task, seed, conditions) {
  const key = `${task}\u0000${seed}`;
  if (!Object.hasOwn(site.pairs, key)) notExported(`trap ${task} seed ${seed}`);
  const pair = await loadData(site.pairs[key]);
  const named = conditions.split(",").filter(Boolean);
  const chosen = (named.length ? [...pair.available.filter((c) => named.includes(c)),
    ...named.filter((c) => !pair.available.includes(c))] : pair.available).slice(0, MAX_PAIR_CONDITIONS);
  const columns = await Promise.all(chosen.map(async (c) => {
    const column = Object.hasOwn(pair.columns, c) ? pair.columns[c] : null;
    const file = column && column.run_id && Object.hasOwn(site.runs, column.run_id) ? site.runs[column.run_id] : null;
    return { condition: c, unit_id: file ? column.unit_id : null, run: file ? await loadData(file) : null };
  }));
  const shown = chosen.filter((c) => pair.patched.includes(c));
  const diffs = shown.slice(1).map((b) => pair.patch_diffs.find((d) => d.a === shown[0] && d.b === b));
  return { run_set: pair.run_set, task: pair.task, seed: pair.seed, available: pair.available, conditions: chosen,
    columns, patch_diffs: diffs };
}

// the server's trajectory search, over the texts the export holds (case-insensitive, first 3 hits)
async function staticSearch(site, query) {
  if (!query.trim() || query.length > 200) throw new Error("search: q must be 1 to 200 characters");
  const { corpus } = await loadData(site.search);
  const needle = query.toLowerCase();
  const units = Object.create(null);
  for (const [unit, runId, session, seq, kind, where, text] of corpus) {
    const at = text.toLowerCase().indexOf(needle);
    if (at < 0) continue;
    const found = units[unit] || (units[unit] = []);
    if (found.length < 3) {
      found.push({ run_id: runId, session, seq, kind, where, snippet: text.slice(Math.max(0, at - 60), at + needle.length + 60) });
    }
  }
  return { query, units, blocks_read: 0 };
}

function reportHref(runSet) {
  return (STATIC_INDEX ? "" : "/") + `runs/${encodeURIComponent(runSet)}/report.html`;
}
function blobHref(runSet, digest) {
  if (!STATIC_INDEX) return `/api/blobs/${encodeURIComponent(runSet)}/${digest}`;
  return siteIndex && Object.hasOwn(siteIndex.blobs, digest) ? siteIndex.blobs[digest] : "#";
}

// the last answer per address with its ETag: a poll names it, and an unchanged answer comes back
// as a bodiless 304 (a finished run set of 10,000 units is 10 MB otherwise, every 1.5 s)
const lastAnswers = new Map();
async function getJSON(url) {
  if (STATIC_INDEX) return staticAnswer(url);
  const known = lastAnswers.get(url);
  const response = await fetch(url, { cache: "no-store", headers: known ? { "If-None-Match": known.etag } : {} });
  if (response.status === 304 && known) return known.body;
  const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  const etag = response.headers.get("ETag");
  lastAnswers.delete(url);
  if (etag) lastAnswers.set(url, { etag, body });
  if (lastAnswers.size > 8) lastAnswers.delete(lastAnswers.keys().next().value);  // the oldest
  return body;
}

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const at = hash.indexOf("?");
  const params = new URLSearchParams(at < 0 ? "" : hash.slice(at + 1));
  const parts = (at < 0 ? hash : hash.slice(0, at)).split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "rs" && parts[1]) return { view: "runSet", id: parts[1] };
  if (parts[0] === "run" && parts[1]) return { view: "run", id: parts[1] };
  // a unit id holds slashes: escaped or not, everything after the run set is the id
  if (parts[0] === "unit" && parts.length >= 3) return { view: "unit", runSet: parts[1], id: parts.slice(2).join("/") };
  if (parts[0] === "pair" && parts.length === 4) {
    return { view: "pair", runSet: parts[1], task: parts[2], seed: parts[3], conditions: params.get("conditions") || "" };
  }
  return { view: "home" };
}
function link(href, text, attrs) { return el("a", { href, ...(attrs || {}) }, text); }
function runSetHref(id) { return "#/rs/" + encodeURIComponent(id); }
function runHref(id) { return "#/run/" + encodeURIComponent(id); }

// ---------------------------------------------------------------------------------------- views

function renderHome(data) {
  crumbs.replaceChildren();
  const rows = data.run_sets.map((rs) => el("tr", { "data-run-set": rs.run_set },
    el("td", {}, link(runSetHref(rs.run_set), rs.run_set, { class: "runset-link", "data-run-set": rs.run_set })),
    el("td", { text: rs.suite ?? "—" }), el("td", { text: rs.agent ?? "—" }),
    el("td", { class: "num", text: rs.units_started }), el("td", { class: "num", text: rs.units_finished }),
    el("td", { class: "num", text: rs.running }), el("td", { class: "num", text: rs.events }),
    el("td", {}, liveBadge(rs)),
    el("td", {}, logBadge(rs, undefined, "ok")),
    el("td", { text: fmt.time(rs.last_event) })));
  app.replaceChildren(el("h1", { text: "Run sets" }),
    data.run_sets.length ? table(["run set", "suite", "agent", { label: "units started", num: 1 },
      { label: "finished", num: 1 }, { label: "running", num: 1 }, { label: "events", num: 1 }, "state", "chain",
      "last event"], rows, { id: "run-sets" })
      : el("p", { class: "muted", id: "no-run-sets", text: "No run sets yet: start `membench run` and this page fills in." }));
}

function progressTable(progress) {
  const fields = ["units_started", "running", "finished", "completed", "passed", "excluded", "errors", "attempts"];
  const totals = Object.fromEntries(fields.map((f) => [f, progress.reduce((n, row) => n + row[f], 0)]));
  const rows = progress.map((row) => el("tr", { "data-condition": row.condition },
    el("td", { text: row.condition }),
    fields.map((f) => el("td", { class: "num", "data-field": f, text: row[f] }))));
  rows.push(el("tr", { class: "total" }, el("th", { text: "all" }),
    fields.map((f) => el("th", { class: "num", id: "total-" + f.replace("units_", ""), text: totals[f] }))));
  return table(["condition", ...["units started", "running", "finished", "completed", "passed", "excluded", "errors",
    "attempts"].map((label) => ({ label, num: 1 }))], rows, { id: "progress" });
}

function ladder(rows) {
  const box = el("div", { class: "ladder", id: "ladder" });
  for (const row of rows) {
    const bar = el("div", { class: "bar" });
    bar.style.width = row.pass_rate === null ? "0" : `${100 * row.pass_rate}%`;
    const track = el("div", { class: "track" }, bar);
    if (row.ci95 && row.ci95[0] !== null) {
      const ci = el("div", { class: "ci" });
      ci.style.left = `${100 * row.ci95[0]}%`;
      ci.style.width = `max(2px, ${100 * (row.ci95[1] - row.ci95[0])}%)`;
      track.append(ci);
    }
    box.append(el("div", { class: "row", "data-condition": row.condition },
      el("b", { text: row.condition }), track,
      el("span", {},
        el("span", { "data-field": "pass_rate",
          text: `${fmt.pct(row.pass_rate)}  CI ${fmt.ci(row.ci95)}  (${row.passed}/${row.valid}; ${row.excluded} excluded)` }),
        el("span", { class: "muted", "data-field": "pass_hat_k", text: "  pass^k " + passHatK(row.pass_hat_k, true) }))));
  }
  if (!rows.length) box.append(el("p", { class: "muted", text: "No finished unit yet." }));
  return box;
}

// Cost and reliability per condition, worded as report.md's table (reports/effort.py): "—" where
// a figure is null (no pass, no priced model call, no session)
const effortNumber = (x, digits) => (x === null || x === undefined ? "—"
  : Number(x).toLocaleString("en-US", { minimumFractionDigits: digits || 0, maximumFractionDigits: digits || 0 }));
const effortUsd = (x) => (x === null || x === undefined ? "—"
  : x < 1 ? "$" + Number(x).toFixed(4) : "$" + effortNumber(x, 2));
function passHatK(p, short) {
  if (!p) return "—";
  const rate = fmt.pct(p.value);
  if (short) return `${rate} ${p.passed}/${p.complete}` + (p.incomplete ? ` +${p.incomplete} incomplete` : "");
  return `${rate} (${p.passed}/${p.complete} traps, k=${p.k}${p.incomplete ? `, ${p.incomplete} incomplete` : ""})`;
}
function effortTable(rows) {
  const shown = rows.filter((row) => row.effort);
  if (!shown.length) return null;
  const body = shown.map((row) => {
    const e = row.effort;
    const usd = e.cost_usd || { per_cell: null, per_pass: null };
    const cells = [["pass_rate", fmt.pct(row.pass_rate)], ["pass_hat_k", passHatK(row.pass_hat_k)],
      ["tokens_per_cell", effortNumber(e.tokens.per_cell)], ["tokens_per_pass", effortNumber(e.tokens.per_pass)],
      ["usd_per_cell", effortUsd(usd.per_cell)], ["usd_per_pass", effortUsd(usd.per_pass)],
      ["wall_s_per_cell", effortNumber(e.wall_time_s.per_cell, 1)], ["wall_s_per_pass", effortNumber(e.wall_time_s.per_pass, 1)],
      ["memory_tokens_per_session", effortNumber(e.memory_tokens_per_session, 1)],
      ["memory_calls_per_session", effortNumber(e.memory_calls_per_session, 2)],
      ["passes_per_memory_call", effortNumber(e.passes_per_memory_call, 2)]];
    return el("tr", { "data-condition": row.condition }, el("td", { text: row.condition }),
      cells.map(([field, text]) => el("td", { class: "num", "data-field": field, text })));
  });
  return table(["condition", ...["pass rate", "pass^k", "tokens / cell", "tokens / pass", "USD / cell", "USD / pass",
    "wall s / cell", "wall s / pass", "memory tokens / session", "memory calls / session", "passes / memory call"]
    .map((label) => ({ label, num: 1 }))], body, { id: "effort" });
}

// The units table keeps its controls across polls (focus and typing survive a refresh); its state
// (filters, sort, search, page) lives in the URL: #/rs/<run set>?condition=B5&sort=cost_usd&desc=1&q=…
const PAGE_SIZE = 200;
const FILTERS = [["condition", "condition"], ["construct", "construct"], ["task", "sequence"], ["seed", "seed"],
  ["outcome", "outcome"], ["reason", "failure / exclusion"]];
const SORTS = { events: "events", attempts: "attempts", duration_ms: "duration", tokens: "tokens",
  memory_tokens: "memory tokens", cost_usd: "cost", seed: "seed" };
let unitsData = null;   // the run set's last answer
let deepHits = { key: "", units: {} };  // the server's full-text search answer for the current q
let searching = "";  // the search being answered: a growing log does not queue another one meanwhile

function unitOutcome(u) {
  if (u.state === "running") return "running";
  if (u.valid) return u.passed ? "pass" : "fail";
  return u.excluded ? "excluded" : "error";
}
function unitReason(u) { return u.failure_reason ?? u.exclusion_reason ?? u.error_type ?? ""; }
function unitValue(u, key) {
  if (key === "tokens") return (u.input_tokens || 0) + (u.output_tokens || 0);
  if (key === "attempts") return u.attempts.length;
  if (key === "outcome") return unitOutcome(u);
  if (key === "reason") return unitReason(u);
  return u[key];
}
function hashParams() {
  const hash = location.hash;
  const at = hash.indexOf("?");
  return new URLSearchParams(at < 0 ? "" : hash.slice(at + 1));
}
function setParams(runSet, params) {
  for (const [k, v] of [...params]) if (v === "") params.delete(k);
  const query = params.toString();
  history.replaceState(null, "", runSetHref(runSet) + (query ? "?" + query : ""));
}
function pairHref(runSet, task, seed, conditions) {
  return `#/pair/${encodeURIComponent(runSet)}/${encodeURIComponent(task)}/${encodeURIComponent(seed)}` +
    (conditions && conditions.length ? "?conditions=" + conditions.map(encodeURIComponent).join(",") : "");
}
// the conditions a unit's pair link opens: the first condition (the ladder's base) and the unit's own
function pairConditions(data, u) {
  const order = data.progress.map((p) => p.condition);
  const ran = order.filter((c) => data.units.some((o) => o.task === u.task && o.seed === u.seed && o.condition === c));
  const first = ran[0];
  if (u.condition !== first) return [first, u.condition];
  return ran.slice(0, 2);
}

function unitControls(runSet) {
  const params = hashParams();
  const controls = el("div", { id: "unit-controls", class: "controls", "data-run-set": runSet });
  for (const [key, label] of FILTERS) {
    const select = el("select", { id: "filter-" + key, "data-filter": key, "aria-label": label },
      el("option", { value: "", text: `${label}: all` }));
    select.addEventListener("change", () => {
      const p = hashParams(); p.set(key, select.value); p.delete("page"); setParams(runSet, p); renderUnits();
    });
    controls.append(select);
  }
  const search = el("input", { id: "unit-search", type: "search", placeholder: "search units, reasons, turns, tool output, memory…",
    value: params.get("q") || "", "aria-label": "search" });
  let debounce = null;
  search.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      const p = hashParams(); p.set("q", search.value); p.delete("page"); setParams(runSet, p); renderUnits(); deepSearch();
    }, 250);
  });
  const clear = el("button", { id: "clear-filters", type: "button", text: "clear" });
  clear.addEventListener("click", () => {
    setParams(runSet, new URLSearchParams()); search.value = "";
    for (const s of controls.querySelectorAll("select")) s.value = "";
    renderUnits();
  });
  controls.append(search, clear, el("span", { id: "search-state", class: "muted" }));
  return controls;
}

function refreshFilterOptions(data) {
  const params = hashParams();
  for (const [key, label] of FILTERS) {
    const select = document.getElementById("filter-" + key);
    if (!select) continue;
    const values = [...new Set(data.units.map((u) => unitValue(u, key)).filter((v) => v !== null && v !== undefined && v !== "")
      .map(String))].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    const wanted = params.get(key) || "";
    if (wanted && !values.includes(wanted)) values.push(wanted);  // a state from the URL stays selectable
    const joined = values.join("\u0000");
    if (select.dataset.values !== joined) {
      select.dataset.values = joined;
      select.replaceChildren(el("option", { value: "", text: `${label}: all` }),
        ...values.map((v) => el("option", { value: v, text: v })));
    }
    select.value = wanted;
  }
  const search = document.getElementById("unit-search");
  if (search && document.activeElement !== search) search.value = params.get("q") || "";
}

async function deepSearch() {
  const data = unitsData;
  const q = (hashParams().get("q") || "").trim();
  const state = document.getElementById("search-state");
  if (!data || q.length < 2) { deepHits = { key: "", units: {} }; if (state) state.textContent = ""; renderUnits(); return; }
  const key = `${data.run_set}\u0000${data.events}\u0000${q}`;
  if (deepHits.key === key || searching.endsWith("\u0000" + q)) return;
  searching = key;
  if (state) state.textContent = "searching trajectories…";
  try {
    const answer = await getJSON(`/api/run_sets/${encodeURIComponent(data.run_set)}/search?q=${encodeURIComponent(q)}`);
    if ((hashParams().get("q") || "").trim() !== q) return;  // the user typed on
    deepHits = { key, units: answer.units };
    if (state) state.textContent = `trajectories searched: ${Object.keys(answer.units).length} units hold it`;
  } catch (err) {
    if (state) state.textContent = "search failed: " + err.message;
  } finally {
    if (searching === key) searching = "";
  }
  renderUnits();
}

function filteredUnits(data, params) {
  const q = (params.get("q") || "").trim().toLowerCase();
  const deep = deepHits.key.endsWith("\u0000" + (params.get("q") || "").trim()) ? deepHits.units : {};
  let rows = data.units.filter((u) => FILTERS.every(([key]) => {
    const want = params.get(key);
    return !want || String(unitValue(u, key) ?? "") === want;
  }));
  if (q) {
    rows = rows.filter((u) => deep[u.unit_id] || [u.unit_id, u.run_id, u.task, unitReason(u), u.why]
      .some((t) => t && String(t).toLowerCase().includes(q)));
  }
  const sort = params.get("sort");
  if (sort && SORTS[sort]) {
    const sign = params.get("desc") ? -1 : 1;
    rows = [...rows].sort((a, b) => sign * ((Number(unitValue(a, sort)) || 0) - (Number(unitValue(b, sort)) || 0)));
  }
  return { rows, deep };
}

function sortHeader(runSet, key, params) {
  const active = params.get("sort") === key;
  const arrow = active ? (params.get("desc") ? " ▼" : " ▲") : "";
  const th = el("th", { class: "num sortable", "data-sort": key, title: "sort", text: SORTS[key] + arrow });
  th.addEventListener("click", () => {
    const p = hashParams();
    if (active && !p.get("desc")) p.set("desc", "1"); else p.delete("desc");
    if (active && params.get("desc")) p.delete("sort"); else p.set("sort", key);
    setParams(runSet, p); renderUnits();
  });
  return th;
}

function renderUnits() {
  const data = unitsData;
  const box = document.getElementById("units-box");
  if (!data || !box) return;
  const params = hashParams();
  const { rows, deep } = filteredUnits(data, params);
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  const page = Math.min(pages, Math.max(1, parseInt(params.get("page") || "1", 10) || 1));
  const shown = rows.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
  const body = shown.map((u) => {
    const hits = deep[u.unit_id] || [];
    return el("tr", { "data-unit-id": u.unit_id, "data-state": u.state },
      el("td", {}, link(runHref(u.run_id), u.unit_id, { class: "unit-link", "data-unit-id": u.unit_id }),
        hits.length ? el("div", { class: "hit", title: `${hits.length === 3 ? "3 or more" : hits.length} hits in its trajectory` },
          el("b", { text: `${hits[0].where}, session ${hits[0].session}: ` }), "…" + hits[0].snippet + "…") : null),
      el("td", { text: u.condition }), el("td", { text: u.construct ?? "—" }), el("td", { text: u.task ?? "—" }),
      el("td", { class: "num", text: u.seed ?? "—" }),
      el("td", { class: "num", text: u.attempts.length }), el("td", {}, stateBadge(u.state)),
      el("td", {}, u.state === "running" ? badge(`session ${u.session}`, "muted") : verdictBadge(u.valid ? u.passed : null)),
      el("td", { text: unitReason(u), title: u.why ?? "" }),
      el("td", { class: "num", text: ((u.duration_ms || 0) / 1000).toFixed(1) }),
      el("td", { class: "num", text: unitValue(u, "tokens") }), el("td", { class: "num", text: u.memory_tokens ?? 0 }),
      el("td", { class: "num", text: fmt.usd(u.cost_usd) }),
      el("td", { class: "num", text: u.events }),
      el("td", {}, !u.chain_ok ? badge("broken", "broken") : u.dead_letters ? badge("not verified", "broken") : badge("ok", "ok")),
      el("td", {}, u.task !== null && u.task !== undefined
        ? link(pairHref(data.run_set, u.task, u.seed, pairConditions(data, u)), "pair", { class: "pair-link", "data-unit-id": u.unit_id }) : null));
  });
  const head = el("tr", {}, el("th", { text: "unit" }), el("th", { text: "condition" }), el("th", { text: "construct" }),
    el("th", { text: "sequence" }), sortHeader(data.run_set, "seed", params), sortHeader(data.run_set, "attempts", params),
    el("th", { text: "state" }), el("th", { text: "verdict" }), el("th", { text: "failure / exclusion" }),
    sortHeader(data.run_set, "duration_ms", params), sortHeader(data.run_set, "tokens", params),
    sortHeader(data.run_set, "memory_tokens", params), sortHeader(data.run_set, "cost_usd", params),
    sortHeader(data.run_set, "events", params), el("th", { text: "chain" }), el("th", { text: "side by side" }));
  const pager = el("div", { class: "pager", id: "units-pager" },
    el("span", { id: "units-count", "data-matching": rows.length, text: `${rows.length} of ${data.units.length} units` +
      (pages > 1 ? ` · page ${page} of ${pages}` : "") }));
  for (const [label, to] of [["« previous", page - 1], ["next »", page + 1]]) {
    if (to < 1 || to > pages) continue;
    const button = el("button", { type: "button", text: label, "data-page": to });
    button.addEventListener("click", () => { const p = hashParams(); p.set("page", String(to)); setParams(data.run_set, p); renderUnits(); });
    pager.append(" ", button);
  }
  box.replaceChildren(pager, el("table", { id: "units" }, el("thead", {}, head), el("tbody", {}, body)));
}

function renderRunSet(data) {
  crumbs.replaceChildren(link("#/", "run sets"), " / ", data.run_set);
  const previous = unitsData;
  unitsData = data;
  const chain = logBadge(data, data.chain.breaks.length, `chain ok · ${data.chain.events_checked} events`);
  const top = [
    el("h1", {}, data.run_set, " ", liveBadge(data), " ", chain, " ",
      el("a", { href: reportHref(data.run_set), class: "report-link", text: "report.html" })),
    el("div", { class: "cards" },
      card("suite", data.suite ?? "—"), card("agent", data.agent ?? "—"),
      card("units started", data.units_started, "units-started"), card("units finished", data.units_finished, "units-finished"),
      card("running", data.running, "units-running"), card("events", data.events, "events"),
      card("planned", data.planned ?? "not in the log")),
    el("h2", { text: "Progress per condition" }), progressTable(data.progress),
    el("h2", { text: "Ladder: pass rate per condition, 95% CI (trap-cluster bootstrap)" }), ladder(data.ladder),
    el("h2", { text: "Cost and reliability per condition (valid cells)" }),
    effortTable(data.ladder) || el("p", { class: "muted", id: "no-effort", text: "No finished unit yet." }),
    el("p", { class: "muted caption", text: "Tokens: input + output of the agent's and the memory model's calls; USD: " +
      "every priced ModelCall of the cells' runs (— when none was priced); per pass = the total over all valid cells / " +
      "passed cells; memory tokens / session: tokens memory reads admitted into the prompt; memory calls / session: " +
      "memory tools the agent called (the harness's read before each session left out); passes / memory call: passed " +
      "cells / those calls (— with none); pass^k: traps passed " +
      "under every one of the k seeds finished so far / traps with a valid cell under each." }),
    el("h2", { text: "Units" }),
  ];
  const bottom = [];
  if (data.chain.breaks.length) {
    bottom.push(el("h2", { text: "Chain breaks" }), table(["unit", "run", { label: "seq", num: 1 }, "reason"],
      data.chain.breaks.map((b) => el("tr", {}, el("td", { text: b.unit_id }), el("td", {}, link(runHref(b.run_id), b.run_id)),
        el("td", { class: "num", text: b.seq }), el("td", { text: b.reason })))));
  }
  if (data.dead_letters.length) {
    bottom.push(el("h2", { text: "Events the processors could not fold" }), table(["run", { label: "seq", num: 1 }, "reason"],
      data.dead_letters.map((d) => el("tr", {}, el("td", { text: d.run_id }), el("td", { class: "num", text: d.seq }),
        el("td", { text: d.reason })))));
  }
  if (data.log.error) bottom.push(el("p", { class: "errorbox", text: "Log: " + data.log.error }));
  bottom.push(el("p", { class: "muted", id: "log-position",
    text: `log: ${data.log.read_to} of ${data.log.bytes} bytes read in ${data.log.blocks} blocks` +
      (data.log.pending_bytes ? ` · ${data.log.pending_bytes} bytes of a block still being written` : "") }));
  const controls = document.getElementById("unit-controls");
  if (!controls || controls.dataset.runSet !== data.run_set) {
    deepHits = { key: "", units: {} };
    app.replaceChildren(el("div", { id: "rs-top" }, top), unitControls(data.run_set), el("div", { id: "units-box" }),
      el("div", { id: "rs-bottom" }, bottom));
  } else {
    document.getElementById("rs-top").replaceChildren(...top);
    document.getElementById("rs-bottom").replaceChildren(...bottom);
  }
  refreshFilterOptions(data);
  renderUnits();
  if (!previous || previous.events !== data.events || previous.run_set !== data.run_set) deepSearch();
}


// ------------------------------------------------------------------------------- one run's events

function renderEvent(ev) {
  const p = ev.payload || {};
  let body;
  switch (ev.kind) {
    case "Turn":
      body = [kv([["role", p.role], ["tokens in", p.input_tokens || null], ["out", p.output_tokens || null],
        ["latency ms", p.latency_ms || null], ["from", p.source_kind]]), pre(fmt.text(p.text))];
      break;
    case "ToolCall":
      body = kv([["tool", p.name], ["call", p.call_id], ["patch", p.is_patch ? "yes" : "no"], ["arguments sha256", p.arguments_digest]]);
      break;
    case "ToolResult":
      body = [kv([["tool", p.name], ["call", p.call_id], ["exit", p.exit_code], ["ms", p.duration_ms], ["output bytes", p.output_size]]),
        p.output ? details("output", pre(fmt.text(p.output))) : null];
      break;
    case "ModelCall":
      body = [kv([["model", `${p.provider}/${p.model}`], ["api", p.api], ["mode", p.mode], ["status", p.status],
        ["http", p.http_status], ["tokens in", p.input_tokens], ["cached", p.cached_tokens], ["out", p.output_tokens],
        ["reasoning", p.reasoning_tokens], ["latency ms", p.latency_ms], ["first byte ms", p.first_byte_ms],
        ["cost", fmt.usd(p.cost_usd)], ["streamed", p.streamed ? `${p.chunks} chunks` : null]]),
        p.error ? el("div", { class: "bad", text: p.error }) : null];
      break;
    case "MemoryRead": {
      const admitted = new Set(p.admitted_ids || []);
      body = [kv([["tokens admitted", `${p.tokens_admitted} / ${p.token_budget}`],
        ["candidates", (p.candidates || []).length], ["admitted", admitted.size]]),
        details("query", pre(fmt.text(p.query))),
        el("ul", { class: "ids memory-candidates" }, (p.candidates || []).map((id) =>
          el("li", { class: admitted.has(id) ? "admitted" : "muted", text: id + (admitted.has(id) ? "  (admitted)" : "  (not admitted)") }))),
        details("context given to the agent", pre(fmt.text(p.context)))];
      break;
    }
    case "MemoryWrite":
      body = [kv([["memory", p.memory_id], ["type", p.memory_type], ["scope", (p.scope || []).join(", ")],
        ["from events", (p.provenance_event_ids || []).length]]), pre(fmt.text(p.content))];
      break;
    case "MemoryCitation":
      body = kv([["cited", (p.memory_ids || []).join(", ")]]);
      break;
    case "ContextCompaction":
      body = kv([["tokens", `${p.tokens_before} → ${p.tokens_after}`]]);
      break;
    case "PatchProduced": {
      const diff = p.production_diff;
      body = [kv([["files", (p.files || []).join(", ")], ["lines", `+${p.added_lines} −${p.removed_lines}`],
        ["stripped", (p.stripped_paths || []).join(", ")], ["tests", (p.test_paths || []).join(", ")]]),
        diff !== null && diff !== undefined ? details("production diff", diffBlock(diff), true)
          : p.production_diff_sha256 ? link(blobHref(currentRunSet, p.production_diff_sha256),
            "production diff (large; opens the stored blob)") : null,
        p.stripped_diff ? details("stripped diff (not scored)", diffBlock(p.stripped_diff)) : null];
      break;
    }
    case "OracleVerdict":
      body = [el("div", { class: "verdict", "data-outcome": p.outcome }, badge(p.outcome, p.outcome), " ",
        kv([["oracle", p.oracle_id], ["exit", p.exit_status], ["ms", p.duration_ms], ["isolation", p.isolation],
          ["inconclusive", p.inconclusive ? "yes" : null]])),
        (p.cases || []).length ? table(["case", "outcome", { label: "ms", num: 1 }], p.cases.map((c) =>
          el("tr", {}, el("td", { text: c.case_id }), el("td", {}, badge(c.outcome, c.outcome)), el("td", { class: "num", text: c.duration_ms })))) : null];
      break;
    case "SessionStarted":
      body = [kv([["start", p.start_state], ["scored", p.scored ? "yes" : "no"], ["oracle", p.oracle_id]]),
        pre(fmt.text(p.instruction))];
      break;
    case "SessionEnded": case "RunEnded":
      body = kv([["status", p.status], ["error", p.error_type]]);
      break;
    case "RunStarted":
      body = kv([["agent", p.agent], ["kind", p.agent_kind], ["model", p.model], ["construct", p.construct],
        ["family", p.family], ["attempt", p.attempt], ["pack", (p.pack_digest || "").slice(0, 12)]]);
      break;
    case "OracleLabel":
      body = kv([["label", p.label_id], ["type", p.label_type], ["session", p.active_session],
        ["events", (p.event_ids || []).join(", ")], ["facts", (p.fact_ids || []).join(", ")]]);
      break;
    default:
      body = pre(JSON.stringify(p, null, 2));
  }
  return el("div", { class: `event ${ev.visibility}`, "data-kind": ev.kind, "data-seq": ev.seq },
    el("span", { class: "seq", text: "#" + ev.seq }), el("span", { class: "kind", title: ev.ts, text: ev.kind }),
    el("div", {}, body));
}

function derivedPanel(s) {
  const out = [];
  if (s.verdict) {
    out.push(kv([["verdict", s.verdict.outcome], ["passed", s.verdict.passed ? "yes" : "no"],
      ["excluded", s.verdict.excluded ? s.verdict.exclusion_reason : null], ["tool calls", s.verdict.tool_calls],
      ["memory reads", s.verdict.memory_reads], ["memory tokens", s.verdict.memory_tokens_admitted],
      ["tokens in/out", `${s.verdict.input_tokens}/${s.verdict.output_tokens}`], ["ms", s.verdict.duration_ms]]));
  }
  if (s.failure) {
    out.push(el("div", { class: "failure", "data-failure-reason": s.failure.failure_reason },
      kv([["failure reason", s.failure.failure_reason], ["rule", s.failure.rule],
        ["memory failure", s.failure.memory_failure], ["resolved", s.failure.resolved ? "yes" : "no"]])));
  }
  if (s.contract) {
    const c = s.contract;
    out.push(details(`memory contract: ${c.memory_contract_status}`, kv([["injected", (c.injected_memory_ids || []).join(", ")],
      ["cited", (c.cited_memory_ids || []).join(", ")], ["relevant", (c.relevant_memory_ids || []).join(", ")],
      ["stale", (c.stale_memory_ids || []).join(", ")], ["citation precision", c.citation_precision],
      ["citation recall", c.citation_recall], ["helped", c.memory_helped ? "yes" : "no"], ["hurt", c.memory_hurt ? "yes" : "no"],
      ["runtime failure", c.runtime_contract_failure_reason]])));
  }
  if (s.hygiene.length) {
    out.push(el("h3", { text: "Hygiene observations" }), table(["metric", "label", { label: "numerator", num: 1 },
      { label: "denominator", num: 1 }], s.hygiene.map((h) => el("tr", { class: "hygiene" }, el("td", { text: h.metric }),
      el("td", { text: h.label_id ?? "" }), el("td", { class: "num", text: h.numerator }), el("td", { class: "num", text: h.denominator })))));
  }
  if (s.model.calls) {
    out.push(kv([["model calls", s.model.calls], ["tokens in", s.model.input_tokens], ["out", s.model.output_tokens],
      ["latency ms", s.model.latency_ms], ["cost", fmt.usd(s.model.cost_usd)]]));
  }
  return out;
}

let currentRunSet = "";

function renderRun(data) {
  currentRunSet = data.run_set;
  crumbs.replaceChildren(link("#/", "run sets"), " / ", link(runSetHref(data.run_set), data.run_set), " / ", data.unit_id);
  const chain = el("div", { id: "chain-status", "data-ok": data.chain.ok && !data.dead_letters ? "true" : "false" },
    !data.chain.ok ? badge(`hash chain broken at seq ${data.chain.break.seq}: ${data.chain.break.reason}`, "broken")
      : data.dead_letters ? badge(`not verified · ${data.dead_letters} events the processors rejected`, "broken")
      : badge(`hash chain ok · ${data.chain.events_checked} events`, "ok"));
  const sessions = data.sessions.map((s) => {
    const scored = s.started && s.started.scored;
    return el("section", { class: "session", "data-session": s.index },
      el("h2", {}, `Session ${s.index}`, scored ? " (scored)" : "", " ",
        s.verdict ? badge(s.verdict.outcome, s.verdict.outcome) : badge("in progress", "running")),
      derivedPanel(s), el("h3", { text: `Trajectory (${s.events.length} events)` }), s.events.map(renderEvent));
  });
  app.replaceChildren(
    el("h1", {}, data.unit_id, " ", stateBadge(data.state), " ", data.valid ? verdictBadge(data.passed) : null),
    el("div", { class: "cards" }, card("run", data.run_id), card("attempt", data.attempt ?? "—"),
      card("events", data.events, "run-events"), card("failure", data.failure_reason ?? (data.exclusion_reason || "—")),
      card("model calls", data.model.calls), card("cost", fmt.usd(data.model.cost_usd))),
    chain,
    data.why && !data.passed ? el("p", { class: "why", text: data.why }) : null,
    el("section", { class: "runlevel" }, el("h2", { text: "Run" }), data.run_events.map(renderEvent)),
    ...sessions);
}


// ------------------------------------------------------------------------------- the paired view

function memoryList(items) {
  if (!items || !items.length) return el("p", { class: "muted", text: "no memory read" });
  return el("ul", { class: "ids memory-items" }, items.map((m) =>
    el("li", { class: `memory-item ${m.admitted ? "admitted" : "muted"} ${m.cited ? "cited" : ""}`, "data-memory-id": m.memory_id },
      el("code", { text: m.memory_id }), " ", m.admitted ? badge("admitted", "ok") : badge("not admitted", "muted"),
      m.cited ? [" ", badge("cited", "pass")] : null,
      m.content !== null && m.content !== undefined ? el("div", { class: "memory-content", text: m.content }) : null)));
}

function pairCell(run, s, condition) {
  if (!s) return el("div", { class: "pair-cell muted", "data-condition": condition, text: "no such session" });
  const count = (kind) => s.events.filter((e) => e.kind === kind).length;
  const verdictEvent = [...s.events].reverse().find((e) => e.kind === "OracleVerdict");
  const patch = [...s.events].reverse().find((e) => e.kind === "PatchProduced");
  const scored = s.started && s.started.scored;
  const v = verdictEvent ? verdictEvent.payload : null;
  return el("div", { class: "pair-cell", "data-condition": condition },
    s.verdict ? badge(s.verdict.outcome, s.verdict.outcome) : badge("in progress", "running"),
    s.failure && s.failure.failure_reason ? el("span", { class: "failure", "data-failure-reason": s.failure.failure_reason,
      text: " " + s.failure.failure_reason }) : null,
    s.started ? details("instruction", pre(fmt.text(s.started.instruction))) : null,
    el("h4", { text: "Memory read" }), memoryList(s.memory_items),
    el("h4", { text: "Oracle" }),
    v ? el("div", { class: "verdict", "data-outcome": v.outcome }, badge(v.outcome, v.outcome), " ",
      kv([["exit", v.exit_status], ["isolation", v.isolation]]),
      (v.cases || []).length ? table(["case", "outcome"], v.cases.map((c) =>
        el("tr", {}, el("td", { text: c.case_id }), el("td", {}, badge(c.outcome, c.outcome))))) : null)
      : el("p", { class: "muted", text: "no verdict" }),
    patch ? details(`patch: +${patch.payload.added_lines} −${patch.payload.removed_lines} in ${(patch.payload.files || []).length} files`,
      patch.payload.production_diff !== null && patch.payload.production_diff !== undefined
        ? diffBlock(patch.payload.production_diff) : el("p", { class: "muted", text: "large diff: in the blob store" }), scored) : null,
    el("details", { class: "trajectory" },
      el("summary", { text: `trajectory: ${s.events.length} events, ${count("Turn")} turns, ${count("ToolCall")} tool calls` }),
      s.events.map(renderEvent)));
}

function renderPair(data) {
  currentRunSet = data.run_set;
  crumbs.replaceChildren(link("#/", "run sets"), " / ", link(runSetHref(data.run_set), data.run_set), " / ",
    `${data.task} · seed ${data.seed}`);
  const toggles = el("div", { class: "controls", id: "pair-conditions" }, "conditions: ", data.available.flatMap((c) => {
    const on = data.conditions.includes(c);
    const next = on ? data.conditions.filter((x) => x !== c) : data.available.filter((x) => x === c || data.conditions.includes(x));
    return [link(pairHref(data.run_set, data.task, data.seed, next.length ? next : [c]), (on ? "☑ " : "☐ ") + c,
      { class: on ? "toggle on" : "toggle", "data-condition": c }), " "];
  }));
  const columns = data.columns;
  const grid = (cells, cls) => {
    const row = el("div", { class: "pair-row " + (cls || "") }, cells);
    row.style.gridTemplateColumns = `repeat(${columns.length}, minmax(0, 1fr))`;
    return row;
  };
  const heads = grid(columns.map((col) => {
    const r = col.run;
    if (!r) return el("div", { class: "pair-head", "data-condition": col.condition }, el("h2", { text: col.condition }),
      el("p", { class: "muted", text: "did not run this trap and seed" }));
    return el("div", { class: "pair-head pair-column", "data-condition": col.condition },
      el("h2", {}, col.condition, " ", r.valid ? verdictBadge(r.passed) : stateBadge(r.state)),
      link(runHref(r.run_id), r.unit_id, { class: "unit-link" }),
      kv([["failure", r.failure_reason], ["excluded", r.exclusion_reason], ["error", r.error_type],
        ["duration s", ((r.duration_ms || 0) / 1000).toFixed(1)], ["tokens", (r.input_tokens || 0) + (r.output_tokens || 0)],
        ["memory tokens", r.memory_tokens], ["cost", fmt.usd(r.cost_usd)]]),
      r.why && !r.passed ? el("p", { class: "why", text: r.why }) : null);
  }), "heads");
  const indexes = [...new Set(columns.flatMap((c) => (c.run ? c.run.sessions.map((s) => s.index) : [])))].sort((a, b) => a - b);
  const sessions = indexes.map((i) => {
    const scored = columns.some((c) => c.run && c.run.sessions.some((s) => s.index === i && s.started && s.started.scored));
    return el("section", { class: "pair-session", "data-session": i },
      el("h3", { text: `Session ${i}${scored ? " (scored)" : ""}` }),
      grid(columns.map((c) => pairCell(c.run, c.run ? c.run.sessions.find((s) => s.index === i) : null, c.condition))));
  });
  const diffs = el("section", { id: "patch-diffs" }, el("h2", { text: "Scored patches: the difference between conditions" }),
    data.patch_diffs.length ? data.patch_diffs.map((d) => el("div", { class: "patch-diff", "data-a": d.a, "data-b": d.b },
      el("h3", { text: `${d.a} → ${d.b}` }),
      d.identical ? el("p", { class: "muted", text: "the two patches are identical" })
        : d.too_large ? el("p", { class: "muted", text: "too large to diff here" }) : diffBlock(d.diff)))
      : el("p", { class: "muted", text: "fewer than two conditions produced a scored patch" }));
  app.replaceChildren(el("h1", { id: "pair" }, `${data.task} · seed ${data.seed}`), toggles, heads, ...sessions, diffs);
}

// ---------------------------------------------------------------------------------------- polling

async function tick() {
  const mine = ++generation;
  const r = route();
  try {
    if (r.view === "home") {
      const data = await getJSON("/api/run_sets");
      if (mine === generation) renderHome(data);
    } else if (r.view === "runSet") {
      const data = await getJSON("/api/run_sets/" + encodeURIComponent(r.id));
      if (mine === generation) renderRunSet(data);
    } else if (r.view === "pair") {
      const data = await getJSON(`/api/run_sets/${encodeURIComponent(r.runSet)}/pair/${encodeURIComponent(r.task)}/` +
        `${encodeURIComponent(r.seed)}?conditions=${encodeURIComponent(r.conditions)}`);
      // re-rendered only when a column changed, so open <details> stay open
      const key = "pair:" + data.conditions.join(",") + ":" + data.columns.map((c) => c.run ? `${c.run.run_id}:${c.run.events}:${c.run.state}` : "-").join("|");
      if (mine === generation && key !== lastRunKey) { lastRunKey = key; renderPair(data); }
    } else {
      const data = await getJSON(r.view === "unit"
        ? `/api/run_sets/${encodeURIComponent(r.runSet)}/units/${encodeURIComponent(r.id)}`
        : "/api/runs/" + encodeURIComponent(r.id));
      const key = `${data.run_id}:${data.events}:${data.state}:${data.chain.ok}`;
      if (mine === generation && key !== lastRunKey) { lastRunKey = key; renderRun(data); }
    }
    statusLine.textContent = STATIC_INDEX ? `static export, made ${siteIndex ? siteIndex.exported_at : "?"}`
      : "updated " + new Date().toLocaleTimeString();
    statusLine.className = "status";
  } catch (err) {
    if (mine !== generation) return;
    statusLine.textContent = "error: " + err.message;
    statusLine.className = "status bad";
    if (!app.firstChild || r.view !== "home") app.replaceChildren(el("p", { class: "errorbox", text: err.message }));
  }
}

function schedule() {
  clearTimeout(timer);
  if (STATIC_INDEX) return;  // an export does not change: nothing to poll
  timer = setTimeout(async () => { await tick(); schedule(); }, POLL_MS);
}

window.addEventListener("hashchange", () => { lastRunKey = null; window.scrollTo(0, 0); tick().then(schedule); });
tick().then(schedule);
