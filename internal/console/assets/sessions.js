// The sessions list (live, filtered, paged by the server) and the form
// that starts a session.
import { get, post, qs } from "./api.js";
import { h, clear, ago, errorBox, field } from "./util.js";
import { writeControl } from "./access.js";

const PAGE = 25;
const REFRESH_MS = 2000;
// The status filter: a status, or an idle stop reason (the server's
// stop_reasons[] filter, a reins extension).
const STATUSES = {
  "": { label: "Any status" },
  idle: { label: "idle", statuses: ["idle"] },
  "requires-action": { label: "requires action", statuses: ["idle"], stop_reasons: ["requires_action"] },
  failed: { label: "failed", statuses: ["idle"], stop_reasons: ["retries_exhausted"] },
  running: { label: "running", statuses: ["running"] },
  rescheduling: { label: "rescheduling", statuses: ["rescheduling"] },
  terminated: { label: "terminated", statuses: ["terminated"] },
};

// statusLabel is what a session's badge says: an idle session waiting on
// the user "requires action", one whose turn failed "failed".
export function statusLabel(status, stop) {
  if (status === "idle" && stop === "requires_action") return "requires action";
  if (status === "idle" && stop === "retries_exhausted") return "failed";
  return status;
}

export function statusBadge(status, stop) {
  const label = statusLabel(status, stop);
  return h("span", { class: `badge s-${label.replace(" ", "-")}` }, label);
}

// named lists the first hundred agents or environments: [{id, name}].
async function named(path) {
  try { return (await get(path + qs({ limit: 100 }))).data.map((x) => ({ id: x.id, name: x.name || x.id })); } catch { return []; }
}

const options = (xs) => xs.map((x) => h("option", { value: x.id }, x.name));

