// Environments (with their keys and work queue) and vaults (with their
// credentials). Secrets are write-only: a key is shown once when made, a
// credential's secret never comes back.
import { get, post, del, qs, getWorkspace } from "./api.js";
import { h, clear, ago, errorBox, field, pretty, confirmDialog, onceDialog, toast } from "./util.js";
import { writeControl, workspaces, workspaceLabel, hasWorkspaces } from "./access.js";

function table(cols, rows) {
  return h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)));
}

export async function environmentsPage(main) {
  const r = await get("/v1/environments" + qs({ limit: 100 }));
  const name = h("input", { name: "name", required: true });
  const type = h("select", { name: "type" }, h("option", { value: "cloud" }, "cloud: tools run in a sandbox here"),
    h("option", { value: "self_hosted" }, "self_hosted: tools run on your executors"));
  const out = h("div");
  const form = writeControl(h("form", { class: "card inline" }, h("h2", {}, "New environment"), field("Name", name), field("Type", type), h("button", { type: "submit" }, "Create"), out));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    try {
      const env = await post("/v1/environments", { name: name.value, config: { type: type.value } });
      location.hash = `#/environments/${env.id}`;
    } catch (err) { out.append(errorBox(err)); }
  });
  main.append(h("h1", {}, "Environments"),
    table(["Name", "Type", "Created"], r.data.map((e) => h("tr", {}, h("td", {}, h("a", { href: `#/environments/${e.id}` }, e.name), h("div", { class: "id" }, e.id)),
      h("td", {}, e.config?.type), h("td", { title: e.created_at }, ago(e.created_at))))), form);
}

export async function environmentPage(main, id) {
  const env = await get(`/v1/environments/${id}`);
  main.append(h("p", {}, h("a", { href: "#/environments" }, "← Environments")),
    h("div", { class: "head" }, h("h1", {}, env.name), h("span", { class: "badge" }, env.config?.type)),
    h("p", { class: "id" }, env.id), h("details", {}, h("summary", {}, "Configuration"), h("pre", { class: "code" }, pretty(env.config))));
  if (env.config?.type !== "self_hosted") {
    main.append(h("p", { class: "muted" }, "A cloud environment runs its sessions' tools in sandboxes on this server: it has no keys, executors or work queue."));
    return;
  }
  const keys = h("div"), work = h("div"), execs = h("div");
  const newKey = writeControl(h("button", { type: "button", onclick: async () => {
    try {
      const k = await post(`/v1/environments/${id}/keys`);
      onceDialog("Environment key", k.key, "Copy it now: it is shown this once. Executors and workers connect with it.");
      loadKeys();
    } catch (err) { toast(err.message, "error"); }
  } }, "Create key"));
  async function loadKeys() {
    try {
      const r = await get(`/v1/environments/${id}/keys` + qs({ limit: 100 }));
      clear(keys).append(table(["Key", "Created", "State", ""], r.data.map((k) => h("tr", {},
        h("td", {}, h("span", { class: "id" }, k.id), ` …${k.hint}`), h("td", { title: k.created_at }, ago(k.created_at)),
        h("td", {}, k.revoked_at ? "revoked" : "active"),
        h("td", {}, k.revoked_at ? null : writeControl(h("button", { type: "button", class: "danger", onclick: async () => {
          if (!(await confirmDialog(`Revoke key …${k.hint}? Executors connected with it are cut off.`, "Revoke"))) return;
          try { await post(`/v1/environments/${id}/keys/${k.id}/revoke`); loadKeys(); } catch (err) { toast(err.message, "error"); }
        } }, "Revoke")))))));
    } catch (err) { clear(keys).append(errorBox(err)); }
  }
  async function loadExecutors() {
    try {
      const r = await get(`/v1/environments/${id}/executors`);
      clear(execs).append(r.data.length ? table(["Executor", "Machine", "Capabilities", "Leases"], r.data.map((x) => h("tr", { dataset: { id: x.id } },
        h("td", {}, `${x.name}${x.version ? " " + x.version : ""}`, h("div", { class: "id" }, x.id)),
        h("td", {}, [x.hostname, x.os, x.arch].filter(Boolean).join(" · ") || x.machine_id),
        h("td", {}, (x.capabilities || []).join(", ")),
        h("td", {}, `${x.sessions.length} of ${x.max_sessions || "∞"}`, x.sessions.map((sid) => h("div", {}, h("a", { class: "id", href: `#/sessions/${sid}` }, sid)))))))
        : h("p", { class: "muted" }, "No executor is connected to this server for this environment. Start one with reins executor and an environment key."));
    } catch (err) { clear(execs).append(errorBox(err)); }
  }
  async function loadWork() {
    try {
      const [st, r] = await Promise.all([get(`/v1/environments/${id}/work/stats`), get(`/v1/environments/${id}/work` + qs({ limit: 50 }))]);
      clear(work).append(h("p", {}, `Queue depth ${st.depth ?? 0}, pending ${st.pending ?? 0}`),
        table(["Work", "Session", "State", "Heartbeat"], (r.data || []).map((w) => h("tr", {}, h("td", { class: "id" }, w.id),
          h("td", {}, w.data?.id ? h("a", { href: `#/sessions/${w.data.id}` }, w.data.id) : ""), h("td", {}, w.state),
          h("td", {}, w.latest_heartbeat_at ? ago(w.latest_heartbeat_at) : "—")))));
    } catch (err) { clear(work).append(errorBox(err)); }
  }
  main.append(h("h2", {}, "Executors connected"), execs, h("h2", {}, "Environment keys"), newKey, keys, h("h2", {}, "Work queue (pull workers)"), work);
  loadKeys();
  loadExecutors();
  loadWork();
  const t = setInterval(() => { if (!document.hidden) { loadWork(); loadExecutors(); } }, 2000);
  return () => clearInterval(t);
}

