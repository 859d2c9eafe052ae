// Overview (admin): the broker's numbers, live rates (a simulator's apart), topics, the
// elastic deployment, the placement, suspended functions, subscribers (real, simulated or
// all), settings and versions; everything read from /v1/admin with the admin token.
import { call, describe, saved } from "../api.js";
import { TimeChart } from "../chart.js";
import { confirmed } from "../confirm.js";
import { h, section, when } from "../dom.js";
import { showCluster } from "./cluster.js";
import { showPlacement } from "./placement.js";
import { TopicsTable } from "./topics.js";

export function adminTokenBox(onChange) {
  const input = h("input", { type: "password", id: "admin-token", placeholder: "admin token",
    value: saved.get("adminToken") || "" });
  const save = () => { saved.set("adminToken", input.value.trim() || null); onChange(); };
  return section("Admin token",
    h("p", { class: "muted" }, "Printed once by the broker at its first start, and kept in ",
      h("code", {}, "<data-dir>/admin-token"), "."),
    h("div", { class: "row" }, input, h("button", { onclick: save, id: "admin-save" }, "Use")));
}

export function render(root) {
  const status = h("p", { class: "muted" }, "Enter the admin token to see the broker.");
  const cards = h("div", { class: "cards" });
  const rates = new TimeChart([
    { label: "publications", color: "#2e5bff" }, { label: "deliveries", color: "#027a48" },
    { label: "simulated publications", color: "#7a5af8", dash: [6, 4] },
    { label: "simulated deliveries", color: "#dc6803", dash: [6, 4] },
  ], { unit: "msg/s", id: "rates" });
  const topics = new TopicsTable();
  const suspended = h("div");
  const cluster = h("div", { id: "cluster" });
  const placement = h("div", { id: "placement" });
  const subscribers = h("div");
  const origin = h("select", { id: "subscriber-origin", onchange: () => refresh() },
    h("option", { value: "all" }, "all"), h("option", { value: "real" }, "real"),
    h("option", { value: "simulated" }, "simulated (made by a simulator)"));
  const details = h("div");
  root.append(adminTokenBox(refresh), status,
    section("Broker", cards),
    section("Live rates", rates.el),
    section("Topics", topics.el),
    section("Elastic deployment", cluster),
    section("Placement", placement),
    section("Suspended functions", suspended),
    section("Subscribers", h("div", { class: "row" }, h("label", {}, "Show ", origin)),
      subscribers),
    details);
  let last = null;
  const timer = setInterval(refresh, 2000);
  refresh();

  async function refresh() {
    const token = saved.get("adminToken");
    if (!token) return;
    try {
      const seen = await call("GET", "/v1/admin/overview", { token });
      const page = await call("GET", "/v1/admin/subscribers",
        { token, query: { limit: 50, origin: origin.value } });
      const traffic = await call("GET", "/v1/admin/topics", { token });
      status.textContent = `Updated ${new Date().toLocaleTimeString()}`;
      status.className = "ok";
      showCards(cards, seen);
      showRates(rates, seen, last);
      last = { at: Date.now(), counters: seen.counters };
      topics.show(traffic);
      await showCluster(cluster, token);
      await showPlacement(placement, token);
      showSuspended(suspended, seen.suspended);
      showSubscribers(subscribers, page, token, refresh);
      showDetails(details, seen);
    } catch (error) {
      status.textContent = describe(error);
      status.className = "error";
    }
  }
  return () => { clearInterval(timer); rates.destroy(); };
}

function card(label, value) {
  return h("div", { class: "card" }, h("div", { class: "value" }, value),
    h("div", { class: "label" }, label));
}

function showCards(cards, seen) {
  const kinds = seen.subscriptions;
  cards.replaceChildren(
    card("subscribers", seen.subscribers),
    card("topic subscriptions", kinds.topic || 0),
    card("content subscriptions", kinds.content || 0),
    card("function subscriptions", kinds.function || 0),
    card("ready", seen.queues.ready),
    card("leased", seen.queues.leased),
    card("dead letters", seen.queues.dead),
    card("oldest message (s)", seen.oldest_message_age_s.toFixed(1)),
    card("publications", seen.counters.publications),
    card("deliveries", seen.counters.deliveries_enqueued),
  );
}

function showRates(chart, seen, last) {
  if (!last) return;
  const seconds = (Date.now() - last.at) / 1000;
  const rate = (name) => (seen.counters[name] - last.counters[name]) / seconds;
  chart.push(["publications", "deliveries_enqueued", "simulated_publications",
    "simulated_deliveries"].map(rate));
}

function showSuspended(root, suspended) {
  if (!suspended.length) { root.replaceChildren(h("p", { class: "muted" }, "None.")); return; }
  root.replaceChildren(h("table", {},
    h("tr", {}, h("th", {}, "subscription"), h("th", {}, "subscriber"), h("th", {}, "type"),
      h("th", {}, "reason")),
    suspended.map((s) => h("tr", {}, h("td", {}, s.id), h("td", {}, s.subscriber_id),
      h("td", {}, s.function_type), h("td", { class: "error" }, s.reason)))));
}

function showSubscribers(root, page, token, refresh) {
  const remove = (id) => async () => {
    if (!await confirmed(`Delete subscriber ${id}, its subscriptions and its queue?`)) return;
    await call("DELETE", `/v1/admin/subscribers/${id}`, { token });
    refresh();
  };
  const note = page.next ? h("p", { class: "muted" }, "The first 50 are shown.") : "";
  root.replaceChildren(h("table", {},
    h("tr", {}, h("th", {}, "id"), h("th", {}, "created"), h("th", {}, "last seen"),
      h("th", {}, "ready / leased / dead"), h("th", {}, "")),
    page.subscribers.map((s) => h("tr", {},
      h("td", {}, s.id, s.ephemeral ? h("span", { class: "muted" }, " (ephemeral)") : null,
        s.simulation ? h("span", { class: "tag sim", title: "made by a simulator" },
          `simulation: ${s.simulation}`) : null),
      h("td", {}, when(s.created_at)), h("td", {}, when(s.last_seen)),
      h("td", {}, `${s.depth.ready} / ${s.depth.leased} / ${s.depth.dead}`),
      h("td", {}, h("button", { class: "danger", onclick: remove(s.id) }, "Delete"))))),
  note);
}

function showDetails(root, seen) {
  if (root.childElementCount) return; // once: a refresh would fold what the reader opened
  root.replaceChildren(section("Settings and versions",
    h("details", {}, h("summary", {}, "Settings"), h("pre", {}, JSON.stringify(seen.settings, null, 2))),
    h("details", {}, h("summary", {}, "Versions and machine"),
      h("pre", {}, JSON.stringify({ ...seen.versions, machine: seen.machine }, null, 2)))));
}
