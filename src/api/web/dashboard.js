// hotrank dashboard. Client-side routes:
//   #/?model=gravity&range=24h&category=&limit=10         the overview
//   #/hot?model=gravity&range=72h&category=&kind=&limit=20 the hot list
//   #/rising?window=1h&baseline=24h&min=5&category=&limit=20 what is rising
//   #/compare?a=gravity&b=weighted&range=24h&limit=10      two models
//   #/article/ID?hours=72                                  one article
//   #/quarantine?hours=24                                  what was held back
// Every value from the server goes into the page through textContent or
// setAttribute with numbers: never through innerHTML.
"use strict";

const REASONS = ["duplicate", "rate_limited", "bot", "replayed"];
const REFRESH_MS = 5000;
const OVERVIEW_REFRESH_MS = 60000;
const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}
function fmt(n, digits) {
  if (typeof n !== "number") return "–";
  return digits === undefined ? n.toLocaleString("en") : n.toFixed(digits);
}
// The site's time zone: a setting kept in this browser (localStorage);
// until chosen, the server's default (`dashboard.time_zone`, from
// /api/settings), else UTC. Every time on the page is shown in it.
const TZ_KEY = "hotrank.timeZone";
let siteZone = "UTC";
function zone() {
  const z = localStorage.getItem(TZ_KEY);
  return z && validZone(z) ? z : siteZone;
}
async function loadSettings() {
  try {
    const s = await getJson("/api/settings");
    if (s.timeZone && validZone(s.timeZone)) siteZone = s.timeZone;
  } catch (e) {
    // UTC, as before.
  }
}
function validZone(z) {
  try {
    new Intl.DateTimeFormat("en", { timeZone: z });
    return true;
  } catch (e) {
    return false;
  }
}
const formatters = new Map();
// "YYYY-MM-DD HH:MM" in the site's time zone.
function when(ts) {
  const z = zone();
  if (!formatters.has(z)) {
    formatters.set(z, new Intl.DateTimeFormat("en", { timeZone: z, year: "numeric", month: "2-digit",
      day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23" }));
  }
  const p = Object.fromEntries(formatters.get(z).formatToParts(new Date(ts * 1000)).map((x) => [x.type, x.value]));
  return p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute;
}
// How old something is, from seconds: "40 min", "5 h", "3 d".
function age(seconds) {
  if (seconds < 3600) return Math.max(0, Math.floor(seconds / 60)) + " min";
  if (seconds < 48 * 3600) return Math.floor(seconds / 3600) + " h";
  return Math.floor(seconds / 86400) + " d";
}
// Unique visitors are HyperLogLog estimates (16384 registers: a standard
// error of 1.04 / sqrt(16384), about 0.81%), so an estimate can come out a
// little above the page views it counts. The page never shows more
// visitors than views, and says what the estimate was.
const UV_ERROR = 1.04 / Math.sqrt(16384);
function visitors(uv, pv) {
  const shown = Math.min(uv, pv);
  let tip = "estimated " + fmt(uv) + " unique visitors (±" + (UV_ERROR * 100).toFixed(2) + "%, a HyperLogLog estimate)";
  if (uv > pv) tip += "; shown as " + fmt(pv) + ", the page views, as there cannot be more visitors than views";
  return el("span", { class: "uv-est", title: tip }, fmt(shown));
}
function status(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.className = isError ? "error" : "muted";
}
async function getJson(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => null);
  if (!r.ok) {
    const msg = body && body.error ? body.error.message : "HTTP " + r.status;
    throw new Error(msg);
  }
  return body;
}
function kvTable(table, rows) {
  table.replaceChildren(...rows.map(([k, v, cls]) => {
    const tr = el("tr", {}, el("td", {}, k), el("td", {}, v));
    if (cls) tr.firstChild.prepend(el("span", { class: "key " + cls }), " ");
    return tr;
  }));
}

// ---- routing --------------------------------------------------------
function route() {
  const h = location.hash.replace(/^#/, "") || "/";
  const [path, query] = h.split("?");
  return { path, params: new URLSearchParams(query || "") };
}
let timer = null;
const VIEWS = ["overview", "hot", "rising", "compare", "article", "quarantine"];
function show(name) {
  for (const v of VIEWS) $("view-" + v).hidden = v !== name;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.nav === name);
  }
}
function render() {
  clearInterval(timer);
  timer = null;
  unfollow();
  const { path, params } = route();
  const m = path.match(/^\/article\/([A-Za-z0-9_-]{1,64})$/);
  if (m) {
    show("article");
    formFrom($("a-form"), params);
    const load = () => loadArticle(m[1], $("a-form").hours.value);
    load();
    timer = setInterval(load, REFRESH_MS * 2);
  } else if (path === "/quarantine") {
    show("quarantine");
    formFrom($("q-form"), params);
    const load = () => loadQuarantine($("q-form").hours.value);
    load();
    timer = setInterval(load, REFRESH_MS * 2);
  } else if (path === "/compare") {
    show("compare");
    formFrom($("c-form"), params);
    loadCompare();
    timer = setInterval(loadCompare, REFRESH_MS * 2);
  } else if (path === "/rising") {
    show("rising");
    formFrom($("r-form"), params);
    follow(streamParams($("r-form"), RISING), renderRising, loadRising);
  } else if (path === "/hot") {
    show("hot");
    formFrom($("hot-form"), params);
    if ($("hot-form").auto.checked) followHot();
    else loadHot();
  } else {
    show("overview");
    formFrom($("o-form"), params);
    loadOverview();
    followOverview();
  }
}

// ---- the live stream ------------------------------------------------
// The hot list, the rising list and the overview follow their ranking
// over /api/stream (Server-Sent Events): the server says when the list
// changes, so the page does not poll. The stream's first event is the
// list as it is now (a fetch beside it could land after a newer event
// and show older data). Only while the stream is down (the browser
// reconnects by itself) does a poll stand in for it, at once if the
// stream never said anything.
let live = null;
let standInTimer = null;
function unfollow() {
  if (live) live.close();
  live = null;
  clearInterval(standInTimer);
  standInTimer = null;
  document.body.dataset.live = "off";
}
function follow(params, onRanking, poll) {
  unfollow();
  const es = new EventSource("/api/stream?" + params);
  live = es;
  let heard = false;
  const standIn = () => {
    if (live !== es || standInTimer) return;
    if (!heard) poll();
    standInTimer = setInterval(poll, REFRESH_MS);
  };
  es.addEventListener("open", () => {
    clearInterval(standInTimer);
    standInTimer = null;
    document.body.dataset.live = "on";
  });
  es.addEventListener("ranking", (e) => {
    if (live !== es) return;
    heard = true;
    let body;
    try { body = JSON.parse(e.data); } catch { return; }
    document.body.dataset.liveEvents = String(Number(document.body.dataset.liveEvents || 0) + 1);
    onRanking(body);
  });
  es.addEventListener("error", () => {
    document.body.dataset.live = "off";
    standIn();
  });
}
// The stream's parameters for a form: a ranking's, with `top` for `limit`.
function streamParams(form, extra) {
  const p = formParams(form);
  const top = p.get("limit") || "20";
  p.delete("limit");
  p.set("top", top);
  for (const [k, v] of Object.entries(extra)) p.set(k, v);
  return p;
}
function followHot() {
  const form = $("hot-form");
  if (!form.auto.checked) return;
  follow(streamParams(form, { explain: "true" }), renderHot, loadHot);
}
// The overview carries more than the list (totals, the chart, trend
// lines): a change of the list reloads it, and figures that move without
// one (totals of articles below the list) refresh every minute.
function followOverview() {
  // The stream's first event is the list the overview was just read with.
  let first = true;
  follow(streamParams($("o-form"), {}), () => {
    if (first) first = false;
    else loadOverview();
  }, loadOverview);
  timer = setInterval(loadOverview, OVERVIEW_REFRESH_MS);
}
function formFrom(form, params) {
  for (const [k, v] of params) {
    const f = form.elements[k];
    if (!f || f.type === "checkbox") continue;
    if (f.tagName === "SELECT" && ![...f.options].some((o) => o.value === v)) {
      f.append(el("option", { value: v }, v));
    }
    f.value = v;
  }
}
function formParams(form) {
  const p = new URLSearchParams();
  for (const f of form.elements) {
    if (!f.name || f.type === "checkbox" || !f.value) continue;
    p.set(f.name, f.value);
  }
  return p;
}
// Form changes go to the URL (bookmarkable), which re-renders.
function bindForm(form, prefix) {
  form.addEventListener("change", (e) => {
    if (e.target.type === "checkbox") return;
    location.hash = prefix() + "?" + formParams(form);
  });
  form.addEventListener("submit", (e) => e.preventDefault());
}

// ---- the hot list ---------------------------------------------------
// Explanations open on demand, remembered across refreshes by article.
const openExplain = new Set();
function whyButton(id, text, reload) {
  const why = el("button", { class: "why", type: "button", title: "why this score" }, text);
  why.setAttribute("aria-expanded", String(openExplain.has(id)));
  why.addEventListener("click", () => {
    if (openExplain.has(id)) openExplain.delete(id);
    else openExplain.add(id);
    reload();
  });
  return why;
}
// The row under an item that shows its score's terms, if it is open.
function explainRow(model, it, before, colSpan) {
  if (!openExplain.has(it.articleId) || !it.explain) return [];
  const terms = Object.entries(it.explain).map(([k, v]) =>
    el("span", {}, el("code", {}, k), " = ", fmt(v, 3), "  "));
  const cells = [];
  for (let i = 0; i < before; i++) cells.push(el("td", {}));
  return [el("tr", { class: "explain" }, ...cells, el("td", { colSpan },
    model + " score " + fmt(it.score, 4) + ": ", ...terms))];
}
// An article's title cell: its link, and why it ranks in words (every
// row, so a phone that hides the score column still says why).
function titleCell(it) {
  const id = it.articleId;
  const link = el("a", { href: "#/article/" + encodeURIComponent(id) }, it.title || id);
  const cell = el("td", { class: "title" }, link);
  if (it.why) cell.append(el("div", { class: "why-words" }, it.why));
  return cell;
}
async function loadHot() {
  const p = formParams($("hot-form"));
  p.set("explain", "true");
  try {
    renderHot(await getJson("/api/hot?" + p));
  } catch (e) {
    status("hot list: " + e.message, true);
  }
}
function renderHot(body) {
  const rows = [];
  for (const it of body.items) {
    const id = it.articleId;
    const why = whyButton(id, "why", loadHot);
    const title = titleCell(it);
    title.append(rowMeta(it, body.generatedAt));
    rows.push(el("tr", { "data-article-id": id },
      el("td", { class: "num" }, it.rank),
      title,
      el("td", { class: "num" }, fmt(it.score, 4)),
      el("td", { class: "num" }, fmt(it.pv)),
      el("td", { class: "num" }, visitors(it.uv, it.pv)),
      el("td", { class: "wide" }, it.author || ""),
      el("td", { class: "wide" }, it.publishedAt ? when(it.publishedAt) : ""),
      el("td", {}, why)));
    rows.push(...explainRow(body.model, it, 1, 7));
  }
  $("hot-items").replaceChildren(...rows);
  $("hot-items").dataset.generatedAt = String(body.generatedAt);
  $("hot-empty").hidden = body.items.length > 0;
  status(body.items.length + " items · " + body.model + " · " + body.range +
    " · generated " + when(body.generatedAt) + " " + zone());
}

// ---- what is rising ------------------------------------------------
const RISING = { model: "rising", explain: "true" };
async function loadRising() {
  const p = formParams($("r-form"));
  for (const [k, v] of Object.entries(RISING)) p.set(k, v);
  try {
    renderRising(await getJson("/api/hot?" + p));
  } catch (e) {
    status("rising: " + e.message, true);
  }
}
// "6.5×" with its 95% interval, or what stands for it without a baseline.
function ratioCell(x) {
  if (!x || typeof x.ratio !== "number") {
    return el("td", { class: "num", title: "no views in the baseline: nothing to compare with" }, "new");
  }
  const text = fmt(x.ratio, x.ratio < 10 ? 1 : 0) + "×";
  const range = typeof x.ratioLow === "number"
    ? "95% interval " + fmt(x.ratioLow, 1) + "–" + fmt(x.ratioHigh, 1) + "×" : "";
  const cell = el("td", { class: "num", title: range }, text);
  if (range) cell.append(el("div", { class: "muted" }, fmt(x.ratioLow, 1) + "–" + fmt(x.ratioHigh, 1)));
  return cell;
}
function renderRising(body) {
  const since = body.movementSince ? when(body.movementSince).slice(11) + " " + zone() : null;
  $("r-since").textContent = since ? "· moves since " + since : "";
  const rows = body.items.flatMap((it) => {
    const id = it.articleId;
    const x = it.explain || {};
    const title = titleCell(it);
    title.append(rowMeta(it, body.generatedAt));
    return [el("tr", { "data-article-id": id },
      el("td", { class: "num" }, it.rank),
      movementCell(it, since),
      title,
      el("td", { class: "num" }, fmt(x.observed)),
      el("td", { class: "num wide" }, fmt(x.expected, 1)),
      ratioCell(x),
      el("td", { class: "num score" }, whyButton(id, fmt(it.score, 2), loadRising))),
      ...explainRow(body.model, it, 2, 5)];
  });
  $("r-items").replaceChildren(...rows);
  $("r-items").dataset.generatedAt = String(body.generatedAt);
  $("r-empty").hidden = body.items.length > 0;
  status(body.items.length + " rising · last " + $("r-form").window.value + " against the " +
    $("r-form").baseline.value + " before · generated " + when(body.generatedAt) + " " + zone());
}

// ---- the overview -------------------------------------------------
const ARROWS = { up: "▲", down: "▼", same: "=", new: "new" };
function movementCell(it, since) {
  const m = it.movement;
  if (!m) return el("td", { class: "move" }, el("span", { class: "muted", title: "no earlier ranking to compare with" }, "–"));
  const places = it.previousRank ? Math.abs(it.previousRank - it.rank) : 0;
  const text = m === "new" ? "new" : m === "same" ? "=" : ARROWS[m] + " " + places;
  const said = m === "new" ? "new in the list since " + since
    : m === "same" ? "same place as at " + since
    : m + " " + places + (places === 1 ? " place" : " places") + " since " + since + " (was #" + it.previousRank + ")";
  const s = el("span", { class: "mv " + m, title: said }, text);
  s.setAttribute("aria-label", said);
  return el("td", { class: "move" }, s);
}
// A trend line. `max` is the table's largest hourly count, so every row
// is drawn to one scale: a small spike looks small next to a big one.
function sparkline(trend, max, label) {
  const w = 120, h = 28, n = trend.length;
  const root = svg("svg", { viewBox: `0 0 ${w} ${h}`, class: "spark", role: "img", "aria-label": label,
    preserveAspectRatio: "none", "data-max": max });
  const x = (i) => (n <= 1 ? w / 2 : (i * (w - 2)) / (n - 1) + 1);
  const y = (v) => h - 2 - (v / Math.max(1, max)) * (h - 4);
  const pts = trend.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1));
  if (n) {
    root.append(svg("polygon", { class: "spark-fill", points: [x(0).toFixed(1) + "," + (h - 2), ...pts, x(n - 1).toFixed(1) + "," + (h - 2)].join(" ") }));
    root.append(svg("polyline", { class: "spark-line", points: pts.join(" ") }));
  }
  return root;
}
// "+12% vs previous 24 h", from the server's change on a total.
function changeText(t, key) {
  const c = t.change ? t.change[key] : undefined;
  if (c === undefined) return { text: "", title: "" };
  const span = "previous " + t.previous.hours + " h";
  if (c === null) {
    return { text: "none in the " + span, title: "nothing in the " + span + " to compare with" };
  }
  const pct = Math.round(c * 100);
  const text = (pct > 0 ? "+" : pct < 0 ? "−" : "±") + Math.abs(pct) + "% vs " + span;
  return { text, title: "the " + span + " had " + fmt(t.previous[key]),
    cls: pct > 0 ? "up" : pct < 0 ? "down" : "same" };
}
function showChange(id, t, key) {
  const c = changeText(t, key);
  const e = $(id);
  e.textContent = c.text;
  e.title = c.title;
  e.className = "delta " + (c.cls || "");
}
// The empty state: a site with no events at all gets the tracker tag and
// a test request to paste, with this server's own address.
function showStart(empty) {
  $("o-start").hidden = !empty;
  $("o-data").hidden = empty;
  if (!empty) return;
  const origin = location.origin;
  $("o-snippet").textContent = '<script src="' + origin + '/tracker.js" data-article-id="ARTICLE-ID" defer></script>';
  $("o-curl").textContent = "curl -s " + origin + "/api/views -H 'Content-Type: application/json' \\\n" +
    "  -A 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0' \\\n" +
    "  -d '{\"articleId\": \"hello\", \"visitorId\": \"test-1\"}'";
}
// Whether the site has ever counted or held back anything.
async function siteIsEmpty() {
  const s = await getJson("/api/stats?hours=1");
  return s.counted === 0 && s.quarantinedTotal === 0;
}
// The realtime card: this clock hour so far (hotrank counts by the hour),
// and today (since midnight in the site's time zone) when the chart
// reaches back that far.
function showNow(o) {
  const pts = o.series.points;
  const last = pts[pts.length - 1];
  $("o-now").textContent = last ? fmt(last.pv) : "–";
  const today = when(o.generatedAt).slice(0, 10);
  const first = pts.length ? when(pts[0].hour) : "";
  const reaches = first !== "" && (first.slice(0, 10) !== today || first.slice(11) === "00:00");
  const todayPv = pts.filter((p) => when(p.hour).slice(0, 10) === today).reduce((a, p) => a + p.pv, 0);
  const note = [last ? "since " + when(last.hour).slice(11) + " " + zone() : ""];
  if (reaches) note.push("today " + fmt(todayPv));
  $("o-now-note").textContent = note.join(" · ");
  $("o-now-note").dataset.today = reaches ? String(todayPv) : "";
}
// An item's age and, on the overview, its views this hour.
function rowMeta(it, now) {
  const parts = [];
  if (it.publishedAt) parts.push(age(now - it.publishedAt) + " old");
  if (typeof it.lastHour === "number") parts.push(fmt(it.lastHour) + " views this hour");
  return el("div", { class: "row-meta" }, parts.join(" · "));
}
async function loadOverview() {
  const p = formParams($("o-form"));
  try {
    const o = await getJson("/api/overview?" + p);
    const t = o.totals;
    if (t.pv === 0 && t.quarantinedTotal === 0 && t.counted === 0 && await siteIsEmpty()) {
      showStart(true);
      status("no events yet · " + when(o.generatedAt) + " " + zone());
      return;
    }
    showStart(false);
    showNow(o);
    $("o-pv").textContent = fmt(t.pv);
    $("o-uv").replaceChildren(visitors(t.visitors, t.pv));
    // The tooltip's word in plain sight when it matters (no mouse needed).
    $("o-uv-note").textContent = t.visitors > t.pv
      ? "estimated " + fmt(t.visitors) + " (±" + (UV_ERROR * 100).toFixed(2) + "%), not above the views" : "";
    showRealtime(o.realtime);
    $("o-counted").textContent = fmt(t.counted);
    $("o-quarantined").textContent = fmt(t.quarantinedTotal);
    showChange("o-pv-change", t, "pv");
    showChange("o-quarantined-change", t, "quarantinedTotal");
    $("o-reasons").replaceChildren(...REASONS.filter((r) => t.quarantined[r]).map((r) =>
      el("span", {}, el("span", { class: "key " + r }), " " + r + " " + fmt(t.quarantined[r]))));
    $("o-chart").replaceChildren(overviewChart(o.series.points));
    $("o-cover").textContent = "· last " + o.series.hours + " h of the " + o.series.articles +
      " hottest articles" + (t.complete ? "" : " (totals: the " + fmt(t.articles) + " ranked)");
    const since = o.movementSince ? when(o.movementSince).slice(11) + " " + zone() : null;
    $("o-since").textContent = since ? "· moves since " + since : "· no earlier ranking to compare with yet";
    const scale = Math.max(1, ...o.items.flatMap((it) => it.trend));
    const rows = o.items.flatMap((it) => {
      const id = it.articleId;
      const peak = Math.max(0, ...it.trend);
      const title = titleCell(it);
      title.append(rowMeta(it, o.generatedAt));
      return [el("tr", { "data-article-id": id },
        el("td", { class: "num" }, it.rank),
        movementCell(it, since),
        title,
        el("td", { class: "trend-col" }, sparkline(it.trend, scale, "PV per hour over the last " + it.trend.length +
          " hours, peak " + peak + " (every row drawn to the table's peak, " + scale + ")")),
        el("td", { class: "num" }, fmt(it.pv)),
        el("td", { class: "num wide" }, visitors(it.uv, it.pv)),
        el("td", { class: "num score" }, whyButton(id, fmt(it.score, 3), loadOverview))),
        ...explainRow(o.model, it, 2, 5)];
    });
    $("o-items").replaceChildren(...rows);
    $("o-items").dataset.generatedAt = String(o.generatedAt);
    $("o-empty").hidden = o.items.length > 0;
    status("overview · " + o.model + " · " + o.range + " · " + when(o.generatedAt) + " " + zone());
  } catch (e) {
    status("overview: " + e.message, true);
  }
}
// The realtime panel: page views a minute over the last hour, and the
// last five minutes' sum. (No "current visitors": the stores keep no
// sketch by minute, so there is no honest count of them.)
function showRealtime(rt) {
  $("o-rt-last").textContent = fmt(rt.lastMinutesViews);
  $("o-rt-label").textContent = "views in the last " + rt.lastMinutes + " minutes";
  $("o-rt-chart").replaceChildren(realtimeChart(rt.minutes));
  $("o-rt-chart").dataset.minutes = rt.minutes.join(",");
}
function realtimeChart(minutes) {
  const w = W, h = 70, n = minutes.length;
  const root = svg("svg", { viewBox: `0 0 ${w} ${h}`, role: "img",
    "aria-label": "page views per minute over the last " + n + " minutes" });
  const max = Math.max(1, ...minutes);
  const step = w / Math.max(1, n);
  minutes.forEach((v, i) => {
    const ago = n - 1 - i;
    const height = v ? Math.max(1, (v / max) * (h - 12)) : 0;
    const bar = svg("rect", { class: "pv", x: i * step + step * 0.1, width: Math.max(1, step * 0.8), y: h - 2 - height, height });
    const tip = svg("title");
    tip.textContent = (ago === 0 ? "this minute" : ago + " min ago") + ": " + fmt(v) + " views";
    bar.append(tip);
    root.append(bar);
  });
  const t = svg("text", { x: w - 2, y: 10, "text-anchor": "end" });
  t.textContent = "peak " + fmt(max) + "/min";
  root.append(t);
  return root;
}
function overviewChart(points) {
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": "page views and events held back per hour, last " + points.length + " hours" });
  const max = Math.max(1, ...points.map((r) => r.pv + r.quarantined));
  axes(root, max, points);
  const step = (W - PAD_L) / Math.max(1, points.length);
  const y = (v) => PAD_T + (H - PAD_T - PAD_B) * (1 - v / max);
  points.forEach((r, i) => {
    const x = PAD_L + i * step + step * 0.1, width = Math.max(1, step * 0.8);
    const tip = () => {
      const t = svg("title");
      t.textContent = when(r.hour) + " " + zone() + ": " + fmt(r.pv) + " PV, " + fmt(r.quarantined) + " held back";
      return t;
    };
    if (r.pv > 0) {
      const bar = svg("rect", { class: "pv", x, width, y: y(r.pv), height: y(0) - y(r.pv) });
      bar.append(tip());
      root.append(bar);
    }
    if (r.quarantined > 0) {
      const q = svg("rect", { class: "quarantined", x, width, y: y(r.pv + r.quarantined), height: y(r.pv) - y(r.pv + r.quarantined) });
      q.append(tip());
      root.append(q);
    }
  });
  return root;
}

