// "/flows/{id}": a flow's processors and connections as a graph, with queued counts,
// back-pressure state and start/stop buttons, polled once a second.

import { post, seg, followDetail, showError } from "./api.js";
import { h, badge, setBadge, setText, link, breadcrumbs, card, tile } from "./dom.js";
import { svg, layout, curve, arrowDefs, panZoom, fitTexts } from "./graph.js";
import * as fmt from "./format.js";

const PROC_W = 236;
const PROC_H = 104;
const CONN_W = 176;
const CONN_H = 62;

/** Shows the flow `id` in `main`; returns the function that stops its updates. */
export function mount(main, [id]) {
  breadcrumbs([["Overview", "/"], ["Flow"]]);
  const view = new FlowView(main, id);
  const stop = followDetail(main, `/flows/${seg(id)}`, "flow", view);
  view.refreshNow = stop.now;
  return stop;
}

/** How full a connection is: the larger of its count and size fractions, in 0..1. */
export function connectionFill(c) {
  const byCount = c.object_threshold > 0 ? c.queued_count / c.object_threshold : 0;
  const bySize = c.size_threshold_bytes > 0 ? c.queued_bytes / c.size_threshold_bytes : 0;
  return Math.min(1, Math.max(byCount, bySize));
}

class FlowView {
  constructor(main, id) {
    this.main = main;
    this.id = id;
    this.topology = null;
    this.refreshNow = () => {};
    this.name = h("h1", { id: "flow-name" }, id);
    this.status = badge("running", { id: "flow-status" });
    this.groups = h("div", { class: "chips", id: "flow-groups" });
    const tiles = [
      tile("Processors running", "tile-running"),
      tile("Flow files queued", "tile-queued"),
      tile("Bytes queued", "tile-queued-bytes"),
      tile("Queues under back pressure", "tile-back-pressure"),
      tile("Out (1 s)", "tile-out-rate"),
    ];
    [this.running, this.queued, this.queuedBytes, this.backPressure, this.outRate] =
      tiles.map(([, value]) => value);
    this.graph = svg("svg", { id: "flow-graph", class: "graph", role: "img", "aria-label": "Flow graph" });
    this.fitButton = h("button", { class: "btn btn-small", type: "button" }, "Fit");
    this.processorsBody = h("tbody");
    this.connectionsBody = h("tbody");
    this.bulletins = h("ul", { class: "bulletins", id: "bulletins" });
    main.append(
      h("div", { class: "page-head" },
        h("div", { class: "page-title" }, this.name, this.status),
        h("div", { class: "page-actions" },
          link(`/flows/${encodeURIComponent(id)}/provenance`, "Provenance search →"))),
      this.groups,
      h("div", { class: "tiles" }, tiles.map(([el]) => el)),
      card(["Flow graph", h("span", { class: "legend" },
        legendItem("running", "Running"), legendItem("stopped", "Stopped"),
        legendItem("disabled", "Disabled"), legendItem("pressure", "Back pressure")), this.fitButton],
      { class: "card graph-card" }, h("div", { class: "graph-wrap" }, this.graph)),
      h("div", { class: "columns" },
        card("Processors", { class: "card grow" },
          h("div", { class: "table-scroll" }, h("table", { class: "table", id: "processors-table" },
            h("thead", {}, h("tr", {},
              h("th", {}, "Processor"), h("th", {}, "Type"), h("th", {}, "Group"), h("th", {}, "State"),
              h("th", { class: "num" }, "In"), h("th", { class: "num" }, "Out"),
              h("th", { class: "num", title: "Flow files in per second, last 1 s" }, "In/s"),
              h("th", { class: "num", title: "Flow files out per second, last 1 s" }, "Out/s"),
              h("th", { class: "num", title: "Flow files out per second, last 10 s" }, "Out 10s"),
              h("th", { class: "num", title: "Flow files out per second, last 60 s" }, "Out 60s"),
              h("th", { class: "num" }, "Bytes in"), h("th", { class: "num" }, "Bytes out"),
              h("th", { class: "num" }, "Tasks"), h("th", {}, ""))),
            this.processorsBody))),
      ),
      card("Connections", {},
        h("div", { class: "table-scroll" }, h("table", { class: "table", id: "connections-table" },
          h("thead", {}, h("tr", {},
            h("th", {}, "From"), h("th", {}, "Relationships"), h("th", {}, "To"),
            h("th", { class: "num" }, "Queued"), h("th", { class: "num" }, "Bytes"),
            h("th", {}, "Fill"), h("th", { class: "num" }, "Thresholds"), h("th", {}, "Back pressure"))),
          this.connectionsBody))),
      card("Bulletins", {}, this.bulletins),
    );
    // One listener for every start/stop button, in the graph or the table.
    main.addEventListener("click", (e) => {
      const button = e.target.closest("[data-action][data-processor-id]");
      if (button) this.setState(button.dataset.processorId, button.dataset.action);
    });
  }

