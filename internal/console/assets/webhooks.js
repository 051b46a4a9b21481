// Webhooks: the endpoints of the workspace in view
// (/v1/organizations/webhooks, a reins extension): the list (URL, state
// and why an endpoint was disabled, its event types), the form that
// registers one, enable and disable, a new signing secret, delete. A
// signing secret is shown once, in the dialog API keys use. Admin and
// developer keys manage endpoints; read-only keys see them only.
import { get, post, del, qs } from "./api.js";
import { h, clear, ago, errorBox, field, confirmDialog, onceDialog, toast } from "./util.js";
import { writeControl } from "./access.js";
// The event types the server accepts, served from its own list
// (webhooks.EventTypes): the form offers no type the API would refuse.
import { EVENT_TYPES } from "./webhook-events.js";

const enc = encodeURIComponent;
const BASE = "/v1/organizations/webhooks";
const SECRET_NOTE = "Copy it now: it is shown this once. Receivers verify each delivery's webhook-signature with it (the SDKs' webhooks.unwrap).";
// Up to this many event types are listed in a row; more fold.
const SHOWN_EVENTS = 3;

const label = (e) => e.name || e.url;

// busy disables button while fn runs, so that a double click acts once.
async function busy(button, fn) {
  button.disabled = true;
  try { await fn(); } finally { button.disabled = false; }
}

function events(types) {
  const list = h("ul", { class: "wh-events" }, types.map((t) => h("li", {}, h("code", {}, t))));
  if (types.length <= SHOWN_EVENTS) return list;
  return h("details", {}, h("summary", {}, `${types.length} event types`), list);
}

function state(e) {
  if (e.state === "enabled") return h("span", { class: "badge w-enabled" }, "enabled");
  return [h("span", { class: "badge w-disabled" }, e.disabled_reason ? "auto-disabled" : "disabled"),
    e.disabled_reason ? h("p", { class: "wh-reason" }, e.disabled_reason) : null];
}

