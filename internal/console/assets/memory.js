// Memory stores: the list (create, archive, delete), a store's memories
// as a tree of folders, a memory's content and its version history (who
// made each change: an API key, or a session writing under /mnt/memory),
// a diff between two versions, and redaction. Every string from the API
// goes in as text (util.h).
import { get, post, del, qs } from "./api.js";
import { h, append, clear, ago, errorBox, field, confirmDialog, toast } from "./util.js";
import { writeControl } from "./access.js";
import { diffLines } from "./agents.js";

const enc = encodeURIComponent;
const storePath = (id) => `/v1/memory_stores/${enc(id)}`;

function table(cols, rows, attrs = {}) {
  return h("div", { class: "table-wrap" }, h("table", attrs, h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)));
}

// size is a byte count for a person.
function size(n) {
  if (n === null || n === undefined) return "";
  return n < 1000 ? `${n} B` : `${(n / 1000).toFixed(1)} kB`;
}

export async function memoryStoresPage(main) {
  const archived = h("input", { type: "checkbox", name: "archived", id: "f-mem-archived" });
  const list = h("div");
  async function load() {
    try {
      const r = await get("/v1/memory_stores" + qs({ limit: 100, include_archived: archived.checked }));
      clear(list).append(r.data.length ? table(["Name", "Description", "Created", ""], r.data.map(storeRow))
        : h("p", { class: "muted" }, "No memory store yet. Sessions mount a store's memories under /mnt/memory when it is attached to them."));
    } catch (err) { clear(list).append(errorBox(err)); }
  }
  function storeRow(s) {
    const archive = s.archived_at ? null : writeControl(h("button", { type: "button", onclick: async () => {
      if (!(await confirmDialog(`Archive memory store ${s.name}? For good: its memories become read-only and new sessions cannot attach it.`, "Archive"))) return;
      try { await post(`${storePath(s.id)}/archive`); toast("Memory store archived"); load(); } catch (err) { toast(err.message, "error"); }
    } }, "Archive"));
    const remove = writeControl(h("button", { type: "button", class: "danger", onclick: async () => {
      if (!(await confirmDialog(`Delete memory store ${s.name}, its memories and all their versions?`))) return;
      try { await del(storePath(s.id)); toast("Memory store deleted"); load(); } catch (err) { toast(err.message, "error"); }
    } }, "Delete"));
    return h("tr", { dataset: { id: s.id } },
      h("td", {}, h("a", { href: `#/memory/${enc(s.id)}` }, s.name), s.archived_at ? [" ", h("span", { class: "badge" }, "archived")] : null, h("div", { class: "id" }, s.id)),
      h("td", {}, s.description || ""), h("td", { title: s.created_at }, ago(s.created_at)),
      h("td", {}, h("div", { class: "row" }, archive, remove)));
  }
  archived.addEventListener("change", load);
  const name = h("input", { name: "name", required: true, maxlength: "255" });
  const description = h("textarea", { name: "description", rows: "2", maxlength: "1024" });
  const out = h("div");
  const form = writeControl(h("form", { class: "card inline" }, h("h2", {}, "New memory store"), field("Name", name),
    field("Description", description, "Put in the system prompt of the agents the store is attached to."), h("button", { type: "submit" }, "Create"), out));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    try {
      const s = await post("/v1/memory_stores", { name: name.value, description: description.value });
      location.hash = `#/memory/${enc(s.id)}`;
    } catch (err) { out.append(errorBox(err)); }
  });
  main.append(h("h1", {}, "Memory stores"),
    h("div", { class: "field check" }, archived, h("label", { for: archived.id }, "Include archived")), list, form);
  await load();
}

// allMemories lists every memory of a store (at most 2,000: 20 pages).
async function allMemories(id) {
  const all = [];
  let page = "";
  for (let i = 0; i < 40; i++) {
    const r = await get(`${storePath(id)}/memories` + qs({ limit: 100, page }));
    all.push(...r.data.filter((m) => m.type === "memory"));
    if (!r.next_page || !r.data.length) break;
    page = r.next_page;
  }
  return all;
}