  async setState(pid, action) {
    try {
      const processor = await post(`/flows/${seg(this.id)}/processors/${seg(pid)}/${action}`);
      this.updateProcessor(processor, null);
      // The totals and the queues change too: show them now, not at the next tick.
      this.refreshNow();
    } catch (e) {
      showError(`Cannot ${action} ${pid}`, e);
    }
  }

  update(flow) {
    breadcrumbs([["Overview", "/"], [flow.name]]);
    setText(this.name, flow.name);
    setBadge(this.status, flow.status);
    this.main.dataset.status = flow.status;
    this.groups.replaceChildren(...flow.groups.map((g) =>
      h("span", { class: `chip engine-${g.engine}`, dataset: { group: g.id } },
        h("b", {}, g.name), ` ${g.engine}`)));
    const signature = JSON.stringify([flow.processors.map((p) => p.id),
      flow.connections.map((c) => [c.id, c.source, c.destination])]);
    if (signature !== this.topology) {
      this.topology = signature;
      this.draw(flow);
    }
    // Rates are the server's, sampled once a second.
    let outRate = 0;
    for (const p of flow.processors) {
      outRate += p.flowfiles_out_rate_1s;
      this.updateProcessor(p);
    }
    for (const c of flow.connections) this.updateConnection(c);
    setText(this.running, `${flow.processors.filter((p) => p.state === "running").length} of ${flow.processors.length}`);
    setText(this.queued, fmt.count(flow.connections.reduce((s, c) => s + c.queued_count, 0)));
    setText(this.queuedBytes, fmt.bytes(flow.connections.reduce((s, c) => s + c.queued_bytes, 0)));
    const pressured = flow.connections.filter((c) => c.back_pressure).length;
    setText(this.backPressure, String(pressured));
    this.backPressure.dataset.level = pressured ? "high" : "ok";
    setText(this.outRate, `${fmt.count(outRate)} files/s`);
    this.showBulletins(flow);
  }

  draw(flow) {
    // Each connection is a node of its own between its ends, so that its label gets a
    // place in the layout instead of overlapping others.
    const nodes = flow.processors.map((p) => ({ id: `p:${p.id}`, width: PROC_W, height: PROC_H }));
    const known = new Set(flow.processors.map((p) => p.id));
    const ports = new Set();
    for (const c of flow.connections) {
      for (const end of [c.source, c.destination]) {
        if (!known.has(end) && !ports.has(end)) {
          ports.add(end);
          nodes.push({ id: `p:${end}`, width: PROC_W, height: 44 });
        }
      }
      nodes.push({ id: `c:${c.id}`, width: CONN_W, height: CONN_H });
    }
    const edges = flow.connections.flatMap((c) => [
      { from: `p:${c.source}`, to: `c:${c.id}`, head: false },
      { from: `c:${c.id}`, to: `p:${c.destination}`, head: true },
    ]);
    // Top to bottom, as NiFi users draw flows; the connection boxes sit between the layers.
    const g = layout(nodes, edges, { direction: "TB", layerGap: 30, nodeGap: 40 });
    const edgeLayer = svg("g", { class: "edges" });
    for (const { edge, points } of g.edges) {
      edgeLayer.append(svg("path", { class: "edge", d: curve(points, "TB"),
        "marker-end": edge.head ? "url(#arrow)" : null, "data-link": `${edge.from}->${edge.to}` }));
    }
    const nodeLayer = svg("g", { class: "nodes" });
    for (const p of flow.processors) nodeLayer.append(processorNode(p, g.nodes.get(`p:${p.id}`)));
    for (const port of ports) nodeLayer.append(portNode(port, g.nodes.get(`p:${port}`)));
    for (const c of flow.connections) nodeLayer.append(connectionNode(c, g.nodes.get(`c:${c.id}`)));
    this.graph.replaceChildren(arrowDefs(), edgeLayer, nodeLayer);
    fitTexts(this.graph);
    const view = panZoom(this.graph, g.width, g.height, { maxHeight: 1600 });
    this.fitButton.onclick = () => view.fit();
    this.processorsBody.replaceChildren(...flow.processors.map(processorRow));
    this.connectionsBody.replaceChildren(...flow.connections.map(connectionRow));
  }

