// hotrank review page (/review): the articles held for review, with the
// evidence of when they were held, and allow/deny buttons. The admin
// token is asked once and kept for this tab only (sessionStorage).
// Every value from the server goes into the page through textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "hotrank.adminToken";

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

function fmt(n) {
  return typeof n === "number" ? n.toLocaleString("en") : "–";
}

function when(ts) {
  if (typeof ts !== "number") return "–";
  return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

function queryText(e) {
  if (!e || !e.query) return "–";
  const q = e.query;
  const parts = [e.list, q.model, q.range];
  for (const f of ["category", "kind", "group"]) if (q[f]) parts.push(f + "=" + q[f]);
  return parts.join(" ");
}

const RULES = { narrow_network: "narrow network", held_back: "held back by the gate" };

function pct(x) {
  return typeof x === "number" ? (x * 100).toFixed(x < 0.1 ? 1 : 0) + "%" : "–";
}

// The network evidence of a hold under [review] mode = "suspicious": which
// rule fired, distinct /24 or /64 blocks against unique visitors, the share
// of events the gate held back, over which hours.
function network(e) {
  const n = e && e.network;
  if (!n) return el("td", { class: "muted" }, "–");
  const hours = when(n.from).slice(11, 16) + "–" + when(n.until).slice(11);
  return el("td", { class: "network" },
    el("strong", {}, RULES[n.rule] || n.rule),
    el("div", {}, fmt(n.blocks) + " block" + (n.blocks === 1 ? "" : "s") + " / " + fmt(n.uv) +
      " visitors (" + pct(n.blockShare) + ")"),
    el("div", {}, "held back " + fmt(n.heldBack) + " of " + fmt(n.counted + n.heldBack) +
      " events (" + pct(n.heldShare) + ")"),
    el("div", { class: "muted" }, hours));
}

async function call(method, path, body) {
  const headers = { Accept: "application/json", Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) };
  if (body) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined });
  const v = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((v.error && v.error.message) || r.status + " " + r.statusText);
  return v;
}

function row(it) {
  const e = it.evidence || {};
  const c = e.counters || {};
  const title = e.title || it.articleId;
  const buttons = el("td", { class: "actions" });
  if (it.status !== "allowed") {
    buttons.append(el("button", { type: "button", class: "allow", "data-decision": "allow",
      ariaLabel: "Allow " + title }, "Allow"));
  }
  if (it.status !== "denied") {
    buttons.append(el("button", { type: "button", class: "deny", "data-decision": "deny",
      ariaLabel: "Deny " + title }, "Deny"));
  }
  return el("tr", { "data-article-id": it.articleId },
    el("td", {}, el("a", { href: "./#/article/" + encodeURIComponent(it.articleId) }, title),
      el("div", { class: "muted" }, it.articleId)),
    el("td", { class: "status-" + it.status }, it.status),
    el("td", {}, when(it.heldAt)),
    el("td", {}, queryText(e)),
    el("td", { class: "num" }, fmt(e.rank)),
    el("td", { class: "num" }, fmt(c.pv)),
    el("td", { class: "num" }, fmt(c.uv)),
    network(e),
    buttons);
}

async function load() {
  const status = $("r-filter").status.value;
  const msg = $("r-msg");
  let v;
  try {
    v = await call("GET", "/api/review?status=" + encodeURIComponent(status));
  } catch (err) {
    msg.textContent = "Could not load the review queue: " + err.message;
    $("r-table").hidden = true;
    return;
  }
  $("r-token").hidden = true;
  $("r-filter").hidden = false;
  const items = v.items || [];
  const body = $("r-items");
  body.replaceChildren(...items.map(row));
  $("r-table").hidden = items.length === 0;
  msg.textContent = (v.mode === "off" ? "Review is off ([review] mode = \"off\"). " : "") +
    (items.length === 0 ? "Nothing " + status + "." : items.length + " " + status + ".");
}

async function decide(button) {
  const tr = button.closest("tr");
  const id = tr.getAttribute("data-article-id");
  const decision = button.getAttribute("data-decision");
  button.disabled = true;
  try {
    await call("POST", "/api/review/" + encodeURIComponent(id), { decision });
    await load();
    const msg = $("r-msg");
    msg.textContent = id + ": " + (decision === "allow" ? "allowed" : "denied") + ". " + msg.textContent;
  } catch (err) {
    button.disabled = false;
    $("r-msg").textContent = id + ": " + err.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("r-token").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, ev.target.token.value);
    load();
  });
  $("r-filter").status.addEventListener("change", load);
  $("r-items").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-decision]");
    if (b) decide(b);
  });
  if (sessionStorage.getItem(TOKEN_KEY)) load();
});
