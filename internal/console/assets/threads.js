// A multi-agent session's threads on its page: the tree of its threads
// (the primary thread, and under it the child threads its delegations
// started), each with its agent and status, kept live from the session's
// stream; and the transcript of the thread picked, from the thread's own
// stream.
import { get, stream } from "./api.js";
import { h, clear, pretty } from "./util.js";
import { statusBadge } from "./sessions.js";
import { textOf, agentText, folded } from "./content.js";

const STATUS_OF = {
  "session.thread_status_running": "running",
  "session.thread_status_idle": "idle",
  "session.thread_status_rescheduled": "rescheduling",
  "session.thread_status_terminated": "terminated",
};

// agentLabel names a thread's agent: an advisor by its model.
function agentLabel(agent) {
  if (!agent) return "";
  return agent.type === "advisor" ? `advisor ${typeof agent.model === "string" ? agent.model : agent.model?.id || ""}` : agent.name || agent.id || "";
}

// threadMessage is a message between threads: sent by the thread whose
// transcript shows it, or received by it. The primary thread's agent is
// unnamed on these events.
export function threadMessage(ev) {
  const sent = ev.type === "agent.thread_message_sent";
  const other = sent ? (ev.to_agent_name || "primary") : (ev.from_agent_name || "primary");
  return h("li", { class: `ev thread-msg ${sent ? "sent" : "received"}` },
    h("div", { class: "who" }, sent ? `To ${other}` : `From ${other}`), agentText(ev.content));
}

// threadStatusLine is a thread's change of status, as a line.
export function threadStatusLine(ev, name) {
  const stop = ev.stop_reason?.type;
  return h("li", { class: "ev sys muted thread-status" }, `Thread ${name}: ${STATUS_OF[ev.type]}${stop ? " (" + stop.replaceAll("_", " ") + ")" : ""}`);
}

// threadsPanel is the tree (hidden until the session has a child thread)
// and the view of a child thread's transcript; picking the primary thread
// shows the session's own transcript, log, again.
export function threadsPanel(sessionID, sess, log) {
  const primaryID = "sthr_" + sessionID.slice(sessionID.indexOf("_") + 1);
  const threads = new Map(); // thread id -> { name, status, stop, button, badge }
  const children = h("ul", { class: "tree" });
  const tree = h("nav", { class: "threads", "aria-label": "Threads", hidden: true },
    h("h2", {}, "Threads"), h("ul", { class: "tree" }, h("li", {}, node(primaryID, sess.agent?.name || "primary"), children)));
  const view = h("section", { class: "thread-view", hidden: true, "aria-label": "Thread transcript" });
  let picked = primaryID, stopView = () => {};

  function node(tid, name) {
    const badge = h("span", {});
    const button = h("button", { type: "button", class: "thread", "aria-pressed": String(tid === primaryID), onclick: () => pick(tid) },
      h("span", { class: "name" }, name), " ", badge);
    button.dataset.threadId = tid;
    threads.set(tid, { name, status: "", stop: null, button, badge, statusSeen: false });
    return button;
  }

  function setStatus(tid, status, stop) {
    const t = threads.get(tid);
    if (!t) return;
    t.status = status;
    t.stop = stop || null;
    clear(t.badge).append(statusBadge(status, t.stop));
  }

  // add puts a child thread in the tree when its creation streams in;
  // its agent and archived state come from the thread itself.
  async function add(tid, name) {
    if (threads.has(tid)) return;
    children.append(h("li", {}, node(tid, name)));
    tree.hidden = false;
    try {
      const th = await get(`/v1/sessions/${sessionID}/threads/${tid}`);
      const t = threads.get(tid);
      t.button.querySelector(".name").textContent = t.name = agentLabel(th.agent) || name;
      if (!t.statusSeen) setStatus(tid, th.status, th.stop_reason?.type);
      if (th.archived_at) t.button.append(" ", h("span", { class: "muted" }, "archived"));
    } catch { /* the tree keeps what the event said */ }
  }

  function pick(tid) {
    if (tid === picked) return;
    picked = tid;
    stopView();
    stopView = () => {};
    for (const [id, t] of threads) t.button.setAttribute("aria-pressed", String(id === tid));
    clear(view);
    log.hidden = tid !== primaryID;
    view.hidden = tid === primaryID;
    if (tid !== primaryID) stopView = threadTranscript(sessionID, tid, threads.get(tid).name, view);
  }

  // onEvent follows the session's stream: the creation and status changes
  // of child threads are cross-posted to it.
  function onEvent(ev) {
    const tid = ev.session_thread_id;
    if (ev.type === "session.thread_created") add(tid, ev.agent_name || tid);
    else if (STATUS_OF[ev.type] && threads.has(tid)) {
      threads.get(tid).statusSeen = true;
      setStatus(tid, STATUS_OF[ev.type], ev.stop_reason?.type);
    }
  }

  return {
    tree, view, onEvent,
    name: (tid) => threads.get(tid)?.name || tid,
    // primaryStatus is the session's status, which is its primary thread's.
    primaryStatus: (status, stop) => setStatus(primaryID, status, stop),
    stop: () => stopView(),
  };
}

