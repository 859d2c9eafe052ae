// The overview's topics table (GET /v1/admin/topics): each topic's publications and the
// deliveries they made, per second and counted; sorted by a click on a column's header.
import { h } from "../dom.js";

const COLUMNS = [
  { key: "topic", label: "topic" },
  { key: "publications_per_s", label: "publications/s", rate: true },
  { key: "deliveries_per_s", label: "deliveries/s", rate: true },
  { key: "publications", label: "publications" },
  { key: "deliveries", label: "deliveries" },
];

function shown(row, column) {
  const value = row[column.key];
  return column.rate ? value.toFixed(value >= 100 ? 0 : 2) : value;
}

export class TopicsTable {
  constructor() {
    this.by = "publications_per_s";
    this.descending = true;
    this.last = null;
    this.el = h("div", { id: "topics" });
  }

  sortBy(key) {
    this.descending = this.by === key ? !this.descending : key !== "topic";
    this.by = key;
    if (this.last) this.show(this.last);
  }

  sorted(rows) {
    const sign = this.descending ? -1 : 1;
    const key = this.by;
    return [...rows].sort((a, b) => {
      const order = typeof a[key] === "string" ? a[key].localeCompare(b[key]) : a[key] - b[key];
      return sign * order || a.topic.localeCompare(b.topic);
    });
  }

  header() {
    return h("tr", {}, COLUMNS.map((c) => {
      const on = c.key === this.by;
      const arrow = on ? (this.descending ? " ▼" : " ▲") : "";
      return h("th", { "aria-sort": on ? (this.descending ? "descending" : "ascending") : "none" },
        h("button", { class: "sort", "data-key": c.key, onclick: () => this.sortBy(c.key) },
          c.label + arrow));
    }));
  }

  show(seen) {
    this.last = seen;
    if (!seen.topics.length) {
      this.el.replaceChildren(h("p", { class: "muted" }, "No publication to a topic yet."));
      return;
    }
    const rows = this.sorted(seen.topics).map((row) => h("tr", { class: "topic" },
      COLUMNS.map((c) => h("td", {}, shown(row, c)))));
    const other = seen.other;
    const rest = other.publications
      ? h("tr", { class: "other muted" }, h("td", {}, "other topics (summed)"),
        COLUMNS.slice(1).map((c) => h("td", {}, shown(other, c))))
      : null;
    this.el.replaceChildren(
      h("table", {}, this.header(), rows, rest),
      h("p", { class: "muted" }, `Rates over the last ~${seen.window_s} s; the `,
        `${seen.max_topics} busiest topics by name, the others summed.`));
  }
}