  updateProcessor(p) {
    const node = this.graph.querySelector(`g[data-processor="${CSS.escape(p.id)}"]`);
    if (node) {
      Object.assign(node.dataset, { state: p.state, flowfilesIn: String(p.flowfiles_in),
        flowfilesOut: String(p.flowfiles_out), tasks: String(p.tasks),
        inRate: String(p.flowfiles_in_rate_1s), outRate: String(p.flowfiles_out_rate_1s) });
      node.setAttribute("class", `processor state-${p.state}`);
      const q = (name) => node.querySelector(`.${name}`);
      setText(q("p-in"), `In ${fmt.count(p.flowfiles_in)} (${fmt.bytes(p.bytes_in)})`);
      setText(q("p-out"), `Out ${fmt.count(p.flowfiles_out)} (${fmt.bytes(p.bytes_out)})`);
      setText(q("p-rate"), fmt.rate(p.flowfiles_out_rate_1s));
      setText(q("p-tasks"), `${fmt.count(p.tasks)} tasks`);
      const toggle = q("p-toggle");
      toggle.style.display = p.state === "disabled" ? "none" : "";
      toggle.dataset.action = p.state === "running" ? "stop" : "start";
      setText(toggle.querySelector("title"), p.state === "running" ? `Stop ${p.name}` : `Start ${p.name}`);
      toggle.querySelector(".icon-stop").style.display = p.state === "running" ? "" : "none";
      toggle.querySelector(".icon-start").style.display = p.state === "running" ? "none" : "";
      const warn = q("p-bulletins");
      warn.style.display = p.bulletins.length ? "" : "none";
      setText(warn.querySelector("title"), p.bulletins.map((b) => `${b.level}: ${b.message}`).join("\n"));
      setText(warn.querySelector("text"), String(p.bulletins.length));
    }
    const tr = this.processorsBody.querySelector(`tr[data-processor-row="${CSS.escape(p.id)}"]`);
    if (tr) {
      const c = tr.children;
      setBadge(c[3].firstChild, p.state);
      setText(c[4], fmt.count(p.flowfiles_in));
      setText(c[5], fmt.count(p.flowfiles_out));
      const rates = [
        [p.flowfiles_in_rate_1s, `${fmt.bytes(Math.round(p.bytes_in_rate_1s))}/s in over the last second`],
        [p.flowfiles_out_rate_1s, `${fmt.bytes(Math.round(p.bytes_out_rate_1s))}/s out over the last second`],
        [p.flowfiles_out_rate_10s, `${fmt.bytes(Math.round(p.bytes_out_rate_10s))}/s out over the last 10 s`],
        [p.flowfiles_out_rate_60s, `${fmt.bytes(Math.round(p.bytes_out_rate_60s))}/s out over the last 60 s`],
      ];
      rates.forEach(([rate, bytes], i) => {
        setText(c[6 + i], fmt.rate(rate));
        c[6 + i].title = bytes;
        c[6 + i].classList.toggle("muted", rate === 0);
      });
      Object.assign(tr.dataset, { inRate: String(p.flowfiles_in_rate_1s),
        outRate: String(p.flowfiles_out_rate_1s), outRate10s: String(p.flowfiles_out_rate_10s),
        outRate60s: String(p.flowfiles_out_rate_60s) });
      setText(c[10], fmt.bytes(p.bytes_in));
      setText(c[11], fmt.bytes(p.bytes_out));
      setText(c[12], fmt.count(p.tasks));
      const [start, stop] = c[13].children;
      start.disabled = p.state !== "stopped";
      stop.disabled = p.state !== "running";
    }
  }

