"""The script that draws an HTML report's timeline (timeline_view) in the page: plain JavaScript over plotly, offline.

profkitTimeline.attach(divId) inflates the data beside the figure (timeline_view.packed), draws the opening window
(gd.__profkitTimeline.ready resolves when it has) and redraws on every zoom, pan or button (plotly_relayout).
Per lane, the items in view are boxes when they are at most limits.detail and the boxes of all lanes stay within
limits.boxes (lanes with fewer items first); else limits.bins bins over the window, each shaded by how much of it
the lane was busy and counting the items that start in it (those that started before the window count in its
first bin), so every item in view is drawn or counted. A box narrower than a pixel is drawn one pixel wide; its
hover keeps the real duration.

GPU idle gaps are shaded across all lanes; the idle lane is binned while any gap in view is narrower than a pixel
(drawn a pixel wide, a thousand sub-microsecond gaps would read as most of a window of tens of milliseconds). Arrows
join each drawn call to the drawn work it issued (none past limits.flows); clicking a box draws its own arrows in
red whatever the window holds (a call's to all the work it issued: each node of a CUDA graph launch). Each draw
leaves a summary in gd.__profkitTimeline.summary: per lane, the mode ("boxes" / "bins"), the items in view and the
items drawn or counted; the arrows drawn, and the selected item's.
"""

