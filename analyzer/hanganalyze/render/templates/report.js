// hanganalyze report: filter box, idle toggle, expand/collapse, print expands everything.
// Reads text with textContent only: nothing from the core is ever parsed as HTML.
(function () {
  "use strict";
  var groups = Array.prototype.slice.call(document.querySelectorAll("details.group"));
  var filter = document.getElementById("filter");
  var hideIdle = document.getElementById("hide-idle");
  var count = document.getElementById("count");
  var index = null;

  function buildIndex() {
    index = groups.map(function (g) { return g.textContent.toLowerCase(); });
  }

  function apply() {
    if (index === null) { buildIndex(); }
    var q = (filter && filter.value || "").trim().toLowerCase();
    var terms = q ? q.split(/\s+/) : [];
    var shown = 0;
    groups.forEach(function (g, i) {
      var ok = terms.every(function (t) { return index[i].indexOf(t) !== -1; });
      if (hideIdle && hideIdle.checked && g.classList.contains("idle")) { ok = false; }
      g.classList.toggle("hidden", !ok);
      if (ok) { shown += 1; }
      if (ok && terms.length) { g.open = true; }
    });
    if (count) { count.textContent = shown + " of " + groups.length + " groups shown"; }
  }

  function setAll(open) { groups.forEach(function (g) { if (!g.classList.contains("hidden")) { g.open = open; } }); }

  if (filter) { filter.addEventListener("input", apply); }
  if (hideIdle) { hideIdle.addEventListener("change", apply); }
  var ex = document.getElementById("expand"), co = document.getElementById("collapse");
  if (ex) { ex.addEventListener("click", function () { setAll(true); }); }
  if (co) { co.addEventListener("click", function () { setAll(false); }); }

  // Jumping to a thread from a finding's evidence opens its group.
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.tagName === "DETAILS") { el.classList.remove("hidden"); el.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();

  // Printing shows every stack: remember what was open and restore it afterwards.
  var before = [];
  window.addEventListener("beforeprint", function () {
    before = groups.map(function (g) { return g.open; });
    groups.forEach(function (g) { g.open = true; });
  });
  window.addEventListener("afterprint", function () {
    groups.forEach(function (g, i) { if (i < before.length) { g.open = before[i]; } });
  });
  if (count) { count.textContent = groups.length + " groups"; }
})();
