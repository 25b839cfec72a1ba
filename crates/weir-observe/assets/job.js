// "/jobs/{id}": a job's DAG with live per-vertex metrics, polled once a second.

import { post, seg, followDetail, showError } from "./api.js";
import { h, badge, setBadge, setText, breadcrumbs, card, tile } from "./dom.js";
import { svg, layout, curve, midpoint, arrowDefs, sparkline, updateSparkline, panZoom, fitTexts } from "./graph.js";
import * as fmt from "./format.js";

const NODE_W = 228;
const NODE_H = 148;
/** The second title line pushes everything below it down by this much. */
const T = 16;
const SPARK_W = NODE_W - 24;
const SPARK_H = 26;

/** Backpressure levels as Flink shows them: share of time a vertex could not emit. */
export function backpressureLevel(ratio) {
  if (ratio > 0.5) return "high";
  if (ratio > 0.1) return "low";
  return "ok";
}

/** Queue fill levels: how close the fullest input queue is to its capacity. */
export function fillLevel(fill) {
  if (fill >= 0.8) return "high";
  if (fill >= 0.5) return "low";
  return "ok";
}

/** Shows the job `id` in `main`; returns the function that stops its updates. */
export function mount(main, [id]) {
  breadcrumbs([["Overview", "/"], ["Job"]]);
  const view = new JobView(main, id);
  return followDetail(main, `/jobs/${seg(id)}`, "job", view);
}

class JobView {
  constructor(main, id) {
    this.main = main;
    this.id = id;
    this.topology = null;
    this.previous = new Map();
    // A sink emits nothing and a source fused with an aggregation emits only at window
    // ends, so their `history` (items out) says little: their sparklines show items-in
    // rates instead, the server's `in_history` when it sends one, else those this page saw.
    this.inHistory = new Map();
    this.name = h("h1", { id: "job-name" }, id);
    this.status = badge("running", { id: "job-status" });
    this.meta = h("div", { class: "page-meta" });
    this.error = h("div", { class: "error-box", id: "job-error", hidden: true });
    this.cancel = h("button", { class: "btn btn-danger", id: "cancel-job", hidden: true,
      onclick: () => this.cancelJob() }, "Cancel job");
    const tiles = [
      tile("Source rate (1 s)", "tile-source-rate"),
      tile("Sink rate (1 s)", "tile-sink-rate"),
      tile("Max watermark lag", "tile-lag"),
      tile("Backpressured vertices", "tile-backpressured"),
      tile("Late events", "tile-late"),
      tile("Last snapshot", "tile-snapshot"),
    ];
    [this.sourceRate, this.sinkRate, this.lag, this.backpressured, this.late, this.snapshot] =
      tiles.map(([, value]) => value);
    this.snapshotNote = tiles[5][2];
    const stats = [
      stat("p50", "latency-p50"),
      stat("p99", "latency-p99"),
      stat("p99.9", "latency-p999"),
      stat("Mean", "latency-mean"),
      stat("Watermarks at sinks", "latency-count"),
    ];
    [this.p50, this.p99, this.p999, this.latencyMean, this.latencyCount] =
      stats.map(([, value]) => value);
    this.latency = card(["Window latency (watermark to sink)",
      h("span", { class: "card-note" }, "bucket upper bounds, over every sink instance")],
    { id: "window-latency", title: "For each watermark a sink took, the time since its source " +
      "sent it: every result of the windows that watermark closed reached the sink within it." },
    h("div", { class: "stats" }, stats.map(([el]) => el)));
    this.dag = svg("svg", { id: "dag", class: "graph", role: "img", "aria-label": "Job DAG" });
    this.fitButton = h("button", { class: "btn btn-small", type: "button" }, "Fit");
    this.tableBody = h("tbody");
    main.append(
      h("div", { class: "page-head" },
        h("div", { class: "page-title" }, this.name, this.status),
        h("div", { class: "page-actions" }, this.cancel)),
      this.meta,
      this.error,
      h("div", { class: "tiles" }, tiles.map(([el]) => el)),
      this.latency,
      card(["Job graph", h("span", { class: "legend" },
        legendItem("ok", "OK"), legendItem("low", "Low backpressure"),
        legendItem("high", "High backpressure")), this.fitButton],
      { class: "card graph-card" }, h("div", { class: "graph-wrap" }, this.dag)),
      card("Vertices", {},
        h("div", { class: "table-scroll" }, h("table", { class: "table", id: "vertices-table" },
          h("thead", {}, h("tr", {},
            h("th", {}, "Vertex"), h("th", { class: "num", title: "Parallelism" }, "Par."),
            h("th", { class: "num" }, "Items in"), h("th", { class: "num" }, "Items out"),
            h("th", { class: "num" }, "In 1 s"), h("th", { class: "num" }, "Out 1 s"),
            h("th", { class: "num" }, "Out 10 s"), h("th", { class: "num" }, "Out 60 s"),
            h("th", {}, "Input queues"),
            h("th", { class: "num" }, "Busy"), h("th", { class: "num" }, "Backpressured"),
            h("th", {}, "Watermark"), h("th", { class: "num" }, "Lag"),
            h("th", { class: "num" }, "Late"))),
          this.tableBody))),
    );
  }

