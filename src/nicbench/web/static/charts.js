// The dashboard's interactive charts, drawn with uPlot (static/vendor, shipped in the
// package: nothing is fetched at run time).  The data is JSON the server put in a
// <script type="application/json"> block (data, never run: the CSP allows no inline
// code); text goes into the page as text.
//
// Each chart: hover values (legend and the readout under it), drag to zoom x (double
// click: all), click a legend entry to hide or show a line, the line-rate ceiling
// dashed, "PNG" downloads the chart as drawn.  Zoom, hidden lines and the chosen point
// live in the URL's fragment (#z.ID=min,max&h.ID=1,3&point=KEY), so a copied URL
// reproduces the view.  Clicking a point opens its timeline and verdict.
"use strict";
(function () {
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                   "#7f7f7f", "#d62728", "#393b79", "#637939"];
  const CEILING = "#c0392b";
  const charts = {};
  window.nicbenchCharts = charts;            // the browser tests read the drawn data back from here

  const num = (v) => (v === null || v === undefined || Number.isNaN(v)) ? "—" : String(Number(v.toPrecision(4)));
  function size(v) {
    if (v === null || v === undefined) { return "—"; }
    const units = [[1 << 30, "G"], [1 << 20, "M"], [1 << 10, "K"]];
    for (const [b, s] of units) {
      if (v >= b && v % b === 0) { return (v / b) + s; }
      if (v >= b) { return num(v / b) + s; }
    }
    return num(v) + "B";
  }

  // ---- the URL fragment: the view's state ----
  function state() {
    return new URLSearchParams(window.location.hash.replace(/^#/, ""));
  }
  function setState(key, value) {
    const s = state();
    if (value === null || value === "") { s.delete(key); } else { s.set(key, value); }
    const h = s.toString().replace(/%2C/g, ",");
    window.history.replaceState(null, "", window.location.pathname + window.location.search + (h ? "#" + h : ""));
  }

  // ---- a point's timeline and verdict ----
  function openPoint(key, run) {
    const here = document.body.dataset.run;
    if (run && run !== here) {
      window.location.href = "/run/" + encodeURIComponent(run) + "#point=" + encodeURIComponent(key);
      return;
    }
    const d = Array.from(document.querySelectorAll("details[data-point]")).find((e) => e.dataset.point === key);
    setState("point", key);
    if (!d) { return; }
    d.open = true;
    d.scrollIntoView({block: "start"});
  }

  function readout(el, c, u, idx) {
    const out = el.querySelector(".readout");
    if (!out) { return; }
    if (idx === null || idx === undefined) { out.textContent = ""; return; }
    const parts = [(c.x_size ? size(c.x[idx]) : num(c.x[idx]))];
    c.series.forEach((s, i) => {
      if (!u.series[i + 1].show || s.y[idx] === null) { return; }
      let t = `${s.label}: ${num(s.y[idx])}`;
      if (s.low[idx] !== null && s.high[idx] !== null) { t += ` (${num(s.low[idx])}…${num(s.high[idx])})`; }
      if (c.ceiling && c.ceiling[idx]) { t += `, ${num(100 * s.y[idx] / c.ceiling[idx])} % of ceiling`; }
      parts.push(t);
    });
    if (c.ceiling && c.ceiling[idx] !== null) { parts.push(`ceiling ${num(c.ceiling[idx])}`); }
    out.textContent = parts.join(" · ");
  }

  // ---- PNG of a chart as drawn: its canvas on white, with the title and the visible lines' names ----
  function png(c, u) {
    const src = u.ctx.canvas;
    const shown = c.series.map((s, i) => [s, i]).filter(([, i]) => u.series[i + 1].show);
    const ratio = src.width / u.width;
    const line = 16 * ratio;
    const top = 24 * ratio;
    const cv = document.createElement("canvas");
    cv.width = src.width;
    cv.height = src.height + top + line * (shown.length + (c.ceiling ? 1 : 0)) + 8 * ratio;
    const g = cv.getContext("2d");
    g.fillStyle = "#fff";
    g.fillRect(0, 0, cv.width, cv.height);
    g.fillStyle = "#222";
    g.font = `bold ${13 * ratio}px sans-serif`;
    g.fillText(c.title, 8 * ratio, 17 * ratio);
    g.drawImage(src, 0, top);
    g.font = `${12 * ratio}px sans-serif`;
    let y = top + src.height + line;
    const key = (colour, text, dash) => {
      g.strokeStyle = colour;
      g.lineWidth = 2 * ratio;
      g.setLineDash(dash);
      g.beginPath();
      g.moveTo(8 * ratio, y - 4 * ratio);
      g.lineTo(28 * ratio, y - 4 * ratio);
      g.stroke();
      g.fillStyle = "#222";
      g.fillText(text, 34 * ratio, y);
      y += line;
    };
    shown.forEach(([s, i]) => key(PALETTE[i % PALETTE.length], s.label, []));
    if (c.ceiling) { key(CEILING, "line-rate ceiling", [6 * ratio, 4 * ratio]); }
    return new Promise((resolve) => cv.toBlob(resolve, "image/png"));
  }

  function download(c, u) {
    png(c, u).then((blob) => {
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = `${document.body.dataset.name || "nicbench"}-${c.id}.png`;
      document.body.appendChild(a);
      a.click();
      a.remove();
      window.setTimeout(() => URL.revokeObjectURL(a.href), 2000);
    });
  }

  function build(el, c) {
    const n = c.series.length;
    const series = [{label: c.x_label, value: (u, v) => (c.x_size ? size(v) : num(v))}];
    c.series.forEach((s, i) => series.push({label: s.label, stroke: PALETTE[i % PALETTE.length], width: 2,
                                             points: {show: true, size: 7}, spanGaps: false,
                                             value: (u, v) => num(v)}));
    const data = [c.x, ...c.series.map((s) => s.y)];
    if (c.ceiling) {
      series.push({label: "line-rate ceiling", stroke: CEILING, width: 1.5, dash: [6, 4], points: {show: false},
                   spanGaps: true, value: (u, v) => num(v)});
      data.push(c.ceiling);
    }
    const lo = Math.min(...c.x);
    const hi = Math.max(...c.x);
    // all the data: padded, so the end points are not on the frame (half hidden, hard to click);
    // a zoom is taken as asked
    const xrange = (u, min, max) => {
      if (min === max) { return c.x_log ? [min / 2, max * 2] : [min - 1, max + 1]; }
      if (min === lo && max === hi) {
        return c.x_log ? [min / 1.3, max * 1.3] : [min - (max - min) * 0.04, max + (max - min) * 0.04];
      }
      return [min, max];
    };
    let ready = false;
    let down = null;
    const opts = {
      title: c.title,
      width: Math.max(360, el.clientWidth || 640),
      height: 300,
      scales: {
        x: {time: false, distr: c.x_log ? 3 : 1, log: 2, range: xrange},
        y: {range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.08 : 1]},
      },
      axes: [
        {label: c.x_label, values: (u, ticks) => ticks.map((t) => (c.x_size ? size(t) : num(t)))},
        {label: c.y_label, size: 60, values: (u, ticks) => ticks.map(num)},
      ],
      series: series,
      cursor: {drag: {x: true, y: false}, points: {size: 9}},
      hooks: {
        setScale: [(u, key) => {
          if (!ready || key !== "x") { return; }
          const mn = u.scales.x.min;
          const mx = u.scales.x.max;
          const full = (mn <= lo * 1.0001 || mn <= xrange(u, lo, hi)[0]) && (mx >= hi * 0.9999);
          setState("z." + c.id, full ? null : `${Number(mn.toPrecision(6))},${Number(mx.toPrecision(6))}`);
        }],
        setSeries: [(u) => {
          if (!ready) { return; }
          const hidden = [];
          for (let i = 1; i <= n; i++) { if (!u.series[i].show) { hidden.push(i); } }
          setState("h." + c.id, hidden.join(","));
        }],
        setCursor: [(u) => readout(el, c, u, u.cursor.idx)],
      },
    };
    const u = new uPlot(opts, data, el.querySelector(".plot"));
    charts[c.id] = u;
    u.nicbench = c;
    u.nicbenchPng = () => png(c, u);
    // the view the URL names
    const st = state();
    const z = (st.get("z." + c.id) || "").split(",").map(Number);
    if (z.length === 2 && z.every(Number.isFinite) && z[0] < z[1]) { u.setScale("x", {min: z[0], max: z[1]}); }
    for (const h of (st.get("h." + c.id) || "").split(",")) {
      const i = Number(h);
      if (Number.isInteger(i) && i >= 1 && i <= n) { u.setSeries(i, {show: false}); }
    }
    ready = true;
    // a click on a point (not the end of a drag) opens its timeline and verdict
    // (from the event's own position: uPlot's cursor state may already have moved on)
    u.over.addEventListener("mousedown", (e) => { down = [e.clientX, e.clientY]; });
    u.over.addEventListener("mouseup", (e) => {
      if (!down || Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 4) { down = null; return; }
      down = null;
      const r = u.over.getBoundingClientRect();
      const left = e.clientX - r.left;
      const top = e.clientY - r.top;
      const idx = u.posToIdx(left);
      if (idx === null || idx === undefined || idx < 0 || idx >= c.x.length) { return; }
      let best = null;
      let dist = 24;
      for (let i = 1; i <= n; i++) {
        const v = u.data[i][idx];
        if (!u.series[i].show || v === null) { continue; }
        const d = Math.abs(u.valToPos(v, "y") - top);
        if (d < dist) { dist = d; best = i; }
      }
      if (best !== null) { openPoint(c.series[best - 1].points[idx], c.series[best - 1].run); }
    });
    const b = el.querySelector("button.png");
    if (b) { b.addEventListener("click", () => download(c, u)); }
  }

  // ---- a point's timeline, fetched when its details open: one uPlot per panel, cursors and zoom in step ----
  const timelines = {};
  window.nicbenchTimelines = timelines;      // the browser tests read these back too

  function drawTimeline(host, d) {
    host.replaceChildren();
    const said = document.createElement("p");
    said.className = "muted";
    said.textContent = `repeat ${d.repeat} (${d.status}, trial ${d.trial}), seconds from its first interval` +
      (d.windows.length ? "; shaded: the window its figure is summed on" : "");
    host.appendChild(said);
    const plots = [];
    timelines[d.point] = plots;
    if (!d.t.length) { return; }
    const xs = d.t.concat([d.t[d.t.length - 1] + d.width]);      // the last bin's end: a step holds to it
    let syncing = false;
    d.panels.forEach((p, k) => {
      const el = document.createElement("div");
      el.className = "tl-panel";
      host.appendChild(el);
      const series = [{label: "s", value: (u, v) => num(v)}];
      const data = [xs];
      p.lines.forEach((l, i) => {
        series.push({label: l.label, stroke: PALETTE[i % PALETTE.length], width: 1.5, dash: l.dash ? [5, 3] : [],
                     paths: uPlot.paths.stepped({align: 1}), points: {show: false}, value: (u, v) => num(v)});
        data.push(l.values.concat([l.values[l.values.length - 1]]));
      });
      const last = k === d.panels.length - 1;
      const u = new uPlot({
        width: Math.max(360, host.clientWidth - 10 || 640), height: 170,
        scales: {x: {time: false}, y: {distr: p.log ? 3 : 1,
                                       range: p.log ? undefined : (u, min, max) => [0, max > 0 ? max * 1.08 : 1]}},
        axes: [{label: last ? "seconds from the trial's first interval" : "", values: (u, t) => t.map(num)},
               {label: p.ylabel, size: 60, values: (u, t) => t.map(num)}],
        series: series,
        cursor: {sync: {key: "tl-" + d.point}, drag: {x: true, y: false}},
        hooks: {
          draw: [(u) => {
            if (k !== 0) { return; }
            const g = u.ctx;
            g.save();
            g.fillStyle = "rgba(120, 120, 120, 0.15)";
            for (const [a, b] of d.windows) {
              const x0 = u.valToPos(a, "x", true);
              const x1 = u.valToPos(b, "x", true);
              g.fillRect(x0, u.bbox.top, x1 - x0, u.bbox.height);
            }
            g.restore();
          }],
          setScale: [(u, key) => {
            if (key !== "x" || syncing) { return; }
            syncing = true;
            for (const o of plots) { if (o !== u) { o.setScale("x", {min: u.scales.x.min, max: u.scales.x.max}); } }
            syncing = false;
          }],
        },
      }, data, el);
      u.nicbench = p;
      plots.push(u);
    });
  }

  function loadTimelines() {
    for (const det of document.querySelectorAll("details[data-point]")) {
      const host = det.querySelector(".nb-timeline");
      if (!host) { continue; }
      const load = () => {
        if (!det.open || host.dataset.loaded) { return; }
        host.dataset.loaded = "1";
        host.textContent = "loading…";
        fetch(host.dataset.src, {credentials: "same-origin"})
          .then((r) => r.json().then((j) => [r.ok, j]))
          .then(([ok, j]) => { if (ok) { drawTimeline(host, j); } else { host.textContent = j.error; } })
          .catch((e) => { host.textContent = "could not load the timeline: " + e; });
      };
      det.addEventListener("toggle", load);
      load();
    }
  }

  function init() {
    loadTimelines();
    const src = document.getElementById("chart-data");
    if (!src) { return; }
    const list = JSON.parse(src.textContent);
    const host = document.getElementById("charts");
    for (const c of list) {
      const fig = document.createElement("figure");
      fig.className = "nb-chart";
      fig.id = "chart-" + c.id;
      const bar = document.createElement("div");
      bar.className = "chart-tools";
      const b = document.createElement("button");
      b.type = "button";
      b.className = "png";
      b.textContent = "PNG";
      b.title = "download this chart as a PNG";
      bar.appendChild(b);
      const plot = document.createElement("div");
      plot.className = "plot";
      const out = document.createElement("p");
      out.className = "readout";
      fig.append(bar, plot, out);
      host.appendChild(fig);
      build(fig, c);
    }
    const p = state().get("point");
    if (p) { openPoint(p, null); }
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", init); } else { init(); }
}());