TIMELINE_JS = r"""
window.profkitTimeline = window.profkitTimeline || (function () {
  "use strict";
  var CONFIG = {displaylogo: false, responsive: true, scrollZoom: true};

  function firstAbove(values, lo, hi, x) {  // first index in [lo, hi) whose value is > x (values ascending)
    while (lo < hi) { var mid = (lo + hi) >> 1; if (values[mid] > x) { hi = mid; } else { lo = mid + 1; } }
    return lo;
  }
  function firstAtLeast(values, lo, hi, x) {
    while (lo < hi) { var mid = (lo + hi) >> 1; if (values[mid] >= x) { hi = mid; } else { lo = mid + 1; } }
    return lo;
  }
  function rgba(hex, alpha) {
    var v = parseInt(hex.slice(1), 16);
    return "rgba(" + (v >> 16 & 255) + "," + (v >> 8 & 255) + "," + (v & 255) + "," + alpha.toFixed(3) + ")";
  }
  function duration(ns) {
    if (ns >= 1e6) { return (ns / 1e6).toFixed(3) + " ms"; }
    return (ns / 1e3).toFixed(ns >= 1e5 ? 0 : 1) + " µs";
  }

  function prepare(d) {
    var n = d.start_step.length, lane, i, m, t = 0;
    d.start = new Float64Array(n);  // ns since origin_ns
    d.end = new Float64Array(n);
    for (i = 0; i < n; i++) { t += d.start_step[i]; d.start[i] = t; d.end[i] = t + d.duration[i]; }
    d.reach = new Float64Array(n);  // per lane, the latest end of its items up to i: finds the first one in view
    d.laneOf = new Int32Array(n);
    for (var y = 0; y < d.lanes.length; y++) {
      lane = d.lanes[y]; m = -Infinity;
      for (i = lane.first; i < lane.first + lane.count; i++) {
        m = Math.max(m, d.end[i]); d.reach[i] = m; d.laneOf[i] = y;
      }
    }
    d.callOf = new Int32Array(n).fill(-1);
    for (i = 0; i < d.flows.length; i += 2) { d.callOf[d.flows[i + 1]] = d.flows[i]; }
  }

  function inView(d, lane, a, b) {  // indices of the lane's items with end > a and start < b
    var end = lane.first + lane.count, out = [];
    var lo = firstAbove(d.reach, lane.first, end, a), hi = firstAtLeast(d.start, lo, end, b);
    for (var i = lo; i < hi; i++) { if (d.end[i] > a) { out.push(i); } }
    return out;
  }

  function hover(d, i) {
    var text = d.names[d.name[i]] + "<br>" + duration(d.end[i] - d.start[i]);
    if (d.details[d.detail[i]]) { text += " · " + d.details[d.detail[i]]; }
    if (d.functions[d.function[i]]) { text += "<br>" + d.functions[d.function[i]]; }
    if (d.correlation[i]) { text += "<br>correlation " + d.correlation[i]; }
    return text;
  }

  function boxes(d, y, idx, a, b, minWidth, drawn) {  // idle gaps keep their width: widened, they read as idle time
    var base = [], width = [], color = [], text = [], tips = [];
    for (var k = 0; k < idx.length; k++) {
      var i = idx[k];
      drawn[i] = 1;
      base.push(d.start[i] / 1e6);
      width.push(Math.max(d.end[i] - d.start[i], minWidth) / 1e6);
      color.push(d.colors[d.color[i]]);
      text.push(d.names[d.name[i]]);
      tips.push(hover(d, i));
    }
    return {type: "bar", orientation: "h", base: base, x: width, y: idx.map(function () { return y; }), width: 0.78,
            marker: {color: color, line: {width: 0}}, text: text, textposition: "inside", insidetextanchor: "start",
            textfont: {color: "#fff"}, hovertext: tips, hoverinfo: "text", name: d.lanes[y].name, showlegend: false,
            customdata: idx.slice(), meta: "boxes"};
  }

  function linked(d, item) {  // [call, work] pairs of a selected call (every work it issued) or work (its call)
    var pairs = [];
    if (item < 0) { return pairs; }
    if (d.callOf[item] >= 0) { pairs.push([d.callOf[item], item]); }
    for (var f = 0; f < d.flows.length; f += 2) { if (d.flows[f] === item) { pairs.push([item, d.flows[f + 1]]); } }
    return pairs;
  }

  function selection(d, item) {  // the selected item's arrows, drawn whatever the window holds
    var x = [], y = [], size = [], pairs = linked(d, item);
    pairs.forEach(function (pair) {
      x.push(d.start[pair[0]] / 1e6, d.start[pair[1]] / 1e6, null);
      y.push(d.laneOf[pair[0]], d.laneOf[pair[1]], null);
      size.push(0, 11, 0);
    });
    return {trace: {type: "scatter", mode: "lines+markers", x: x, y: y, hoverinfo: "skip", showlegend: false,
                    name: "selected call → work", line: {color: "#d62728", width: 2},
                    marker: {symbol: "arrow", angleref: "previous", size: size, color: "#d62728"}},
            count: pairs.length};
  }

  function bins(d, y, idx, a, b) {
    var count = d.limits.bins, step = (b - a) / count;
    var busy = new Float64Array(count), starts = new Int32Array(count);
    for (var k = 0; k < idx.length; k++) {
      var s = Math.max(d.start[idx[k]], a), e = Math.min(d.end[idx[k]], b);
      var first = Math.min(count - 1, Math.floor((s - a) / step));
      var last = Math.min(count - 1, Math.floor((e - a) / step));
      starts[first] += 1;
      for (var j = first; j <= last; j++) {
        busy[j] += Math.min(e, a + (j + 1) * step) - Math.max(s, a + j * step);
      }
    }
    var base = [], width = [], color = [], tips = [], counted = [], share = [];
    var hue = d.colors[d.color[idx[0]]], kind = d.lanes[y].kind;
    for (var j2 = 0; j2 < count; j2++) {
      if (!starts[j2] && busy[j2] <= 0) { continue; }
      var fraction = Math.min(1, busy[j2] / step);
      base.push((a + j2 * step) / 1e6); width.push(step / 1e6);
      color.push(rgba(kind === "kernel" ? "#1F4E79" : hue, 0.12 + 0.88 * fraction));
      counted.push(starts[j2]); share.push(fraction);
      tips.push(d.lanes[y].name + "<br>" + starts[j2] + " starting here · busy " + (100 * fraction).toFixed(0)
                + "% of " + duration(step) + "<br>zoom in for each one");
    }
    return {type: "bar", orientation: "h", base: base, x: width, y: base.map(function () { return y; }), width: 0.78,
            marker: {color: color, line: {width: 0}}, customdata: counted, hovertext: tips, hoverinfo: "text",
            name: d.lanes[y].name + " (binned)", showlegend: false, share: share};
  }

  function shading(trace, lanes, binned, minWidth) {  // the idle lane's gaps or bins, stretched over every lane
    var base = [], x = [], color = [];
    for (var k = 0; k < trace.base.length; k++) {
      if (!binned && trace.x[k] * 1e6 < 2 * minWidth) { continue; }  // thinner than two pixels: a haze, not a gap
      base.push(trace.base[k]); x.push(trace.x[k]);
      color.push(binned ? rgba("#E45756", 0.22 * trace.share[k]) : "rgba(228,87,86,0.14)");
    }
    return {type: "bar", orientation: "h", base: base, x: x, y: base.map(function () { return (lanes - 1) / 2; }),
            width: lanes, marker: {color: color, line: {width: 0}}, hoverinfo: "skip", showlegend: false,
            name: "GPU idle (shaded)"};
  }

  function arrows(d, drawn) {  // every call -> work arrow whose ends are both drawn, or none past limits.flows
    var x = [], y = [], size = [], total = 0;
    for (var i = 0; i < drawn.length; i++) {
      var call = d.callOf[i];
      if (!drawn[i] || call < 0 || !drawn[call]) { continue; }
      total += 1;
      if (total > d.limits.flows) { continue; }
      x.push(d.start[call] / 1e6, d.start[i] / 1e6, null);
      y.push(d.laneOf[call], d.laneOf[i], null);
      size.push(0, 8, 0);
    }
    if (total > d.limits.flows) { x = []; y = []; size = []; }
    return {trace: {type: "scatter", mode: "lines+markers", x: x, y: y, hoverinfo: "skip", showlegend: false,
                    name: "call → work", line: {color: "rgba(60,60,60,0.4)", width: 1},
                    marker: {symbol: "arrow", angleref: "previous", size: size, color: "rgba(60,60,60,0.7)"}},
            count: total > d.limits.flows ? 0 : total, linked: total};
  }

  function narrowest(d, idx) {
    var least = Infinity;
    for (var k = 0; k < idx.length; k++) { least = Math.min(least, d.end[idx[k]] - d.start[idx[k]]); }
    return least;
  }

  function draw(gd, d, a, b) {
    var full = gd._fullLayout, pixels = full && full._size ? full._size.w : 1200;
    var minWidth = (b - a) / Math.max(pixels, 1), drawn = new Uint8Array(d.start.length);
    var under = [], over = [], summary = {range: [a, b], lanes: [], flows: 0, shaded: 0}, binnedNames = [];
    var shown = d.lanes.map(function (lane, y) { return inView(d, lane, a, b); });
    var order = shown.map(function (idx, y) { return y; }).sort(function (p, q) {
      return shown[p].length - shown[q].length || p - q; });
    var detailed = [], budget = d.limits.boxes;  // boxes for the lanes with the fewest items first
    for (var o = 0; o < order.length; o++) {
      var idx = shown[order[o]], kind = d.lanes[order[o]].kind;
      detailed[order[o]] = idx.length <= Math.min(d.limits.detail, budget)
                           && !(kind === "idle" && idx.length && narrowest(d, idx) < minWidth);
      if (detailed[order[o]]) { budget -= idx.length; }
    }
    for (var y = 0; y < d.lanes.length; y++) {
      var items = shown[y], lane = {name: d.lanes[y].name, kind: d.lanes[y].kind, items: items.length};
      if (!items.length) { lane.mode = "boxes"; lane.represented = 0; summary.lanes.push(lane); continue; }
      var trace = detailed[y] ? boxes(d, y, items, a, b, lane.kind === "idle" ? 0 : minWidth, drawn)
                              : bins(d, y, items, a, b);
      lane.mode = detailed[y] ? "boxes" : "bins";
      lane.represented = detailed[y] ? trace.base.length
                                     : trace.customdata.reduce(function (s, c) { return s + c; }, 0);
      if (!detailed[y]) { binnedNames.push(lane.name + " (" + items.length.toLocaleString() + ")"); }
      if (lane.kind === "idle") {
        under.push(shading(trace, d.lanes.length, !detailed[y], minWidth));
        summary.shaded = under[under.length - 1].base.length;
      }
      delete trace.share;
      over.push(trace);
      summary.lanes.push(lane);
    }
    var flows = arrows(d, drawn), chosen = selection(d, gd.__profkitTimeline.selected);
    summary.flows = flows.count;
    summary.selected = chosen.count;
    var note = "window " + duration(b - a) + (binnedNames.length ? " · binned (zoom in for boxes): "
               + binnedNames.join(", ") : " · every item drawn");
    if (flows.count) { note += " · " + flows.count + " call → work arrows"; }
    else if (flows.linked) { note += " · zoom in for the " + flows.linked + " call → work arrows"; }
    var layout = Object.assign({}, gd.layout);
    layout.xaxis = Object.assign({}, gd.layout.xaxis, {range: [a / 1e6, b / 1e6], autorange: false});
    layout.annotations = [{xref: "paper", yref: "paper", x: 0, y: 1, xanchor: "left", yanchor: "bottom",
                           showarrow: false, text: note, font: {size: 11, color: "#555"}}];
    gd.__profkitTimeline.summary = summary;
    gd.__profkitTimeline.last = [a, b];
    return Plotly.react(gd, under.concat(over, [flows.trace, chosen.trace]), layout, CONFIG);
  }

  function requested(event, d) {  // the window (ns) a relayout event asks for, or null
    if (event["xaxis.autorange"]) { return d.extent.slice(); }
    if (event["xaxis.range[0]"] !== undefined) {
      return [event["xaxis.range[0]"] * 1e6, event["xaxis.range[1]"] * 1e6];
    }
    if (event["xaxis.range"]) { return [event["xaxis.range"][0] * 1e6, event["xaxis.range"][1] * 1e6]; }
    return null;
  }

  function inflate(text) {  // base64 of gzip-compressed JSON -> the payload
    var binary = atob(text.trim()), bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) { bytes[i] = binary.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }

  function attach(divId) {
    var gd = document.getElementById(divId);
    var state = gd.__profkitTimeline = {data: null, pending: null, summary: null, last: null, selected: -1};
    state.ready = inflate(document.getElementById(divId + "-timeline").textContent).then(function (d) {
      prepare(d);
      state.data = d;
      state.show = function (a, b) { return draw(gd, d, a, b); };
      state.select = function (item) { state.selected = item; return draw(gd, d, state.last[0], state.last[1]); };
      gd.on("plotly_click", function (event) {  // a box: its call's or its work's arrows; anything else clears
        var point = event.points && event.points[0];
        var boxed = point && point.data.meta === "boxes";
        state.select(boxed ? point.customdata : -1);
      });
      gd.on("plotly_relayout", function (event) {
        var range = requested(event, d);
        if (!range || (state.last && Math.abs(range[0] - state.last[0]) < 1
                       && Math.abs(range[1] - state.last[1]) < 1)) {
          return;
        }
        var waiting = state.pending !== null;
        state.pending = range;
        if (!waiting) {
          setTimeout(function () { var next = state.pending; state.pending = null; draw(gd, d, next[0], next[1]); }, 0);
        }
      });
      return state.show(d.window[0], d.window[1]);
    });
    return state.ready;
  }

  return {attach: attach};
})();
"""
