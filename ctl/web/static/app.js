// The dplb console: polls the JSON API about once a second and renders the
// active tab. Every edit is a POST of the same request lbctl would send;
// the answer's error, lbd's own message, is shown as is.
"use strict";

// Anything the Content-Security-Policy blocks is kept here (the browser
// test checks that nothing is).
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", e => window.cspViolations.push(e.violatedDirective + " " + e.blockedURI));

const state = { csrf: "", role: "", tab: "services", list: null, draining: [], charts: {}, chartKey: {} };

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function showMsg(text, isErr) {
  const m = $("msg");
  m.textContent = text;
  m.className = isErr ? "msg err" : "msg";
  m.hidden = false;
}

async function getJSON(url) {
  const r = await fetch(url, { credentials: "same-origin" });
  if (r.status === 401) { location.href = "/login"; throw new Error("logged out"); }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function post(url, req) {
  const r = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": state.csrf },
    body: JSON.stringify(req),
  });
  if (r.status === 401) { location.href = "/login"; return false; }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) { showMsg(body.error || r.statusText, true); return false; }
  let text = "Done: " + describe(req);
  if (body.restart && body.restart.length) text += " (these settings need a restart: " + body.restart.join(", ") + ")";
  showMsg(text, false);
  refresh();
  return true;
}

function describe(req) {
  let s = req.op;
  if (req.service) s += " " + req.service.protocol + " " + req.service.vip + ":" + req.service.port;
  if (req.server) s += " -> " + req.server.address + ":" + req.server.port;
  if (req.server && req.server.weight !== undefined) s += " weight " + req.server.weight;
  return s;
}

