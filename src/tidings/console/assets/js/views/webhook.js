// A subscriber's webhook: where the broker POSTs its messages, set or replaced with a form,
// and its status (active or paused, consecutive failures, the last error), resumed or
// deleted (after a confirmation).
import { call, describe } from "../api.js";
import { h, section, field, when } from "../dom.js";
import { dangerButton } from "../confirm.js";

export function webhook(me) {
  const path = `/v1/subscribers/${me.id}/webhook`;
  const status = h("div", { id: "webhook-status" });
  const url = h("input", { id: "webhook-url", placeholder: "https://example.org/tidings" });
  const retention = h("input", { id: "webhook-retention", type: "number", min: "1", step: "any",
    placeholder: "default: the queues' retention" });
  const result = h("p", { id: "webhook-result" });
  const tell = (text, ok) => { result.textContent = text; result.className = ok ? "ok" : "error"; };

  const show = (hook) => {
    if (!hook) { status.replaceChildren(h("p", { class: "muted" }, "No webhook: messages wait for pulls or a stream.")); return; }
    url.value = hook.url;
    const paused = hook.state === "paused";
    status.replaceChildren(h("table", {},
      row("URL", h("code", {}, hook.url)),
      row("State", h("span", { class: paused ? "error" : "ok", id: "webhook-state" }, hook.state)),
      row("Last error", h("span", { id: "webhook-reason" }, hook.reason || "none")),
      row("Consecutive failures", hook.failures),
      row("Retried for", `${hook.retention_s} s`),
      row("Changed", when(hook.updated_at)),
      row("Signing secret", h("code", { class: "secret" }, hook.secret))),
    ...(paused ? [h("button", { class: "quiet", id: "webhook-resume", onclick: resume }, "Resume now")] : []),
    dangerButton("Delete webhook", `Stop pushing subscriber ${me.id}'s messages to ${hook.url}? `
      + "They stay in the queue.", remove, { id: "webhook-delete" }));
  };
  const refresh = async () => {
    try { show(await call("GET", path, { token: me.token })); } catch (error) {
      if (error.status === 404) show(null);
      else status.replaceChildren(h("p", { class: "error" }, describe(error)));
    }
  };
  const save = async () => {
    const body = { url: url.value.trim() };
    if (retention.value.trim()) body.retention_s = Number(retention.value);
    try { show(await call("PUT", path, { token: me.token, body })); tell("Webhook set.", true); } catch (error) { tell(describe(error), false); }
  };
  async function resume() {
    try { show(await call("POST", `${path}/resume`, { token: me.token })); tell("Resumed.", true); } catch (error) { tell(describe(error), false); }
  }
  async function remove() {
    try { await call("DELETE", path, { token: me.token }); show(null); tell("Webhook deleted.", true); } catch (error) { tell(describe(error), false); }
  }
  refresh();
  return section("Webhook", status,
    h("div", { class: "row" }, field("Endpoint URL (http or https)", url),
      field("Retry each message for (seconds)", retention),
      h("button", { id: "webhook-save", onclick: save }, "Set webhook")),
    h("button", { class: "quiet", id: "webhook-refresh", onclick: refresh }, "Refresh"), result);
}

function row(label, value) {
  return h("tr", {}, h("th", {}, label), h("td", {}, value));
}
