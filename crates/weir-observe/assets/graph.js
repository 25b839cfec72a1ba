// A layered (Sugiyama-style) graph layout into SVG, for job DAGs, flows and lineage.
//
// Steps: reverse back edges so the graph is acyclic; give each node the layer of its
// longest path from a source; put dummy nodes where an edge spans several layers so it is
// routed between the nodes instead of through them; order each layer by the barycenter of
// its neighbours (sweeps down and up, keeping the order with the fewest crossings); place
// the nodes of a layer next to each other, pulled toward their neighbours; draw each edge
// as smooth curves through its dummy points.

const SVG_NS = "http://www.w3.org/2000/svg";

/** Creates an SVG element with attributes and children. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== null && v !== undefined && v !== false) el.setAttribute(k, String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/**
 * Lays out a directed graph.
 *
 * `nodes`: [{id, width, height}]; `edges`: [{from, to, ...}] (edges naming unknown nodes are
 * skipped). `direction`: "LR" (layers left to right) or "TB" (top to bottom).
 * Returns {nodes: Map(id -> {x, y, width, height, layer}), edges: [{edge, points}],
 * width, height}, with x and y the top-left corner. Cost: O(sweeps * (V + E) log V) for the
 * ordering plus O(E^2) per layer pair for counting crossings; fine for the few hundred
 * nodes a dashboard shows.
 */
export function layout(nodes, edges, { direction = "LR", layerGap = 90, nodeGap = 28 } = {}) {
  const horizontal = direction === "LR";
  const ids = new Set(nodes.map((n) => n.id));
  const valid = edges.filter((e) => ids.has(e.from) && ids.has(e.to) && e.from !== e.to);
  const acyclic = breakCycles(nodes.map((n) => n.id), valid);
  const layerOf = assignLayers(nodes.map((n) => n.id), acyclic);

  // Real and dummy nodes, with the chains that long edges become.
  const size = new Map(nodes.map((n) => [n.id, n]));
  const all = new Map();
  for (const n of nodes) all.set(n.id, { id: n.id, layer: layerOf.get(n.id), dummy: false });
  const links = [];
  const chains = [];
  acyclic.forEach(({ from, to, reversed, edge }, index) => {
    const chain = [from];
    for (let l = layerOf.get(from) + 1; l < layerOf.get(to); l += 1) {
      const id = `\u0000dummy:${index}:${l}`;
      all.set(id, { id, layer: l, dummy: true });
      chain.push(id);
    }
    chain.push(to);
    for (let i = 0; i + 1 < chain.length; i += 1) links.push([chain[i], chain[i + 1]]);
    chains.push({ edge, chain: reversed ? [...chain].reverse() : chain });
  });

  const layers = orderLayers(all, links, nodes.map((n) => n.id));

  // Breadth (along a layer) and depth (across layers) of each node.
  const breadth = (id) => {
    const n = size.get(id);
    if (!n) return 0;
    return horizontal ? n.height : n.width;
  };
  const depth = (id) => {
    const n = size.get(id);
    if (!n) return 0;
    return horizontal ? n.width : n.height;
  };
  const pos = placeAlongLayers(layers, links, breadth, nodeGap);

  // Layer offsets: each layer is as deep as its deepest node.
  const layerStart = [];
  let offset = 0;
  for (const layer of layers) {
    layerStart.push(offset);
    offset += Math.max(0, ...layer.map(depth)) + layerGap;
  }
  const layerDepth = layers.map((layer) => Math.max(0, ...layer.map(depth)));

  const minPos = Math.min(...[...pos.entries()].map(([id, p]) => p - breadth(id) / 2));
  const placed = new Map();
  let maxBreadth = 0;
  for (const [l, layer] of layers.entries()) {
    for (const id of layer) {
      const along = pos.get(id) - minPos;
      const across = layerStart[l] + (layerDepth[l] - depth(id)) / 2;
      maxBreadth = Math.max(maxBreadth, along + breadth(id) / 2);
      if (!size.has(id)) {
        placed.set(id, horizontal
          ? { x: across, y: along, width: 0, height: 0, layer: l }
          : { x: along, y: across, width: 0, height: 0, layer: l });
        continue;
      }
      const { width, height } = size.get(id);
      placed.set(id, horizontal
        ? { x: across, y: along - height / 2, width, height, layer: l }
        : { x: along - width / 2, y: across, width, height, layer: l });
    }
  }

  const routed = chains.map(({ edge, chain }) => ({
    edge,
    points: chain.map((id, i) => anchor(placed.get(id), horizontal, i === 0 ? "out" : i === chain.length - 1 ? "in" : "mid")),
  }));
  const realNodes = new Map(nodes.map((n) => [n.id, placed.get(n.id)]));
  const extent = offset - layerGap;
  return {
    nodes: realNodes,
    edges: routed,
    width: horizontal ? Math.max(extent, 0) : maxBreadth,
    height: horizontal ? maxBreadth : Math.max(extent, 0),
  };
}

