// Publisher: publish by topic, by content (attributes) and for functions (function types;
// an image for the vision functions), with sample inputs one click away; a function publish
// shows its evaluation pending, then its outcome.
import { call, describe } from "../api.js";
import { h, section, field } from "../dom.js";
import { PUBLICATIONS } from "../samples.js";

export function render(root) {
  const topics = h("input", { id: "pub-topics", placeholder: "home/kitchen/temp, alerts" });
  const attributes = h("textarea", { id: "pub-attributes", placeholder: '{"temp": 31, "room": "hall"}' });
  const functionTypes = h("input", { id: "pub-function-types", placeholder: "text, image" });
  const data = h("textarea", { id: "pub-data", placeholder: '{"any": "JSON"} or plain text' });
  const image = h("input", { type: "file", id: "pub-image", accept: "image/png,image/jpeg" });
  const imageNote = h("span", { class: "muted" });
  const result = h("p", { id: "pub-result" });
  const log = h("div", { class: "log", id: "pub-log" });
  let imageData = null;

  image.addEventListener("change", async () => {
    imageData = image.files.length ? await base64Of(image.files[0]) : null;
    imageNote.textContent = imageData ? `${image.files[0].name} will be sent as data.image` : "";
  });

  const fill = (sample) => () => {
    topics.value = sample.topics;
    attributes.value = sample.attributes;
    functionTypes.value = sample.functionTypes;
    data.value = sample.data;
    imageData = null;
    imageNote.textContent = "";
  };
  const face = async () => {
    const response = await fetch("samples/astronaut.png");
    imageData = await base64Of(await response.blob());
    functionTypes.value = "image";
    topics.value = attributes.value = data.value = "";
    imageNote.textContent = "sample: a photograph of a face (scikit-image's astronaut)";
  };

  async function publish() {
    try {
      const body = build();
      const answer = await call("POST", "/v1/publications", { body });
      const outcome = h("span", { class: "outcome" }, `${answer.deliveries} deliveries`);
      result.replaceChildren(`Published ${answer.id}: `, outcome);
      result.className = "ok";
      const logged = h("span", {}, `${answer.deliveries} deliveries`);
      log.prepend(h("div", { class: "item" }, `${new Date().toLocaleTimeString()} ${answer.id} -> `,
        logged, " ", h("span", { class: "muted" }, JSON.stringify(body).slice(0, 160))));
      if (answer.evaluations) follow(answer, [outcome, logged]);
    } catch (error) {
      result.textContent = describe(error);
      result.className = "error";
    }
  }

  function build() {
    const body = { data: parseData(data.value) };
    const list = (text) => text.split(",").map((t) => t.trim()).filter(Boolean);
    if (list(topics.value).length) body.topics = list(topics.value);
    if (attributes.value.trim()) body.attributes = JSON.parse(attributes.value);
    if (list(functionTypes.value).length) body.function_types = list(functionTypes.value);
    if (imageData) body.data = { ...(isObject(body.data) ? body.data : {}), image: imageData };
    return body;
  }

  root.append(
    section("Samples",
      Object.entries(PUBLICATIONS).map(([key, sample]) =>
        h("button", { class: "quiet", id: `sample-${key}`, onclick: fill(sample) }, sample.label)),
      h("button", { class: "quiet", id: "sample-face", onclick: face }, "Image: a face")),
    section("Publish",
      field("Topics (comma-separated)", topics),
      field("Attributes (a JSON object, for content subscriptions)", attributes),
      field("Function types (comma-separated, for function subscriptions)", functionTypes),
      field("Data (JSON, or plain text)", data),
      field("Image (sent as data.image, base64)", h("div", {}, image, " ", imageNote)),
      h("button", { id: "publish", onclick: publish }, "Publish"),
      result),
    section("Published", log),
  );
}

// Function subscriptions evaluate a publication after its publish is answered: say so, then
// follow its progress (GET /v1/publications/{id}, with the progress token the answer gave
// this publisher alone) until no evaluation is owed, and show the deliveries it made in all.
// The answer's `deliveries` counts topic and content ones alone.
async function follow(answer, shown) {
  const say = (text, className) => shown.forEach((el) => { el.textContent = text; el.className = className; });
  const owed = answer.evaluations;
  say(`${answer.deliveries} deliveries; function evaluation pending (${owed} `
    + `subscription${owed === 1 ? "" : "s"})`, "pending");
  const started = Date.now();
  while (Date.now() - started < 120_000) {
    await new Promise((resolve) => setTimeout(resolve, 400));
    let seen;
    const path = `/v1/publications/${encodeURIComponent(answer.id)}`
      + `?token=${encodeURIComponent(answer.progress_token)}`;
    try { seen = await call("GET", path); } catch (error) {
      say(`function evaluation: ${describe(error)}`, "error");
      return;
    }
    if (!seen.evaluating) {
      const matched = seen.deliveries - answer.deliveries;
      say(`${seen.deliveries} deliveries (function evaluation done: ${matched} more)`, "ok");
      return;
    }
  }
  say(`${answer.deliveries} deliveries; function evaluation still pending after 2 minutes`, "pending");
}

function parseData(text) {
  if (!text.trim()) return null;
  try { return JSON.parse(text); } catch { return text; }
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function base64Of(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1]);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}