// buildTree makes the folders of a list of memories: {folders, memories,
// count, size}, keyed by name.
function buildTree(memories) {
  const root = { path: "/", folders: new Map(), memories: [], count: 0, size: 0 };
  for (const m of memories) {
    const parts = m.path.split("/").slice(1);
    let n = root;
    n.count++; n.size += m.content_size_bytes;
    for (const part of parts.slice(0, -1)) {
      if (!n.folders.has(part)) n.folders.set(part, { path: `${n.path}${part}/`, folders: new Map(), memories: [], count: 0, size: 0 });
      n = n.folders.get(part);
      n.count++; n.size += m.content_size_bytes;
    }
    n.memories.push({ name: parts[parts.length - 1], memory: m });
  }
  return root;
}

// treeList renders a folder's content: its folders (rolled up, with their
// count, opened when they hold the memory in view) then its memories.
function treeList(storeID, n, current) {
  const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  const folders = [...n.folders.entries()].sort((a, b) => byName(a[0], b[0])).map(([name, f]) =>
    h("li", {}, h("details", { "data-path": f.path, open: !!current && current.startsWith(f.path) },
      h("summary", {}, h("span", { class: "folder" }, `${name}/`), " ", h("span", { class: "muted" }, `${f.count} ${f.count === 1 ? "memory" : "memories"} · ${size(f.size)}`)),
      treeList(storeID, f, current))));
  const files = n.memories.sort((a, b) => byName(a.name, b.name)).map(({ name, memory }) =>
    h("li", {}, h("a", { class: "mem", href: `#/memory/${enc(storeID)}/${enc(memory.id)}`, "data-path": memory.path,
      "aria-current": memory.path === current ? "page" : null }, name), " ", h("span", { class: "muted" }, size(memory.content_size_bytes))));
  return h("ul", { class: "mem-tree" }, folders, files);
}

// actor says who made a change; a session links to its page.
function actor(a) {
  if (!a) return h("span", { class: "muted" }, "not recorded");
  switch (a.type) {
    case "session_actor": return h("span", { class: "actor session" }, "session ", h("a", { class: "id", href: `#/sessions/${enc(a.session_id)}` }, a.session_id));
    case "api_actor": return h("span", { class: "actor api" }, "API key ", h("span", { class: "id" }, a.api_key_id));
    case "user_actor": return h("span", { class: "actor" }, "user ", h("span", { class: "id" }, a.user_id));
    case "service_account_actor": return h("span", { class: "actor" }, "service account ", h("span", { class: "id" }, a.service_account_id));
  }
  return h("span", { class: "actor" }, a.type);
}

export async function memoryStorePage(main, id, memoryID) {
  const s = await get(storePath(id));
  const memories = await allMemories(id);
  const current = memoryID ? memories.find((m) => m.id === memoryID) : null;
  const tree = buildTree(memories);
  const view = h("section", { class: "mem-view", "aria-label": "Memory" });
  // util's append: the parts left out (null) are skipped, not written.
  append(main, [h("p", {}, h("a", { href: "#/memory" }, "← Memory stores")),
    h("div", { class: "head" }, h("h1", {}, s.name), s.archived_at ? h("span", { class: "badge" }, "archived") : null),
    h("p", { class: "id" }, s.id), s.description ? h("p", { class: "muted" }, s.description) : null,
    h("div", { class: "mem-layout" },
      h("nav", { class: "mem-nav", "aria-label": "Memories" }, h("h2", {}, `${memories.length} ${memories.length === 1 ? "memory" : "memories"}`),
        memories.length ? treeList(id, tree, current?.path) : h("p", { class: "muted" }, "No memory yet.")),
      view)]);
  if (current) await memoryView(view, s, current.id);
  else if (memoryID) view.append(h("p", { class: "muted" }, "This memory is not in the store any more (deleted, or renamed to another id)."), await storeChanges(s));
  else view.append(await storeChanges(s));
  return null;
}

// storeChanges lists the store's latest changes, of any memory.
async function storeChanges(s) {
  const r = await get(`${storePath(s.id)}/memory_versions` + qs({ limit: 20 }));
  return h("div", {}, h("h2", {}, "Latest changes"), r.data.length ? table(["Path", "Change", "By", "When"], r.data.map((v) => h("tr", {},
    h("td", {}, v.path ?? h("span", { class: "muted" }, "redacted")), h("td", {}, v.operation), h("td", {}, actor(v.created_by)),
    h("td", { title: v.created_at }, ago(v.created_at)))), { class: "changes" }) : h("p", { class: "muted" }, "Nothing yet."));
}

