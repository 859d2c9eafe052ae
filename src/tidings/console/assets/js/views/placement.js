// The overview's placement (GET /v1/admin/placement, docs/placement.md): the last state the
// MultiPub controller published on placement/state, with region names: each region's topics
// and clients, each topic's regions, mode, clients and the decision that put it there. A
// broker that has had no state answers 404 placement_unknown: a plain note says so.
import { ApiError, call } from "../api.js";
import { h, when } from "../dom.js";

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function regions(state) {
  const rows = state.regions.map((name) => {
    const served = state.topics.filter((t) => t.regions.includes(name));
    const homed = state.topics.flatMap((t) => t.clients.filter((c) => c.region === name));
    const sum = (key) => homed.reduce((total, c) => total + c[key], 0);
    return h("tr", {}, h("td", {}, name), h("td", {}, served.length),
      h("td", {}, sum("publishers")), h("td", {}, sum("subscribers")));
  });
  return h("table", { id: "placement-regions" },
    h("tr", {}, ["region", "topics served", "publishers", "subscribers"]
      .map((c) => h("th", {}, c))), rows);
}

function clients(topic) {
  if (!topic.clients.length) return h("span", { class: "muted" }, "none known");
  return topic.clients.map((c) => h("div", {},
    `${c.region}: ${plural(c.publishers, "publisher")}, ${plural(c.subscribers, "subscriber")}`));
}

function decision(d) {
  if (!d) return h("span", { class: "muted" }, "given to the controller, not solved");
  const goal = d.objective === "cost"
    ? "cost: the cheapest meeting the bound"
    : "latency: none meets the bound, the lowest percentile";
  return [
    h("div", {}, goal),
    h("div", { class: d.meets ? "muted" : "error" },
      `${d.ratio} % within ${d.max_ms} ms: ${d.percentile_ms.toFixed(1)} ms` +
      `${d.meets ? "" : " (not met)"}; cost ${Number(d.cost).toPrecision(3)}`),
    h("div", { class: "muted" }, `decided ${when(d.at)}`),
  ];
}

function topics(state) {
  return h("table", { id: "placement-topics" },
    h("tr", {}, ["topic", "served at", "mode", "version", "clients per region", "decision"]
      .map((c) => h("th", {}, c))),
    state.topics.map((t) => h("tr", {},
      h("td", {}, t.topic),
      h("td", {}, t.regions.map((r) => h("span", { class: "tag region" }, r))),
      h("td", {}, t.mode), h("td", {}, t.version),
      h("td", {}, clients(t)), h("td", {}, decision(t.decision)))));
}

function notes(seen) {
  const state = seen.state;
  return [
    state.omitted ? h("p", { class: "muted" },
      `${plural(state.omitted, "more topic")} left out by the controller (a state names 200 at most).`)
      : null,
    seen.ignored ? h("p", { class: "error", id: "placement-ignored" },
      `${plural(seen.ignored, "publication")} on placement/state ignored since the broker started` +
      ` (not a state); the last: ${seen.last_ignored}`) : null,
  ];
}

export async function showPlacement(root, token) {
  let seen;
  try {
    seen = await call("GET", "/v1/admin/placement", { token });
  } catch (error) {
    if (!(error instanceof ApiError) || error.code !== "placement_unknown") throw error;
    root.replaceChildren(h("p", { class: "muted", id: "placement-none" },
      "No placement state since this broker started. The placement controller (",
      h("code", {}, "tidings placement controller"), ", docs/placement.md) publishes it on ",
      h("code", {}, "placement/state"), " whenever it changes; the broker keeps the last one."));
    return;
  }
  const state = seen.state;
  root.replaceChildren(
    h("p", {}, `The controller's state of ${when(state.at)} (received ${when(seen.received_at)}),`
      + ` observing every ${state.interval_s} s.`),
    regions(state),
    h("h3", {}, "Topics"),
    state.topics.length ? topics(state) : h("p", { class: "muted" }, "No topic placed yet."),
    ...notes(seen).filter(Boolean));
}
