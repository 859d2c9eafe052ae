// A small element builder: h("button", {onclick}, "Publish").
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), ...children);
}

export function field(labelText, input) {
  return h("div", {}, h("label", {}, labelText), input);
}

export function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "-";
}