// ---- compare --------------------------------------------------------
async function loadCompare() {
  const p = formParams($("c-form"));
  try {
    const c = await getJson("/api/compare?" + p);
    $("c-overlap").textContent = fmt(c.common) + " / " + c.limit + " (" + Math.round(c.overlap * 100) + "%)";
    $("c-tau").textContent = c.kendallTau === null ? "–" : fmt(c.kendallTau, 2);
    $("c-jaccard").textContent = fmt(c.jaccard, 2);
    for (const [side, other] of [["a", "B"], ["b", "A"]]) {
      const s = c[side];
      $("c-" + side + "-title").textContent = side.toUpperCase() + ": " + s.model;
      $("c-" + side).replaceChildren(...s.items.map((it) => {
        const moved = it.rankInOther === null ? "only here" : "#" + it.rankInOther;
        const cell = el("td", { class: "num" + (it.rankInOther === null ? " only" : "") }, moved);
        cell.title = it.rankInOther === null ? "not in " + other + "'s top " + c.limit : "#" + it.rankInOther + " in " + other;
        return el("tr", { "data-article-id": it.articleId, class: it.rankInOther === null ? "only" : "" },
          el("td", { class: "num" }, it.rank),
          el("td", { class: "title" }, el("a", { href: "#/article/" + encodeURIComponent(it.articleId) }, it.title || it.articleId)),
          cell);
      }));
    }
    status("compare · " + c.a.model + " vs " + c.b.model + " · " + c.range + " · " + when(c.generatedAt) + " " + zone());
    await showClickThrough(c.a.model, c.b.model);
  } catch (e) {
    status("compare: " + e.message, true);
  }
}
// What readers of the widget's lists clicked, per model (GET /api/ctr):
// raw, and corrected for position bias.
async function showClickThrough(a, b) {
  const ctr = await getJson("/api/ctr");
  const pct = (x) => (typeof x === "number" ? (x * 100).toFixed(1) + "%" : "–");
  for (const [side, model] of [["a", a], ["b", b]]) {
    const row = (ctr.models || []).find((m) => m.model === model);
    $("c-ctr-" + side).textContent = row && row.impressions ? pct(row.ipwCtr) : "–";
    $("c-ctr-" + side + "-label").textContent = side.toUpperCase() + " (" + model + "): click-through, corrected for position";
    $("c-ctr-" + side + "-raw").textContent = row && row.impressions
      ? "raw " + pct(row.ctr) + " · " + fmt(row.clicks) + (row.clicks === 1 ? " click" : " clicks") +
        " of " + fmt(row.impressions) + " shown"
      : "no widget impressions yet";
  }
}

