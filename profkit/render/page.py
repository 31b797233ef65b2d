"""The page around a report's sections: style, the small script for tables, collapsible sections and contents.

No CDN and no framework: the page opens offline from disk. SCRIPT (vanilla JS, ~80 lines) gives every table made by
render.tables_html a filter box, header-click sorting (numbers by their raw value), paging ("show all N rows"), and
row clicks that open the row's detail line; it opens a collapsed section when a link points into it. Sections are
<details> elements, open by default, with a button to collapse or open them all.
"""

from __future__ import annotations

import html

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2d3d;color:#fff;padding:10px 24px}header h1{margin:0;font-size:19px}
header p{margin:2px 0 0;color:#c8d3de;font-size:12px}
main{padding:6px 24px 40px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:6px 16px;margin:10px 0}
section>details>summary{cursor:pointer;list-style-position:outside;margin-left:14px}
section>details>summary h2{display:inline;font-size:17px;margin:0}
h2{font-size:18px;margin:6px 0 8px}h3{font-size:14.5px;margin:10px 0 4px}
p.how,span.how{color:#555;font-size:12.5px;margin:2px 0 6px}
.pk-table{max-width:100%}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0;max-width:100%}
th,td{border-bottom:1px solid #eee;padding:3px 8px;text-align:left;white-space:nowrap;vertical-align:top}
th{background:#eef1f4;position:sticky;top:0;z-index:1;cursor:pointer;white-space:normal;vertical-align:bottom;
   font-weight:600}
th[title]{text-decoration:underline dotted #999}
th.pk-asc::after{content:" ▲";font-size:9px}th.pk-desc::after{content:" ▼";font-size:9px}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.name{white-space:normal;overflow-wrap:anywhere;max-width:400px;min-width:210px;
        font-family:ui-monospace,Menlo,monospace;font-size:11.5px}
td.src{font-family:ui-monospace,Menlo,monospace;white-space:pre-wrap;overflow-wrap:anywhere;max-width:460px;
       min-width:210px;color:#333}
td.wrap{white-space:normal;overflow-wrap:anywhere;max-width:520px;min-width:210px}
td.pk-tg,th.pk-tg{color:#888;width:10px;padding:3px 2px;cursor:pointer}
tr.pk-row:hover td{background:#f6f9fc}tr.pk-open td.pk-tg{color:#1f77b4}
tr.pk-more td{background:#fbfbfb;white-space:normal}
dl.pk-kv{display:flex;flex-wrap:wrap;gap:2px 18px;margin:2px 0;font-size:12px}
dl.pk-kv div{display:flex;gap:6px;max-width:100%}dl.pk-kv dt{color:#666}
dl.pk-kv dd{margin:0;overflow-wrap:anywhere;font-variant-numeric:tabular-nums}
td.good,p.good{color:#0a7a2f;font-weight:600}td.bad,p.bad{color:#b3261e;font-weight:600}td.chg{color:#7a5b00}
td.na{color:#999}
tr.refuse td{background:#fde7e7}tr.warn td{background:#fff6dc}
ul.why li{margin:2px 0}dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:4px 0}
dl.meta dt{color:#666}dl.meta dd{margin:0;overflow-wrap:anywhere}
#profkit-js-errors{background:#fde7e7;color:#8a1c1c;padding:8px 12px;margin:0;white-space:pre-wrap}
details>summary{cursor:pointer;font-weight:600;margin:6px 0}
.banner{background:#fff6dc;padding:6px 10px;border-radius:4px}
nav.pk-top{font-size:12.5px;margin:6px 0}nav.pk-top a{margin-right:12px}
nav.pk-top button,.pk-tools button{font-size:12px;margin-left:8px;cursor:pointer}
p.pk-toc{font-size:12.5px;margin:4px 0 2px;line-height:1.7}p.pk-toc a{margin-right:10px;white-space:nowrap}
.pk-tools{display:flex;gap:8px;align-items:center;font-size:12px;margin:2px 0}
.pk-tools input{font-size:12px;padding:2px 6px;width:220px}
.overview{border-left:4px solid #1f2d3d;padding:2px 0 4px 12px}
.pk-bar-chart{display:flex;height:22px;max-width:900px;border-radius:3px;overflow:hidden;background:#eee}
.pk-bar-chart span{display:block;height:100%}
ul.pk-legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;gap:4px 18px;font-size:13px}
ul.pk-legend i{display:inline-block;width:11px;height:11px;margin-right:5px;border-radius:2px;vertical-align:-1px}
ul.pk-findings{padding-left:18px;margin:4px 0}ul.pk-findings li{margin:0 0 8px;overflow-wrap:anywhere}
.pk-kernels{font-family:ui-monospace,Menlo,monospace;font-size:11.5px;color:#333}
.pk-session-head{display:flex;flex-wrap:wrap;gap:4px 16px;align-items:baseline}
.pk-session-head h2{margin:4px 0}.pk-meta summary{font-weight:400;color:#444;font-size:13px}
"""

SCRIPT = r"""
(function () {
  function rowsOf(box) {
    return Array.prototype.slice.call(box.querySelectorAll(".pk-row")).filter(function (r) {
      return r.closest(".pk-table, .pk-list") === box; });
  }
  function detailOf(row) {
    var next = row.nextElementSibling;
    return next && next.classList.contains("pk-more") ? next : null;
  }
  function key(row, index) {
    var cell = row.children[index];
    if (!cell) { return ""; }
    var raw = cell.getAttribute("data-v");
    if (raw !== null) { return parseFloat(raw); }
    return cell.classList.contains("n") ? -Infinity : cell.textContent.trim().toLowerCase();
  }
  function setup(box) {
    var rows = rowsOf(box), page = parseInt(box.getAttribute("data-page"), 10) || 20;
    var state = {query: "", all: false};
    var tools = document.createElement("div"); tools.className = "pk-tools";
    var input = null, more = null, count = document.createElement("span"); count.className = "how";
    if (rows.length > 8) {
      input = document.createElement("input"); input.type = "search";
      input.placeholder = "filter " + rows.length + " rows"; tools.appendChild(input);
      input.addEventListener("input", function () { state.query = input.value.trim().toLowerCase(); render(); });
    }
    if (rows.length > page) {
      more = document.createElement("button"); tools.appendChild(more);
      more.addEventListener("click", function () { state.all = !state.all; render(); });
    }
    tools.appendChild(count);
    if (input || more) { box.insertBefore(tools, box.firstChild); }
    function text(row) { var d = detailOf(row); return (row.textContent + " " + (row.title || "") + " " +
      Array.prototype.map.call(row.querySelectorAll("[title]"), function (e) { return e.title; }).join(" ") +
      (d ? " " + d.textContent : "")).toLowerCase(); }
    var texts = rows.map(text);
    function render() {
      var matching = 0, shown = 0;
      rows.forEach(function (row, i) {
        var hit = !state.query || texts[i].indexOf(state.query) >= 0;
        var visible = hit && (state.all || matching < page);
        if (hit) { matching += 1; }
        if (visible) { shown += 1; }
        row.hidden = !visible;
        var d = detailOf(row); if (d && !visible) { d.hidden = true; row.classList.remove("pk-open"); }
      });
      if (more) { more.hidden = matching <= page; more.textContent = state.all ? "show first " + page :
                  "show all " + matching + " rows"; }
      count.textContent = shown < rows.length ? shown + " of " + rows.length + " rows shown" : "";
    }
    box.addEventListener("click", function (e) {
      var th = e.target.closest("th");
      if (th && th.closest(".pk-table") === box && !th.classList.contains("pk-tg")) {
        var index = Array.prototype.indexOf.call(th.parentNode.children, th);
        var asc = !th.classList.contains("pk-asc");
        Array.prototype.forEach.call(th.parentNode.children, function (h) { h.classList.remove("pk-asc", "pk-desc"); });
        th.classList.add(asc ? "pk-asc" : "pk-desc");
        var order = rows.map(function (r, i) { return i; });
        order.sort(function (a, b) { var x = key(rows[a], index), y = key(rows[b], index);
          return (x < y ? -1 : x > y ? 1 : a - b) * (asc ? 1 : -1); });
        var body = rows[0].parentNode;
        rows = order.map(function (i) { return rows[i]; }); texts = order.map(function (i) { return texts[i]; });
        rows.forEach(function (r) { var d = detailOf(r); body.appendChild(r); if (d) { body.appendChild(d); } });
        render(); return;
      }
      var row = e.target.closest("tr.pk-row");
      if (row && !e.target.closest("a") && detailOf(row)) {
        var detail = detailOf(row); detail.hidden = !detail.hidden; row.classList.toggle("pk-open", !detail.hidden);
      }
    });
    render();
  }
  function openTarget() {
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    for (var node = target; node; node = node.parentElement) { if (node.tagName === "DETAILS") { node.open = true; } }
    if (target) { target.scrollIntoView(); }
  }
  document.querySelectorAll(".pk-table, .pk-list").forEach(setup);
  document.addEventListener("mouseover", function (e) {  // a number's raw value as its tooltip
    var cell = e.target.closest && e.target.closest("td[data-v]");
    if (cell && !cell.title) { cell.title = cell.getAttribute("data-v"); }
  });
  var toggle = document.getElementById("pk-toggle-all");
  if (toggle) { toggle.addEventListener("click", function () {
    var all = document.querySelectorAll("section > details"), open = toggle.getAttribute("data-open") !== "1";
    all.forEach(function (d) { d.open = open; });
    toggle.setAttribute("data-open", open ? "1" : "0");
    toggle.textContent = open ? "collapse all sections" : "open all sections";
  }); }
  window.addEventListener("hashchange", openTarget);
  if (location.hash) { openTarget(); }
})();
"""


def section(anchor: str, title: str, how: str, body: str, *, collapsible: bool = True) -> str:
    """One section: a <details> (open) whose summary is the title, so a reader can fold what they do not need."""
    how_html = f"<p class='how'>{html.escape(how)}</p>" if how else ""
    if not collapsible:
        return f"<section id='{html.escape(anchor)}'><h2>{html.escape(title)}</h2>{how_html}{body}</section>"
    return (f"<section id='{html.escape(anchor)}'><details open><summary><h2>{html.escape(title)}</h2></summary>"
            f"{how_html}{body}</details></section>")


def toc_html(entries: list[tuple[str, str]]) -> str:
    """A line of links to sections: (anchor, title) pairs."""
    links = " ".join(f"<a href='#{html.escape(a)}'>{html.escape(t)}</a>" for a, t in entries)
    return f"<p class='pk-toc'><b>Sections:</b> {links}</p>" if entries else ""


def nav_html(nav: list[tuple[str, str]]) -> str:
    """The top bar: links to each input (anchor, text) and the button that folds every section."""
    links = " ".join(f"<a href='#{html.escape(a)}'>{html.escape(t)}</a>" for a, t in nav)
    return (f"<nav class='pk-top'>{links}<button id='pk-toggle-all' type='button' data-open='1'>collapse all "
            f"sections</button></nav>")