  async cancelJob() {
    if (!window.confirm(`Cancel job ${this.name.textContent}?`)) return;
    try {
      await post(`/jobs/${seg(this.id)}/cancel`);
    } catch (e) {
      showError("Cannot cancel", e);
    }
  }

  update(job) {
    breadcrumbs([["Overview", "/"], [job.name]]);
    setText(this.name, job.name);
    setBadge(this.status, job.status);
    this.main.dataset.status = job.status;
    this.cancel.hidden = job.status !== "running";
    setText(this.meta, `Job ${job.id} · started ${fmt.time(job.started_ms)} · ` +
      `running for ${fmt.duration(job.duration_ms)}`);
    this.error.hidden = !job.error;
    setText(this.error, job.error ?? "");

    const signature = JSON.stringify([job.vertices.map((v) => v.name),
      job.edges.map((e) => [e.from, e.to, e.kind])]);
    if (signature !== this.topology) {
      this.topology = signature;
      this.draw(job);
    }
    this.producers = new Set(job.edges.map((e) => e.from));
    this.consumers = new Set(job.edges.map((e) => e.to));
    const now = performance.now();
    const stats = job.vertices.map((v) => this.stats(v, now));
    this.updateTiles(job, stats);
    this.updateLatency(job.window_latency);
    for (const s of stats) {
      this.updateNode(s);
      this.updateRow(s);
    }
    for (const e of job.edges) {
      const path = this.dag.querySelector(`path[data-edge="${CSS.escape(`${e.from}->${e.to}`)}"]`);
      const target = stats.find((s) => s.vertex.name === e.to);
      if (path && target) {
        const input = target.vertex.queue_fill.find((q) => q.input === e.to_ordinal);
        const hot = input ? fillLevel(input.fill) === "high" : false;
        path.classList.toggle("hot", hot);
        path.setAttribute("marker-end", hot ? "url(#arrow-hot)" : "url(#arrow)");
      }
    }
  }

  /** Derived figures of a vertex, with the backpressured share since the previous poll. */
  stats(vertex, now) {
    const total = vertex.busy_ms + vertex.idle_ms + vertex.backpressured_ms;
    const prev = this.previous.get(vertex.name);
    this.previous.set(vertex.name, { total, bp: vertex.backpressured_ms, busy: vertex.busy_ms });
    let bpRatio;
    let busyRatio;
    if (prev && total > prev.total) {
      bpRatio = (vertex.backpressured_ms - prev.bp) / (total - prev.total);
      busyRatio = (vertex.busy_ms - prev.busy) / (total - prev.total);
    } else {
      bpRatio = total > 0 ? vertex.backpressured_ms / total : 0;
      busyRatio = total > 0 ? vertex.busy_ms / total : 0;
    }
    const maxFill = Math.max(0, ...vertex.queue_fill.map((q) => q.fill));
    const queued = vertex.queue_fill.reduce((s, q) => s + q.queued, 0);
    const source = !this.consumers.has(vertex.name);
    const sink = !this.producers.has(vertex.name);
    // Sources and sinks are measured by what they take in (read, or write).
    const byInput = source || sink;
    if (byInput && vertex.in_history) {
      this.inHistory.set(vertex.name, vertex.in_history);
    } else if (byInput) {
      const seen = this.inHistory.get(vertex.name) ?? [];
      seen.push(vertex.in_rate_1s);
      this.inHistory.set(vertex.name, seen.slice(-60));
    }
    return { vertex, bpRatio, busyRatio, maxFill, queued, source, sink, byInput };
  }

  updateTiles(job, stats) {
    const inRate = (pick) => stats.filter(pick).reduce((sum, s) => sum + s.vertex.in_rate_1s, 0);
    setText(this.sourceRate, fmt.rate(inRate((s) => s.source)));
    setText(this.sinkRate, fmt.rate(inRate((s) => s.sink)));
    const lags = job.vertices.map((v) => v.watermark_lag_ms).filter((l) => l !== null);
    setText(this.lag, lags.length ? fmt.duration(Math.max(...lags)) : "no watermark");
    const hot = stats.filter((s) => backpressureLevel(s.bpRatio) !== "ok").length;
    setText(this.backpressured, `${hot} of ${stats.length}`);
    this.backpressured.dataset.level = hot ? "high" : "ok";
    setText(this.late, fmt.count(job.vertices.reduce((s, v) => s + v.late_events, 0)));
    const snap = job.last_snapshot;
    setText(this.snapshot, snap ? `#${snap.id}` : "none");
    setText(this.snapshotNote, snap
      ? `${fmt.bytes(snap.bytes)} in ${fmt.duration(snap.duration_ms)}, at ${fmt.time(snap.completed_ms).slice(11)}`
      : "");
  }

