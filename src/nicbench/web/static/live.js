// The live run page: progress from server-sent events (the server reads
// them from the archive the running process writes).  Text goes in as
// text; the figure is SVG the server drew and escaped.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) { return; }
  const conn = document.getElementById("conn");
  const set = (id, v) => { const el = document.getElementById(id); if (el) { el.textContent = v; } };
  const es = new EventSource(live.dataset.events);
  es.addEventListener("open", () => set("conn", "connected"));
  es.addEventListener("progress", (ev) => {
    const d = JSON.parse(ev.data);
    set("done", String(d.done));
    set("total", d.total === null ? "?" : String(d.total));
    set("ok", String(d.ok));
    set("failed", String(d.failed));
    set("partial", String(d.partial));
    set("status", d.status);
    set("eta", d.eta_s === null ? "?" : Math.round(d.eta_s) + " s");
    const bar = document.getElementById("bar");
    if (bar) { bar.max = d.total || 1; bar.value = d.done; }
    const ul = document.getElementById("last");
    if (ul) {
      ul.replaceChildren(...d.last.map((t) => { const li = document.createElement("li"); li.textContent = t; return li; }));
    }
    const fig = document.getElementById("figure");
    if (fig && d.figure) {
      const doc = new DOMParser().parseFromString(d.figure, "image/svg+xml");
      if (doc.documentElement && doc.documentElement.nodeName === "svg") {
        fig.replaceChildren(document.importNode(doc.documentElement, true));
      }
    }
  });
  es.addEventListener("end", () => {
    es.close();
    set("conn", "finished: loading the report");
    window.setTimeout(() => window.location.reload(), 800);
  });
  es.addEventListener("failure", (ev) => { es.close(); set("conn", JSON.parse(ev.data).message); });
  es.addEventListener("error", () => { if (conn) { conn.textContent = "reconnecting…"; } });
}());