function anchor(box, horizontal, role) {
  if (role === "mid" || box.width === 0) return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
  if (horizontal) {
    return { x: role === "out" ? box.x + box.width : box.x, y: box.y + box.height / 2 };
  }
  return { x: box.x + box.width / 2, y: role === "out" ? box.y + box.height : box.y };
}

/** Reverses the edges that close a cycle (found by depth-first search from each node). */
function breakCycles(ids, edges) {
  const out = new Map(ids.map((id) => [id, []]));
  edges.forEach((e, i) => out.get(e.from).push(i));
  const state = new Map();
  const reversed = new Set();
  for (const root of ids) {
    if (state.has(root)) continue;
    const stack = [[root, 0]];
    state.set(root, "open");
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [id, next] = top;
      const outgoing = out.get(id);
      if (next >= outgoing.length) {
        state.set(id, "done");
        stack.pop();
        continue;
      }
      top[1] += 1;
      const e = edges[outgoing[next]];
      const s = state.get(e.to);
      if (s === "open") reversed.add(outgoing[next]);
      else if (s === undefined) {
        state.set(e.to, "open");
        stack.push([e.to, 0]);
      }
    }
  }
  return edges.map((edge, i) => reversed.has(i)
    ? { from: edge.to, to: edge.from, reversed: true, edge }
    : { from: edge.from, to: edge.to, reversed: false, edge });
}

/** Longest path from a source, in topological order (Kahn). */
function assignLayers(ids, edges) {
  const indegree = new Map(ids.map((id) => [id, 0]));
  const out = new Map(ids.map((id) => [id, []]));
  for (const e of edges) {
    indegree.set(e.to, indegree.get(e.to) + 1);
    out.get(e.from).push(e.to);
  }
  const layer = new Map(ids.map((id) => [id, 0]));
  const queue = ids.filter((id) => indegree.get(id) === 0);
  while (queue.length) {
    const id = queue.shift();
    for (const to of out.get(id)) {
      layer.set(to, Math.max(layer.get(to), layer.get(id) + 1));
      indegree.set(to, indegree.get(to) - 1);
      if (indegree.get(to) === 0) queue.push(to);
    }
  }
  return layer;
}

/** Orders each layer by barycenters, keeping the ordering with the fewest crossings. */
function orderLayers(all, links, inputOrder) {
  const count = Math.max(0, ...[...all.values()].map((n) => n.layer)) + 1;
  const rank = new Map(inputOrder.map((id, i) => [id, i]));
  const layers = Array.from({ length: count }, () => []);
  for (const n of all.values()) layers[n.layer].push(n.id);
  for (const layer of layers) layer.sort((a, b) => (rank.get(a) ?? 1e9) - (rank.get(b) ?? 1e9));

  const up = new Map();
  const down = new Map();
  for (const id of all.keys()) {
    up.set(id, []);
    down.set(id, []);
  }
  for (const [a, b] of links) {
    down.get(a).push(b);
    up.get(b).push(a);
  }

  let best = layers.map((l) => [...l]);
  let bestCrossings = crossings(best, down);
  for (let sweep = 0; sweep < 8; sweep += 1) {
    const downward = sweep % 2 === 0;
    const range = downward ? [...Array(count).keys()].slice(1) : [...Array(count).keys()].reverse().slice(1);
    for (const l of range) {
      const ref = layers[downward ? l - 1 : l + 1];
      const index = new Map(ref.map((id, i) => [id, i]));
      const neighbours = downward ? up : down;
      const key = new Map(layers[l].map((id, i) => {
        const ns = neighbours.get(id).map((n) => index.get(n)).filter((v) => v !== undefined);
        return [id, ns.length ? ns.reduce((s, v) => s + v, 0) / ns.length : i];
      }));
      layers[l].sort((a, b) => key.get(a) - key.get(b));
    }
    const c = crossings(layers, down);
    if (c < bestCrossings) {
      bestCrossings = c;
      best = layers.map((layer) => [...layer]);
    }
  }
  return best;
}

