// The function subscription form: code (an editor that marks the compile check's line), a
// builtin of the library (a form per function, built from the parameters the broker lists
// at GET /v1/functions/builtins), or a URL (with its own free-form params). Each kind keeps
// its own inputs, so switching kinds or builtins never carries parameters over.
import { call, describe } from "../api.js";
import { h, field } from "../dom.js";
import { BUILTINS, SUBSCRIPTIONS } from "../samples.js";

export function functionForm() {
  const type = h("input", { id: "fn-type", value: "text" });
  const mode = h("select", { id: "fn-mode" }, ["code", "builtin", "url"].map((m) => h("option", { value: m }, m)));
  const editor = codeEditor(SUBSCRIPTIONS.code);
  const builtin = builtinForm();
  const url = h("input", { id: "fn-url", value: `${location.origin}/api/DetectLanguages` });
  const urlParams = h("textarea", { id: "fn-url-params" }, "{}");
  const parts = {
    code: field("Code: a top-level match(publication) returning a bool", editor.element),
    builtin: builtin.element,
    url: h("div", {}, field("URL (POSTed {publication, params}, answers {\"match\": bool})", url),
      field("Params (JSON, passed to the URL as they are)", urlParams)),
  };
  const slot = h("div");
  const show = () => slot.replaceChildren(parts[mode.value]);
  mode.addEventListener("change", show);
  show();
  const body = () => {
    const spec = { function_type: type.value.trim() };
    if (mode.value === "code") spec.code = editor.value();
    if (mode.value === "builtin") Object.assign(spec, builtin.spec());
    if (mode.value === "url") { spec.url = url.value.trim(); spec.params = JSON.parse(urlParams.value || "{}"); }
    return { function: spec };
  };
  return {
    element: h("div", {}, field("Function type (what publications name in function_types)", type),
      field("Kind", mode), slot),
    body,
    showError: (error) => editor.mark(error),
    clearError: () => editor.mark(null),
  };
}

// A select of the library's functions and, under it, one input per parameter of the chosen
// one (from its JSON Schema), filled with the sample's values.
function builtinForm() {
  const select = h("select", { id: "fn-builtin" });
  const inputs = h("div", { id: "fn-params" });
  const note = h("p", { class: "muted", id: "fn-builtin-note" });
  let listed = {};
  let fields = [];
  const pick = () => {
    const chosen = listed[select.value];
    if (!chosen) return;
    const example = BUILTINS[chosen.name] || {};
    const schema = chosen.params;
    fields = Object.entries(schema.properties || {}).map(([name, prop]) =>
      paramInput(name, prop, (schema.required || []).includes(name), example[name]));
    inputs.replaceChildren(...(fields.length ? fields.map((f) => f.element)
      : [h("p", { class: "muted" }, "This function takes no parameters.")]));
    note.textContent = chosen.available ? `${chosen.module} library`
      : `not installed on this broker: install the ${chosen.extra} extra`;
  };
  select.addEventListener("change", pick);
  call("GET", "/v1/functions/builtins").then(({ builtins }) => {
    listed = Object.fromEntries(builtins.map((b) => [b.name, b]));
    select.replaceChildren(...builtins.map((b) => h("option", { value: b.name }, b.name)));
    pick();
  }).catch((error) => { note.textContent = describe(error); note.className = "error"; });
  const spec = () => {
    const params = {};
    for (const f of fields) {
      const value = f.value();
      if (value !== undefined) params[f.name] = value;
    }
    return { builtin: select.value, params };
  };
  return { element: h("div", {}, field("Library function", select), note, inputs), spec };
}

// One parameter's input by its schema: a choice (enum), a number, a list (comma-separated)
// or text; an optional one left empty is not sent.
function paramInput(name, prop, required, example) {
  const id = `fn-param-${name}`;
  const hint = [prop.description, required ? "required" : "optional"].filter(Boolean).join("; ");
  let input;
  let read;
  if (prop.enum) {
    input = h("select", { id }, required ? null : h("option", { value: "" }, "(any)"),
      prop.enum.map((v) => h("option", { value: v, selected: v === example }, v)));
    read = () => input.value || undefined;
  } else if (prop.type === "number" || prop.type === "integer") {
    input = h("input", { id, type: "number", step: prop.type === "integer" ? "1" : "any",
      min: prop.minimum, max: prop.maximum, value: example });
    read = () => (input.value === "" ? undefined : Number(input.value));
  } else if (prop.type === "array") {
    input = h("input", { id, placeholder: "comma-separated", value: example && example.join(", ") });
    read = () => {
      const items = input.value.split(",").map((v) => v.trim()).filter(Boolean);
      return items.length || required ? items : undefined;
    };
  } else {
    input = h("input", { id, value: example });
    read = () => (input.value === "" && !required ? undefined : input.value);
  }
  return { name, element: field(`${name} (${hint})`, input), value: read };
}

// A textarea with line numbers; the compile check's "line N: ..." is marked at line N.
function codeEditor(text) {
  const gutter = h("div", { class: "gutter", id: "code-gutter" });
  const area = h("textarea", { id: "code", spellcheck: "false" }, text);
  const message = h("div", { class: "error", id: "code-error" });
  let bad = null;
  const number = () => {
    const lines = area.value.split("\n").length;
    gutter.replaceChildren(...Array.from({ length: lines }, (_, i) =>
      h("div", { class: i + 1 === bad ? "bad" : "", "data-line": i + 1 }, i + 1)));
  };
  area.addEventListener("input", number);
  area.addEventListener("scroll", () => { gutter.scrollTop = area.scrollTop; });
  area.addEventListener("keydown", (event) => {
    if (event.key !== "Tab") return;
    event.preventDefault();
    area.setRangeText("    ", area.selectionStart, area.selectionEnd, "end");
    number();
  });
  number();
  return {
    element: h("div", {}, h("div", { class: "editor" }, gutter, area), message),
    value: () => area.value,
    mark(error) {
      const found = error && /^line (\d+): (.*)$/s.exec(error.message || "");
      bad = found ? Number(found[1]) : null;
      message.textContent = found ? `line ${found[1]}: ${found[2]}` : "";
      number();
    },
  };
}
