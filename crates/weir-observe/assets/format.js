// Number, byte, duration and time formatting shared by every page.

const SI = ["", "k", "M", "G", "T", "P"];

/** A count with an SI suffix: 1234 -> "1.23k", 12 -> "12". */
export function count(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  const sign = value < 0 ? "-" : "";
  let v = Math.abs(value);
  let i = 0;
  while (v >= 1000 && i < SI.length - 1) {
    v /= 1000;
    i += 1;
  }
  if (i === 0) return sign + (Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 1 : 0));
  return sign + v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0) + SI[i];
}

/** A rate in items per second: "1.23k/s". */
export function rate(value) {
  return `${count(value)}/s`;
}

/** A size in bytes with binary units: 1536 -> "1.5 KiB". */
export function bytes(value) {
  if (value === null || value === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = value;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** A duration in milliseconds: "850 ms", "12.4 s", "3m 05s", "2h 07m". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  const sign = ms < 0 ? "-" : "";
  const a = Math.abs(ms);
  if (a < 1000) return `${sign}${Math.round(a)} ms`;
  if (a < 60_000) return `${sign}${(a / 1000).toFixed(1)} s`;
  const s = Math.floor(a / 1000);
  if (s < 3600) return `${sign}${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  const m = Math.floor(s / 60);
  if (m < 1440) return `${sign}${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
  return `${sign}${Math.floor(m / 1440)}d ${String(Math.floor(m / 60) % 24).padStart(2, "0")}h`;
}

/** A latency in seconds, to three significant digits: "500 µs", "12.3 ms", "1.5 s". */
export function seconds(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  const three = (v) => Number(v.toPrecision(3));
  if (value < 0.001) return `${three(value * 1e6)} µs`;
  if (value < 1) return `${three(value * 1e3)} ms`;
  return `${three(value)} s`;
}

/**
 * A latency histogram's bucket bound as the API sends it (seconds, "+Inf" for the bucket
 * above `largest`, null for none): "≤ 5 ms", "> 60 s", "–".
 */
export function latencyBound(bound, largest) {
  if (bound === null || bound === undefined) return "–";
  if (bound === "+Inf") return largest === null || largest === undefined ? "unbounded" : `> ${seconds(largest)}`;
  return `≤ ${seconds(bound)}`;
}

/** A timestamp (ms since the epoch) in local time: "2026-11-30 14:03:07". */
export function time(ms) {
  if (ms === null || ms === undefined) return "–";
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** A timestamp with milliseconds, for provenance events. */
export function preciseTime(ms) {
  if (ms === null || ms === undefined) return "–";
  return `${time(ms)}.${String(ms % 1000).padStart(3, "0")}`;
}

/** A fraction in 0..1 as a percentage: 0.423 -> "42%". */
export function percent(fraction) {
  if (fraction === null || fraction === undefined || Number.isNaN(fraction)) return "–";
  return `${Math.round(fraction * 100)}%`;
}

/** A long id (a flow file's uuid) cut to its first 8 characters and an ellipsis; the page
 * shows the whole id on hover (`title`). Ids of 9 characters or fewer are shown whole. */
export function shortId(id) {
  return id.length > 9 ? `${id.slice(0, 8)}…` : id;
}