// Number formatting as ipvsadm scales large numbers.
function num(n) {
  if (n === undefined || n === null) return "";
  if (n >= 1e12) return (n / 1e12).toFixed(1) + "T";
  if (n >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "K";
  return String(Math.round(n * 10) / 10);
}

function svcSpec(s) { return { protocol: s.protocol.toLowerCase(), vip: s.vip, port: s.port }; }
function svcName(s) { return s.protocol + " " + s.vip + ":" + s.port; }
function parseSvc(v) { const [p, ap] = v.split(" "); const i = ap.lastIndexOf(":"); return { protocol: p.toLowerCase(), vip: ap.slice(0, i), port: Number(ap.slice(i + 1)) }; }
function parseAddr(v, def) { const i = v.lastIndexOf(":"); return i < 0 ? { address: v.trim(), port: def } : { address: v.slice(0, i).trim(), port: Number(v.slice(i + 1)) }; }

// ---- services

// ago formats an age in seconds.
function ago(secs) {
  if (secs < 10) return secs.toFixed(1) + " s ago";
  if (secs < 120) return Math.round(secs) + " s ago";
  return Math.round(secs / 60) + " min ago";
}

// probeCell is a server's last health probe: its result and age.
function probeCell(rs) {
  const td = el("td", { class: "text", "data-col": "probe" });
  const p = rs.probe;
  if (p) {
    const title = `${p.passed_total} passed, ${p.failed_total} failed` + (p.reason ? "; last failure: " + p.reason : "");
    td.append(el("span", { class: "probe " + (p.passed ? "passed" : "failed"), title, "data-age": String(p.age_secs) },
      (p.passed ? "passed " : "failed ") + ago(p.age_secs)));
  } else if (rs.health === "up" || rs.health === "down") {
    td.append("none yet");
  }
  return td;
}

// dynamicCell is what slow start and dynamic feedback make of the weight.
function dynamicCell(rs) {
  const td = el("td", { class: "text", "data-col": "dynamic" });
  const ss = rs.slow_start;
  if (ss) {
    td.append(el("span", { class: "ramp", "data-ramp": "1", title: `ramping from 1 over ${Math.round(ss.duration_secs)} s since the server came back` },
      `slow start ${rs.weight} → ${ss.target_weight} (${Math.round(ss.elapsed_secs)}/${Math.round(ss.duration_secs)} s)`));
  }
  const fb = rs.feedback;
  if (fb) {
    let text = `feedback ${fb.weight} of ${rs.configured_weight || 0}`;
    if (fb.last_poll_age_secs !== undefined) text += ` (load ${fb.load.toFixed(0)}%)`;
    const title = fb.last_poll_age_secs === undefined ? "not polled yet" : "last poll " + ago(fb.last_poll_age_secs) + (fb.last_error ? "; failing: " + fb.last_error : "");
    td.append(el("span", { class: fb.last_error ? "probe failed" : "", "data-feedback": String(fb.weight), title }, text));
  }
  return td;
}

function renderServices(data) {
  const resp = data.list;
  const info = resp.info || { connections: 0, conn_table_size: 0 };
  const pct = info.conn_table_size ? (100 * info.connections / info.conn_table_size).toFixed(2) : "0";
  const n = (resp.services || []).length;
  // A port whose link is down leads the summary: nothing reaches its
  // segment (lbctl -L --links).
  const down = (info.links_down || []).length ? `link down: ${info.links_down.join(", ")}; ` : "";
  // VIPs no service has any more, kept for their connections (lbctl -L).
  const draining = (info.draining_vips || []).length ? `VIP draining: ${info.draining_vips.join(", ")}; ` : "";
  $("summary").textContent = `${down}${draining}${n} service${n === 1 ? "" : "s"}; connection table ${info.connections} of ${info.conn_table_size} (${pct}%); refreshed ${new Date().toLocaleTimeString()}`;
  $("summary").classList.toggle("failed", down !== "");
  const tb = $("services").tBodies[0];
  const rows = [];
  for (const s of resp.services || []) {
    let sched = s.scheduler;
    if (s.sched_flags && s.sched_flags.length) sched += " (" + s.sched_flags.join(",") + ")";
    if (s.persistence) sched += " persistent " + s.persistence;
    if (s.synproxy) sched += " synproxy";
    if (s.one_packet) sched += " ops";
    if (s.quic) sched += " quic";
    // The lists are counted here, their entries in the cell's title
    // (lbctl --get-blklst and --get-whtlst list them whole).
    const lists = [["blocklist", s.blocklist], ["allowlist", s.allowlist]].filter(([, l]) => l && l.length);
    for (const [name, l] of lists) sched += " " + name + " " + l.length;
    const listTitle = lists.map(([name, l]) => name + ": " + l.slice(0, 20).join(", ") + (l.length > 20 ? ", ..." : "")).join("\n");
    const act = el("td", { class: "admin" }, el("button", { onclick: () => confirmDo("Delete service " + svcName(s) + " and its servers?", { op: "delete-service", service: svcSpec(s) }) }, "Delete"));
    let active = 0, inact = 0;
    for (const rs of s.servers || []) { active += rs.active_conns; inact += rs.inactive_conns; }
    rows.push(el("tr", { class: "svc", "data-service": svcName(s) },
      el("td", {}, svcName(s)), el("td", { class: "text", title: listTitle }, sched), el("td", {}, ""), el("td", {}, active), el("td", {}, inact), el("td", {}, ""),
      el("td", {}, ""), el("td", {}, ""), el("td", {}, num(s.rates.cps)), el("td", {}, num(s.rates.in_pps)), el("td", {}, num(s.rates.out_pps)),
      el("td", {}, num(s.rates.in_bps)), el("td", {}, num(s.rates.out_bps)), el("td", {}, num(s.stats.conns)), act));
    const servers = (s.servers || []).slice().sort((a, b) => (a.address + a.port).localeCompare(b.address + b.port));
    for (const rs of servers) {
      const key = svcName(s) + " -> " + rs.address + ":" + rs.port;
      const health = el("td", { class: "text" });
      if (rs.health) health.append(el("span", { class: "badge " + rs.health, title: rs.health_reason || "" }, rs.health + (rs.health_reason ? " (" + rs.health_reason + ")" : "")));
      if (data.draining.includes(key)) health.append(" ", el("span", { class: "badge draining" }, "draining"));
      const spec = { address: rs.address, port: rs.port };
      const acts = el("td", { class: "admin" },
        el("button", { onclick: () => fillEdit(s, rs) }, "Edit"),
        el("button", { onclick: () => post("/api/edit", { op: "edit-server", service: svcSpec(s), server: { ...spec, weight: 0 } }) }, "Quiesce"),
        el("button", { onclick: () => post("/api/drain", { service: svcSpec(s), server: spec }) }, "Drain"),
        el("button", { onclick: () => confirmDo("Remove " + key + "?", { op: "delete-server", service: svcSpec(s), server: spec }) }, "Remove"));
      rows.push(el("tr", { class: "rs", "data-server": key },
        el("td", {}, "-> " + rs.address + ":" + rs.port), el("td", { class: "text" }, rs.forward),
        el("td", { "data-col": "weight" }, rs.weight), el("td", {}, rs.active_conns), el("td", {}, rs.inactive_conns), health, probeCell(rs), dynamicCell(rs),
        el("td", {}, num(rs.rates.cps)), el("td", {}, num(rs.rates.in_pps)), el("td", {}, num(rs.rates.out_pps)),
        el("td", {}, num(rs.rates.in_bps)), el("td", {}, num(rs.rates.out_bps)), el("td", {}, num(rs.stats.conns)), acts));
    }
  }
  // The SNAT rules after the services, as lbctl -L lists them: the
  // servers' own connections out through lbd (configured in the file).
  for (const r of resp.snat || []) {
    const name = `SNAT ${r.protocol} ${r.source}`;
    rows.push(el("tr", { class: "snat", "data-snat": name },
      el("td", {}, name), el("td", { class: "text" }, "from " + r.addresses.join(", ")), el("td", {}, ""),
      el("td", {}, r.active_conns), el("td", {}, r.inactive_conns), el("td", {}, ""), el("td", {}, ""), el("td", {}, ""),
      el("td", {}, ""), el("td", {}, ""), el("td", {}, ""), el("td", {}, ""), el("td", {}, ""), el("td", {}, num(r.stats.conns)), el("td", { class: "admin" }, "")));
  }
  tb.replaceChildren(...rows);
  fillServiceSelects(resp.services || []);
}

function confirmDo(question, req) { if (window.confirm(question)) post("/api/edit", req); }

function fillServiceSelects(services) {
  const names = services.map(svcName);
  for (const id of ["es-service", "as-service", "conn-service"]) {
    const sel = $(id);
    const have = Array.from(sel.options).map(o => o.value).filter(v => v !== "");
    if (have.join("|") === names.join("|")) continue;
    const keep = sel.value;
    const opts = id === "conn-service" ? [el("option", { value: "" }, "any")] : [];
    for (const n of names) opts.push(el("option", { value: n }, n));
    sel.replaceChildren(...opts);
    if (keep) sel.value = keep;
  }
}

function fillEdit(s, rs) {
  $("es-service").value = svcName(s);
  $("es-server").value = rs.address + ":" + rs.port;
  $("es-weight").value = rs.weight;
  $("es-upper").value = "";
  $("es-lower").value = "";
  $("es-weight").focus();
}

function intOrUndef(v) { return v === "" ? undefined : Number(v); }

function wireForms() {
  $("edit-server").addEventListener("submit", ev => {
    ev.preventDefault();
    const svc = parseSvc($("es-service").value);
    const server = { ...parseAddr($("es-server").value, svc.port), weight: intOrUndef($("es-weight").value),
      upper: intOrUndef($("es-upper").value), lower: intOrUndef($("es-lower").value) };
    post("/api/edit", { op: "edit-server", service: svc, server });
  });
  $("add-server").addEventListener("submit", ev => {
    ev.preventDefault();
    const svc = parseSvc($("as-service").value);
    post("/api/edit", { op: "add-server", service: svc, server: { address: $("as-address").value.trim(), port: intOrUndef($("as-port").value) || 0,
      forward: $("as-forward").value, weight: intOrUndef($("as-weight").value) } });
  });
  $("add-service").addEventListener("submit", ev => {
    ev.preventDefault();
    post("/api/edit", { op: "add-service", service: { protocol: $("sv-proto").value, vip: $("sv-vip").value.trim(), port: Number($("sv-port").value),
      scheduler: $("sv-sched").value.trim() || undefined, persistence: intOrUndef($("sv-persist").value) } });
  });
  $("reload").addEventListener("click", () => post("/api/edit", { op: "reload" }));
  $("conn-form").addEventListener("submit", ev => { ev.preventDefault(); refreshConns(); });
  $("conn-filter").addEventListener("input", filterConns);
  $("ch-entity").addEventListener("change", refresh);
  $("ch-window").addEventListener("change", refresh);
  $("lc-window").addEventListener("change", refresh);
}

// ---- charts

const trafficCharts = [
  { id: "cps", title: "New connections per second", series: [["conns_per_s", "conns/s"]] },
  { id: "pps", title: "Packets per second", series: [["in_pps", "in"], ["out_pps", "out"]] },
  { id: "bps", title: "Bytes per second", series: [["in_Bps", "in"], ["out_Bps", "out"]] },
  { id: "active", title: "Connections", series: [["active", "active"], ["inactive", "inactive"]] },
  { id: "total", title: "Connections since start", series: [["conns_total", "total"]] },
  { id: "fill", title: "Connection table fill (%)", series: [["table_fill_pct", "fill %"]] },
];
const colors = ["#2459c7", "#c4320a", "#18794e", "#7a2ec4", "#b54708", "#0e7490", "#be185d", "#4d7c0f"];

function drawChart(container, id, title, names, labels, ser) {
  const data = [ser.t];
  for (const n of names) data.push(ser.series[n] || []);
  const key = names.join(",");
  let c = state.charts[id];
  if (!c || state.chartKey[id] !== key || !c.root.isConnected) {
    if (c) c.destroy();
    const box = el("div", { class: "chart", "data-chart": id }, el("h3", {}, title), el("div", { class: "latest", id: "latest-" + id }));
    container.append(box);
    const width = Math.max(400, box.clientWidth - 16);
    c = new uPlot({
      width, height: 200,
      series: [{}].concat(labels.map((l, i) => ({ label: l, stroke: colors[i % colors.length], width: 1.5 }))),
      axes: [{}, { size: 60 }],
      scales: { x: { time: true } },
    }, data, box);
    state.charts[id] = c;
    state.chartKey[id] = key;
  } else {
    c.setData(data);
  }
  const latest = $("latest-" + id);
  latest.replaceChildren();
  names.forEach((n, i) => {
    const vals = ser.series[n] || [];
    const v = vals.length ? vals[vals.length - 1] : 0;
    latest.append(labels[i] + " ", el("b", { "data-metric": n, "data-value": String(v) }, num(v)), "  ");
  });
}

async function refreshCharts() {
  const entity = $("ch-entity").value || "total";
  const ser = await getJSON("/api/series?entity=" + encodeURIComponent(entity) + "&window=" + $("ch-window").value);
  const box = $("charts");
  if (box.dataset.entity !== entity) {
    for (const id of Object.keys(state.charts)) if (!id.startsWith("lc-")) { state.charts[id].destroy(); delete state.charts[id]; }
    box.replaceChildren();
    box.dataset.entity = entity;
  }
  for (const ch of trafficCharts) {
    if (!ch.series.every(([n]) => n in ser.series)) continue;
    drawChart(box, ch.id, ch.title, ch.series.map(s => s[0]), ch.series.map(s => s[1]), ser);
  }
}

function fillEntities(names) {
  const sel = $("ch-entity");
  const have = Array.from(sel.options).map(o => o.value);
  if (have.join("|") === names.join("|")) return;
  const keep = sel.value;
  sel.replaceChildren(...names.map(n => el("option", { value: n }, n === "total" ? "all services" : n.replace(/^svc /, "service ").replace(/^rs /, "server "))));
  if (keep && names.includes(keep)) sel.value = keep;
}

// ---- lcores

async function refreshLcores() {
  const data = state.list;
  if (data) {
    $("lcores").tBodies[0].replaceChildren(...(data.list.lcores || []).map(l => el("tr", {},
      el("td", {}, l.id), el("td", {}, num(l.rx_packets)), el("td", {}, num(l.tx_packets)), el("td", {}, num(l.drops)),
      el("td", {}, num(l.handed_off)), el("td", {}, num(l.handed_in)), el("td", {}, num(l.connections)),
      el("td", {}, l.busy_percent.toFixed(1)), el("td", {}, Math.round(l.cycles_per_packet)),
      el("td", { class: "reasons", "data-col": "drops-by-reason" }, Object.entries(l.drops_by_reason || {}).map(([r, n]) => r + " " + num(n)).join(", ")))));
  }
  let ser;
  try { ser = await getJSON("/api/series?entity=lcores&window=" + $("lc-window").value); } catch (e) { return; }
  const ids = Object.keys(ser.series).filter(n => n.startsWith("busy_pct_")).map(n => n.slice(9));
  const box = $("lcore-charts");
  for (const [m, title] of [["busy_pct_", "Busy share (%)"], ["cycles_per_pkt_", "Cycles per packet"], ["rx_pps_", "Received packets per second"], ["handoffs_per_s_", "Handoffs per second"], ["drops_per_s_", "Drops per second"]]) {
    drawChart(box, "lc-" + m, title, ids.map(i => m + i), ids.map(i => "lcore " + i), ser);
  }
  let drops;
  try { drops = await getJSON("/api/series?entity=drops&window=" + $("lc-window").value); } catch (e) { return; }
  const reasons = Object.keys(drops.series).sort();
  if (reasons.length) drawChart(box, "lc-drops-by-reason", "Drops per second by reason (all lcores)", reasons, reasons.map(r => r.replace(/^drops_per_s_/, "")), drops);
}

// ---- connections

async function refreshConns() {
  const q = new URLSearchParams({ client: $("conn-client").value.trim(), service: $("conn-service").value });
  let data;
  try { data = await getJSON("/api/connections?" + q); } catch (e) { showMsg(e.message, true); return; }
  const pad = n => String(n).padStart(2, "0");
  $("conns").tBodies[0].replaceChildren(...data.conns.map(c => el("tr", {},
    el("td", { class: "text" }, c.protocol), el("td", {}, pad(Math.floor(c.expires_secs / 60)) + ":" + pad(c.expires_secs % 60)),
    el("td", { class: "text" }, c.state), el("td", { class: "text" }, c.client), el("td", { class: "text" }, c.virtual), el("td", { class: "text" }, c.destination))));
  $("conn-note").textContent = data.conns.length + " connections" + (data.truncated ? " shown; more matched: narrow by client or service" : "");
  filterConns();
}

function filterConns() {
  const f = $("conn-filter").value.trim().toLowerCase();
  for (const tr of $("conns").tBodies[0].rows) tr.hidden = f !== "" && !tr.textContent.toLowerCase().includes(f);
}

// ---- events and audit

function when(t) { return new Date(t).toLocaleString(); }

async function refreshEvents() {
  const evs = await getJSON("/api/events");
  $("events").tBodies[0].replaceChildren(...evs.map(e => el("tr", {}, el("td", { class: "text" }, when(e.time)), el("td", { class: "text" }, e.kind), el("td", { class: "text" }, e.user || ""), el("td", { class: "text" }, e.text))));
}

async function refreshAudit() {
  const entries = await getJSON("/api/audit");
  $("audit").tBodies[0].replaceChildren(...entries.map(a => el("tr", {}, el("td", { class: "text" }, when(a.time)), el("td", { class: "text" }, a.user), el("td", { class: "text" }, a.via || ""), el("td", { class: "text" }, a.role || ""),
    el("td", { class: "text" }, a.op), el("td", { class: "text" }, a.target), el("td", { class: "text" }, a.result))));
}

// ---- polling

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    state.list = await getJSON("/api/list");
    state.draining = state.list.draining || [];
    fillEntities(state.list.entities || ["total"]);
    fillServiceSelects(state.list.list.services || []);
    switch (state.tab) {
      case "services": renderServices(state.list); break;
      case "charts": await refreshCharts(); break;
      case "lcores": await refreshLcores(); break;
      case "events": await refreshEvents(); break;
      case "audit": await refreshAudit(); break;
    }
  } catch (e) {
    if (e.message !== "logged out") showMsg("Refresh failed: " + e.message, true);
  } finally {
    busy = false;
  }
}

function selectTab(name) {
  state.tab = name;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== "tab-" + name;
  if (name === "conns") refreshConns();
  refresh();
}

async function start() {
  const ses = await getJSON("/api/session");
  state.csrf = ses.csrf;
  state.role = ses.role;
  $("logout-csrf").value = ses.csrf;
  $("who").textContent = ses.user + " (" + ses.role + ")";
  document.body.classList.add(ses.role);
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => selectTab(b.dataset.tab));
  wireForms();
  const tab = location.hash.slice(1);
  selectTab(["services", "charts", "lcores", "conns", "events", "audit"].includes(tab) ? tab : "services");
  setInterval(refresh, 1000);
}

document.addEventListener("DOMContentLoaded", start);