  /** The window latency card; every figure "–" before any sink took a watermark. */
  updateLatency(latency) {
    const l = latency ?? { count: 0, sum_seconds: 0, p50: null, p99: null, p999: null, buckets: [] };
    const bounded = l.buckets.filter((b) => b.upper_bound !== "+Inf");
    const largest = bounded.length ? bounded[bounded.length - 1].upper_bound : null;
    setText(this.p50, fmt.latencyBound(l.p50, largest));
    setText(this.p99, fmt.latencyBound(l.p99, largest));
    setText(this.p999, fmt.latencyBound(l.p999, largest));
    setText(this.latencyMean, l.count ? fmt.seconds(l.sum_seconds / l.count) : "–");
    setText(this.latencyCount, l.count ? fmt.count(l.count) : "–");
    const raw = (bound) => (bound === null || bound === undefined ? "" : String(bound));
    Object.assign(this.latency.dataset, {
      count: String(l.count), p50: raw(l.p50), p99: raw(l.p99), p999: raw(l.p999),
    });
  }

  draw(job) {
    const nodes = job.vertices.map((v) => ({ id: v.name, width: NODE_W, height: NODE_H }));
    const edges = job.edges.map((e) => ({ ...e }));
    const g = layout(nodes, edges, { direction: "LR", layerGap: 78, nodeGap: 30 });
    const edgeLayer = svg("g", { class: "edges" });
    const labelLayer = svg("g", { class: "edge-labels" });
    for (const { edge, points } of g.edges) {
      const d = curve(points, "LR");
      edgeLayer.append(svg("path", { class: "edge", d, "marker-end": "url(#arrow)",
        "data-edge": `${edge.from}->${edge.to}`, "data-kind": edge.kind },
      svg("title", {}, `${edge.from} → ${edge.to} (${edge.kind})`)));
      const m = midpoint(points);
      const w = edge.kind.length * 6.4 + 14;
      labelLayer.append(svg("g", { class: "edge-label", transform: `translate(${m.x - w / 2},${m.y - 9})` },
        svg("rect", { width: w, height: 18, rx: 9 }),
        svg("text", { x: w / 2, y: 12.5, "text-anchor": "middle" }, edge.kind)));
    }
    const nodeLayer = svg("g", { class: "nodes" });
    for (const v of job.vertices) {
      const box = g.nodes.get(v.name);
      nodeLayer.append(vertexNode(v, box));
    }
    this.dag.replaceChildren(arrowDefs(), edgeLayer, labelLayer, nodeLayer);
    fitTexts(this.dag);
    const view = panZoom(this.dag, g.width, g.height);
    this.fitButton.onclick = () => view.fit();
    this.tableBody.replaceChildren(...job.vertices.map((v) => vertexRow(v)));
  }

  updateNode({ vertex: v, bpRatio, maxFill, queued, byInput }) {
    const node = this.dag.querySelector(`g[data-vertex="${CSS.escape(v.name)}"]`);
    if (!node) return;
    const level = backpressureLevel(bpRatio);
    Object.assign(node.dataset, {
      rate: String(v.rate_1s), inRate: String(v.in_rate_1s), itemsIn: String(v.items_in), itemsOut: String(v.items_out),
      queueFill: String(maxFill), queued: String(queued), backpressure: level,
      watermarkLag: v.watermark_lag_ms === null ? "" : String(v.watermark_lag_ms),
    });
    node.setAttribute("class", `vertex bp-${level}`);
    const q = (name) => node.querySelector(`.${name}`);
    setText(q("v-rate"), byInput ? `${fmt.rate(v.in_rate_1s)} in` : fmt.rate(v.rate_1s));
    setText(q("v-out"), byInput ? `in ${fmt.count(v.items_in)}` : `out ${fmt.count(v.items_out)}`);
    const history = byInput ? this.inHistory.get(v.name) ?? [] : v.history;
    updateSparkline(q("sparkline"), history, SPARK_W, SPARK_H, 60);
    const fillLevelName = fillLevel(maxFill);
    const bar = q("v-fill");
    bar.setAttribute("width", String(Math.max(0, Math.min(1, maxFill)) * (NODE_W - 24)));
    bar.setAttribute("class", `v-fill fill-${fillLevelName}`);
    setText(q("v-queue"), v.queue_fill.length
      ? `queue ${fmt.percent(maxFill)} · ${fmt.count(queued)} queued`
      : "source: no input queue");
    setText(q("v-bp"), `bp ${fmt.percent(bpRatio)}`);
    setText(q("v-lag"), v.watermark_lag_ms === null ? "no watermark" : `lag ${fmt.duration(v.watermark_lag_ms)}`);
  }

