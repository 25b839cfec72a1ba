// "/flows/{id}/provenance": provenance search (flow file, component, type, time) and a flow
// file's lineage graph. The search lives in the address (?flowfile=&component=&type=&since=
// &until=&limit=&lineage=&lineage_depth=&lineage_max=), so a search or a lineage can be
// bookmarked and shared. A lineage is bounded (the server's depth and flow-file limits);
// a flow file with more beyond shows "+N", which expands it in place.

import { get, blob, seg, liveState, showError } from "./api.js";
import { h, setText, breadcrumbs, card, banner, errorBox } from "./dom.js";
import { svg, layout, curve, arrowDefs, panZoom, fitTexts } from "./graph.js";
import * as fmt from "./format.js";

/** NiFi's provenance event types, as Weir records them. */
const EVENT_TYPES = ["CREATE", "RECEIVE", "FETCH", "SEND", "DROP", "EXPIRE", "ROUTE",
  "ATTRIBUTES_MODIFIED", "CONTENT_MODIFIED", "CLONE", "FORK", "JOIN", "REMOTE_INVOCATION"];

/** Shows the provenance page of flow `id` in `main`. Nothing here refreshes by itself. */
export function mount(main, [id]) {
  const base = `/flows/${encodeURIComponent(id)}`;
  breadcrumbs([["Overview", "/"], ["Flow", base], ["Provenance"]]);
  const params = new URLSearchParams(window.location.search);
  const field = (name, attrs) => h("input", { id: `prov-${name}`, name, value: params.get(name) ?? "",
    ...attrs });
  const flowfile = field("flowfile", { placeholder: "uuid", class: "mono", size: 38 });
  const component = field("component", { placeholder: "any", list: "prov-components" });
  const components = h("datalist", { id: "prov-components" });
  const type = h("select", { id: "prov-type", name: "type" }, h("option", { value: "" }, "any"),
    EVENT_TYPES.map((t) => h("option", { value: t, selected: params.get("type") === t }, t)));
  const since = field("since", { type: "datetime-local", step: 1 });
  const until = field("until", { type: "datetime-local", step: 1 });
  const limit = field("limit", { type: "number", min: 1, max: 100000, placeholder: "1000", size: 6 });
  const count = h("span", { class: "count", id: "prov-count" }, "0");
  const results = h("tbody");
  const lineageCard = h("div", { id: "lineage-card" });
  const form = h("form", { id: "prov-form", class: "search-form", onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const input of [flowfile, component, type, since, until, limit]) {
      if (input.value.trim()) next.set(input.name, input.value.trim());
    }
    window.history.replaceState(null, "", `${window.location.pathname}?${next}`);
    search();
  } },
  labelled("Flow file", flowfile), labelled("Component", component, components),
  labelled("Type", type), labelled("Since", since), labelled("Until", until),
  labelled("Limit", limit),
  h("div", { class: "form-buttons" },
    h("button", { type: "submit", class: "btn btn-primary", id: "prov-search" }, "Search"),
    h("button", { type: "button", class: "btn", onclick: () => {
      for (const input of [flowfile, component, type, since, until, limit]) input.value = "";
      form.requestSubmit();
    } }, "Clear")));
  main.append(
    h("div", { class: "page-head" },
      h("div", { class: "page-title" }, h("h1", { id: "flow-name" }, "Provenance"))),
    card("Search", {}, form),
    card(["Events", count], {},
      h("div", { class: "table-scroll tall" }, h("table", { class: "table", id: "prov-table" },
        h("thead", {}, h("tr", {},
          h("th", {}, "Time"), h("th", {}, "Type"), h("th", {}, "Flow file"),
          h("th", {}, "Component"), h("th", {}, "Details"), h("th", {}, "Parents / children"),
          h("th", {}, ""))),
        results))),
    lineageCard,
  );

  let disposed = false;
  // Searches run on demand: nothing here is live.
  liveState("none");
  get(`/flows/${seg(id)}`).then((flow) => {
    if (disposed) return;
    breadcrumbs([["Overview", "/"], [flow.name, base], ["Provenance"]]);
    setText(main.querySelector("#flow-name"), `Provenance · ${flow.name}`);
    components.replaceChildren(...flow.processors.map((p) => h("option", { value: p.name })));
  }).catch((e) => showError("Cannot load the flow", e));

  const showLineage = (uuid) => {
    const next = new URLSearchParams(window.location.search);
    next.set("lineage", uuid);
    window.history.replaceState(null, "", `${window.location.pathname}?${next}`);
    lineage(id, uuid, lineageCard);
  };

  async function search() {
    const query = new URLSearchParams();
    if (flowfile.value.trim()) query.set("flowfile", flowfile.value.trim());
    if (component.value.trim()) query.set("component", component.value.trim());
    if (type.value) query.set("type", type.value);
    if (since.value) query.set("since_ms", String(new Date(since.value).getTime()));
    if (until.value) query.set("until_ms", String(new Date(until.value).getTime()));
    if (limit.value) query.set("limit", limit.value);
    results.replaceChildren(h("tr", { class: "empty-row" }, h("td", { colspan: 7 }, "Searching…")));
    try {
      const events = await get(`/flows/${seg(id)}/provenance?${query}`);
      if (disposed) return;
      banner(null);
      setText(count, String(events.length));
      results.replaceChildren(...(events.length ? events.map((e) => eventRow(e, showLineage))
        : [h("tr", { class: "empty-row" }, h("td", { colspan: 7 }, "No event matches."))]));
    } catch (e) {
      results.replaceChildren();
      showError("Search failed", e);
    }
  }

  search();
  if (params.get("lineage")) lineage(id, params.get("lineage"), lineageCard);
  return () => {
    disposed = true;
  };
}