export async function vaultsPage(main) {
  const r = await get("/v1/vaults" + qs({ limit: 100 }));
  const name = h("input", { name: "display_name", required: true });
  const out = h("div");
  const form = writeControl(h("form", { class: "card inline" }, h("h2", {}, "New vault"), field("Name", name), h("button", { type: "submit" }, "Create"), out));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    try { const v = await post("/v1/vaults", { display_name: name.value }); location.hash = `#/vaults/${v.id}`; } catch (err) { out.append(errorBox(err)); }
  });
  main.append(h("h1", {}, "Vaults"), table(["Name", "Created"], r.data.map((v) => h("tr", {},
    h("td", {}, h("a", { href: `#/vaults/${v.id}` }, v.display_name), h("div", { class: "id" }, v.id)), h("td", { title: v.created_at }, ago(v.created_at))))), form);
}

export async function vaultPage(main, id) {
  const v = await get(`/v1/vaults/${id}`);
  const list = h("div");
  async function load() {
    try {
      const r = await get(`/v1/vaults/${id}/credentials` + qs({ limit: 100 }));
      clear(list).append(table(["Credential", "Kind", "For", ""], r.data.map((c) => h("tr", {},
        h("td", {}, c.display_name || "", h("div", { class: "id" }, c.id)), h("td", {}, c.auth?.type),
        h("td", {}, c.auth?.mcp_server_url || c.auth?.secret_name || ""),
        h("td", {}, writeControl(h("button", { type: "button", class: "danger", onclick: async () => {
          if (!(await confirmDialog(`Delete credential ${c.display_name || c.id}?`))) return;
          try { await del(`/v1/vaults/${id}/credentials/${c.id}`); load(); } catch (err) { toast(err.message, "error"); }
        } }, "Delete")))))));
    } catch (err) { clear(list).append(errorBox(err)); }
  }
  const kind = h("select", { name: "kind" }, h("option", { value: "static_bearer" }, "static_bearer: a token for an MCP server"),
    h("option", { value: "environment_variable" }, "environment_variable: a secret for sandboxed tools"));
  const label = h("input", { name: "display_name" });
  const target = h("input", { name: "target", required: true });
  const secret = h("input", { type: "password", name: "secret", required: true, autocomplete: "off" });
  const hosts = h("input", { name: "hosts", placeholder: "api.example.com, *.example.org" });
  const out = h("div");
  const targetField = field("MCP server URL", target), hostsField = field("Hosts the secret may be sent to", hosts);
  const sync = () => {
    const env = kind.value === "environment_variable";
    targetField.querySelector("label").textContent = env ? "Variable name" : "MCP server URL";
    hostsField.hidden = !env;
  };
  kind.addEventListener("change", sync);
  const form = h("form", { class: "card inline" }, h("h2", {}, "New credential"), field("Kind", kind), field("Name", label), targetField,
    field("Secret", secret, "Write-only: sealed at rest and never shown again."), hostsField, h("button", { type: "submit" }, "Add credential"), out);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    const auth = kind.value === "static_bearer" ? { type: "static_bearer", mcp_server_url: target.value, token: secret.value }
      : { type: "environment_variable", secret_name: target.value, secret_value: secret.value,
        networking: { type: "limited", allowed_hosts: hosts.value.split(",").map((s) => s.trim()).filter(Boolean) } };
    secret.value = "";
    try {
      const body = { auth };
      if (label.value.trim()) body.display_name = label.value.trim();
      await post(`/v1/vaults/${id}/credentials`, body);
      form.reset();
      sync();
      load();
    } catch (err) { out.append(errorBox(err)); }
  });
  sync();
  writeControl(form);
  main.append(h("p", {}, h("a", { href: "#/vaults" }, "← Vaults")), h("h1", {}, v.display_name), h("p", { class: "id" }, v.id),
    h("h2", {}, "Credentials"), list, form);
  load();
}

