// The console's shell: one view at a time, chosen by the URL's hash.
import { render as overview } from "./views/overview.js";
import { render as publisher } from "./views/publisher.js";
import { render as subscriber } from "./views/subscriber.js";
import { render as simulator } from "./views/simulator.js";

const VIEWS = { overview, publisher, subscriber, simulator };
let leave = () => {};

function show() {
  const name = location.hash.replace(/^#\//, "") || "overview";
  const view = VIEWS[name] || overview;
  leave();
  const root = document.getElementById("view");
  root.replaceChildren();
  leave = view(root) || (() => {});
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    link.classList.toggle("active", link.dataset.view === name);
  }
}

addEventListener("hashchange", show);
show();