function labelled(label, input, ...extra) {
  return h("label", { class: "field" }, h("span", {}, label), input, ...extra);
}

function eventRow(e, showLineage) {
  const family = [...e.parents.map((p) => `↑ ${p.slice(0, 8)}`), ...e.children.map((c) => `↓ ${c.slice(0, 8)}`)];
  return h("tr", { dataset: { event: String(e.id), flowfile: e.flowfile, type: e.type, component: e.component } },
    h("td", { class: "mono nowrap" }, fmt.preciseTime(e.time_ms)),
    h("td", {}, h("span", { class: `event-type type-${e.type.toLowerCase()}` }, e.type)),
    h("td", { class: "mono" }, h("a", { href: "#", title: `${e.flowfile}\nShow the lineage`,
      dataset: { id: e.flowfile }, onclick: (ev) => {
        ev.preventDefault();
        showLineage(e.flowfile);
      } }, fmt.shortId(e.flowfile))),
    h("td", {}, e.component),
    h("td", { class: "muted" }, e.details ?? ""),
    h("td", { class: "mono small-text", title: [...e.parents, ...e.children].join("\n") }, family.join(" ")),
    h("td", { class: "actions" }, h("button", { class: "btn btn-small", type: "button",
      onclick: () => showLineage(e.flowfile) }, "Lineage")));
}

/** A lineage request's limits from the address (`lineage_depth`, `lineage_max`), or the
 * server's defaults. */
function lineageLimits() {
  const params = new URLSearchParams(window.location.search);
  return { depth: params.get("lineage_depth") ?? "", max: params.get("lineage_max") ?? "" };
}

/** The lineage path of flow file `uuid`, with the limits that are set. */
function lineagePath(flowId, uuid, { depth, max }) {
  const query = new URLSearchParams();
  if (depth !== "") query.set("depth", depth);
  if (max !== "") query.set("max_nodes", max);
  const q = query.toString();
  return `/flows/${seg(flowId)}/flowfiles/${seg(uuid)}/lineage${q ? `?${q}` : ""}`;
}

/**
 * Shows flow file `uuid`'s lineage in `container`: the server's bounded graph drawn at
 * once; a flow file with parents or children left out carries a "+N" button that fetches
 * its own lineage (one hop) and merges it into the graph, as NiFi's expand does.
 */
