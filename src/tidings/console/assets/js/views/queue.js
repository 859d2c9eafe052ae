// A subscriber's queue as it stands: its waiting messages browsed without leasing them (a
// page at a time, FIFO, with attempts and age), purged after a confirmation, and its dead
// letters with their payloads, re-driven one by one or all at once.
import { call, describe } from "../api.js";
import { h, section, when } from "../dom.js";
import { dangerButton } from "../confirm.js";

const PAGE = 50;

export function queue(me) {
  const rows = h("div", { id: "queue" });
  const status = h("p", { id: "queue-status", class: "muted" });
  const more = h("button", { class: "quiet", id: "queue-more" }, "More");
  let after = 0;
  const base = `/v1/subscribers/${me.id}`;

  const load = async (reset) => {
    if (reset) { after = 0; rows.replaceChildren(); }
    try {
      const [page, info] = await Promise.all([
        call("GET", `${base}/queue/messages`, { token: me.token, query: { limit: PAGE, after } }),
        call("GET", base, { token: me.token }),
      ]);
      const table = rows.querySelector("table") || rows.appendChild(h("table", {}, h("tr", {},
        ["id", "publication", "attempts", "age", "ready", "payload"].map((t) => h("th", {}, t)))));
      for (const m of page.messages) table.append(queuedRow(m));
      after = page.next ?? after;
      more.hidden = page.next === null;
      const shown = table.querySelectorAll("tr.queued").length;
      const { ready, leased } = info.depth;
      status.textContent = `${shown} waiting shown; ${ready} ready, ${leased} leased or delayed `
        + "(browsing leases nothing)";
      if (!shown) rows.replaceChildren(h("p", { class: "muted" }, "No message waiting."));
    } catch (error) { rows.replaceChildren(h("p", { class: "error" }, describe(error))); }
  };
  more.addEventListener("click", () => load(false));

  const purge = async () => {
    try {
      const { purged } = await call("DELETE", `${base}/queue/messages`, { token: me.token });
      await load(true);
      status.textContent = `Purged ${purged} waiting messages. ${status.textContent}`;
    } catch (error) { status.textContent = describe(error); }
  };
  load(true);
  return section("Queue", status, rows, more,
    h("button", { class: "quiet", id: "queue-refresh", onclick: () => load(true) }, "Refresh"),
    dangerButton("Purge", `Delete every waiting message of subscriber ${me.id}? Messages leased `
      + "right now stay with their holders.", purge, { id: "queue-purge" }));
}

function queuedRow(m) {
  const delayed = m.ready_at * 1000 > Date.now();
  return h("tr", { class: "queued", "data-id": m.id },
    h("td", {}, m.id), h("td", {}, m.publication_id), h("td", { class: "attempts" }, m.attempt),
    h("td", {}, age(m.age_s)), h("td", {}, delayed ? `at ${when(m.ready_at)}` : "ready"),
    h("td", { class: "payload" }, payload(m.body)));
}

function age(seconds) {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

// A body's data (and its topics), shortened; null when the broker could not encode it.
function payload(body) {
  if (body === null || body === undefined) return h("span", { class: "muted" }, "(unreadable)");
  const text = JSON.stringify(body.data ?? null);
  const topics = (body.topics || []).join(", ");
  return h("span", {}, h("code", { title: text }, text.length > 200 ? `${text.slice(0, 200)}…` : text),
    topics ? h("span", { class: "muted" }, ` ${topics}`) : null);
}

export function deadLetters(me) {
  const list = h("div", { id: "dead-letters" });
  const base = `/v1/subscribers/${me.id}/dead-letters`;
  const note = h("p", { id: "redrive-result", class: "muted" });
  const redrive = (ids) => async () => {
    try {
      const { redriven } = await call("POST", `${base}/redrive`,
        { token: me.token, body: ids ? { ids } : {} });
      note.textContent = `Re-drove ${redriven} to the queue.`;
      refresh();
    } catch (error) { note.textContent = describe(error); }
  };
  const refresh = async () => {
    try {
      const { dead_letters: dead } = await call("GET", base, { token: me.token });
      list.replaceChildren(dead.length ? h("table", {},
        h("tr", {}, ["id", "publication", "reason", "attempts", "when", "payload", ""].map((t) => h("th", {}, t))),
        dead.map((d) => h("tr", { class: "dead", "data-id": d.id }, h("td", {}, d.id),
          h("td", {}, d.publication_id), h("td", {}, d.reason), h("td", {}, d.attempt),
          h("td", {}, when(d.dead_at)), h("td", { class: "payload" }, payload(d.body)),
          h("td", {}, h("button", { class: "quiet", onclick: redrive([d.id]) }, "Re-drive")))))
        : h("p", { class: "muted" }, "None."));
    } catch (error) { list.replaceChildren(h("p", { class: "error" }, describe(error))); }
  };
  refresh();
  return section("Dead letters", list, note,
    h("button", { class: "quiet", id: "dead-refresh", onclick: refresh }, "Refresh"),
    h("button", { id: "redrive-all", onclick: redrive(null) }, "Re-drive all"));
}
