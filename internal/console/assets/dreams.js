// Dreams: the list (live while a dream runs: status, inputs, output
// store, the dream's session, usage, errors; stores and sessions link to
// their pages), the form that starts one
// over a memory store and past sessions, and cancel and archive as the
// API allows them (cancel while pending or running, archive once ended).
// Every string from the API goes in as text (util.h).
import { get, post, qs } from "./api.js";
import { h, clear, ago, errorBox, field, confirmDialog, toast } from "./util.js";
import { writeControl } from "./access.js";

const enc = encodeURIComponent;
const STATUSES = ["pending", "running", "completed", "failed", "canceled"];
const ACTIVE = new Set(["pending", "running"]);
// The list is read again this often while a dream shown is active, and
// less often otherwise.
const FAST_MS = 1000, SLOW_MS = 4000;

function table(cols, rows) {
  return h("div", { class: "table-wrap" }, h("table", { class: "dreams" },
    h("caption", { class: "sr-only" }, "Dreams, newest first"),
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)));
}

// everything reads up to five pages of a list ({data, next_page}).
async function everything(path, params) {
  const all = [];
  let page = "";
  for (let i = 0; i < 5; i++) {
    const r = await get(path + qs({ ...params, limit: 100, page }));
    all.push(...r.data);
    if (!r.next_page) break;
    page = r.next_page;
  }
  return all;
}

const sessionInput = (d) => (d.inputs || []).find((i) => i.type === "sessions")?.session_ids || [];
const storeInput = (d) => (d.inputs || []).find((i) => i.type === "memory_store")?.memory_store_id || "";

export async function dreamsPage(main) {
  const state = { status: "", archived: false };
  const statusSel = h("select", { name: "status" }, h("option", { value: "" }, "Any status"), STATUSES.map((s) => h("option", { value: s }, s)));
  const archived = h("input", { type: "checkbox", name: "archived", id: "f-dreams-archived" });
  const list = h("div");
  const errs = h("div");
  // The names of memory stores, by id (archived ones too): a dream's
  // output store is made after the page read them, so an unknown id is
  // read again once.
  const names = new Map();
  let stopped = false, timer = null, inflight = false;

  async function loadStores() {
    const stores = await everything("/v1/memory_stores", { include_archived: "true" });
    for (const s of stores) names.set(s.id, s.name);
    return stores;
  }

  // storeCell links a memory store to its page.
  function storeCell(id) {
    if (!id) return h("span", { class: "muted" }, "—");
    const name = names.get(id);
    return h("a", { class: "store", href: `#/memory/${enc(id)}` }, name ? h("span", {}, name) : null, h("div", { class: "id" }, id));
  }

  function row(d) {
    const sessions = sessionInput(d);
    const out = d.outputs?.[0]?.memory_store_id || "";
    const cancel = ACTIVE.has(d.status) ? writeControl(h("button", { type: "button", class: "danger", onclick: async () => {
      if (!(await confirmDialog(`Cancel dream ${d.id}? Its session is interrupted; what it wrote so far stays in the output store.`, "Cancel dream"))) return;
      cancel.disabled = true;
      try { await post(`/v1/dreams/${enc(d.id)}/cancel`); toast("Dream canceled"); load(); } catch (err) { toast(err.message, "error"); cancel.disabled = false; }
    } }, "Cancel")) : null;
    const archive = !ACTIVE.has(d.status) && !d.archived_at ? writeControl(h("button", { type: "button", onclick: async () => {
      if (!(await confirmDialog(`Archive dream ${d.id}? For good: it leaves the list (its output store stays).`, "Archive"))) return;
      archive.disabled = true;
      try { await post(`/v1/dreams/${enc(d.id)}/archive`); toast("Dream archived"); load(); } catch (err) { toast(err.message, "error"); archive.disabled = false; }
    } }, "Archive")) : null;
    const usage = d.usage && (d.usage.input_tokens || d.usage.output_tokens)
      ? h("div", { class: "muted" }, `${d.usage.input_tokens} in / ${d.usage.output_tokens} out tokens`) : null;
    return h("tr", { dataset: { id: d.id, status: d.status } },
      h("td", {}, h("div", { class: "id" }, d.id), h("div", {}, d.model?.id || ""),
        d.archived_at ? h("span", { class: "badge" }, "archived") : null,
        d.instructions ? h("details", { class: "instructions" }, h("summary", {}, "Instructions"), h("pre", { class: "code" }, d.instructions)) : null),
      h("td", {}, h("span", { class: `badge d-${d.status}` }, d.status),
        d.error ? h("p", { class: "error dream-error" }, `${d.error.type}: ${d.error.message}`) : null, usage),
      h("td", {}, storeCell(storeInput(d)),
        h("details", { class: "inputs" }, h("summary", {}, `${sessions.length} session${sessions.length === 1 ? "" : "s"}`),
          h("ul", {}, sessions.map((s) => h("li", {}, h("a", { class: "id", href: `#/sessions/${enc(s)}` }, s)))))),
      h("td", {}, storeCell(out), d.output_behavior?.type === "update_existing" ? h("div", { class: "muted" }, "updates the input") : null),
      h("td", {}, d.session_id ? h("a", { class: "id dream-session", href: `#/sessions/${enc(d.session_id)}` }, d.session_id) : h("span", { class: "muted" }, "not yet")),
      h("td", { title: d.created_at }, ago(d.created_at), d.ended_at ? h("div", { class: "muted", title: d.ended_at }, `ended ${ago(d.ended_at)}`) : null),
      h("td", {}, h("div", { class: "row" }, cancel, archive)));
  }

  // Each load has a number: an older answer is dropped.
  let gen = 0, active = false;
  async function load() {
    const my = ++gen;
    inflight = true;
    try {
      const r = await get("/v1/dreams" + qs({ limit: 100, statuses: state.status ? [state.status] : [], include_archived: state.archived ? "true" : "" }));
      const unknown = r.data.some((d) => [storeInput(d), d.outputs?.[0]?.memory_store_id].some((id) => id && !names.has(id)));
      if (unknown) await loadStores().catch(() => {});
      if (stopped || my !== gen) return;
      active = r.data.some((d) => ACTIVE.has(d.status));
      // A refresh keeps the details a person opened open.
      const opened = new Set([...list.querySelectorAll("tr[data-id] details[open]")].map((x) => `${x.closest("tr").dataset.id} ${x.className}`));
      clear(list).append(r.data.length ? table(["Dream", "Status", "Inputs", "Output store", "Session", "Created", ""], r.data.map(row))
        : h("p", { class: "muted" }, state.status || state.archived ? "No dream matches." : "No dream yet."));
      for (const x of list.querySelectorAll("tr[data-id] details")) x.open = opened.has(`${x.closest("tr").dataset.id} ${x.className}`);
      clear(errs);
    } catch (err) {
      if (my === gen) clear(errs).append(errorBox(err));
    } finally {
      if (my === gen) inflight = false;
    }
  }
  statusSel.addEventListener("change", () => { state.status = statusSel.value; load(); });
  archived.addEventListener("change", () => { state.archived = archived.checked; load(); });

  const form = await createForm(() => load(), loadStores);
  main.append(
    h("div", { class: "head" }, h("h1", {}, "Dreams")),
    h("p", { class: "muted" }, "A dream reads a memory store and past sessions, then writes a reorganized store: a new one, or the input itself. It runs as a session of the built-in dream agent."),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
      field("Status", statusSel), h("div", { class: "field check" }, archived, h("label", { for: archived.id }, "Include archived"))),
    errs, list, form);
  await load();
  const tick = () => {
    if (stopped) return;
    if (!document.hidden && !inflight) load();
    timer = setTimeout(tick, active ? FAST_MS : SLOW_MS);
  };
  timer = setTimeout(tick, active ? FAST_MS : SLOW_MS);
  return () => { stopped = true; clearTimeout(timer); };
}

