/* hotrank widget. Usage, options and the CSP it needs: README.md, "Widget and embed".
   <script src="https://HOTRANK/widget.js" data-model="gravity" data-range="24h" data-limit="5" async></script>
   Renders the list where the tag is, in a shadow root; talks to nothing but
   the server it came from; no cookies. */
(function () {
  "use strict";
  var d = document, w = window, nav = navigator;
  var script = d.currentScript;
  if (!script || !script.src || !script.parentNode) return;
  function attr(name, dflt) {
    var v = script.getAttribute("data-" + name);
    return v === null || v === "" ? dflt : v;
  }
  var base = new URL(".", script.src).href.replace(/\/+$/, "");
  var model = attr("model", "gravity");
  var range = attr("range", "24h");
  var limit = Math.min(100, Math.max(1, parseInt(attr("limit", "5"), 10) || 5));
  var list = attr("list", model + ":" + range);
  var events = attr("events", "on") !== "off";

  var host = d.createElement("div");
  host.className = "hotrank-widget";
  script.parentNode.insertBefore(host, script.nextSibling);
  var root = host.attachShadow ? host.attachShadow({ mode: "open" }) : host;
  try {
    var sheet = new CSSStyleSheet();
    sheet.replaceSync(__CSS__);
    root.adoptedStyleSheets = [sheet];
  } catch (e) {
    // No constructed stylesheets: the same file, from the same server.
    var link = d.createElement("link");
    link.rel = "stylesheet";
    link.href = base + "/widget.css";
    root.appendChild(link);
  }

  function send(evs) {
    if (!events) return;
    var body = JSON.stringify({ events: evs });
    var url = base + "/api/events";
    // text/plain: no CORS preflight; the server accepts it.
    if (nav.sendBeacon && nav.sendBeacon(url, body)) return;
    if (w.fetch) {
      w.fetch(url, { method: "POST", body: body, keepalive: true, credentials: "omit", mode: "no-cors", headers: { "Content-Type": "text/plain" } })
        .catch(function () {});
    }
  }

  function el(name, text) {
    var e = d.createElement(name);
    if (text) e.textContent = text;
    return e;
  }

  function safeUrl(u) {
    try {
      var p = new URL(u);
      return p.protocol === "https:" || p.protocol === "http:" ? p.href : null;
    } catch (e) {
      return null;
    }
  }

  function render(items) {
    var box = el("section");
    box.className = "hr";
    var h = el("h2", attr("title", "Popular now"));
    h.id = "hr-title";
    box.setAttribute("aria-labelledby", "hr-title");
    box.appendChild(h);
    if (!items.length) {
      box.appendChild(el("p", attr("empty", "Nothing yet.")));
      root.appendChild(box);
      return;
    }
    var ol = el("ol");
    items.forEach(function (it, i) {
      var li = el("li");
      var title = it.title || "Article " + it.articleId;
      var href = it.url && safeUrl(it.url);
      var a;
      if (href) {
        a = el("a", title);
        a.href = href;
        var click = function () {
          send([{ type: "click", list: list, position: i + 1 }]);
        };
        a.addEventListener("click", click);
        a.addEventListener("auxclick", function (e) {
          if (e.button === 1) click();
        });
      } else {
        a = el("span", title);
      }
      li.appendChild(a);
      ol.appendChild(li);
    });
    box.appendChild(ol);
    root.appendChild(box);
    // One impression of each position, once, when the list is seen.
    var seen = function () {
      send(items.map(function (it, i) {
        return { type: "impression", list: list, position: i + 1 };
      }));
    };
    if (w.IntersectionObserver) {
      var io = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) {
          io.disconnect();
          seen();
        }
      });
      io.observe(host);
    } else {
      seen();
    }
  }

  var q = new URLSearchParams({ model: model, range: range, limit: String(limit) });
  ["category", "kind", "group"].forEach(function (k) {
    var v = attr(k, null);
    if (v !== null) q.set(k, v);
  });
  w.fetch(base + "/api/hot?" + q, { credentials: "omit", mode: "cors" })
    .then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    })
    .then(function (page) {
      render(page.items || []);
    })
    .catch(function (e) {
      if (w.console) console.warn("hotrank widget: " + e.message);
    });
})();