// memoryView shows a memory's content and its history.
async function memoryView(view, s, memID) {
  const m = await get(`${storePath(s.id)}/memories/${enc(memID)}`);
  const history = h("div");
  view.append(h("h2", { class: "mem-path" }, m.path),
    h("p", { class: "muted" }, `${size(m.content_size_bytes)} · updated `, h("span", { title: m.updated_at }, ago(m.updated_at))),
    h("p", { class: "id" }, `${m.id} · sha256 ${m.content_sha256}`),
    h("pre", { class: "code mem-content", tabindex: "0", "aria-label": "Content" }, m.content ?? ""),
    history);
  await versionHistory(history, s, m);
}

// versionHistory lists a memory's versions (newest first) with a From and
// a To to compare, and a Redact button on each one not yet redacted.
async function versionHistory(box, s, m) {
  const r = await get(`${storePath(s.id)}/memory_versions` + qs({ memory_id: m.id, limit: 100 }));
  const vs = r.data;
  const contents = new Map();
  const pick = { from: vs.length > 1 ? vs[1].id : vs[0]?.id, to: vs[0]?.id };
  const diff = h("div", { class: "mem-diff" });
  const radio = (side, v) => h("input", { type: "radio", name: `mem-${side}`, value: v.id, checked: pick[side] === v.id,
    "aria-label": `${side === "from" ? "From" : "To"} version ${v.id}`, onchange: () => { pick[side] = v.id; showDiff(); } });
  const redact = (v) => (v.redacted_at ? h("span", { class: "muted" }, "redacted ", h("span", { title: v.redacted_at }, ago(v.redacted_at)), " by ", actor(v.redacted_by))
    : writeControl(h("button", { type: "button", class: "danger", onclick: async (e) => {
      if (!(await confirmDialog(`Redact version ${v.id}? The content and path it recorded are erased for good; the version stays listed.`, "Redact"))) return;
      e.target.disabled = true;
      try {
        await post(`${storePath(s.id)}/memory_versions/${enc(v.id)}/redact`);
        toast("Version redacted");
        clear(box);
        await versionHistory(box, s, m);
      } catch (err) { e.target.disabled = false; toast(err.message, "error"); }
    } }, "Redact")));
  const rows = vs.map((v) => h("tr", { dataset: { id: v.id } },
    h("td", {}, radio("from", v)), h("td", {}, radio("to", v)),
    h("td", {}, h("span", { class: "id" }, v.id), v.id === m.memory_version_id ? [" ", h("span", { class: "badge" }, "current")] : null),
    h("td", {}, h("span", { class: `badge op-${v.operation}` }, v.operation), v.path && v.path !== m.path ? h("div", { class: "muted" }, v.path) : null),
    h("td", {}, actor(v.created_by)), h("td", { title: v.created_at }, ago(v.created_at)), h("td", {}, size(v.content_size_bytes)),
    h("td", {}, redact(v))));

  // version reads a version's content once.
  async function version(vid) {
    if (!contents.has(vid)) contents.set(vid, get(`${storePath(s.id)}/memory_versions/${enc(vid)}`));
    return contents.get(vid);
  }
  let shown = 0;
  async function showDiff() {
    const my = ++shown;
    if (vs.length < 2) { clear(diff).append(h("p", { class: "muted" }, "A single version: nothing to compare yet.")); return; }
    try {
      const [a, b] = await Promise.all([version(pick.from), version(pick.to)]);
      if (my !== shown) return;
      const gone = [a, b].find((v) => v.redacted_at);
      if (gone) { clear(diff).append(h("p", { class: "muted" }, `Version ${gone.id} was redacted: its content is gone, there is nothing to compare.`)); return; }
      const text = (v) => (v.operation === "deleted" ? "" : v.content ?? "");
      const lines = diffLines(text(a), text(b));
      clear(diff).append(h("p", { class: "muted" }, `From ${a.id} to ${b.id}`),
        lines.some(([k]) => k !== " ") ? h("pre", { class: "diff", "aria-label": "Differences" },
          lines.map(([k, l]) => h("span", { class: k === "+" ? "add" : k === "-" ? "del" : "" }, `${k} ${l}\n`)))
          : h("p", { class: "muted same" }, "Same content."));
    } catch (err) { if (my === shown) clear(diff).append(errorBox(err)); }
  }
  append(box, [h("h2", {}, "History"),
    table(["From", "To", "Version", "Change", "By", "When", "Size", ""], rows, { class: "versions" }),
    r.next_page ? h("p", { class: "muted" }, "Older versions are not shown (the latest 100 are).") : null,
    h("h2", {}, "Compare versions"), diff]);
  await showDiff();
}
