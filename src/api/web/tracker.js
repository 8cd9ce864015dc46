/* hotrank page tracker. Usage and options: README.md, "The page tracker".
   <script src="https://HOTRANK/tracker.js" data-article-id="12345" defer></script>
   No cookies; no visitor id unless the site asks for one; nothing at all
   with data-respect-dnt when the browser says Do Not Track / GPC. */
(function () {
  "use strict";
  var w = window, d = document, nav = navigator;
  var queued = w.hotrank;
  if (queued && queued.version) return; // loaded twice
  var script = d.currentScript;
  function attr(name) {
    return script ? script.getAttribute("data-" + name) : null;
  }
  function flag(name) {
    var v = attr(name);
    return v !== null && v !== "false" && v !== "0";
  }

  // Where events go: data-endpoint, else the server this file came from.
  var base = attr("endpoint") || (script && script.src ? new URL(".", script.src).href : "/");
  base = base.replace(/\/+$/, "");
  var intervalMs = Math.max(1, Number(attr("dwell-interval")) || 10) * 1000;
  var optedOut =
    flag("respect-dnt") &&
    (nav.doNotTrack === "1" || w.doNotTrack === "1" || nav.globalPrivacyControl === true);

  function randomId() {
    var b = new Uint8Array(16);
    (w.crypto || w.msCrypto).getRandomValues(b);
    var s = "";
    for (var i = 0; i < b.length; i++) s += (b[i] < 16 ? "0" : "") + b[i].toString(16);
    return s;
  }

  // A visitor id only when the site asks for one; otherwise the server
  // derives a daily-salted hash of IP and user agent.
  var visitorId = attr("visitor-id") || null;
  if (!visitorId && flag("persist-visitor")) {
    try {
      visitorId = w.localStorage.getItem("hotrank.visitor");
      if (!visitorId) {
        visitorId = "v-" + randomId();
        w.localStorage.setItem("hotrank.visitor", visitorId);
      }
    } catch (e) {
      visitorId = null;
    }
  }

  function post(path, payload, beacon) {
    if (optedOut) return;
    var body = JSON.stringify(payload);
    var url = base + path;
    // A beacon survives the page going away; sent as text/plain, which
    // needs no CORS preflight and which the server accepts.
    if (beacon && nav.sendBeacon && nav.sendBeacon(url, body)) return;
    var attempt = function (retry) {
      w.fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: body,
        keepalive: true,
        credentials: "omit",
        mode: "cors"
      }).catch(function () {
        // Network error: retry once; the eventId makes a retry harmless.
        if (retry) setTimeout(function () { attempt(false); }, 2000);
      });
    };
    attempt(true);
  }

  function event(type, article, extra, beacon) {
    var ev = { type: type, articleId: article, eventId: randomId() };
    if (visitorId) ev.visitorId = visitorId;
    for (var k in extra) if (Object.prototype.hasOwnProperty.call(extra, k)) ev[k] = extra[k];
    if (type === "view") {
      delete ev.type;
      post("/api/views", ev, beacon);
    } else {
      post("/api/events", { events: [ev] }, beacon);
    }
  }

  // ---- dwell: visible time only -------------------------------------
  var current = null; // the article being read (and timed)
  var visibleSince = null; // performance.now() when it became visible
  var pendingMs = 0; // visible time not yet reported

  function now() {
    return w.performance && performance.now ? performance.now() : Date.now();
  }
  function accumulate() {
    if (visibleSince !== null) {
      var t = now();
      pendingMs += t - visibleSince;
      visibleSince = t;
    }
  }
  // Reports whole seconds and keeps the remainder; `last` rounds the
  // remainder too (the page or the article is going away).
  function flushDwell(last, beacon) {
    accumulate();
    var secs = last ? Math.round(pendingMs / 1000) : Math.floor(pendingMs / 1000);
    if (current && secs >= 1) {
      event("dwell", current, { seconds: secs }, beacon);
    }
    pendingMs = last ? 0 : Math.max(0, pendingMs - secs * 1000);
  }
  function onVisibility() {
    if (d.visibilityState === "visible") {
      if (visibleSince === null) visibleSince = now();
    } else {
      // Hidden: stop the clock and report what was seen, while we can.
      flushDwell(false, true);
      visibleSince = null;
    }
  }
  // The throttle: at most one periodic report per interval.
  setInterval(function () {
    if (visibleSince !== null) flushDwell(false, false);
  }, intervalMs);

  // ---- views and navigation -----------------------------------------
  var explicitId = null; // set by hotrank.setArticle
  var scheduled = false;
  var navigated = false;

  function articleNow() {
    return explicitId || attr("article-id") || null;
  }
  // Views are committed a tick later, so that a site calling setArticle
  // just before or just after pushState counts exactly one view.
  function schedule(isNavigation) {
    navigated = navigated || isNavigation;
    if (scheduled) return;
    scheduled = true;
    setTimeout(commit, 0);
  }
  function commit() {
    scheduled = false;
    var id = articleNow();
    var isNew = id !== current;
    if (!navigated && !isNew) return;
    navigated = false;
    if (isNew) {
      flushDwell(true, false); // the old article's remaining time
      current = id;
    }
    if (id) event("view", id, {}, false);
  }

  function pathOf(href) {
    var u = new URL(href, location.href);
    return u.pathname + u.search;
  }
  var lastPath = pathOf(location.href);
  function onNavigate() {
    var p = pathOf(location.href);
    if (p === lastPath) return; // a hash change or replaceState-like no-op
    lastPath = p;
    schedule(true);
  }
  var pushState = history.pushState;
  history.pushState = function () {
    var r = pushState.apply(this, arguments);
    onNavigate();
    return r;
  };
  // replaceState is not a navigation: only keep the path current.
  var replaceState = history.replaceState;
  history.replaceState = function () {
    var r = replaceState.apply(this, arguments);
    lastPath = pathOf(location.href);
    return r;
  };
  w.addEventListener("popstate", onNavigate);
  d.addEventListener("visibilitychange", onVisibility);
  w.addEventListener("pagehide", function () {
    flushDwell(true, true);
    visibleSince = null;
  });
  w.addEventListener("pageshow", function (e) {
    // Back from the back/forward cache: a new view of the same page.
    if (e.persisted) {
      pendingMs = 0;
      visibleSince = d.visibilityState === "visible" ? now() : null;
      schedule(true);
    }
  });

  var api = {
    version: 1,
    /** Sets the article being read; counts a view of it (next tick). */
    setArticle: function (id) {
      explicitId = id === null || id === undefined ? null : String(id);
      schedule(false);
    },
    /** Records a like, comment, favorite or share of the current article. */
    track: function (type, articleId) {
      if (!/^(like|comment|favorite|share)$/.test(type)) {
        throw new Error("hotrank.track: type must be like, comment, favorite or share");
      }
      var id = articleId ? String(articleId) : current || articleNow();
      if (id) event(type, id, {}, false);
    },
    /** Reports visible time now (whole seconds). */
    flush: function () {
      flushDwell(false, false);
    },
    optedOut: optedOut
  };
  w.hotrank = api;

  if (d.visibilityState === "visible") visibleSince = now();
  schedule(true);
  // Calls queued before the script loaded: window.hotrank = [["setArticle", "1"], ...]
  if (queued && queued.length) {
    for (var i = 0; i < queued.length; i++) {
      var c = queued[i];
      if (c && typeof api[c[0]] === "function") api[c[0]].apply(api, c.slice(1));
    }
  }
})();
