// The overview's elastic deployment (GET /v1/admin/cluster, docs/elastic.md): its layers
// (matchers, exit points, access points) with their views and members, the operators running,
// those unassigned or missing, the scale in progress and the last ones. A broker that does not
// match elastically answers 404: a plain note says so.
import { ApiError, call } from "../api.js";
import { h } from "../dom.js";

function list(items) {
  return items.length ? items.join(", ") : "none";
}

function layers(status) {
  const rows = [
    ["matchers", status.matchers.view, status.matchers.members],
    ["exit points", status.exit_points.view, status.exit_points.members],
    ["access points", "-", status.access_points],
  ];
  return h("table", { id: "cluster-layers" },
    h("tr", {}, h("th", {}, "layer"), h("th", {}, "view"), h("th", {}, "operators"),
      h("th", {}, "members")),
    rows.map(([name, view, members]) => h("tr", {}, h("td", {}, name), h("td", {}, view),
      h("td", {}, members.length), h("td", {}, list(members)))));
}

function running(status) {
  const roles = Object.entries(status.running);
  return h("table", { id: "cluster-running" },
    h("tr", {}, h("th", {}, "operator"), h("th", {}, "role"), h("th", {}, "state")),
    roles.map(([id, role]) => h("tr", {}, h("td", {}, id), h("td", {}, role),
      h("td", {}, status.unassigned.includes(id) ? "unassigned" : "assigned"))),
    status.missing.map((id) => h("tr", { class: "error" }, h("td", {}, id), h("td", {}, "-"),
      h("td", {}, "missing (assigned, not running)"))));
}

function scaling(status) {
  const now = status.scale;
  const current = now
    ? `${now.kind}: ${now.phase}${now.reason ? ` (${now.reason})` : ""}`
    : "No scale in progress.";
  const past = status.last_scales || [];
  return h("div", { id: "cluster-scaling" }, h("p", {}, current),
    past.length ? h("table", {},
      h("tr", {}, ["scale", "from", "to", "outcome", "reason"].map((c) => h("th", {}, c))),
      past.map((s) => h("tr", {}, [s.kind, s.old, s.new, s.outcome, s.reason || ""]
        .map((v) => h("td", {}, v))))) : null);
}

export async function showCluster(root, token) {
  let status;
  try {
    status = await call("GET", "/v1/admin/cluster", { token });
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
    root.replaceChildren(h("p", { class: "muted", id: "cluster-none" },
      "Not elastic: this broker matches in its own process. Start it with ",
      h("code", {}, "--matching elastic"), " to see its layers, operators and scaling."));
    return;
  }
  root.replaceChildren(
    h("p", {}, `Cluster ${status.cluster} on ZooKeeper ${status.zookeeper}.`),
    layers(status), h("h3", {}, "Operators"), running(status),
    h("h3", {}, "Scaling"), scaling(status));
}