// keyState is what a key's State column says.
function keyState(k) {
  if (k.revoked_at || k.status === "archived") return "revoked";
  return k.status === "inactive" ? "inactive" : "active";
}

const ROLES = {
  developer: "developer: works in one workspace",
  read_only: "read_only: reads one workspace, changes nothing",
  admin: "admin: every workspace, keys and the audit log",
};

export async function keysPage(main) {
  const withSpaces = hasWorkspaces();
  const spaces = withSpaces ? await workspaces().catch(() => []) : [];
  const spaceNames = new Map(spaces.map((w) => [w.id, workspaceLabel(w)]));
  const list = h("div");
  const cols = withSpaces ? ["Key", "Name", "Role", "Workspace", "Created", "State", ""] : ["Key", "Name", "Created", "State", ""];
  async function load() {
    try {
      const r = await get("/v1/api_keys");
      clear(list).append(table(cols, r.data.map((k) => h("tr", { dataset: { id: k.id } },
        h("td", {}, h("span", { class: "id" }, k.id), ` …${k.hint}`), h("td", {}, k.name),
        withSpaces ? [h("td", {}, k.role || "admin"), h("td", {}, k.workspace_id ? spaceNames.get(k.workspace_id) || k.workspace_id : h("span", { class: "muted" }, "all"))] : null,
        h("td", { title: k.created_at }, ago(k.created_at)),
        h("td", {}, keyState(k)),
        h("td", {}, keyState(k) === "revoked" ? null : h("button", { type: "button", class: "danger", onclick: async () => {
          if (!(await confirmDialog(`Revoke key ${k.name} (…${k.hint})? Every client using it is refused from now on — this tab too, if it is this tab's key.`, "Revoke"))) return;
          try { await post(`/v1/api_keys/${k.id}/revoke`); load(); } catch (err) { toast(err.message, "error"); }
        } }, "Revoke"))))));
    } catch (err) { clear(list).append(errorBox(err)); }
  }
  const name = h("input", { name: "key-name", required: true, maxlength: "256" });
  // A new key is a developer of the workspace in view unless said
  // otherwise: the least a key usually needs.
  const role = h("select", { name: "key-role" }, Object.entries(ROLES).map(([v, l]) => h("option", { value: v }, l)));
  const space = h("select", { name: "key-workspace" }, spaces.filter((w) => !w.archived_at).map((w) => h("option", { value: w.id }, workspaceLabel(w))));
  space.value = getWorkspace() || "wrkspc_default";
  const spaceField = field("Workspace", space, "A developer or read-only key sees this workspace only.");
  const syncRole = () => { spaceField.hidden = space.disabled = role.value === "admin"; };
  role.addEventListener("change", syncRole);
  syncRole();
  const out = h("div");
  const form = h("form", { class: "card inline" }, h("h2", {}, "New API key"), field("Name", name),
    withSpaces ? [field("Role", role), spaceField] : null, h("button", { type: "submit" }, "Create key"), out);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    const body = { name: name.value };
    if (withSpaces) {
      body.role = role.value;
      if (role.value !== "admin") body.workspace_id = space.value;
    }
    try {
      const k = await post("/v1/api_keys", body);
      form.reset();
      space.value = getWorkspace() || "wrkspc_default";
      syncRole();
      onceDialog("API key", k.key, "Copy it now: it is shown this once. Only its hash is kept.");
      load();
    } catch (err) { out.append(errorBox(err)); }
  });
  main.append(h("h1", {}, "API keys"), list, form);
  load();
}
