// agentc console: times in the viewer's zone, and live parts of a page refreshed in place.
// Loaded from /console/static (no inline script: the Content-Security-Policy forbids it).
"use strict";

function localize(root) {
  root.querySelectorAll("time[datetime]").forEach(function (el) {
    var when = new Date(el.getAttribute("datetime"));
    if (!isNaN(when.getTime())) {
      el.textContent = when.toLocaleString();
      el.title = el.getAttribute("datetime");
    }
  });
}

function refresh(live) {
  if (document.hidden) { return; }
  fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
    .then(function (resp) { return resp.ok ? resp.text() : null; })
    .then(function (text) {
      if (text === null) { return; }
      var fresh = new DOMParser().parseFromString(text, "text/html").querySelector("[data-live]");
      if (fresh && fresh.innerHTML !== live.dataset.shown) {
        live.dataset.shown = fresh.innerHTML;
        live.innerHTML = fresh.innerHTML;
        localize(live);
      }
    })
    .catch(function () { /* the next tick retries */ });
}

document.addEventListener("DOMContentLoaded", function () {
  localize(document);
  var live = document.querySelector("[data-live]");
  if (live) {
    live.dataset.shown = live.innerHTML;
    window.setInterval(function () { refresh(live); }, Number(live.dataset.live) || 3000);
  }
});