  updateConnection(c) {
    const fill = connectionFill(c);
    const level = c.back_pressure ? "high" : fill >= 0.5 ? "low" : "ok";
    const node = this.graph.querySelector(`g[data-connection="${CSS.escape(c.id)}"]`);
    if (node) {
      Object.assign(node.dataset, { queued: String(c.queued_count), queuedBytes: String(c.queued_bytes),
        backPressure: String(c.back_pressure) });
      node.setAttribute("class", `connection fill-level-${level}${c.back_pressure ? " pressured" : ""}`);
      setText(node.querySelector(".c-queued"), `Queued ${fmt.count(c.queued_count)} (${fmt.bytes(c.queued_bytes)})`);
      const bar = node.querySelector(".c-fill");
      bar.setAttribute("width", String(fill * (CONN_W - 20)));
      bar.setAttribute("class", `c-fill fill-${level}`);
      setText(node.querySelector(".c-threshold"), `${fmt.percent(fill)} of ${fmt.count(c.object_threshold)} / ${fmt.bytes(c.size_threshold_bytes)}`);
    }
    for (const path of this.graph.querySelectorAll(`path[data-link$="->c:${CSS.escape(c.id)}"], path[data-link^="c:${CSS.escape(c.id)}->"]`)) {
      path.classList.toggle("hot", c.back_pressure);
      if (path.hasAttribute("marker-end")) path.setAttribute("marker-end", c.back_pressure ? "url(#arrow-hot)" : "url(#arrow)");
    }
    const tr = this.connectionsBody.querySelector(`tr[data-connection-row="${CSS.escape(c.id)}"]`);
    if (tr) {
      const cells = tr.children;
      setText(cells[3], fmt.count(c.queued_count));
      setText(cells[4], fmt.bytes(c.queued_bytes));
      const bar = cells[5].querySelector(".bar-fill");
      bar.style.width = `${fill * 100}%`;
      bar.className = `bar-fill fill-${level}`;
      setText(cells[6], `${fmt.count(c.object_threshold)} / ${fmt.bytes(c.size_threshold_bytes)}`);
      cells[7].replaceChildren(c.back_pressure ? badge("engaged") : h("span", { class: "muted" }, "no"));
      tr.dataset.queued = String(c.queued_count);
      tr.dataset.backPressure = String(c.back_pressure);
    }
  }

  showBulletins(flow) {
    const all = flow.processors.flatMap((p) => p.bulletins.map((b) => ({ ...b, processor: p.name })))
      .sort((a, b) => b.time_ms - a.time_ms)
      .slice(0, 20);
    const items = all.map((b) => h("li", { class: `bulletin level-${b.level.toLowerCase()}` },
      h("span", { class: "mono muted" }, fmt.time(b.time_ms)),
      h("span", { class: `badge badge-${b.level.toLowerCase()}` }, b.level),
      h("b", {}, b.processor), h("span", {}, b.message)));
    const key = JSON.stringify(all);
    if (this.bulletins.dataset.key === key) return;
    this.bulletins.dataset.key = key;
    this.bulletins.replaceChildren(...(items.length ? items
      : [h("li", { class: "muted" }, "No warnings or errors.")]));
  }
}

function legendItem(kind, label) {
  return h("span", { class: "legend-item" }, h("span", { class: `legend-swatch state-${kind}` }), label);
}

