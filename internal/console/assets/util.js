// Small DOM helpers. Text always goes in as text nodes: nothing the API
// returns is ever parsed as HTML.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, v);
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) { el.replaceChildren(); return el; }

export function toast(msg, kind = "info") {
  const t = document.getElementById("toast");
  t.className = kind;
  t.textContent = msg;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.textContent = ""; t.className = ""; }, 6000);
}

export function ago(iso) {
  if (!iso) return "";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.max(s, 0)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return new Date(iso).toLocaleDateString();
}

export function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, `${err.type ? err.type + ": " : ""}${err.message}`);
}

// field is a labelled form control.
export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("small", {}, hint) : null);
}

// confirmDialog asks before a destructive action.
export function confirmDialog(text, action = "Delete") {
  return new Promise((resolve) => {
    const d = h("dialog", { class: "confirm", "aria-label": "Confirm" },
      h("p", {}, text),
      h("div", { class: "row" },
        h("button", { type: "button", class: "danger", onclick: () => { d.close(); resolve(true); } }, action),
        h("button", { type: "button", onclick: () => { d.close(); resolve(false); } }, "Cancel")));
    d.addEventListener("close", () => { d.remove(); resolve(false); });
    document.body.append(d);
    d.showModal();
  });
}

// onceDialog shows a secret once; it is dropped from the page when closed.
export function onceDialog(title, secret, note) {
  const d = h("dialog", { class: "once", "aria-label": title },
    h("h2", {}, title),
    h("p", {}, note),
    h("pre", { class: "secret", tabindex: "0" }, secret),
    h("div", { class: "row" },
      h("button", { type: "button", onclick: () => navigator.clipboard?.writeText(secret) }, "Copy"),
      h("button", { type: "button", onclick: () => d.close() }, "Done")));
  d.addEventListener("close", () => d.remove());
  document.body.append(d);
  d.showModal();
}

export function pretty(v) {
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}