// ---- one article ----------------------------------------------------
async function loadArticle(id, hours) {
  try {
    const [a, h] = await Promise.all([
      getJson("/api/articles/" + encodeURIComponent(id)),
      getJson("/api/articles/" + encodeURIComponent(id) + "/hourly?hours=" + encodeURIComponent(hours)),
    ]);
    $("a-title").textContent = a.title || "article " + a.articleId;
    const meta = ["id " + a.articleId];
    if (a.author) meta.push("by " + a.author);
    if (a.category) meta.push(a.category);
    if (a.kind) meta.push(a.kind);
    meta.push("published " + when(a.publishedAt) + " " + zone());
    $("a-meta").textContent = meta.join(" · ");
    kvTable($("a-signals"), [
      ["PV", fmt(a.pv)], ["UV", visitors(a.uv, a.pv)], ["likes", fmt(a.likes)],
      ["comments", fmt(a.comments)], ["favorites", fmt(a.favorites)], ["shares", fmt(a.shares)],
      ["average dwell", fmt(a.avgDwellSeconds, 1) + " s"],
      ["dwell reported", fmt(a.dwellSeconds) + " s in " + fmt(a.dwellReports) + " reports"],
    ]);
    kvTable($("a-scores"), Object.entries(a.scores || {}).map(([k, v]) => [k, fmt(v, 4)]));
    kvTable($("a-quarantine"), REASONS.map((r) => [r, fmt(a.quarantined[r]), r]));
    // Only the hours since publication: a two-hour-old article gets two
    // bars, not 70 empty hours before them.
    const born = Math.floor(a.publishedAt / 3600) * 3600;
    const lived = h.hours.filter((r) => r.hour >= born);
    const rows = lived.length ? lived : h.hours.slice(-1);
    $("a-chart").replaceChildren(viewsChart(rows));
    $("a-chart-note").textContent = rows.length < h.hours.length
      ? "· since publication, " + rows.length + (rows.length === 1 ? " hour" : " hours") : "· last " + rows.length + " hours";
    status("article " + a.articleId + " · last " + hours + " hours");
  } catch (e) {
    $("a-title").textContent = "article " + id;
    status("article: " + e.message, true);
  }
}

