// "/flows/{id}/provenance": provenance search (flow file, component, type, time) and a flow
// file's lineage graph. The search lives in the address (?flowfile=&component=&type=&since=
// &until=&limit=&lineage=), so a search or a lineage can be bookmarked and shared.

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

async function lineage(flowId, uuid, container) {
  container.replaceChildren(card(`Lineage of ${uuid}`, {}, h("p", { class: "muted" }, "Loading…")));
  let graph;
  try {
    graph = await get(`/flows/${seg(flowId)}/flowfiles/${seg(uuid)}/lineage`);
  } catch (e) {
    container.replaceChildren(card(`Lineage of ${uuid}`, {}, errorBox(e.message)));
    return;
  }
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
    next.delete("lineage");
    window.history.replaceState(null, "", `${window.location.pathname}?${next}`);
    container.replaceChildren();
  } }, "Close");
  const size = (n) => (n.kind === "flowfile" ? { width: 210, height: 40 } : { width: 210, height: 34 });
  const laid = layout(graph.nodes.map((n) => ({ id: n.id, ...size(n) })), graph.links,
    { direction: "TB", layerGap: 34, nodeGap: 24 });
  const edges = svg("g", { class: "edges" }, laid.edges.map(({ points }) =>
    svg("path", { class: "edge", d: curve(points, "TB"), "marker-end": "url(#arrow)" })));
  const nodes = svg("g", { class: "nodes" }, graph.nodes.map((n) => {
    const box = laid.nodes.get(n.id);
    const focus = n.id === uuid;
    return svg("g", { class: `lineage-node kind-${n.kind}${focus ? " focus" : ""}`,
      "data-lineage-node": n.id, "data-kind": n.kind, transform: `translate(${box.x},${box.y})` },
    svg("title", {}, n.kind === "flowfile" ? `${n.label}\n${n.id}` : n.label),
    svg("rect", { width: box.width, height: box.height, rx: n.kind === "flowfile" ? 20 : 6 }),
    svg("text", { x: box.width / 2, y: box.height / 2 + 4.5, "text-anchor": "middle",
      "data-fit": box.width - 16 }, n.label));
  }));
  const root = svg("svg", { id: "lineage", class: "graph lineage", role: "img", "aria-label": "Lineage graph" },
    arrowDefs(), edges, nodes);
  container.replaceChildren(card([`Lineage of `, h("span", { class: "mono" }, uuid),
    h("span", { class: "card-tools" }, download, close)], { class: "card graph-card" },
  h("div", { class: "graph-wrap" }, root),
  h("p", { class: "muted hint" }, `${graph.nodes.filter((n) => n.kind === "flowfile").length} flow files, ` +
    `${graph.nodes.filter((n) => n.kind === "event").length} events. Drag to pan, scroll to zoom.`)));
  fitTexts(root);
  panZoom(root, laid.width, laid.height, { minHeight: 160, maxHeight: 720 });
  container.scrollIntoView({ behavior: "smooth", block: "start" });
}
