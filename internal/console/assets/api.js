// The API client: the key lives in sessionStorage only and travels in the
// x-api-key header, never in a URL. The workspace an admin key works in
// (picked in the header) lives there too and travels in the
// anthropic-workspace-id header of every request.

const KEY = "reins.apiKey";
const WORKSPACE = "reins.workspace";

export function getKey() { return sessionStorage.getItem(KEY); }
export function setKey(k) { sessionStorage.setItem(KEY, k); }
// clearKey signs out: the key and the workspace picked with it are
// forgotten.
export function clearKey() { sessionStorage.removeItem(KEY); sessionStorage.removeItem(WORKSPACE); }

// getWorkspace is the workspace requests are made in, or null: the key's
// own (a developer or read-only key's), or the default one (an admin's).
export function getWorkspace() { return sessionStorage.getItem(WORKSPACE); }
export function setWorkspace(id) {
  if (id) sessionStorage.setItem(WORKSPACE, id); else sessionStorage.removeItem(WORKSPACE);
}

// headers are those of every request: the key, the workspace, and extra.
function headers(key, extra) {
  const hs = { "x-api-key": key, ...extra };
  const ws = getWorkspace();
  if (ws) hs["anthropic-workspace-id"] = ws;
  return hs;
}

// APIError carries the API's error envelope.
export class APIError extends Error {
  constructor(status, type, message, requestID) {
    super(message);
    this.status = status;
    this.type = type;
    this.requestID = requestID;
  }
}

async function errorFrom(res) {
  let type = "api_error", message = `${res.status} ${res.statusText}`, rid;
  try {
    const body = await res.json();
    if (body && body.error) {
      type = body.error.type || type;
      message = body.error.message || message;
      rid = body.request_id;
    }
  } catch { /* not JSON */ }
  return new APIError(res.status, type, message, rid);
}

let onUnauthorized = () => {};
export function whenUnauthorized(fn) { onUnauthorized = fn; }

// notSignedIn is the error of a request made without a key (by a page
// that outlived a sign-out): it is not sent, and signs nobody out again.
function notSignedIn() { return new APIError(401, "authentication_error", "not signed in"); }

// The endpoints in beta name their beta in the anthropic-beta header.
const BETAS = [["/v1/dreams", "dreaming-2026-04-21"], ["/v1/memory_stores", "agent-memory-2026-07-22"]];

// request sends one API request with the key and returns the decoded JSON
// body (null for an empty one). key overrides the stored key (sign-in).
// A 401 signs out only when the key refused is the one in use.
export async function request(method, path, body, key = getKey()) {
  if (!key) throw notSignedIn();
  const hs = headers(key, { "anthropic-version": "2023-06-01" });
  const beta = BETAS.find(([prefix]) => path.startsWith(prefix));
  if (beta) hs["anthropic-beta"] = beta[1];
  const init = { method, headers: hs, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    hs["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (!res.ok) {
    const err = await errorFrom(res);
    if (res.status === 401 && key === getKey()) onUnauthorized(err);
    throw err;
  }
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body === undefined ? {} : body);
export const del = (path) => request("DELETE", path);

// qs builds a query string, skipping empty values; arrays repeat key[].
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "" || v === false) continue;
    if (Array.isArray(v)) v.forEach((x) => u.append(`${k}[]`, x));
    else u.append(k, String(v));
  }
  const s = u.toString();
  return s ? `?${s}` : "";
}

// stream follows a session's events over SSE with fetch (EventSource cannot
// send headers). It resumes after a drop with Last-Event-ID, from the last
// sequence number seen, waiting a little longer after each failure. onEvent
// gets (data, seq) for log events and (data, null) for previews; onState
// gets "live", "reconnecting" or "ended". With thread, it follows that
// thread's stream instead. Returns a function that stops it.
export function stream(sessionID, { from = 0, onEvent, onState, thread = "" }) {
  const ctl = new AbortController();
  let last = from, stopped = false, backoff = 500;
  const base = `/v1/sessions/${encodeURIComponent(sessionID)}`;
  const path = (thread ? `${base}/threads/${encodeURIComponent(thread)}/stream` : `${base}/events/stream`) +
    qs({ event_deltas: ["agent.message", "agent.thinking"] });

  async function once() {
    const key = getKey();
    if (!key) throw notSignedIn();
    const res = await fetch(path, {
      headers: headers(key, { "Last-Event-ID": String(last), accept: "text/event-stream" }),
      signal: ctl.signal, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    });
    if (!res.ok) {
      const err = await errorFrom(res);
      if (res.status === 401 && key === getKey()) onUnauthorized(err);
      throw err;
    }
    onState("live");
    backoff = 500;
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let id = null, data = "";
        for (const line of frame.split("\n")) {
          if (line.startsWith("id: ")) id = line.slice(4);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (!data) continue;
        const ev = JSON.parse(data);
        if (ev.type === "ping") continue;
        if (id !== null) last = Number(id);
        if (ev.type === "error") throw new APIError(0, ev.error?.type, ev.error?.message);
        onEvent(ev, id === null ? null : Number(id));
        if (ev.type === "session.deleted") { stopped = true; return; }
      }
    }
  }

  (async () => {
    while (!stopped) {
      try {
        await once();
      } catch (err) {
        if (stopped || ctl.signal.aborted) break;
        if (err instanceof APIError && (err.status === 401 || err.status === 404)) {
          onState("ended", err);
          return;
        }
      }
      if (stopped) break;
      onState("reconnecting");
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 8000);
    }
    onState("ended");
  })();
  return () => { stopped = true; ctl.abort(); };
}