const W = 720, H = 220, PAD_L = 40, PAD_B = 22, PAD_T = 10;
function axes(g, max, rows) {
  for (const frac of [0, 0.5, 1]) {
    const y = PAD_T + (H - PAD_T - PAD_B) * (1 - frac);
    g.append(svg("line", { x1: PAD_L, x2: W, y1: y, y2: y, stroke: "#e5e7eb" }));
    const t = svg("text", { x: PAD_L - 4, y: y + 3, "text-anchor": "end" });
    t.textContent = fmt(Math.round(max * frac));
    g.append(t);
  }
  if (rows.length) {
    for (const [i, anchor] of [[0, "start"], [rows.length - 1, "end"]]) {
      const t = svg("text", { x: i === 0 ? PAD_L : W, y: H - 6, "text-anchor": anchor });
      t.textContent = when(rows[i].hour).slice(5);
      g.append(t);
    }
  }
}
function viewsChart(rows) {
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "PV and UV per hour" });
  const max = Math.max(1, ...rows.map((r) => r.pv));
  axes(root, max, rows);
  const n = Math.max(1, rows.length);
  const step = (W - PAD_L) / n;
  const y = (v) => PAD_T + (H - PAD_T - PAD_B) * (1 - v / max);
  const pts = [];
  rows.forEach((r, i) => {
    const x = PAD_L + i * step;
    if (r.pv > 0) {
      const bar = svg("rect", { class: "pv", x: x + step * 0.1, width: Math.max(1, step * 0.8), y: y(r.pv), height: y(0) - y(r.pv) });
      const tip = svg("title");
      tip.textContent = when(r.hour) + " " + zone() + ": PV " + r.pv + ", UV " + Math.min(r.uv, r.pv);
      bar.append(tip);
      root.append(bar);
    }
    pts.push((x + step / 2).toFixed(1) + "," + y(Math.min(r.uv, r.pv)).toFixed(1));
  });
  root.append(svg("polyline", { class: "uv", points: pts.join(" ") }));
  return root;
}

