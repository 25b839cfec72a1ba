// DOM helpers shared by the pages: element builder, status badges, messages, breadcrumbs.

/**
 * Creates an HTML element. `attrs` keys starting with "on" add listeners; `dataset` sets
 * data-* attributes; other values become attributes (false/null/undefined are skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Sets an element's text only when it changed (keeps selections and avoids reflows). */
export function setText(el, text) {
  if (el && el.textContent !== text) el.textContent = text;
}

/** A coloured status pill: running, completed, failed, cancelled, stopped, disabled, ... */
export function badge(status, attrs = {}) {
  return h("span", { class: `badge badge-${status}`, ...attrs }, status);
}

/** Updates a badge made by `badge` in place. */
export function setBadge(el, status) {
  el.className = `badge badge-${status}`;
  setText(el, status);
}

/** An inline error box with `message`. */
export function errorBox(message) {
  return h("div", { class: "error-box", role: "alert" }, message);
}

/** An internal link that the router follows without reloading the page. */
export function link(href, ...children) {
  return h("a", { href, "data-link": true }, ...children);
}

/** Replaces the breadcrumbs in the top bar: [[label, href?], ...]. */
export function breadcrumbs(items) {
  const nav = document.getElementById("breadcrumbs");
  nav.replaceChildren(...items.flatMap(([label, href], i) => [
    ...(i > 0 ? [h("span", { class: "crumb-sep" }, "/")] : []),
    href ? link(href, label) : h("span", { class: "crumb-current" }, label),
  ]));
  document.title = items.length ? `${items[items.length - 1][0]} · Weir` : "Weir";
}

/** A card: a titled panel. */
export function card(title, attrs = {}, ...children) {
  return h("section", { class: "card", ...attrs },
    title ? h("header", { class: "card-header" }, ...[].concat(title)) : null,
    ...children);
}

/** A metric tile: a label over a big value and a note; returns [tile, value, note]. */
export function tile(label, id) {
  const value = h("div", { class: "tile-value", id }, "–");
  const note = h("div", { class: "tile-note" });
  return [h("div", { class: "tile" }, h("div", { class: "tile-label" }, label), value, note), value, note];
}

/** Shows `message` in the banner under the top bar, or hides it when null. */
export function banner(message, kind = "error", ...extra) {
  const el = document.getElementById("banner");
  if (!message) {
    el.hidden = true;
    el.replaceChildren();
    return;
  }
  el.hidden = false;
  el.className = `banner banner-${kind}`;
  el.replaceChildren(h("span", {}, message), ...extra);
}