function crossings(layers, down) {
  let total = 0;
  for (let l = 0; l + 1 < layers.length; l += 1) {
    const next = new Map(layers[l + 1].map((id, i) => [id, i]));
    const pairs = [];
    layers[l].forEach((id, i) => {
      for (const to of down.get(id)) if (next.has(to)) pairs.push([i, next.get(to)]);
    });
    for (let a = 0; a < pairs.length; a += 1) {
      for (let b = a + 1; b < pairs.length; b += 1) {
        if ((pairs[a][0] - pairs[b][0]) * (pairs[a][1] - pairs[b][1]) < 0) total += 1;
      }
    }
  }
  return total;
}

/**
 * Centre positions along each layer: packed in order, then moved in alternating sweeps
 * toward the mean of their neighbours in the previous layer (downward) or the next layer
 * (upward), keeping the order and the gaps. A sweep carries an alignment through a whole
 * chain at once, so chains come out straight.
 */
function placeAlongLayers(layers, links, breadth, gap) {
  const above = new Map();
  const below = new Map();
  for (const layer of layers) {
    for (const id of layer) {
      above.set(id, []);
      below.set(id, []);
    }
  }
  for (const [a, b] of links) {
    below.get(a).push(b);
    above.get(b).push(a);
  }
  const room = (id) => Math.max(breadth(id), 8);
  const pos = new Map();
  const widest = Math.max(0, ...layers.map((layer) => layer.reduce((s, id) => s + room(id) + gap, -gap)));
  for (const layer of layers) {
    const total = layer.reduce((s, id) => s + room(id) + gap, -gap);
    let p = (widest - total) / 2;
    for (const id of layer) {
      pos.set(id, p + room(id) / 2);
      p += room(id) + gap;
    }
  }
  const settle = (layer, neighbours) => {
    const wanted = layer.map((id) => {
      const ns = neighbours.get(id);
      return ns.length ? ns.reduce((s, n) => s + pos.get(n), 0) / ns.length : pos.get(id);
    });
    // Keep the order and the gaps: one packing pushes right from the left, the other left
    // from the right; their mean keeps the gaps too (both do) and favours neither end.
    const right = wanted.slice();
    for (let i = 1; i < layer.length; i += 1) {
      right[i] = Math.max(right[i], right[i - 1] + (room(layer[i - 1]) + room(layer[i])) / 2 + gap);
    }
    const left = wanted.slice();
    for (let i = layer.length - 2; i >= 0; i -= 1) {
      left[i] = Math.min(left[i], left[i + 1] - (room(layer[i + 1]) + room(layer[i])) / 2 - gap);
    }
    layer.forEach((id, i) => pos.set(id, (right[i] + left[i]) / 2));
  };
  for (let round = 0; round < 4; round += 1) {
    for (let l = 1; l < layers.length; l += 1) settle(layers[l], above);
    for (let l = layers.length - 2; l >= 0; l -= 1) settle(layers[l], below);
  }
  return pos;
}

/** An SVG path through `points`: smooth curves leaving and entering along the layer axis. */
export function curve(points, direction = "LR") {
  if (points.length < 2) return "";
  let d = `M${points[0].x},${points[0].y}`;
  for (let i = 1; i < points.length; i += 1) {
    const a = points[i - 1];
    const b = points[i];
    if (direction === "LR") {
      const mid = (a.x + b.x) / 2;
      d += ` C${mid},${a.y} ${mid},${b.y} ${b.x},${b.y}`;
    } else {
      const mid = (a.y + b.y) / 2;
      d += ` C${a.x},${mid} ${b.x},${mid} ${b.x},${b.y}`;
    }
  }
  return d;
}