// ---- quarantine -----------------------------------------------------
async function loadQuarantine(hours) {
  try {
    const s = await getJson("/api/stats?hours=" + encodeURIComponent(hours));
    // The range's figures are the hourly rows added up; the lifetime
    // totals sit apart, labelled as such.
    const inRange = Object.fromEntries(REASONS.map((r) => [r, 0]));
    for (const row of s.quarantinedByHour) for (const r of REASONS) inRange[r] += row.quarantined[r] || 0;
    const rangeTotal = REASONS.reduce((a, r) => a + inRange[r], 0);
    $("q-totals-title").textContent = "Last " + hours + " hours";
    kvTable($("q-totals"), [
      ["held back", fmt(rangeTotal)],
      ...REASONS.map((r) => [r, fmt(inRange[r]), r]),
    ]);
    kvTable($("q-lifetime"), [
      ["articles", fmt(s.articles)], ["events counted", fmt(s.counted)],
      ["held back", fmt(s.quarantinedTotal)],
      ...REASONS.map((r) => [r, fmt(s.quarantined[r]), r]),
    ]);
    $("q-chart").replaceChildren(quarantineChart(s.quarantinedByHour, Number(hours)));
    quarantineTables(s);
    $("q-legend").replaceChildren(...REASONS.map((r) =>
      el("span", {}, el("span", { class: "key " + r }), " " + r)));
    status("quarantine · last " + hours + " hours");
  } catch (e) {
    status("stats: " + e.message, true);
  }
}
// Which articles and which crawlers the range's held-back events came from.
function quarantineTables(s) {
  $("q-articles").replaceChildren(...s.byArticle.map((a) => el("tr", { "data-article-id": a.id },
    el("td", { class: "title" }, el("a", { href: "#/article/" + encodeURIComponent(a.id) }, a.id)),
    el("td", { class: "num" }, fmt(a.total)),
    ...REASONS.map((r) => el("td", { class: "num wide" }, fmt(a.quarantined[r] || 0))))));
  $("q-articles-empty").hidden = s.byArticle.length > 0;
  const bots = s.byCrawler.reduce((a, c) => a + c.events, 0);
  $("q-crawlers").replaceChildren(...s.byCrawler.map((c) => el("tr", { "data-family": c.family },
    el("td", {}, c.family),
    el("td", { class: "num" }, fmt(c.events)),
    el("td", { class: "num" }, (100 * c.events / Math.max(1, bots)).toFixed(1) + "%"))));
  $("q-crawlers-empty").hidden = s.byCrawler.length > 0;
}
function quarantineChart(byHour, hours) {
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "quarantined events per hour by reason" });
  // Fill the hours with no row so the time axis is even.
  const last = byHour.length ? byHour[byHour.length - 1].hour : Math.floor(Date.now() / 3600000) * 3600;
  const map = new Map(byHour.map((r) => [r.hour, r.quarantined]));
  const rows = [];
  for (let i = hours - 1; i >= 0; i--) {
    const hour = last - i * 3600;
    rows.push({ hour, q: map.get(hour) || {} });
  }
  const total = (q) => REASONS.reduce((s, r) => s + (q[r] || 0), 0);
  const max = Math.max(1, ...rows.map((r) => total(r.q)));
  axes(root, max, rows);
  const step = (W - PAD_L) / rows.length;
  const scale = (H - PAD_T - PAD_B) / max;
  rows.forEach((r, i) => {
    let base = H - PAD_B;
    for (const reason of REASONS) {
      const v = r.q[reason] || 0;
      if (!v) continue;
      const h = v * scale;
      base -= h;
      const rect = svg("rect", { class: reason, x: PAD_L + i * step + step * 0.1, width: Math.max(1, step * 0.8), y: base, height: h });
      const tip = svg("title");
      tip.textContent = when(r.hour) + " " + zone() + ": " + reason + " " + v;
      rect.append(tip);
      root.append(rect);
    }
  });
  return root;
}

