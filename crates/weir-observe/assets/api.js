// The REST client: the bearer token, JSON requests, and live updates at most once a second.

import { banner, errorBox } from "./dom.js";

const TOKEN_KEY = "weir.token";
const BASE = "/api/v1";

/** The refresh period of live views, in ms (the API's own metrics update once a second). */
export const REFRESH_MS = 1000;

/** An API error: the HTTP status and the server's `error` message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * Shows a failed request in the banner as "`doing`: message", except a 401: the token
 * prompt that every 401 raises stays in the banner instead.
 */
export function showError(doing, e) {
  if (e.status !== 401) banner(`${doing}: ${e.message}`);
}

/**
 * Moves a `?token=` from the address into session storage and out of the address bar,
 * so that the token is not kept in history or shared with a copied link.
 */
export function adoptTokenFromUrl() {
  const url = new URL(window.location.href);
  const token = url.searchParams.get("token");
  if (token !== null) {
    setToken(token);
    url.searchParams.delete("token");
    window.history.replaceState(window.history.state, "", url.pathname + url.search + url.hash);
  }
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function request(method, path, { signal, accept = "application/json" } = {}) {
  let response;
  try {
    response = await fetch(BASE + path, { method, headers: headers({ Accept: accept }), signal });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "the server cannot be reached");
  }
  if (!response.ok) {
    if (response.status === 401) window.dispatchEvent(new Event("weir:unauthorized"));
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      if (body && body.error) message = body.error;
    } catch {
      // Not JSON: keep the status line.
    }
    throw new ApiError(response.status, message);
  }
  return response;
}

/** GETs a JSON document from `/api/v1{path}`. */
export async function get(path, options) {
  return (await request("GET", path, options)).json();
}

/** POSTs to `/api/v1{path}` and returns the JSON answer. */
export async function post(path, options) {
  return (await request("POST", path, options)).json();
}

/** GETs `/api/v1{path}` as a Blob (flow-file content). */
export async function blob(path, options) {
  return (await request("GET", path, { ...options, accept: "*/*" })).blob();
}

/** Encodes one path segment (ids may hold any character). */
export function seg(value) {
  return encodeURIComponent(value);
}

/**
 * Calls `load()` now and then every REFRESH_MS after the previous call settled (so a slow
 * server never gets overlapping requests), passing each result to `onData` and each failure
 * to `onError`. Pauses while the tab is hidden. Returns a function that stops it; its
 * `now()` refreshes at once (after a user's action) instead of at the next tick.
 */
export function poll(load, onData, onError) {
  let stopped = false;
  let timer = null;
  const controller = new AbortController();
  const tick = async () => {
    timer = null;
    if (stopped) return;
    if (document.hidden) {
      timer = setTimeout(tick, REFRESH_MS);
      return;
    }
    try {
      const data = await load(controller.signal);
      if (!stopped) {
        onData(data);
        liveState("live");
      }
    } catch (e) {
      if (stopped || e.name === "AbortError") return;
      liveState(e.status === 401 ? "unauthorized" : e.status === 404 ? "missing" : "error");
      onError(e);
    }
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  };
  tick();
  const stop = () => {
    stopped = true;
    controller.abort();
    if (timer) clearTimeout(timer);
  };
  // With no timer pending a request is in flight, and its answer comes soon enough.
  stop.now = () => {
    if (stopped || !timer) return;
    clearTimeout(timer);
    tick();
  };
  return stop;
}

/**
 * Keeps a detail page live: polls `path` (a job or a flow) and hands each answer to
 * `view.update`. A 404 replaces the page with the server's message (naming what is
 * unknown); other failures show in the banner as "Cannot load the `what`". Returns the stop
 * function of `poll`.
 */
export function followDetail(main, path, what, view) {
  return poll(
    (signal) => get(path, { signal }),
    (data) => {
      banner(null);
      view.update(data);
    },
    (e) => {
      if (e.status === 404) main.replaceChildren(errorBox(e.message));
      else showError(`Cannot load the ${what}`, e);
    },
  );
}

/**
 * Follows the server-sent events of `/api/v1/events`, calling `handlers[eventName](payload)`.
 * It reads the stream with fetch rather than EventSource so that the bearer token goes in a
 * header. Reconnects after a second when the stream ends or fails. Returns a stop function.
 */
export function events(handlers, onError) {
  const controller = new AbortController();
  let stopped = false;
  const run = async () => {
    while (!stopped) {
      try {
        const response = await request("GET", "/events", {
          signal: controller.signal,
          accept: "text/event-stream",
        });
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, "\n");
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            dispatch(buffer.slice(0, end), handlers);
            buffer = buffer.slice(end + 2);
          }
        }
      } catch (e) {
        if (stopped || e.name === "AbortError") return;
        liveState(e.status === 401 ? "unauthorized" : "error");
        onError(e);
      }
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, REFRESH_MS));
    }
  };
  run();
  return () => {
    stopped = true;
    controller.abort();
  };
}

function dispatch(block, handlers) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  const handler = handlers[name];
  if (!handler || data.length === 0) return;
  handler(JSON.parse(data.join("\n")));
  liveState("live");
}

let liveTimer = null;

/** Shows the connection state in the top bar; "live" decays to "stale" without updates. */
export function liveState(state) {
  const live = document.getElementById("live");
  const text = document.getElementById("live-text");
  if (!live) return;
  live.dataset.state = state;
  text.textContent = { live: "live", error: "disconnected", unauthorized: "token needed",
    missing: "not found", stale: "stale", connecting: "connecting" }[state] ?? state;
  if (liveTimer) clearTimeout(liveTimer);
  if (state === "live") {
    live.dataset.updated = String(Number(live.dataset.updated ?? 0) + 1);
    liveTimer = setTimeout(() => liveState("stale"), REFRESH_MS * 5);
  }
}
