// The console's entry point: sign-in and the hash router.
import { getKey, setKey, clearKey, request, whenUnauthorized } from "./api.js";
import { h, clear, errorBox, field, toast } from "./util.js";
import { sessionsPage, newSessionPage } from "./sessions.js";
import { sessionPage } from "./session.js";
import { agentsPage, agentPage, newAgentPage } from "./agents.js";
import { environmentsPage, environmentPage, vaultsPage, vaultPage, keysPage } from "./configure.js";

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
  [/^#\/environments\/([^/]+)$/, environmentPage],
  [/^#\/environments$/, environmentsPage],
  [/^#\/vaults\/([^/]+)$/, vaultPage],
  [/^#\/vaults$/, vaultsPage],
  [/^#\/keys$/, keysPage],
];

function route() {
  leave();
  clear(main);
  const signedIn = !!getKey();
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("signout").hidden = !signedIn;
  if (!signedIn) { signIn(); return; }
  const hash = location.hash || "#/";
  for (const a of document.querySelectorAll("#nav a")) {
    const cur = hash === a.getAttribute("href") || hash.startsWith(a.getAttribute("href") + "/") ||
      (hash === "#/" && a.getAttribute("href") === "#/sessions");
    if (cur) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  for (const [re, page] of routes) {
    const m = hash.match(re);
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
      await request("GET", "/v1/agents?limit=1", undefined, key);
      setKey(key);
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
  leave();
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  signIn(`Signed out: ${err.message}`);
  toast("The API key was refused", "error");
});

document.getElementById("signout").addEventListener("click", () => { clearKey(); route(); });
window.addEventListener("hashchange", route);
route();