// createForm is the form that starts a dream: a memory store, the
// sessions to read (the hundred most recent), a model (those of the
// agents offered), instructions and where the result goes.
async function createForm(created, loadStores) {
  const [stores, sessions, agents] = await Promise.all([
    loadStores().catch(() => []),
    get("/v1/sessions" + qs({ limit: 100 })).then((r) => r.data).catch(() => []),
    get("/v1/agents" + qs({ limit: 100 })).then((r) => r.data).catch(() => []),
  ]);
  const open = stores.filter((s) => !s.archived_at);
  const store = h("select", { name: "dream-store", required: true }, open.map((s) => h("option", { value: s.id }, `${s.name} (${s.id})`)));
  const picks = h("fieldset", { class: "plain dream-sessions" }, h("legend", {}, "Sessions to read (1 to 100)"),
    sessions.length ? sessions.map((s) => {
      const box = h("input", { type: "checkbox", name: "dream-session", value: s.id, id: `f-ds-${s.id}` });
      return h("div", { class: "field check" }, box, h("label", { for: box.id }, s.title || "untitled", " ", h("span", { class: "id" }, s.id)));
    }) : h("p", { class: "muted" }, "No session yet."));
  const models = [...new Set(agents.map((a) => a.model?.id).filter(Boolean))];
  const model = h("input", { name: "dream-model", required: true, list: "dream-models", placeholder: "claude-sonnet-4-6", value: models[0] || "" });
  const instructions = h("textarea", { name: "dream-instructions", rows: "3", maxlength: "4096" });
  const behavior = (value, label, checked) => {
    const r = h("input", { type: "radio", name: "dream-output", value, id: `f-do-${value}`, checked });
    return h("div", { class: "field check" }, r, h("label", { for: r.id }, label));
  };
  const out = h("div");
  const form = h("form", { class: "card dream-new" }, h("h2", {}, "New dream"),
    field("Memory store", store), picks,
    field("Model", model, "As an agent's model: the dream agent runs on it."), h("datalist", { id: "dream-models" }, models.map((m) => h("option", { value: m }))),
    field("Instructions (optional)", instructions, "Up to 4,096 characters that steer the dream."),
    h("fieldset", { class: "plain" }, h("legend", {}, "Result"),
      behavior("create_new", "A new memory store (the input stays as it was)", true),
      behavior("update_existing", "Update the input store in place", false)),
    h("button", { type: "submit" }, "Start dream"), out);
  if (!open.length) out.append(h("p", { class: "muted" }, "No memory store to dream over yet."));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    const ids = [...form.querySelectorAll('input[name="dream-session"]:checked')].map((b) => b.value);
    if (!ids.length) { out.append(errorBox(new Error("Pick at least one session to read."))); return; }
    const body = { inputs: [{ type: "memory_store", memory_store_id: store.value }, { type: "sessions", session_ids: ids }], model: model.value.trim() };
    if (instructions.value.trim()) body.instructions = instructions.value;
    if (form.querySelector('input[name="dream-output"]:checked').value === "update_existing") {
      body.output_behavior = { type: "update_existing", memory_store_id: store.value };
    }
    const submit = form.querySelector('button[type="submit"]');
    submit.disabled = true;
    try {
      const d = await post("/v1/dreams", body);
      toast(`Dream ${d.id} started`);
      instructions.value = "";
      for (const b of form.querySelectorAll('input[name="dream-session"]')) b.checked = false;
      created();
    } catch (err) { out.append(errorBox(err)); }
    submit.disabled = false;
  });
  return writeControl(form);
}
