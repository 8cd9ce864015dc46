// hotrank dashboard. Client-side routes:
//   #/?model=gravity&range=24h&category=&limit=10         the overview
//   #/hot?model=gravity&range=72h&category=&kind=&limit=20 the hot list
//   #/compare?a=gravity&b=weighted&range=24h&limit=10      two models
//   #/article/ID?hours=72                                  one article
//   #/quarantine?hours=24                                  what was held back
// Every value from the server goes into the page through textContent or
// setAttribute with numbers: never through innerHTML.
"use strict";

const REASONS = ["duplicate", "rate_limited", "bot", "replayed"];
const REFRESH_MS = 5000;
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
function when(ts) {
  return new Date(ts * 1000).toISOString().slice(0, 16).replace("T", " ");
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
const VIEWS = ["overview", "hot", "compare", "article", "quarantine"];
function show(name) {
  for (const v of VIEWS) $("view-" + v).hidden = v !== name;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.nav === name);
  }
}
function render() {
  clearInterval(timer);
  timer = null;
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
  } else if (path === "/hot") {
    show("hot");
    formFrom($("hot-form"), params);
    loadHot();
    timer = setInterval(() => {
      if ($("hot-form").auto.checked) loadHot();
    }, REFRESH_MS);
  } else {
    show("overview");
    formFrom($("o-form"), params);
    loadOverview();
    timer = setInterval(loadOverview, REFRESH_MS * 2);
  }
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
    const body = await getJson("/api/hot?" + p);
    const rows = [];
    for (const it of body.items) {
      const id = it.articleId;
      const why = whyButton(id, "why", loadHot);
      rows.push(el("tr", { "data-article-id": id },
        el("td", { class: "num" }, it.rank),
        titleCell(it),
        el("td", { class: "num" }, fmt(it.score, 4)),
        el("td", { class: "num" }, fmt(it.pv)),
        el("td", { class: "num" }, fmt(it.uv)),
        el("td", { class: "wide" }, it.author || ""),
        el("td", { class: "wide" }, it.publishedAt ? when(it.publishedAt) : ""),
        el("td", {}, why)));
      rows.push(...explainRow(body.model, it, 1, 7));
    }
    $("hot-items").replaceChildren(...rows);
    $("hot-items").dataset.generatedAt = String(body.generatedAt);
    $("hot-empty").hidden = body.items.length > 0;
    status(body.items.length + " items · " + body.model + " · " + body.range +
      " · generated " + when(body.generatedAt) + " UTC");
  } catch (e) {
    status("hot list: " + e.message, true);
  }
}