// ---- start ----------------------------------------------------------
async function loadModels() {
  // The served OpenAPI document lists the models this server has.
  try {
    const doc = await getJson("/openapi.json");
    const models = doc.components.schemas.Model.enum || [];
    for (const sel of document.querySelectorAll("select[data-models]")) {
      const current = sel.value;
      sel.replaceChildren(...models.map((m) => el("option", { value: m }, m)));
      if (models.includes(current)) sel.value = current;
    }
  } catch (e) {
    // Keep the built-in options.
  }
}

// One list of ranges for every form; each keeps the default its page gave.
const RANGES = ["1h", "6h", "24h", "72h", "7d", "30d", "90d", "all"];
for (const sel of document.querySelectorAll("select[data-ranges]")) {
  const current = sel.value;
  sel.replaceChildren(...RANGES.map((r) => el("option", { value: r }, r)));
  sel.value = current;
}
// The time zone setting: UTC, this browser's zone, or any other; kept in
// localStorage, and every view re-renders in it.
function timeZones() {
  const sel = $("tz");
  const here = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const all = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  const names = [...new Set(["UTC", here, zone(), ...all])].filter((z) => z && validZone(z));
  const label = (z) => z + (z === siteZone && z !== "UTC" ? " (site default)" : z === here && z !== "UTC" ? " (this browser)" : "");
  sel.replaceChildren(...names.map((z) => el("option", { value: z }, label(z))));
  sel.value = zone();
  $("tz-form").addEventListener("submit", (e) => e.preventDefault());
  sel.addEventListener("change", () => {
    localStorage.setItem(TZ_KEY, sel.value);
    render();
  });
}
bindForm($("o-form"), () => "#/");
bindForm($("c-form"), () => "#/compare");
bindForm($("hot-form"), () => "#/hot");
bindForm($("r-form"), () => "#/rising");
$("hot-form").auto.addEventListener("change", () => {
  if ($("hot-form").auto.checked) followHot();
  else unfollow();
});
bindForm($("a-form"), () => route().path);
bindForm($("q-form"), () => "#/quarantine");
$("goto").addEventListener("submit", (e) => {
  e.preventDefault();
  const id = e.target.elements.article.value.trim();
  if (id) location.hash = "#/article/" + encodeURIComponent(id);
});
window.addEventListener("hashchange", render);
Promise.all([loadModels(), loadSettings()]).then(() => {
  timeZones();
  render();
});