/** The point halfway along a routed edge (for its label). */
export function midpoint(points) {
  if (points.length % 2 === 1) return points[(points.length - 1) / 2];
  const a = points[points.length / 2 - 1];
  const b = points[points.length / 2];
  return { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
}

/** The arrowhead marker, defined once per SVG. */
export function arrowDefs() {
  return svg("defs", {},
    svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
      markerHeight: 7, orient: "auto-start-reverse" },
    svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" })),
    svg("marker", { id: "arrow-hot", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
      markerHeight: 7, orient: "auto-start-reverse" },
    svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead hot" })));
}

/**
 * A sparkline of `values` in a `width` x `height` box: an area and its top line. With
 * `slots`, the values are right-aligned in that many positions, so a short history does not
 * stretch across the whole box.
 */
export function sparkline(values, width, height, slots) {
  const g = svg("g", { class: "sparkline" });
  updateSparkline(g, values, width, height, slots);
  return g;
}

/** Redraws a sparkline made by `sparkline` with new values. */
export function updateSparkline(g, values, width, height, slots = values ? values.length : 0) {
  g.replaceChildren();
  g.append(svg("rect", { class: "spark-bg", width, height, rx: 3 }));
  if (!values || values.length < 2) return;
  const n = Math.max(slots, values.length);
  const max = Math.max(...values, 1e-9);
  const step = width / (n - 1);
  const first = n - values.length;
  const pts = values.map((v, i) => [(first + i) * step, height - 2 - (Math.max(v, 0) / max) * (height - 4)]);
  const line = pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
  const x0 = (first * step).toFixed(1);
  g.append(svg("polygon", { class: "spark-area", points: `${x0},${height} ${line} ${width},${height}` }));
  g.append(svg("polyline", { class: "spark-line", points: line }));
}

/**
 * Fits each `text[data-fit]` in `root` (which must be in the document) into `data-fit`
 * pixels. With `data-fit-second` it may wrap once, after a space, comma or parenthesis, onto
 * a second line that wide, `data-line-height` lower; what still does not fit is cut in the
 * middle with an ellipsis. The full text stays in `data-full`.
 */
export function fitTexts(root) {
  for (const el of root.querySelectorAll("text[data-fit]")) {
    const full = el.dataset.full ?? el.textContent;
    el.dataset.full = full;
    el.textContent = full;
    const first = Number(el.dataset.fit);
    if (!el.dataset.fitSecond || el.getComputedTextLength() <= first) {
      shortenToFit(el, full, first);
      continue;
    }
    // The longest run of whole pieces that fits on the first line.
    const pieces = full.split(/(?<=[\s,(])/);
    let head = "";
    for (const piece of pieces) {
      el.textContent = head + piece;
      if (el.getComputedTextLength() > first) break;
      head += piece;
    }
    if (!head) head = pieces[0];
    shortenToFit(el, head.trimEnd(), first);
    const second = svg("tspan", { x: el.getAttribute("x"), dy: el.dataset.lineHeight });
    el.append(second);
    shortenToFit(second, full.slice(head.length).trimStart(), Number(el.dataset.fitSecond));
  }
}

function shortenToFit(el, text, max) {
  el.textContent = text;
  let keep = text.length;
  while (keep > 4 && el.getComputedTextLength() > max) {
    keep -= 1;
    const head = Math.ceil(keep * 0.6);
    el.textContent = `${text.slice(0, head)}…${text.slice(text.length - (keep - head))}`;
  }
}

/**
 * Makes an SVG pannable (drag) and zoomable (wheel), keeping its viewBox inside reason.
 * Its height follows the graph's at the width it has (between `minHeight` and `maxHeight`),
 * so a wide graph is not drawn tiny in a tall box. `fit()` on the returned object resets the
 * view to show the whole graph.
 */
export function panZoom(root, width, height, { pad = 24, minHeight = 200, maxHeight = 680 } = {}) {
  const full = { x: -pad, y: -pad, w: width + 2 * pad, h: height + 2 * pad };
  const scale = Math.min(1, (root.clientWidth || full.w) / full.w);
  root.style.height = `${Math.round(Math.min(maxHeight, Math.max(minHeight, full.h * scale)))}px`;
  let view = { ...full };
  const apply = () => root.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
  apply();
  let drag = null;
  root.addEventListener("pointerdown", (e) => {
    if (e.target.closest("button, a, [data-action]")) return;
    drag = { x: e.clientX, y: e.clientY, view: { ...view } };
    root.setPointerCapture(e.pointerId);
    root.classList.add("dragging");
  });
  root.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const scale = view.w / root.clientWidth;
    view.x = drag.view.x - (e.clientX - drag.x) * scale;
    view.y = drag.view.y - (e.clientY - drag.y) * scale;
    apply();
  });
  const end = () => {
    drag = null;
    root.classList.remove("dragging");
  };
  root.addEventListener("pointerup", end);
  root.addEventListener("pointercancel", end);
  root.addEventListener("wheel", (e) => {
    e.preventDefault();
    const factor = Math.exp(e.deltaY * 0.0015);
    const w = Math.min(Math.max(view.w * factor, full.w * 0.2), full.w * 4);
    const h = view.h * (w / view.w);
    const rect = root.getBoundingClientRect();
    const fx = (e.clientX - rect.left) / rect.width;
    const fy = (e.clientY - rect.top) / rect.height;
    view = { x: view.x + (view.w - w) * fx, y: view.y + (view.h - h) * fy, w, h };
    apply();
  }, { passive: false });
  return {
    fit() {
      view = { ...full };
      apply();
    },
  };
}
