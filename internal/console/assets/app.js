// The console's entry point: sign-in and the hash router.
import { getKey, setKey, clearKey, getWorkspace, setWorkspace, request, whenUnauthorized } from "./api.js";
import { h, clear, errorBox, field, toast } from "./util.js";
import { loadMe, forget, whoami, isAdmin, hasWorkspaces, workspaces, workspaceLabel } from "./access.js";
import { auditPage } from "./audit.js";
import { dreamsPage } from "./dreams.js";
import { sessionsPage, newSessionPage } from "./sessions.js";
import { sessionPage } from "./session.js";
import { agentsPage, agentPage, newAgentPage } from "./agents.js";
import { environmentsPage, environmentPage, vaultsPage, vaultPage, keysPage } from "./configure.js";
import { memoryStoresPage, memoryStorePage } from "./memory.js";
import { webhooksPage } from "./webhooks.js";

const main = document.getElementById("main");
// cleanup stops the page in view (its timers and streams); visit numbers
// the pages shown, so a page that finishes loading after the user left it
// (or was signed out) is stopped at once instead of running unseen.
let cleanup = null;
let visit = 0;

function leave() {
  visit++;
  if (cleanup) { cleanup(); cleanup = null; }
}

const routes = [
  [/^#\/sessions\/new$/, newSessionPage],
  [/^#\/sessions\/([^/]+)$/, sessionPage],
  [/^#\/(?:sessions)?$/, sessionsPage],
  [/^#\/agents\/new$/, newAgentPage],
  [/^#\/agents\/([^/]+)$/, agentPage],
  [/^#\/agents$/, agentsPage],
  [/^#\/dreams$/, dreamsPage],
  [/^#\/environments\/([^/]+)$/, environmentPage],
  [/^#\/environments$/, environmentsPage],
  [/^#\/vaults\/([^/]+)$/, vaultPage],
  [/^#\/vaults$/, vaultsPage],
  [/^#\/memory\/([^/]+)\/([^/]+)$/, memoryStorePage],
  [/^#\/memory\/([^/]+)$/, memoryStorePage],
  [/^#\/memory$/, memoryStoresPage],
  [/^#\/webhooks$/, webhooksPage],
  [/^#\/keys$/, keysPage, "admin"],
  [/^#\/audit$/, auditPage, "admin"],
];

const DEFAULT_WORKSPACE = "wrkspc_default";
const who = document.getElementById("who");
const picker = document.getElementById("workspace");

// showWho fills the header with the signed-in key (its name, role and
// workspace; an admin's workspace picker) and shows the links its role
// may follow.
function showWho() {
  const me = whoami();
  who.hidden = !me;
  for (const a of document.querySelectorAll("#nav a[data-admin]")) {
    a.hidden = !isAdmin() || (a.getAttribute("href") === "#/audit" && !hasWorkspaces());
  }
  if (!me) return;
  document.getElementById("who-key").textContent = me.name || "";
  const role = document.getElementById("who-role");
  role.textContent = me.role === "read_only" ? "read-only" : me.role;
  role.className = `badge r-${me.role}`;
  const pick = document.getElementById("ws-pick"), ws = document.getElementById("who-ws");
  pick.hidden = !(isAdmin() && hasWorkspaces());
  ws.textContent = !isAdmin() && me.workspace_id ? `workspace ${me.workspace_id}` : "";
  if (!pick.hidden) fillPicker();
}

// fillPicker lists the workspaces an admin may work in. A workspace
// remembered from before that is gone (or archived) falls back to the
// default one.
async function fillPicker() {
  let all;
  try { all = await workspaces(); } catch (err) { toast(`Workspaces: ${err.message}`, "error"); return; }
  const cur = getWorkspace() || DEFAULT_WORKSPACE;
  const open = all.filter((w) => !w.archived_at || w.id === cur);
  if (!open.some((w) => w.id === DEFAULT_WORKSPACE)) open.unshift({ id: DEFAULT_WORKSPACE, name: "Default" });
  picker.replaceChildren(...open.map((w) => h("option", { value: w.id }, workspaceLabel(w))));
  if (open.some((w) => w.id === cur && !w.archived_at)) { picker.value = cur; return; }
  picker.value = DEFAULT_WORKSPACE;
  if (getWorkspace()) { setWorkspace(null); toast("The workspace picked before is gone: back to the default workspace"); route(); }
}

// A switch of workspace reloads the page in view; one showing a single
// resource goes to its list, since the resource is the other workspace's.
picker.addEventListener("change", () => {
  setWorkspace(picker.value === DEFAULT_WORKSPACE ? null : picker.value);
  const section = (location.hash.match(/^#\/([a-z]+)/) || [])[1] || "sessions";
  const to = `#/${section}`;
  if (location.hash === to) route(); else location.hash = to;
});

function route() {
  leave();
  clear(main);
  const signedIn = !!getKey();
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("signout").hidden = !signedIn;
  if (!signedIn) { forget(); showWho(); signIn(); return; }
  if (!whoami()) {
    const my = visit;
    main.append(h("p", { class: "muted" }, "Loading…"));
    loadMe().then(() => { if (my === visit) { showWho(); route(); } })
      .catch((err) => { if (my === visit) clear(main).append(errorBox(err)); });
    return;
  }
  const hash = location.hash || "#/";
  for (const a of document.querySelectorAll("#nav a")) {
    const cur = hash === a.getAttribute("href") || hash.startsWith(a.getAttribute("href") + "/") ||
      (hash === "#/" && a.getAttribute("href") === "#/sessions");
    if (cur) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  for (const [re, page, only] of routes) {
    const m = hash.match(re);
    if (m && only === "admin" && !isAdmin()) {
      main.append(h("h1", {}, "For admin keys"), h("p", {}, "This page is for admin keys; this key's role is ", whoami().role, "."));
      return;
    }
    if (m) {
      const params = m.slice(1).map(decodeURIComponent);
      const my = visit;
      Promise.resolve(page(main, ...params)).then((c) => {
        if (my === visit) cleanup = c || null;
        else if (c) c();
      }).catch((err) => { if (my === visit) main.append(errorBox(err)); });
      return;
    }
  }
  main.append(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/sessions" }, "Back to sessions")));
}

function signIn(reason) {
  clear(main);
  const input = h("input", { type: "password", name: "api-key", autocomplete: "off", required: true, spellcheck: "false" });
  const out = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "card signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Sign in"),
    h("p", {}, "Paste an API key (reins printed one at its first start; ", h("code", {}, "reins keys create"), " makes more). It is kept in this tab's session storage only."),
    reason ? h("p", { class: "error", role: "alert" }, reason) : null,
    field("API key", input),
    h("button", { type: "submit" }, "Sign in"), out);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    const key = input.value.trim();
    try {
      setWorkspace(null);
      await request("GET", "/v1/agents?limit=1", undefined, key);
      setKey(key);
      forget();
      input.value = "";
      route();
    } catch (err) {
      out.append(errorBox(err));
    }
  });
  main.append(form);
  input.focus();
}

whenUnauthorized((err) => {
  clearKey();
  forget();
  showWho();
  leave();
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  signIn(`Signed out: ${err.message}`);
  toast("The API key was refused", "error");
});

document.getElementById("signout").addEventListener("click", () => { clearKey(); forget(); route(); });
window.addEventListener("hashchange", route);
route();