function processorNode(p, box) {
  const toggle = svg("g", { class: "p-toggle", role: "button", tabindex: 0,
    "data-processor-id": p.id, "data-action": "stop", transform: `translate(${PROC_W - 36},12)` },
  svg("title", {}, ""),
  svg("rect", { width: 26, height: 24, rx: 6 }),
  svg("rect", { class: "icon-stop", x: 8, y: 7, width: 10, height: 10, rx: 1.5 }),
  svg("path", { class: "icon-start", d: "M9,6 L19,12 L9,18 z" }));
  const bulletins = svg("g", { class: "p-bulletins", transform: `translate(${PROC_W - 66},12)` },
    svg("title", {}, ""),
    svg("rect", { width: 24, height: 24, rx: 12 }),
    svg("text", { x: 12, y: 16.5, "text-anchor": "middle" }, "0"));
  return svg("g", { class: `processor state-${p.state}`, "data-processor": p.id,
    transform: `translate(${box.x},${box.y})` },
  svg("rect", { class: "node-box", width: PROC_W, height: PROC_H, rx: 8 }),
  svg("rect", { class: "node-strip", width: 5, height: PROC_H, rx: 2 }),
  svg("text", { class: "node-title", x: 16, y: 26, "data-fit": PROC_W - 96 }, p.name),
  svg("text", { class: "small muted", x: 16, y: 44, "data-fit": PROC_W - 28 }, `${p.type} · ${p.group}`),
  svg("text", { class: "p-in small", x: 16, y: 66 }, "–"),
  svg("text", { class: "p-out small", x: 16, y: 84 }, "–"),
  svg("text", { class: "p-rate small strong", x: PROC_W - 12, y: 84, "text-anchor": "end" }, ""),
  svg("text", { class: "p-tasks small muted", x: PROC_W - 12, y: 66, "text-anchor": "end" }, ""),
  svg("title", {}, `${p.name} (${p.type})`),
  bulletins, toggle);
}

function portNode(name, box) {
  return svg("g", { class: "port", "data-port": name, transform: `translate(${box.x},${box.y})` },
    svg("rect", { class: "node-box", width: box.width, height: box.height, rx: 22 }),
    svg("text", { class: "node-title", x: box.width / 2, y: 27, "text-anchor": "middle",
      "data-fit": box.width - 24 }, name));
}

function connectionNode(c, box) {
  return svg("g", { class: "connection", "data-connection": c.id, "data-queued": c.queued_count,
    transform: `translate(${box.x},${box.y})` },
  svg("title", {}, `${c.source} → ${c.destination}: ${c.relationships.join(", ")}`),
  svg("rect", { class: "conn-box", width: CONN_W, height: CONN_H, rx: 6 }),
  svg("text", { class: "small muted", x: 10, y: 16, "data-fit": CONN_W - 20 },
    c.relationships.join(", ") || "(no relationship)"),
  svg("text", { class: "c-queued small strong", x: 10, y: 33 }, "–"),
  svg("rect", { class: "fill-bg", x: 10, y: 40, width: CONN_W - 20, height: 5, rx: 2.5 }),
  svg("rect", { class: "c-fill fill-ok", x: 10, y: 40, width: 0, height: 5, rx: 2.5 }),
  svg("text", { class: "c-threshold tiny muted", x: 10, y: 56 }, ""));
}

function processorRow(p) {
  return h("tr", { dataset: { processorRow: p.id } },
    h("td", { class: "name-cell" }, p.name),
    h("td", {}, p.type),
    h("td", { class: "muted" }, p.group),
    h("td", {}, badge(p.state)),
    ...Array.from({ length: 9 }, () => h("td", { class: "num" })),
    h("td", { class: "actions" },
      h("button", { class: "btn btn-small", type: "button", dataset: { action: "start", processorId: p.id } }, "Start"),
      h("button", { class: "btn btn-small", type: "button", dataset: { action: "stop", processorId: p.id } }, "Stop")));
}

function connectionRow(c) {
  return h("tr", { dataset: { connectionRow: c.id } },
    h("td", {}, c.source),
    h("td", { class: "muted" }, c.relationships.join(", ")),
    h("td", {}, c.destination),
    h("td", { class: "num" }), h("td", { class: "num" }),
    h("td", {}, h("div", { class: "bar" }, h("div", { class: "bar-fill fill-ok" }))),
    h("td", { class: "num muted" }), h("td", {}));
}
