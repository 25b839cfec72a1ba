// "/": the job list and the flow list, live from the server-sent events.

import { get, events, showError } from "./api.js";
import { h, badge, setBadge, setText, link, breadcrumbs, card, tile, banner } from "./dom.js";
import * as fmt from "./format.js";

/** Shows the overview in `main`; returns the function that stops its updates. */
export function mount(main) {
  breadcrumbs([["Overview"]]);
  const jobsBody = h("tbody");
  const flowsBody = h("tbody");
  const jobsCount = h("span", { class: "count", id: "jobs-count" }, "0");
  const flowsCount = h("span", { class: "count", id: "flows-count" }, "0");
  const tiles = [
    tile("Running jobs", "tile-running-jobs"),
    tile("Completed jobs", "tile-completed-jobs"),
    tile("Failed or cancelled", "tile-failed-jobs"),
    tile("Running flows", "tile-running-flows"),
  ];
  const [running, completed, failed, flowsRunning] = tiles.map(([, value]) => value);
  main.append(
    h("div", { class: "tiles" }, tiles.map(([el]) => el)),
    card(["Jobs", jobsCount], { id: "jobs" },
      h("table", { class: "table", id: "jobs-table" },
        h("thead", {}, h("tr", {},
          h("th", {}, "Name"), h("th", {}, "Status"), h("th", {}, "Started"),
          h("th", { class: "num" }, "Duration"), h("th", {}, "Id"))),
        jobsBody)),
    card(["Flows", flowsCount], { id: "flows" },
      h("table", { class: "table", id: "flows-table" },
        h("thead", {}, h("tr", {},
          h("th", {}, "Name"), h("th", {}, "Status"), h("th", {}, "Id"), h("th", {}, ""))),
        flowsBody)),
  );

  const showJobs = (jobs) => {
    setText(jobsCount, String(jobs.length));
    const count = (...states) => String(jobs.filter((j) => states.includes(j.status)).length);
    setText(running, count("running"));
    setText(completed, count("completed"));
    setText(failed, count("failed", "cancelled"));
    failed.dataset.level = count("failed") === "0" ? "ok" : "high";
    syncRows(jobsBody, jobs, "job", 5, "No jobs in this process.", (tr, job) => {
      if (!tr.firstChild) {
        tr.append(
          h("td", {}, link(`/jobs/${encodeURIComponent(job.id)}`, job.name),
            h("div", { class: "row-error" })),
          h("td", {}, badge(job.status)),
          h("td", { class: "muted" }),
          h("td", { class: "num" }),
          h("td", { class: "mono muted" }, job.id));
      }
      const [name, status, started, duration] = tr.children;
      tr.dataset.status = job.status;
      setBadge(status.firstChild, job.status);
      setText(name.querySelector(".row-error"), job.error ?? "");
      setText(started, fmt.time(job.started_ms));
      setText(duration, fmt.duration(job.duration_ms));
    });
  };
  const showFlows = (flows) => {
    setText(flowsCount, String(flows.length));
    setText(flowsRunning, `${flows.filter((f) => f.status === "running").length} of ${flows.length}`);
    syncRows(flowsBody, flows, "flow", 4, "No flows in this process.", (tr, flow) => {
      if (!tr.firstChild) {
        const base = `/flows/${encodeURIComponent(flow.id)}`;
        tr.append(
          h("td", {}, link(base, flow.name)),
          h("td", {}, badge(flow.status)),
          h("td", { class: "mono muted" }, flow.id),
          h("td", { class: "actions" }, link(`${base}/provenance`, "Provenance")));
      }
      tr.dataset.status = flow.status;
      setBadge(tr.children[1].firstChild, flow.status);
    });
  };

  const cannotLoad = (e) => showError("Cannot load the overview", e);
  Promise.all([get("/jobs"), get("/flows")])
    .then(([jobs, flows]) => {
      showJobs(jobs);
      showFlows(flows);
    })
    .catch(cannotLoad);
  return events({
    jobs: (jobs) => {
      banner(null);
      showJobs(jobs);
    },
    flows: (flows) => {
      banner(null);
      showFlows(flows);
    },
  }, cannotLoad);
}

/**
 * Keeps one row per item in `body`, keyed by `item.id` in `data-{kind}`, in the items' order;
 * `fill(tr, item)` builds a new row's cells (when it has none) and updates them.
 */
function syncRows(body, items, kind, columns, emptyText, fill) {
  const existing = new Map([...body.querySelectorAll(`tr[data-${kind}]`)]
    .map((tr) => [tr.dataset[kind], tr]));
  const rows = items.map((item) => {
    const tr = existing.get(item.id) ?? h("tr", { dataset: { [kind]: item.id } });
    fill(tr, item);
    return tr;
  });
  if (rows.length === 0) {
    rows.push(h("tr", { class: "empty-row" }, h("td", { colspan: columns }, emptyText)));
  }
  body.replaceChildren(...rows);
}
