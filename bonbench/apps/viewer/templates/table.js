// The tables of the viewer: filter, search, sort and page the rows the page already holds.
// It reads data-* attributes and moves or hides rows; it never writes markup (no innerHTML).
(function () {
  "use strict";
  document.querySelectorAll("table[data-table]").forEach(function (table) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.querySelectorAll("tr[data-row]"));
    var size = parseInt(table.getAttribute("data-page-size") || "0", 10) || rows.length || 1;
    var page = 0, sortKey = null, sortType = "num", sortDir = 1, shown = rows;
    var q = function (sel) { return document.querySelector(sel); };
    var filters = document.querySelectorAll("select[data-filter]");
    var flag = q("select[data-flag]"), search = q("input[data-search]"), count = q("[data-count]");
    function value(row) {
      var raw = row.getAttribute("data-" + sortKey) || "";
      if (sortType === "text") { return raw.toLowerCase(); }
      var x = parseFloat(raw);
      return isNaN(x) ? null : x;
    }
    function compare(a, b) {
      var x = value(a), y = value(b);
      if (x === y) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      return (x < y ? -1 : 1) * sortDir;
    }
    function keep(row) {
      for (var i = 0; i < filters.length; i++) {
        var want = filters[i].value;
        if (want && row.getAttribute("data-" + filters[i].getAttribute("data-filter")) !== want) { return false; }
      }
      if (flag && flag.value && (" " + row.getAttribute("data-flags") + " ").indexOf(" " + flag.value + " ") < 0) { return false; }
      var needle = search ? search.value.trim().toLowerCase() : "";
      if (needle) {
        var hay = ((row.getAttribute("data-id") || "") + "\n" + (row.getAttribute("data-text") || "")).toLowerCase();
        if (hay.indexOf(needle) < 0) { return false; }
      }
      return true;
    }
    function draw() {
      shown = rows.filter(keep);
      if (sortKey) { shown.sort(compare); }
      var pages = Math.max(1, Math.ceil(shown.length / size));
      page = Math.min(Math.max(page, 0), pages - 1);
      var lo = page * size, hi = Math.min(shown.length, lo + size);
      rows.forEach(function (row) { row.hidden = true; });
      shown.forEach(function (row, i) { body.appendChild(row); row.hidden = i < lo || i >= hi; });
      if (count) {
        count.textContent = shown.length ? ("rows " + (lo + 1) + "–" + hi + " of " + shown.length +
          (shown.length < rows.length ? " (of " + rows.length + ")" : "")) : "no rows match";
      }
    }
    table.querySelectorAll("th[data-sort]").forEach(function (th) {
      th.addEventListener("click", function () {
        var key = th.getAttribute("data-sort");
        sortDir = key === sortKey ? -sortDir : 1;
        sortKey = key;
        sortType = th.getAttribute("data-type") || "num";
        page = 0;
        draw();
      });
    });
    var redraw = function () { page = 0; draw(); };
    filters.forEach(function (el) { el.addEventListener("change", redraw); });
    if (flag) { flag.addEventListener("change", redraw); }
    if (search) { search.addEventListener("input", redraw); }
    var prev = q("[data-prev]"), next = q("[data-next]");
    if (prev) { prev.addEventListener("click", function () { page -= 1; draw(); }); }
    if (next) { next.addEventListener("click", function () { page += 1; draw(); }); }
    draw();
  });
})();