// ---- the overview -------------------------------------------------
const ARROWS = { up: "▲", down: "▼", same: "=", new: "new" };
function movementCell(it, since) {
  const m = it.movement;
  if (!m) return el("td", { class: "move" }, el("span", { class: "muted", title: "no earlier ranking seen yet" }, "–"));
  const places = it.previousRank ? Math.abs(it.previousRank - it.rank) : 0;
  const text = m === "new" ? "new" : m === "same" ? "=" : ARROWS[m] + " " + places;
  const said = m === "new" ? "new in the list since " + since
    : m === "same" ? "same place as at " + since
    : m + " " + places + (places === 1 ? " place" : " places") + " since " + since + " (was #" + it.previousRank + ")";
  const s = el("span", { class: "mv " + m, title: said }, text);
  s.setAttribute("aria-label", said);
  return el("td", { class: "move" }, s);
}
function sparkline(trend, label) {
  const w = 120, h = 28, n = trend.length;
  const root = svg("svg", { viewBox: `0 0 ${w} ${h}`, class: "spark", role: "img", "aria-label": label });
  const max = Math.max(1, ...trend);
  const x = (i) => (n <= 1 ? w / 2 : (i * (w - 2)) / (n - 1) + 1);
  const y = (v) => h - 2 - (v / max) * (h - 4);
  const pts = trend.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1));
  if (n) {
    root.append(svg("polygon", { class: "spark-fill", points: [x(0).toFixed(1) + "," + (h - 2), ...pts, x(n - 1).toFixed(1) + "," + (h - 2)].join(" ") }));
    root.append(svg("polyline", { class: "spark-line", points: pts.join(" ") }));
  }
  return root;
}
async function loadOverview() {
  const p = formParams($("o-form"));
  try {
    const o = await getJson("/api/overview?" + p);
    const t = o.totals;
    $("o-pv").textContent = fmt(t.pv);
    $("o-uv").textContent = fmt(t.uvSum);
    $("o-counted").textContent = fmt(t.counted);
    $("o-quarantined").textContent = fmt(t.quarantinedTotal);
    $("o-reasons").replaceChildren(...REASONS.filter((r) => t.quarantined[r]).map((r) =>
      el("span", {}, el("span", { class: "key " + r }), " " + r + " " + fmt(t.quarantined[r]))));
    $("o-chart").replaceChildren(overviewChart(o.series.points));
    $("o-cover").textContent = "· last " + o.series.hours + " h of the " + o.series.articles +
      " hottest articles" + (t.complete ? "" : " (totals: the " + fmt(t.articles) + " ranked)");
    const since = o.movementSince ? when(o.movementSince).slice(11) + " UTC" : null;
    $("o-since").textContent = since ? "· moves since " + since : "· moves show once an earlier list is seen";
    const rows = o.items.flatMap((it) => {
      const id = it.articleId;
      const peak = Math.max(0, ...it.trend);
      return [el("tr", { "data-article-id": id },
        el("td", { class: "num" }, it.rank),
        movementCell(it, since),
        titleCell(it),
        el("td", { class: "trend-col" }, sparkline(it.trend, "PV per hour over the last " + it.trend.length + " hours, peak " + peak)),
        el("td", { class: "num" }, fmt(it.pv)),
        el("td", { class: "num wide" }, fmt(it.uv)),
        el("td", { class: "num wide" }, whyButton(id, fmt(it.score, 3), loadOverview))),
        ...explainRow(o.model, it, 2, 5)];
    });
    $("o-items").replaceChildren(...rows);
    $("o-items").dataset.generatedAt = String(o.generatedAt);
    $("o-empty").hidden = o.items.length > 0;
    status("overview · " + o.model + " · " + o.range + " · " + when(o.generatedAt) + " UTC");
  } catch (e) {
    status("overview: " + e.message, true);
  }
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
      t.textContent = when(r.hour) + " UTC: " + fmt(r.pv) + " PV, " + fmt(r.quarantined) + " held back";
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
    status("compare · " + c.a.model + " vs " + c.b.model + " · " + c.range + " · " + when(c.generatedAt) + " UTC");
  } catch (e) {
    status("compare: " + e.message, true);
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
    meta.push("published " + when(a.publishedAt) + " UTC");
    $("a-meta").textContent = meta.join(" · ");
    kvTable($("a-signals"), [
      ["PV", fmt(a.pv)], ["UV", fmt(a.uv)], ["likes", fmt(a.likes)],
      ["comments", fmt(a.comments)], ["favorites", fmt(a.favorites)], ["shares", fmt(a.shares)],
      ["average dwell", fmt(a.avgDwellSeconds, 1) + " s"],
      ["dwell reported", fmt(a.dwellSeconds) + " s in " + fmt(a.dwellReports) + " reports"],
    ]);
    kvTable($("a-scores"), Object.entries(a.scores || {}).map(([k, v]) => [k, fmt(v, 4)]));
    kvTable($("a-quarantine"), REASONS.map((r) => [r, fmt(a.quarantined[r]), r]));
    $("a-chart").replaceChildren(viewsChart(h.hours));
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
  const max = Math.max(1, ...rows.map((r) => Math.max(r.pv, r.uv)));
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
      tip.textContent = when(r.hour) + " UTC: PV " + r.pv + ", UV " + r.uv;
      bar.append(tip);
      root.append(bar);
    }
    pts.push((x + step / 2).toFixed(1) + "," + y(r.uv).toFixed(1));
  });
  root.append(svg("polyline", { class: "uv", points: pts.join(" ") }));
  return root;
}

// ---- quarantine -----------------------------------------------------
async function loadQuarantine(hours) {
  try {
    const s = await getJson("/api/stats?hours=" + encodeURIComponent(hours));
    kvTable($("q-totals"), [
      ["articles", fmt(s.articles)], ["events counted", fmt(s.counted)],
      ["quarantined", fmt(s.quarantinedTotal)],
      ...REASONS.map((r) => [r, fmt(s.quarantined[r]), r]),
    ]);
    $("q-chart").replaceChildren(quarantineChart(s.quarantinedByHour, Number(hours)));
    $("q-legend").replaceChildren(...REASONS.map((r) =>
      el("span", {}, el("span", { class: "key " + r }), " " + r)));
    status("quarantine · last " + hours + " hours");
  } catch (e) {
    status("stats: " + e.message, true);
  }
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
      tip.textContent = when(r.hour) + " UTC: " + reason + " " + v;
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
bindForm($("o-form"), () => "#/");
bindForm($("c-form"), () => "#/compare");
bindForm($("hot-form"), () => "#/hot");
bindForm($("a-form"), () => route().path);
bindForm($("q-form"), () => "#/quarantine");
$("goto").addEventListener("submit", (e) => {
  e.preventDefault();
  const id = e.target.elements.article.value.trim();
  if (id) location.hash = "#/article/" + encodeURIComponent(id);
});
window.addEventListener("hashchange", render);
loadModels().then(render);
