// Who is signed in (GET /v1/api_keys/me, read once a sign-in) and what
// the key's role lets the console offer: admin keys manage keys and
// workspaces, read the audit log and pick the workspace they work in;
// developer keys work in their workspace; read-only keys look only.
import { get, qs, APIError } from "./api.js";
import { h } from "./util.js";

export const READ_ONLY_NOTE = "This API key is read-only: it can look but not change anything.";

let me = null;
let spaces = null;

// loadMe reads the signed-in key. A server older than roles answers 404:
// its keys are all admins, and it has no workspaces.
export async function loadMe() {
  try {
    me = await get("/v1/api_keys/me");
  } catch (err) {
    if (!(err instanceof APIError) || err.status !== 404) throw err;
    me = { role: "admin", legacy: true };
  }
  return me;
}

// forget drops what was read of the signed-in key (at sign-out).
export function forget() { me = null; spaces = null; }

export const whoami = () => me;
export const isAdmin = () => me?.role === "admin";
export const isReadOnly = () => me?.role === "read_only";
// hasWorkspaces says the server has workspaces (and an audit log).
export const hasWorkspaces = () => !!me && !me.legacy;

// workspaces lists the workspaces an admin may pick, the default one
// first, read once per sign-in (again with fresh).
export function workspaces(fresh = false) {
  if (!spaces || fresh) {
    spaces = (async () => {
      const all = [];
      let after = "";
      for (let i = 0; i < 20; i++) {
        const r = await get("/v1/organizations/workspaces" + qs({ limit: 100, include_default: "true", after_id: after }));
        all.push(...r.data);
        if (!r.has_more || !r.last_id) break;
        after = r.last_id;
      }
      return all;
    })();
    spaces.catch(() => { spaces = null; });
  }
  return spaces;
}

// workspaceLabel is a workspace's name and id.
export function workspaceLabel(w) {
  return `${w.name || w.id}${w.archived_at ? " (archived)" : ""}`;
}

// writeControl marks el as a control that changes something. For a
// read-only key it is disabled (a form: all of its controls) and says
// why in its tooltip; a link styled as a button stops being a link.
export function writeControl(el) {
  if (!isReadOnly()) return el;
  el.title = READ_ONLY_NOTE;
  el.classList.add("read-only");
  if (el.tagName === "FORM") {
    for (const c of el.elements) { c.disabled = true; c.title = READ_ONLY_NOTE; }
    el.append(h("p", { class: "muted ro-note" }, READ_ONLY_NOTE));
  } else if (el.tagName === "A") {
    el.removeAttribute("href");
    el.setAttribute("role", "link");
    el.setAttribute("aria-disabled", "true");
  } else {
    el.disabled = true;
  }
  return el;
}