  updateRow({ vertex: v, bpRatio, busyRatio }) {
    const tr = this.tableBody.querySelector(`tr[data-vertex-row="${CSS.escape(v.name)}"]`);
    if (!tr) return;
    const c = tr.children;
    setText(c[2], fmt.count(v.items_in));
    setText(c[3], fmt.count(v.items_out));
    setText(c[4], fmt.rate(v.in_rate_1s));
    setText(c[5], fmt.rate(v.rate_1s));
    setText(c[6], fmt.rate(v.rate_10s));
    setText(c[7], fmt.rate(v.rate_60s));
    const queues = v.queue_fill.map((q) => `#${q.input} ${fmt.count(q.queued)}/${fmt.count(q.capacity)}`);
    setText(c[8], queues.length ? queues.join(", ") : "–");
    c[8].dataset.level = fillLevel(Math.max(0, ...v.queue_fill.map((q) => q.fill)));
    setText(c[9], fmt.percent(busyRatio));
    setText(c[10], fmt.percent(bpRatio));
    c[10].dataset.level = backpressureLevel(bpRatio);
    setText(c[11], v.watermark_ms === null ? "–" : fmt.preciseTime(v.watermark_ms).slice(11));
    c[11].title = v.watermark_ms === null ? "" : fmt.preciseTime(v.watermark_ms);
    setText(c[12], v.watermark_lag_ms === null ? "–" : fmt.duration(v.watermark_lag_ms));
    setText(c[13], fmt.count(v.late_events));
  }
}

/** A figure in a card's row of stats: a label over a value; returns [stat, value]. */
function stat(label, id) {
  const value = h("div", { class: "stat-value", id }, "–");
  return [h("div", { class: "stat" }, h("div", { class: "stat-label" }, label), value), value];
}

function legendItem(level, label) {
  return h("span", { class: "legend-item" }, h("span", { class: `legend-swatch bp-${level}` }), label);
}

function vertexNode(v, box) {
  return svg("g", { class: "vertex bp-ok", "data-vertex": v.name, transform: `translate(${box.x},${box.y})` },
    svg("title", {}, v.name),
    svg("rect", { class: "node-box", width: NODE_W, height: NODE_H, rx: 8 }),
    svg("rect", { class: "node-strip", width: NODE_W, height: 5, rx: 2 }),
    svg("text", { class: "node-title", x: 12, y: 24, "data-fit": NODE_W - 64,
      "data-fit-second": NODE_W - 24, "data-line-height": T }, v.name),
    svg("g", { transform: `translate(${NODE_W - 44},11)` },
      svg("rect", { class: "pill", width: 34, height: 18, rx: 9 }),
      svg("text", { class: "pill-text", x: 17, y: 13, "text-anchor": "middle" }, `×${v.parallelism}`)),
    svg("text", { class: "v-rate", x: 12, y: 48 + T }, "–"),
    svg("text", { class: "v-out muted", x: NODE_W - 12, y: 48 + T, "text-anchor": "end" }, "–"),
    svg("g", { transform: `translate(12,${56 + T})` }, sparkline(v.history, SPARK_W, SPARK_H, 60)),
    svg("rect", { class: "fill-bg", x: 12, y: 90 + T, width: NODE_W - 24, height: 6, rx: 3 }),
    svg("rect", { class: "v-fill fill-ok", x: 12, y: 90 + T, width: 0, height: 6, rx: 3 }),
    svg("text", { class: "v-queue small", x: 12, y: 110 + T }, "–"),
    svg("text", { class: "v-lag small muted", x: 12, y: 124 + T }, "–"),
    svg("text", { class: "v-bp small", x: NODE_W - 12, y: 124 + T, "text-anchor": "end" }, "–"));
}

function vertexRow(v) {
  return h("tr", { dataset: { vertexRow: v.name } },
    h("td", { class: "name-cell", title: v.name }, v.name),
    h("td", { class: "num" }, String(v.parallelism)),
    ...Array.from({ length: 6 }, () => h("td", { class: "num" })),
    h("td", { class: "queues nowrap" }),
    h("td", { class: "num" }), h("td", { class: "num" }),
    h("td", { class: "mono" }), h("td", { class: "num" }), h("td", { class: "num" }));
}
