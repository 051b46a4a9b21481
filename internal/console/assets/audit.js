// The audit log (admin keys): who changed what, newest first, a page at a
// time.
import { get, qs } from "./api.js";
import { h, clear, ago, errorBox, pretty } from "./util.js";
import { workspaces, workspaceLabel } from "./access.js";

const PAGE = 50;

// links are the console pages of targets that have one.
const links = { session: "sessions", agent: "agents", environment: "environments", vault: "vaults" };

export async function auditPage(main) {
  // Names for ids: keys (actors) and workspaces, read once; an id without
  // a name stays an id.
  const [keys, spaces] = await Promise.all([
    get("/v1/api_keys").then((r) => r.data).catch(() => []),
    workspaces().catch(() => []),
  ]);
  const keyNames = new Map(keys.map((k) => [k.id, k.name]));
  const spaceNames = new Map(spaces.map((w) => [w.id, workspaceLabel(w)]));
  const body = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "More");
  const errs = h("div");
  let after = "";

  function actor(a) {
    if (!a) return h("td");
    const name = keyNames.get(a.id);
    return h("td", {}, name || a.type || "", a.id ? h("div", { class: "id" }, a.id) : null);
  }
  function target(t) {
    if (!t) return h("td");
    const page = links[t.type];
    return h("td", {}, t.type, " ", page && t.id ? h("a", { class: "id", href: `#/${page}/${t.id}` }, t.id) : h("span", { class: "id" }, t.id || ""));
  }
  function row(e) {
    const details = e.details && Object.keys(e.details).length ? h("details", {}, h("summary", {}, "Details"), h("pre", { class: "code" }, pretty(e.details))) : null;
    return h("tr", { dataset: { id: e.id } },
      h("td", { title: e.created_at }, ago(e.created_at), h("div", { class: "id" }, new Date(e.created_at).toLocaleString())),
      actor(e.actor), h("td", {}, h("code", {}, e.action), details), target(e.target),
      h("td", {}, e.workspace_id ? spaceNames.get(e.workspace_id) || e.workspace_id : h("span", { class: "muted" }, "organization")));
  }

  async function load() {
    more.disabled = true;
    try {
      const r = await get("/v1/organizations/audit_log" + qs({ limit: PAGE, after_id: after }));
      body.append(...r.data.map(row));
      if (!body.children.length) body.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "Nothing recorded yet.")));
      after = r.last_id || after;
      more.hidden = !r.has_more;
      clear(errs);
    } catch (err) {
      clear(errs).append(errorBox(err));
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener("click", load);

  main.append(h("h1", {}, "Audit log"),
    h("p", { class: "muted" }, "Changes to API keys, workspaces, vaults and their credentials, newest first, in every workspace."),
    errs,
    h("div", { class: "table-wrap" }, h("table", { class: "audit" },
      h("caption", { class: "sr-only" }, "Audit log, newest first"),
      h("thead", {}, h("tr", {}, ["Time", "Actor", "Action", "Target", "Workspace"].map((c) => h("th", { scope: "col" }, c)))),
      body)),
    h("div", { class: "pager" }, more));
  await load();
}