export async function sessionsPage(main) {
  const state = { agent: "", env: "", status: "", archived: false, page: "", search: "" };
  const agentSel = h("select", { name: "agent" }, h("option", { value: "" }, "All agents"));
  const envSel = h("select", { name: "environment" }, h("option", { value: "" }, "All environments"));
  const statusSel = h("select", { name: "status" }, Object.entries(STATUSES).map(([v, s]) => h("option", { value: v }, s.label)));
  const archived = h("input", { type: "checkbox", name: "archived" });
  const search = h("input", { type: "search", name: "search", placeholder: "sesn_… or words of a title" });
  const body = h("tbody");
  const info = h("p", { class: "muted", "aria-live": "polite" });
  const prev = h("button", { type: "button", disabled: true }, "← Newer");
  const next = h("button", { type: "button", disabled: true }, "Older →");
  const errs = h("div");
  let cursors = { prev: null, next: null };
  let stopped = false, timer = null, inflight = false;

  main.append(
    h("div", { class: "head" }, h("h1", {}, "Sessions"), writeControl(h("a", { class: "button", href: "#/sessions/new" }, "New session"))),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
      field("Agent", agentSel), field("Environment", envSel), field("Status", statusSel),
      h("div", { class: "field check" }, archived, h("label", { for: archived.id = "f-archived" }, "Include archived")),
      field("Search", search)),
    errs,
    h("div", { class: "table-wrap" }, h("table", { class: "sessions" },
      h("caption", { class: "sr-only" }, "Sessions, newest first"),
      h("thead", {}, h("tr", {}, ["Session", "Status", "Agent", "Environment", "Created", "Updated"].map((c) => h("th", { scope: "col" }, c)))),
      body)),
    h("div", { class: "pager" }, prev, next), info);

  // The names of agents and environments come from their lists, read once:
  // a row costs no request. One beyond the first hundred is looked up
  // once, by id.
  const names = new Map();
  const lists = Promise.all([named("/v1/agents"), named("/v1/environments")]).then(([a, e]) => {
    agentSel.append(...options(a));
    envSel.append(...options(e));
    for (const [kind, xs] of [["agents", a], ["environments", e]]) for (const x of xs) names.set(`${kind}:${x.id}`, x.name);
  });
  // known is the name the session carries (its agent snapshot's): no
  // lookup then, which a dream's built-in agent, stored nowhere, needs.
  function nameCell(kind, id, known) {
    const cell = h("td", {}, names.get(`${kind}:${id}`) ?? known ?? id ?? "");
    if (id && !known && !names.has(`${kind}:${id}`)) {
      const p = get(`/v1/${kind}/${id}`).then((x) => x.name || id).catch(() => id);
      names.set(`${kind}:${id}`, id);
      p.then((n) => { names.set(`${kind}:${id}`, n); cell.textContent = n; });
    }
    return cell;
  }

  function row(s) {
    const agentCell = nameCell("agents", s.agent?.id, s.agent?.name), envCell = nameCell("environments", s.environment_id);
    return h("tr", { dataset: { id: s.id, status: s.status } },
      h("td", {}, h("a", { href: `#/sessions/${s.id}` }, s.title || h("span", { class: "muted" }, "untitled")),
        h("div", { class: "id" }, s.id), s.archived_at ? h("span", { class: "badge" }, "archived") : null),
      h("td", {}, statusBadge(s.status, s.stop_reason?.type)), agentCell, envCell,
      h("td", { title: s.created_at }, ago(s.created_at)), h("td", { title: s.updated_at }, ago(s.updated_at)));
  }

  // Each load has a number: a slower, older answer (a refresh that began
  // before a filter changed) is dropped instead of drawn over a newer one.
  let gen = 0;
  async function load() {
    const my = ++gen;
    inflight = true;
    try {
      let data;
      const q = state.search.trim();
      if (/^sesn_\S+$/.test(q)) {
        try { data = { data: [await get(`/v1/sessions/${q}`)] }; } catch (err) {
          if (err.status !== 404) throw err;
          data = { data: [] };
        }
      } else {
        const st = STATUSES[state.status];
        data = await get("/v1/sessions" + qs({
          limit: PAGE, agent_id: state.agent, environment_id: state.env, statuses: st.statuses, stop_reasons: st.stop_reasons,
          include_archived: state.archived ? "true" : "", page: state.page,
        }));
      }
      await lists;
      if (stopped || my !== gen) return;
      let rows = data.data;
      if (q && !q.startsWith("sesn_")) {
        const words = q.toLowerCase().split(/\s+/);
        rows = rows.filter((s) => words.every((w) => (s.title || "").toLowerCase().includes(w)));
      }
      clear(body).append(...rows.map(row));
      if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No sessions match.")));
      cursors = { prev: data.prev_page || null, next: data.next_page || null };
      prev.disabled = !cursors.prev;
      next.disabled = !cursors.next;
      info.textContent = q && !q.startsWith("sesn_") ? `Title search covers this page (${data.data.length} sessions); page on to search further.` : "";
      clear(errs);
    } catch (err) {
      if (my === gen) clear(errs).append(errorBox(err));
    } finally {
      if (my === gen) inflight = false;
    }
  }

  function reset() { state.page = ""; load(); }
  agentSel.addEventListener("change", () => { state.agent = agentSel.value; reset(); });
  envSel.addEventListener("change", () => { state.env = envSel.value; reset(); });
  statusSel.addEventListener("change", () => { state.status = statusSel.value; reset(); });
  archived.addEventListener("change", () => { state.archived = archived.checked; reset(); });
  let debounce;
  search.addEventListener("input", () => { clearTimeout(debounce); debounce = setTimeout(() => { state.search = search.value; reset(); }, 250); });
  prev.addEventListener("click", () => { state.page = cursors.prev; load(); });
  next.addEventListener("click", () => { state.page = cursors.next; load(); });

  await load();
  // Live: the page in view is read again every two seconds while the tab is
  // visible, one request each time.
  const tick = () => {
    if (stopped) return;
    if (!document.hidden && !inflight) load();
    timer = setTimeout(tick, REFRESH_MS);
  };
  timer = setTimeout(tick, REFRESH_MS);
  return () => { stopped = true; clearTimeout(timer); };
}

export async function newSessionPage(main) {
  const agent = h("select", { name: "agent", required: true });
  const env = h("select", { name: "environment", required: true });
  const title = h("input", { name: "title", maxlength: "500" });
  const out = h("div");
  const [a, e] = await Promise.all([named("/v1/agents"), named("/v1/environments")]);
  agent.append(...options(a));
  env.append(...options(e));
  const form = h("form", { class: "card" },
    h("h1", {}, "New session"),
    field("Agent", agent), field("Environment", env), field("Title (optional)", title),
    h("button", { type: "submit" }, "Start session"), out);
  writeControl(form);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear(out);
    try {
      const body = { agent: agent.value, environment_id: env.value };
      if (title.value.trim()) body.title = title.value.trim();
      const s = await post("/v1/sessions", body);
      location.hash = `#/sessions/${s.id}`;
    } catch (err) { out.append(errorBox(err)); }
  });
  main.append(form);
  if (!a.length) out.append(h("p", {}, "No agent yet: ", h("a", { href: "#/agents/new" }, "create one"), "."));
  if (!e.length) out.append(h("p", {}, "No environment yet: ", h("a", { href: "#/environments" }, "create one"), "."));
}