async function lineage(flowId, uuid, container) {
  const title = () => [`Lineage of `, h("span", { class: "mono" }, uuid)];
  container.replaceChildren(card(title(), {}, h("p", { class: "muted" }, "Loading…")));
  const limits = lineageLimits();
  let first;
  try {
    first = await get(lineagePath(flowId, uuid, limits));
  } catch (e) {
    container.replaceChildren(card(title(), {}, errorBox(e.message)));
    return;
  }
  // The merged graph: nodes by id, links by their ends; a flow file's counts of parents and
  // children left out are the least any answer gave (its own expansion's is exact).
  const nodes = new Map();
  const links = new Map();
  const expanded = new Set();
  const merge = (graph) => {
    for (const n of graph.nodes) {
      const had = nodes.get(n.id);
      nodes.set(n.id, had ? { ...had, more_parents: Math.min(had.more_parents, n.more_parents),
        more_children: Math.min(had.more_children, n.more_children) } : { ...n });
    }
    for (const l of graph.links) links.set(`${l.from}\u0000${l.to}`, l);
  };
  merge(first);

  const download = h("button", { class: "btn btn-small", type: "button", id: "download-content",
    onclick: async () => {
      try {
        const data = await blob(`/flows/${seg(flowId)}/flowfiles/${seg(uuid)}/content`);
        const a = h("a", { href: URL.createObjectURL(data), download: `${uuid}.bin` });
        a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
      } catch (e) {
        showError("Cannot download the content", e);
      }
    } }, "Download content");
  const close = h("button", { class: "btn btn-small", type: "button", onclick: () => {
    const next = new URLSearchParams(window.location.search);
    for (const key of ["lineage", "lineage_depth", "lineage_max"]) next.delete(key);
    window.history.replaceState(null, "", `${window.location.pathname}?${next}`);
    container.replaceChildren();
  } }, "Close");
  const depthInput = h("input", { id: "lineage-depth", type: "number", min: 0, max: 100, size: 3,
    value: limits.depth, placeholder: String(first.depth) });
  const maxInput = h("input", { id: "lineage-max", type: "number", min: 1, max: 10000, size: 5,
    value: limits.max, placeholder: String(first.max_nodes) });
  const limitsForm = h("form", { class: "lineage-limits", id: "lineage-limits", onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams(window.location.search);
    for (const [key, input] of [["lineage_depth", depthInput], ["lineage_max", maxInput]]) {
      if (input.value.trim()) next.set(key, input.value.trim());
      else next.delete(key);
    }
    window.history.replaceState(null, "", `${window.location.pathname}?${next}`);
    lineage(flowId, uuid, container);
  } }, h("label", {}, "Depth ", depthInput), h("label", {}, "Max flow files ", maxInput),
  h("button", { type: "submit", class: "btn btn-small" }, "Apply"));
  const summary = h("p", { class: "muted hint", id: "lineage-summary" });
  const wrap = h("div", { class: "graph-wrap" });
  container.replaceChildren(card([...title(), h("span", { class: "card-tools" }, limitsForm,
    download, close)], { class: "card graph-card" }, wrap, summary));

  async function expand(id) {
    if (expanded.has(id)) return;
    expanded.add(id);
    draw();
    try {
      merge(await get(lineagePath(flowId, id, { depth: "1", max: limits.max })));
    } catch (e) {
      expanded.delete(id);
      showError("Cannot expand the lineage", e);
    }
    draw();
  }

  function draw() {
    const all = [...nodes.values()];
    const size = (n) => (n.kind === "flowfile" ? { width: 210, height: 40 } : { width: 210, height: 34 });
    const laid = layout(all.map((n) => ({ id: n.id, ...size(n) })), [...links.values()],
      { direction: "TB", layerGap: 34, nodeGap: 24 });
    const edges = svg("g", { class: "edges" }, laid.edges.map(({ points }) =>
      svg("path", { class: "edge", d: curve(points, "TB"), "marker-end": "url(#arrow)" })));
    const drawn = svg("g", { class: "nodes" }, all.map((n) => {
      const box = laid.nodes.get(n.id);
      const focus = n.id === uuid;
      const more = n.more_parents + n.more_children;
      const beyond = [n.more_parents ? `${n.more_parents} more parents` : null,
        n.more_children ? `${n.more_children} more children` : null].filter(Boolean).join(", ");
      return svg("g", { class: `lineage-node kind-${n.kind}${focus ? " focus" : ""}${more ? " frontier" : ""}`,
        "data-lineage-node": n.id, "data-kind": n.kind, "data-more-parents": n.more_parents,
        "data-more-children": n.more_children, transform: `translate(${box.x},${box.y})` },
      svg("title", {}, n.kind === "flowfile" ? `${n.label}\n${n.id}${beyond ? `\n${beyond}` : ""}` : n.label),
      svg("rect", { width: box.width, height: box.height, rx: n.kind === "flowfile" ? 20 : 6 }),
      svg("text", { x: box.width / 2, y: box.height / 2 + 4.5, "text-anchor": "middle",
        "data-fit": box.width - 16 }, n.label),
      more ? expander(n, box, more, beyond) : null);
    }));
    const root = svg("svg", { id: "lineage", class: "graph lineage", role: "img", "aria-label": "Lineage graph" },
      arrowDefs(), edges, drawn);
    wrap.replaceChildren(root);
    const flowfiles = all.filter((n) => n.kind === "flowfile").length;
    const left = all.reduce((sum, n) => sum + n.more_parents + n.more_children, 0);
    summary.dataset.truncated = String(left > 0);
    summary.dataset.more = String(left);
    summary.replaceChildren(...[`${flowfiles} flow files, ${all.length - flowfiles} events. `,
      left > 0 ? h("strong", { class: "lineage-more" },
        `Up to ${fmt.count(left)} more related flow files not shown (depth ${first.depth}, at most ` +
        `${first.max_nodes} flow files a request): a flow file's “+N” expands it. `) : null,
      "Drag to pan, scroll to zoom."].filter((part) => part !== null));
    fitTexts(root);
    panZoom(root, laid.width, laid.height, { minHeight: 160, maxHeight: 720 });
  }

  /** The "+N" button on a frontier flow file; "N more" without a button once expanded
   * (more than one request holds). */
  function expander(n, box, more, beyond) {
    const done = expanded.has(n.id);
    const label = `+${fmt.count(more)}${done ? " more" : ""}`;
    const width = 12 + label.length * 7;
    return svg("g", { class: `lineage-expand${done ? " done" : ""}`, "data-action": "expand",
      "data-expand": n.id, transform: `translate(${box.width - width / 2},${-8})` },
    svg("title", {}, done ? `${beyond}: more than one request holds; search provenance for them`
      : `${beyond}: click to expand`),
    svg("rect", { x: 0, y: 0, width, height: 16, rx: 8 }),
    svg("text", { x: width / 2, y: 12, "text-anchor": "middle" }, label));
  }

  // One listener for every "+N": the graph is redrawn on each merge.
  wrap.addEventListener("click", (e) => {
    const target = e.target.closest("[data-expand]");
    if (target) expand(target.dataset.expand);
  });
  draw();
  container.scrollIntoView({ behavior: "smooth", block: "start" });
}
