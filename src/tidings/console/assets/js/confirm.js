// Every destructive action asks first: a <dialog> in the page (styled, and testable, which
// window.confirm is not). Resolves true only when its action button is clicked; Cancel,
// Escape and closing it otherwise resolve false and do nothing.
import { h } from "./dom.js";

export function confirmed(question, verb = "Delete") {
  return new Promise((resolve) => {
    const dialog = h("dialog", { id: "confirm", class: "confirm" });
    let answer = false;
    const close = (yes) => () => { answer = yes; dialog.close(); };
    dialog.addEventListener("close", () => { dialog.remove(); resolve(answer); });
    dialog.append(h("p", { id: "confirm-text" }, question),
      h("div", { class: "actions" },
        h("button", { class: "quiet", id: "confirm-cancel", onclick: close(false) }, "Cancel"),
        h("button", { class: "danger", id: "confirm-ok", onclick: close(true) }, verb)));
    document.body.append(dialog);
    dialog.showModal();
  });
}

// A button whose action runs only once confirmed.
export function dangerButton(label, question, action, attrs = {}) {
  return h("button", { class: "danger", ...attrs, onclick: async () => {
    if (await confirmed(question, label)) await action();
  } }, label);
}
