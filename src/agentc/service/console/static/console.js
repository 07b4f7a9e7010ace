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

// The change page's review form: a click on a line number puts that line in the next empty
// comment (shift-click: ends the last comment's range there). Typing the file and line works
// as well without this script.
function commentOn(event) {
  var form = document.getElementById("review-form");
  var cell = event.target.closest ? event.target.closest("table.diff td.ln") : null;
  if (!form || !cell) { return; }
  var table = cell.closest("table.diff");
  var match = /-([no])(\d+)$/.exec(cell.parentElement.id || "");
  if (!match || (match[1] === "o") !== (table.dataset.deleted === "1")) { return; }
  var rows = Array.prototype.slice.call(form.querySelectorAll("fieldset.comment"));
  var path = table.dataset.path;
  var filled = rows.filter(function (r) { return r.querySelector("[name=line]").value; });
  var last = filled[filled.length - 1];
  if (event.shiftKey && last && last.querySelector("[name=path]").value === path) {
    last.querySelector("[name=end_line]").value = match[2];
    return;
  }
  var free = rows.filter(function (r) {
    return !r.querySelector("[name=line]").value && !r.querySelector("[name=remedy]").value;
  })[0];
  if (!free) { return; }
  free.querySelector("[name=path]").value = path;
  free.querySelector("[name=line]").value = match[2];
  free.querySelector("[name=remedy]").focus();
}

document.addEventListener("DOMContentLoaded", function () {
  if (document.getElementById("review-form") && document.querySelector("table.diff")) {
    document.body.classList.add("reviewing");
    document.addEventListener("click", commentOn);
  }
});
