// Subscriber: register (the token shown once) or unregister, subscribe by topic, content or
// function (views/functionform.js), live deliveries over the WebSocket stream with ack and
// nack, the queue browsed and purged and the dead letters (views/queue.js), the webhook
// (views/webhook.js). Every destructive action asks first (confirm.js).
import { call, describe, saved } from "../api.js";
import { h, section, field } from "../dom.js";
import { dangerButton } from "../confirm.js";
import { OPERATORS, SUBSCRIPTIONS } from "../samples.js";
import { functionForm } from "./functionform.js";
import { deadLetters, queue } from "./queue.js";
import { webhook } from "./webhook.js";

export function render(root) {
  const me = () => saved.get("subscriber");
  const parts = h("div");
  let stream = null;

  function draw() {
    parts.replaceChildren(identity(draw));
    if (me()) {
      const list = h("div", { id: "subscriptions" });
      const refresh = () => showSubscriptions(list, me());
      parts.append(subscribeForm(me(), refresh), section("Subscriptions", list),
        live(me(), (s) => { stream = s; }), queue(me()), deadLetters(me()), webhook(me()));
      refresh();
    }
  }
  root.append(parts);
  draw();
  return () => stream && stream.close();
}

function identity(redraw) {
  const current = saved.get("subscriber");
  const shown = h("div", { id: "identity" });
  if (current) {
    shown.append(h("p", {}, "Subscriber ", h("code", { id: "subscriber-id" }, current.id)));
    if (current.fresh) {
      shown.append(h("p", {}, "Its token, shown this once (the console keeps it in this browser):"),
        h("div", { class: "token", id: "subscriber-token" }, current.token));
      saved.set("subscriber", { id: current.id, token: current.token });
    }
    const error = h("p", { class: "error" });
    const unregister = async () => {
      try {
        await call("DELETE", `/v1/subscribers/${current.id}`, { token: current.token });
        saved.set("subscriber", null);
        redraw();
      } catch (e) { error.textContent = describe(e); }
    };
    shown.append(h("button", { class: "quiet", onclick: () => { saved.set("subscriber", null); redraw(); } },
      "Use another subscriber"),
      dangerButton("Unregister", `Delete subscriber ${current.id} with its subscriptions, queue, `
        + "dead letters and webhook?", unregister, { id: "unregister" }), error);
    return section("Subscriber", shown);
  }
  const ephemeral = h("input", { type: "checkbox", id: "ephemeral" });
  const error = h("p", { class: "error" });
  const register = async () => {
    try {
      const made = await call("POST", "/v1/subscribers", { body: { ephemeral: ephemeral.checked } });
      saved.set("subscriber", { id: made.id, token: made.token, fresh: true });
      redraw();
    } catch (e) { error.textContent = describe(e); }
  };
  const id = h("input", { id: "existing-id", placeholder: "subscriber id" });
  const token = h("input", { type: "password", id: "existing-token", placeholder: "its token" });
  const use = async () => {
    try {
      await call("GET", `/v1/subscribers/${id.value.trim()}`, { token: token.value.trim() });
      saved.set("subscriber", { id: id.value.trim(), token: token.value.trim() });
      redraw();
    } catch (e) { error.textContent = describe(e); }
  };
  return section("Subscriber",
    h("button", { id: "register", onclick: register }, "Register a new subscriber"),
    h("label", {}, ephemeral, " ephemeral (deleted a while after its last stream closes)"),
    h("p", { class: "muted" }, "or use one you have:"),
    h("div", { class: "row" }, id, token, h("button", { class: "quiet", id: "use-existing", onclick: use }, "Use")),
    error);
}

function subscribeForm(me, refresh) {
  const result = h("p", { id: "subscribe-result" });
  const forms = { topic: topicForm(), content: contentForm(), function: functionForm() };
  let kind = "topic";
  const body = h("div");
  const tabs = h("div", { class: "tabs" });
  const pick = (name) => {
    kind = name;
    for (const b of tabs.children) b.classList.toggle("on", b.dataset.kind === name);
    body.replaceChildren(forms[name].element);
  };
  for (const name of Object.keys(forms)) {
    tabs.append(h("button", { "data-kind": name, id: `kind-${name}`, onclick: () => pick(name) }, name));
  }
  pick("topic");
  const subscribe = async () => {
    forms.function.clearError();
    try {
      const made = await call("POST", `/v1/subscribers/${me.id}/subscriptions`,
        { token: me.token, body: forms[kind].body() });
      result.textContent = `Subscribed: ${made.id} (${made.kind})`;
      result.className = "ok";
      refresh();
    } catch (error) {
      result.textContent = describe(error);
      result.className = "error";
      if (kind === "function") forms.function.showError(error);
    }
  };
  return section("Subscribe", tabs, body, h("button", { id: "subscribe", onclick: subscribe }, "Subscribe"), result);
}

function topicForm() {
  const topics = h("input", { id: "sub-topics", value: SUBSCRIPTIONS.topic.topics });
  return {
    element: field("Topics or patterns (comma-separated; * one level, # the rest)", topics),
    body: () => ({ topics: topics.value.split(",").map((t) => t.trim()).filter(Boolean) }),
  };
}

