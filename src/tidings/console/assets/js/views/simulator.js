// Simulator (admin): load a configuration (native or the thesis's), run it against this
// broker, watch throughput and latency live, keep the run's summary.
import { call, describe, saved } from "../api.js";
import { TimeChart } from "../chart.js";
import { h, section } from "../dom.js";
import { SIMULATION, THESIS_SIMULATION } from "../samples.js";
import { adminTokenBox } from "./overview.js";

export function render(root) {
  const config = h("textarea", { id: "sim-config", rows: 16 }, JSON.stringify(SIMULATION, null, 2));
  const file = h("input", { type: "file", id: "sim-file", accept: "application/json,.json" });
  file.addEventListener("change", async () => {
    if (file.files.length) config.value = await file.files[0].text();
  });
  const status = h("p", { id: "sim-status", class: "muted" }, "Not started.");
  const numbers = h("div", { class: "cards", id: "sim-numbers" });
  const throughput = new TimeChart([{ label: "deliveries", color: "#027a48" }],
    { unit: "msg/s", id: "sim-throughput" });
  const latency = new TimeChart(
    [{ label: "p50", color: "#2e5bff" }, { label: "p99", color: "#c4320a" }],
    { unit: "ms", id: "sim-latency" });
  const summary = h("div", { id: "sim-summary" });
  let timer = null;

  const run = async () => {
    const token = saved.get("adminToken");
    summary.replaceChildren();
    try {
      const started = await call("POST", "/v1/admin/simulations",
        { token, body: { config: JSON.parse(config.value) } });
      status.textContent = `Running ${started.id}`;
      status.className = "ok";
      clearInterval(timer);
      timer = setInterval(() => watch(started.id, token), 1000);
    } catch (error) {
      status.textContent = error instanceof SyntaxError ? `Not JSON: ${error.message}` : describe(error);
      status.className = "error";
    }
  };

  async function watch(id, token) {
    try {
      const state = await call("GET", `/v1/admin/simulations/${id}`, { token });
      const p = state.progress;
      if (p) {
        numbers.replaceChildren(...[["phase", p.phase], ["published", `${p.published} / ${p.planned}`],
          ["delivered", p.delivered], ["deliveries/s", p.delivered_per_s],
          ["p50 ms", p.p50_ms ?? "-"], ["p99 ms", p.p99_ms ?? "-"]]
          .map(([label, value]) => h("div", { class: "card" }, h("div", { class: "value" }, value),
            h("div", { class: "label" }, label))));
        throughput.push([p.delivered_per_s]);
        latency.push([p.p50_ms, p.p99_ms]);
      }
      if (state.status === "running") return;
      clearInterval(timer);
      status.textContent = state.status === "done" ? `Finished ${id}` : `Failed: ${state.error}`;
      status.className = state.status === "done" ? "ok" : "error";
      if (state.summary) showSummary(summary, state.summary, id, token);
    } catch (error) {
      status.textContent = describe(error);
      status.className = "error";
    }
  }

  root.append(adminTokenBox(() => {}),
    section("Configuration",
      h("button", { class: "quiet", onclick: () => { config.value = JSON.stringify(SIMULATION, null, 2); } }, "Native sample"),
      h("button", { class: "quiet", id: "sim-thesis", onclick: () => { config.value = JSON.stringify(THESIS_SIMULATION, null, 2); } }, "Thesis sample"),
      h("label", {}, "Or load a file: ", file), config,
      h("button", { id: "sim-run", onclick: run }, "Run against this broker"), status),
    section("Live", numbers, h("p", { class: "muted" }, "Latency of the last 2,048 deliveries, enqueued to received."),
      throughput.el, latency.el),
    section("Summary", summary));
  return () => { clearInterval(timer); throughput.destroy(); latency.destroy(); };
}

function showSummary(root, summary, id, token) {
  const rows = { ...summary.latency_by_kind, all: summary.latency };
  const download = async () => {
    const response = await fetch(`/v1/admin/simulations/${id}/summary`,
      { headers: { Authorization: `Bearer ${token}` } });
    const link = h("a", { href: URL.createObjectURL(await response.blob()), download: `simulation-${id}.json` });
    link.click();
  };
  root.replaceChildren(
    h("p", {}, `${summary.publications} publications, ${summary.deliveries} deliveries to `,
      `${summary.subscribers} subscribers in ${summary.seconds} s; ${summary.redelivered} redelivered, `,
      `${summary.publish_errors} publish errors.`),
    h("table", {}, h("tr", {}, ["matching", "deliveries", "p50 ms", "p95 ms", "p99 ms", "max ms"].map((c) => h("th", {}, c))),
      Object.entries(rows).map(([kind, row]) => h("tr", {}, h("td", {}, kind),
        ["count", "p50_ms", "p95_ms", "p99_ms", "max_ms"].map((k) => h("td", {}, row[k] ?? "-"))))),
    h("button", { id: "sim-download", onclick: download }, "Download the summary"));
}