// threadTranscript shows a child thread's events as they stream in, in
// view (read only: what waits on the user is answered in the session's
// transcript, where it is cross-posted). Returns a function that stops it.
function threadTranscript(sessionID, tid, name, view) {
  const log = h("ol", { class: "transcript", "aria-label": `Transcript of ${name}`, "aria-live": "polite", "aria-relevant": "additions" });
  const conn = h("span", { class: "conn muted" }, "connecting…");
  view.append(h("div", { class: "head" }, h("h2", {}, `Thread ${name}`), conn), h("p", { class: "id" }, tid), log);
  const nodes = new Map(), results = new Map();
  const who = (label, cls, ...body) => h("li", { class: `ev ${cls}` }, h("div", { class: "who" }, label), ...body);
  function add(evID, el) {
    nodes.get(evID)?.remove();
    if (evID) nodes.set(evID, el);
    log.append(el);
  }
  function result(toolID, ev) {
    const el = h("div", { class: ev.is_error ? "result is-error" : "result" }, folded(textOf(ev.content) || "", ev.is_error ? "err" : ""));
    if (results.has(toolID)) clear(results.get(toolID)).append(el); else add(ev.id, who("Tool result", "tool", el));
  }
  function tool(ev, label) {
    const res = h("div", { class: "tool-result" });
    results.set(ev.id, res);
    add(ev.id, who(label, "tool", h("details", { class: "input", open: true }, h("summary", {}, "Input"), h("pre", {}, pretty(ev.input))), res));
  }
  function onEvent(ev, seq) {
    switch (ev.type) {
      case "event_start": {
        if (ev.event.type !== "agent.message") return;
        const el = who(name, "agent", h("div", { class: "text streaming" }));
        el.dataset.preview = "1";
        add(ev.event.id, el);
        return;
      }
      case "event_delta": {
        const el = nodes.get(ev.event_id);
        if (el?.dataset.preview) el.querySelector(".text").append(ev.delta?.content?.text || "");
        return;
      }
      case "agent.message": add(ev.id, who(name, "agent", agentText(ev.content))); return;
      case "agent.thinking": add(ev.id, who("Thinking", "thinking", h("details", {}, h("summary", {}, "Thinking"), h("div", { class: "text" }, textOf(ev.content) || "(hidden)")))); return;
      case "agent.thread_message_sent": case "agent.thread_message_received": add(ev.id, threadMessage(ev)); return;
      case "agent.tool_use": tool(ev, `Tool ${ev.name}`); return;
      case "agent.mcp_tool_use": tool(ev, `MCP tool ${ev.mcp_server_name}/${ev.name}`); return;
      case "agent.custom_tool_use": tool(ev, `Custom tool ${ev.name}`); return;
      case "agent.tool_result": case "user.tool_result": result(ev.tool_use_id, ev); return;
      case "agent.mcp_tool_result": result(ev.mcp_tool_use_id, ev); return;
      case "user.custom_tool_result": result(ev.custom_tool_use_id, ev); return;
      case "user.tool_confirmation": add(ev.id, h("li", { class: "ev sys muted" }, ev.result === "allow" ? "Approved" : `Denied${ev.deny_message ? ": " + ev.deny_message : ""}`)); return;
      case "user.interrupt": add(ev.id, h("li", { class: "ev sys" }, "Interrupted")); return;
      case "span.model_request_start": return;
      case "span.model_request_end": {
        const u = ev.model_usage || {};
        add(ev.id, h("li", { class: "ev span muted" }, `Model call · ${u.input_tokens ?? 0} in / ${u.output_tokens ?? 0} out tokens${ev.is_error ? " · failed" : ""}`));
        return;
      }
      case "session.error": add(ev.id, h("li", { class: "ev session-error", role: "alert" }, h("div", { class: "who" }, `Error · ${ev.error?.type}`), h("p", {}, ev.error?.message))); return;
      default:
        if (STATUS_OF[ev.type]) add(ev.id, threadStatusLine(ev, name));
        else if (seq !== null) add(ev.id, h("li", { class: "ev sys muted" }, ev.type));
    }
  }
  return stream(sessionID, {
    from: 0, thread: tid, onEvent,
    onState: (s, err) => { conn.textContent = s === "live" ? "live" : s === "reconnecting" ? "reconnecting…" : `stream ended${err ? ": " + err.message : ""}`; },
  });
}