function contentForm() {
  const rows = h("div", { id: "predicates" });
  const add = (p = { key: "", op: "=", value: "" }) => {
    const op = h("select", {}, OPERATORS.map((o) => h("option", { value: o, selected: o === p.op }, o)));
    rows.append(h("div", { class: "row predicate" }, h("input", { placeholder: "key", value: p.key }), op,
      h("input", { placeholder: 'value (number, true, "text", or a,b for in)', value: p.value })));
  };
  SUBSCRIPTIONS.content.forEach(add);
  const element = h("div", {}, h("label", {}, "All of these conditions"), rows,
    h("button", { class: "quiet", onclick: () => add() }, "Add a condition"));
  const body = () => ({
    predicates: [...rows.children].map((row) => {
      const [key, op, value] = row.querySelectorAll("input, select");
      return { key: key.value.trim(), op: op.value, value: predicateValue(op.value, value.value) };
    }),
  });
  return { element, body };
}

function predicateValue(op, text) {
  if (op === "exists") return text.trim() !== "false";
  if (op === "in") return text.split(",").map((v) => scalar(v.trim()));
  return scalar(text.trim());
}

function scalar(text) {
  try { return JSON.parse(text); } catch { return text; }
}

async function showSubscriptions(root, me) {
  try {
    const list = await allSubscriptions(me);
    const remove = (id) => async () => {
      await call("DELETE", `/v1/subscribers/${me.id}/subscriptions/${id}`, { token: me.token });
      showSubscriptions(root, me);
    };
    const resume = (id) => async () => {
      await call("POST", `/v1/subscribers/${me.id}/subscriptions/${id}/resume`, { token: me.token });
      showSubscriptions(root, me);
    };
    root.replaceChildren(list.length ? h("table", {},
      h("tr", {}, h("th", {}, "id"), h("th", {}, "kind"), h("th", {}, "what"), h("th", {}, "status"), h("th", {}, "")),
      list.map((s) => h("tr", {}, h("td", {}, s.id), h("td", {}, s.kind), h("td", {}, what(s)),
        h("td", { class: s.status === "active" ? "" : "error" }, s.status, s.status_reason ? `: ${s.status_reason}` : ""),
        h("td", {}, s.status === "suspended" ? h("button", { class: "quiet", onclick: resume(s.id) }, "Resume") : null,
          dangerButton("Delete", `Delete subscription ${s.id} (${what(s)})?`, remove(s.id))))))
      : h("p", { class: "muted" }, "None yet."));
  } catch (error) {
    root.replaceChildren(h("p", { class: "error" }, describe(error)));
  }
}

// Every page of them (the broker answers a page at a time, `next` the cursor; none from a
// broker before paging, whose one answer held them all).
async function allSubscriptions(me) {
  const list = [];
  for (let after = ""; after !== null && after !== undefined;) {
    const page = await call("GET", `/v1/subscribers/${me.id}/subscriptions`,
      { token: me.token, query: { after } });
    list.push(...page.subscriptions);
    after = page.next;
  }
  return list;
}

function what(s) {
  if (s.kind === "topic") return s.topics.join(", ");
  if (s.kind === "content") return s.predicates.map((p) => `${p.key} ${p.op} ${JSON.stringify(p.value)}`).join(" and ");
  const f = s.function;
  return `${f.function_type}: ${f.builtin || f.url || "code"}`; // code is not shown again
}

function live(me, keep) {
  const status = h("span", { class: "muted", id: "stream-status" }, "not connected");
  const autoAck = h("input", { type: "checkbox", id: "auto-ack" });
  const log = h("div", { class: "log", id: "deliveries" });
  let socket = null;
  const send = (type, receipts) => socket && socket.send(JSON.stringify({ type, receipts }));
  const connect = () => {
    if (socket) socket.close();
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${location.host}/v1/subscribers/${me.id}/stream?prefetch=20&token=${encodeURIComponent(me.token)}`;
    socket = new WebSocket(url);
    keep(socket);
    socket.onopen = () => { status.textContent = "connected"; status.className = "ok"; };
    socket.onclose = (event) => { status.textContent = `closed (${event.code})`; status.className = "muted"; };
    socket.onmessage = async (event) => {
      const frame = JSON.parse(typeof event.data === "string" ? event.data : await event.data.text());
      if (frame.type === "error") { status.textContent = frame.error.message; status.className = "error"; return; }
      for (const m of frame.messages || []) show(m);
    };
  };
  const show = (m) => {
    const item = h("div", { class: "item delivery" });
    const settle = (type) => () => { send(type, [m.receipt]); item.querySelectorAll("button").forEach((b) => b.remove());
      item.append(h("span", { class: "muted" }, ` ${type}ed`)); };
    item.append(`${new Date().toLocaleTimeString()} attempt ${m.attempt} `,
      h("span", { class: "payload" }, JSON.stringify(m.body.data)), " ",
      h("span", { class: "muted" }, (m.body.topics || []).join(", ")), " ",
      h("button", { class: "quiet ack", onclick: settle("ack") }, "Ack"),
      h("button", { class: "quiet", onclick: settle("nack") }, "Nack"));
    log.prepend(item);
    if (autoAck.checked) settle("ack")();
  };
  return section("Live deliveries",
    h("div", {}, h("button", { id: "connect", onclick: connect }, "Connect"),
      h("button", { class: "quiet", onclick: () => socket && socket.close() }, "Disconnect"), " ", status),
    h("label", {}, autoAck, " acknowledge as they arrive"), log);
}