export async function webhooksPage(main) {
  const list = h("div", { "aria-live": "polite" });
  let stopped = false;

  function row(e) {
    const enabled = e.state === "enabled";
    const toggle = writeControl(h("button", { type: "button", class: enabled ? "toggle" : "toggle ok", "aria-label": `${enabled ? "Disable" : "Enable"} ${label(e)}`,
      onclick: () => busy(toggle, async () => {
        if (enabled && !(await confirmDialog(`Disable ${label(e)}? It gets no events until it is enabled again, and its queued deliveries are dropped.`, "Disable"))) return;
        try {
          await post(`${BASE}/${enc(e.id)}`, { state: enabled ? "disabled" : "enabled" });
          toast(`${label(e)} ${enabled ? "disabled" : "enabled"}`);
          await load();
        } catch (err) { toast(err.message, "error"); }
      }) }, enabled ? "Disable" : "Enable"));
    const rotate = writeControl(h("button", { type: "button", class: "rotate", "aria-label": `New signing secret for ${label(e)}`,
      onclick: () => busy(rotate, async () => {
        if (!(await confirmDialog(`Make a new signing secret for ${label(e)}? Deliveries from now on are signed with it: a receiver still checking the old one refuses them.`, "New secret"))) return;
        try {
          const r = await post(`${BASE}/${enc(e.id)}/regenerate_signing_secret`);
          onceDialog("Signing secret", r.signing_secret, SECRET_NOTE);
          await load();
        } catch (err) { toast(err.message, "error"); }
      }) }, "New secret"));
    const remove = writeControl(h("button", { type: "button", class: "danger", "aria-label": `Delete ${label(e)}`,
      onclick: () => busy(remove, async () => {
        if (!(await confirmDialog(`Delete webhook endpoint ${label(e)}? Its queued deliveries go with it.`))) return;
        try { await del(`${BASE}/${enc(e.id)}`); toast(`${label(e)} deleted`); await load(); } catch (err) { toast(err.message, "error"); }
      }) }, "Delete"));
    return h("tr", { dataset: { id: e.id, state: e.state } },
      h("td", {}, e.name ? h("div", { class: "wh-name" }, e.name) : null, h("div", { class: "wh-url" }, e.url),
        e.description ? h("div", { class: "muted" }, e.description) : null, h("div", { class: "id" }, e.id)),
      h("td", {}, events(e.enabled_events || [])),
      h("td", {}, state(e)),
      h("td", { title: e.created_at }, ago(e.created_at)),
      h("td", {}, h("div", { class: "row" }, toggle, rotate, remove)));
  }

  // Each load has a number: an older answer is dropped.
  let gen = 0;
  async function load() {
    const my = ++gen;
    try {
      const r = await get(BASE + qs({ limit: 100 }));
      if (stopped || my !== gen) return;
      const opened = new Set([...list.querySelectorAll("tr[data-id] details[open]")].map((x) => x.closest("tr").dataset.id));
      clear(list).append(r.data.length
        ? h("div", { class: "table-wrap" }, h("table", { class: "webhooks" }, h("caption", { class: "sr-only" }, "Webhook endpoints, newest first"),
          h("thead", {}, h("tr", {}, ["Endpoint", "Events", "State", "Created", ""].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", {}, r.data.map(row))))
        : h("p", { class: "muted" }, "No webhook endpoint yet."));
      for (const x of list.querySelectorAll("tr[data-id] details")) x.open = opened.has(x.closest("tr").dataset.id);
    } catch (err) {
      if (my === gen) clear(list).append(errorBox(err));
    }
  }

  main.append(h("div", { class: "head" }, h("h1", {}, "Webhooks")),
    h("p", { class: "muted" }, "This workspace's events, sent signed to the URLs below (the Standard Webhooks way). An endpoint that redirects, has an address the server refuses, or drops 20 deliveries in a row is disabled with the reason; enable it again once fixed."),
    list, createForm(load));
  await load();
  return () => { stopped = true; };
}

// createForm registers an endpoint: a URL, a name, a description and the
// event types, grouped by what they are about.
function createForm(created) {
  const url = h("input", { type: "url", name: "webhook-url", required: true, maxlength: "2048", placeholder: "https://example.com/hooks/reins", spellcheck: "false" });
  const name = h("input", { name: "webhook-name", maxlength: "256" });
  const description = h("input", { name: "webhook-description", maxlength: "1024" });
  const groups = new Map();
  for (const t of EVENT_TYPES) {
    const g = t.slice(0, t.indexOf("."));
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(t);
  }
  const picks = h("fieldset", { class: "plain wh-types" }, h("legend", {}, "Event types (at least one)"),
    [...groups].map(([g, types]) => h("fieldset", { class: "plain wh-group" }, h("legend", {}, g.replace("_", " ")),
      types.map((t) => {
        const box = h("input", { type: "checkbox", name: "webhook-event", value: t, id: `f-we-${t.replace(/[^a-z_]/g, "-")}` });
        return h("div", { class: "field check" }, box, h("label", { for: box.id }, t));
      }))));
  const out = h("div");
  const form = h("form", { class: "card webhook-new" }, h("h2", {}, "New endpoint"),
    field("URL", url, "https:// (http:// only if the server allows it)."), field("Name (optional)", name), field("Description (optional)", description),
    picks, h("button", { type: "submit" }, "Create endpoint"), out);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    const body = { url: url.value.trim(), name: name.value.trim(), description: description.value.trim(),
      enabled_events: [...form.querySelectorAll('input[name="webhook-event"]:checked')].map((b) => b.value) };
    const submit = form.querySelector('button[type="submit"]');
    submit.disabled = true;
    try {
      const ep = await post(BASE, body);
      form.reset();
      onceDialog("Signing secret", ep.signing_secret, SECRET_NOTE);
      created();
    } catch (err) { out.append(errorBox(err)); }
    submit.disabled = false;
  });
  return writeControl(form);
}
