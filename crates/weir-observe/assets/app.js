// The dashboard's entry point: routes the address to a page and follows internal links.
//
// Pages: "/" (jobs and flows), "/jobs/{id}" (a job's DAG), "/flows/{id}" (a flow's graph),
// "/flows/{id}/provenance" (provenance search and lineage). Each page module exports
// `mount(main, params)` that returns a function stopping its live updates.

import { adoptTokenFromUrl, setToken, liveState } from "./api.js";
import { banner, h } from "./dom.js";
import * as overview from "./overview.js";
import * as job from "./job.js";
import * as flow from "./flow.js";
import * as provenance from "./provenance.js";

const routes = [
  [/^\/$/, overview],
  [/^\/jobs\/([^/]+)\/?$/, job],
  [/^\/flows\/([^/]+)\/provenance\/?$/, provenance],
  [/^\/flows\/([^/]+)\/?$/, flow],
];

let unmount = null;

function route() {
  if (unmount) unmount();
  unmount = null;
  banner(null);
  liveState("connecting");
  const main = document.getElementById("app");
  main.replaceChildren();
  const path = window.location.pathname;
  for (const [pattern, page] of routes) {
    const m = path.match(pattern);
    if (m) {
      unmount = page.mount(main, m.slice(1).map(decodeURIComponent));
      return;
    }
  }
  main.append(h("div", { class: "empty" }, h("h2", {}, "Page not found"),
    h("p", {}, h("a", { href: "/", "data-link": true }, "Back to the overview"))));
}

/** Navigates to an internal address without reloading. */
export function navigate(href) {
  window.history.pushState(null, "", href);
  route();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-link]");
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", route);

// A 401 anywhere asks for the token once, in the banner.
window.addEventListener("weir:unauthorized", () => {
  if (document.getElementById("token-input")) return;
  const input = h("input", { type: "password", id: "token-input", placeholder: "token",
    autocomplete: "off" });
  const form = h("form", { class: "token-form", onsubmit: (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    route();
  } }, input, h("button", { type: "submit", class: "btn btn-primary" }, "Use token"));
  banner("This server needs an access token.", "warning", form);
});

adoptTokenFromUrl();
route();
