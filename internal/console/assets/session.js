// A session's page: the live transcript from the event stream, and the
// controls that steer it.
import { get, post, del, stream } from "./api.js";
import { h, clear, errorBox, field, confirmDialog, toast, pretty } from "./util.js";
import { statusBadge } from "./sessions.js";
import { textOf, agentText, folded } from "./content.js";
import { threadsPanel, threadMessage, threadStatusLine } from "./threads.js";
import { outcomesPanel } from "./outcomes.js";
import { isReadOnly, writeControl, READ_ONLY_NOTE } from "./access.js";

const ERROR_MEANING = {
  retrying: "reins retries by itself: wait.",
  exhausted: "The turn was abandoned: send your message again.",
  terminal: "This session cannot continue: start a new session.",
};

// usageText tells a session's usage so far: its tokens and, when every
// model it ran has a list price, its list cost.
function usageText(u) {
  if (!u) return "no usage yet";
  const cost = u.list_cost ? ` · ${u.list_cost.amount} ${u.list_cost.currency} list cost` : "";
  return `${u.input_tokens ?? 0} in / ${u.output_tokens ?? 0} out tokens${cost}`;
}

export async function sessionPage(main, id) {
  let sess = await get(`/v1/sessions/${id}`);
  const nodes = new Map();     // event id -> element
  const tools = new Map();     // tool use id -> { card, actions, result }
  const pending = new Set();   // tool use ids waiting on the user
  const starts = new Map();    // span start id -> processed_at
  let stopReason = sess.stop_reason?.type || null;
  let deleted = false;
  let interruptSent = false;
  // A read-only key follows the session: every control that would
  // change it is disabled, and tool calls waiting on a user say so.
  const ro = isReadOnly();

  const title = h("h1", {}, sess.title || "Untitled session");
  const badge = h("span", {}, statusBadge(sess.status, stopReason));
  const conn = h("span", { class: "conn muted", "aria-live": "polite" }, "connecting…");
  const log = h("ol", { class: "transcript", "aria-label": "Transcript", "aria-live": "polite", "aria-relevant": "additions" });
  const stopLine = h("p", { class: "stop", "aria-live": "polite" });
  const text = h("textarea", { name: "message", rows: "3", placeholder: "Message the agent (Ctrl+Enter sends)" });
  const sendOut = h("div");
  const closedNote = h("p", { class: "closed muted", hidden: true });
  // The session's usage so far, replaced by each session.usage snapshot
  // (one per idle) rather than repeated in the transcript.
  const usage = h("span", { class: "usage" }, usageText(sess.usage));

  // The threads of a multi-agent session and the outcomes, each shown
  // once the session has one.
  const threads = threadsPanel(id, sess, log);
  const outcomes = outcomesPanel(id, sess);
  threads.primaryStatus(sess.status, stopReason);

  function setStatus(status) {
    if (status !== sess.status) interruptSent = false;
    sess.status = status;
    clear(badge).append(statusBadge(deleted ? "deleted" : status, stopReason));
    threads.primaryStatus(deleted ? "deleted" : status, stopReason);
    controls();
  }

  const interrupt = h("button", { type: "button", onclick: async () => {
    if (await sendEvents([{ type: "user.interrupt" }], [interrupt], true)) interruptSent = true;
    controls();
  } }, "Interrupt");
  const archive = h("button", { type: "button", onclick: async () => {
    if (!(await confirmDialog("Archive this session? It stops and can no longer take messages.", "Archive"))) return;
    archive.disabled = true;
    try { sess = await post(`/v1/sessions/${id}/archive`); toast("Session archived"); } catch (err) { toast(err.message, "error"); }
    controls();
  } }, "Archive");
  const remove = h("button", { type: "button", class: "danger", onclick: async () => {
    if (!(await confirmDialog("Delete this session and its whole event log? This cannot be undone."))) return;
    remove.disabled = true;
    try { await del(`/v1/sessions/${id}`); location.hash = "#/sessions"; toast("Session deleted"); } catch (err) { toast(err.message, "error"); remove.disabled = false; }
  } }, "Delete");

  // sendEvents posts events with the buttons that sent them disabled until
  // the answer comes (a second click cannot send them twice); keep leaves
  // them disabled after a success, for buttons the events make moot.
  async function sendEvents(events, buttons = [], keep = false) {
    clear(sendOut);
    for (const b of buttons) b.disabled = true;
    let ok = false;
    try { await post(`/v1/sessions/${id}/events`, { events }); ok = true; } catch (err) { sendOut.append(errorBox(err)); }
    if (!ok || !keep) for (const b of buttons) b.disabled = false;
    return ok;
  }

  // controls enables what the session's state allows: Interrupt while a
  // turn is on (running, rescheduling, or idle waiting on the user), no
  // message box once the session is archived, terminated or deleted.
  function closedBecause() {
    if (deleted) return "This session was deleted.";
    if (sess.archived_at) return "This session is archived: it takes no more messages.";
    return sess.status === "terminated" ? "This session is terminated: it takes no more messages; start a new one." : "";
  }
  function controls() {
    const waiting = sess.status === "idle" && stopReason === "requires_action";
    const closed = closedBecause();
    interrupt.disabled = ro || interruptSent || !!closed || !(sess.status === "running" || sess.status === "rescheduling" || waiting);
    form.hidden = !!closed;
    closedNote.hidden = !closed;
    closedNote.textContent = closed;
    archive.disabled = ro || deleted || !!sess.archived_at;
    remove.disabled = ro || deleted;
    for (const tid of closed ? pending : []) if (tools.has(tid)) clear(tools.get(tid).actions);
  }

  const sendButton = h("button", { type: "submit" }, "Send");
  const form = h("form", { class: "composer", "aria-label": "Send a message" }, field("Message", text),
    h("div", { class: "row" }, sendButton, interrupt), sendOut);
  for (const c of [archive, remove]) writeControl(c);
  writeControl(form);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const t = text.value;
    if (!t.trim() || sendButton.disabled) return;
    // Cleared at once, not when the answer comes: what is typed meanwhile
    // stays. A refused message comes back if the box is still empty.
    text.value = "";
    if (!(await sendEvents([{ type: "user.message", content: [{ type: "text", text: t }] }], [sendButton])) && !text.value) text.value = t;
  });
  text.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit(); });

  main.append(
    h("p", {}, h("a", { href: "#/sessions" }, "← Sessions")),
    h("div", { class: "head" }, title, badge, conn),
    h("p", { class: "meta muted" }, h("span", { class: "id" }, id), ` · agent ${sess.agent?.name || sess.agent?.id} v${sess.agent?.version ?? ""} · model ${sess.agent?.model?.id || ""} · environment ${sess.environment_id} · `, usage),
    h("div", { class: "row actions" }, archive, remove),
    threads.tree, outcomes.el, log, threads.view, stopLine, closedNote, form);

  // Rendering. Events arrive in order and each is appended, so a long log
  // renders as it streams in. An event seen before (a queued input echoed
  // again when consumed, a preview's final event) moves to where it came
  // last: its place in the log, as the list endpoint shows it.
  function add(evID, el) {
    const old = evID && nodes.get(evID);
    if (old) old.remove();
    log.append(el);
    if (evID) { nodes.set(evID, el); el.dataset.eventId = evID; }
    follow();
    return el;
  }

  // follow keeps the end of the transcript in view while the user is at
  // the bottom, once per frame however many events and deltas arrived.
  function follow() {
    if (!atBottom || scrollQueued) return;
    scrollQueued = true;
    requestAnimationFrame(() => { scrollQueued = false; window.scrollTo(0, document.documentElement.scrollHeight); });
  }
  let scrollQueued = false;
  let atBottom = true;
  window.addEventListener("scroll", onScroll, { passive: true });
  function onScroll() { atBottom = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80; }

  function who(label, cls, ...body) {
    return h("li", { class: `ev ${cls}` }, h("div", { class: "who" }, label), ...body);
  }

  function toolCard(ev, kind) {
    const actions = h("div", { class: "tool-actions" });
    const result = h("div", { class: "tool-result" });
    const label = (kind === "mcp" ? `MCP tool ${ev.mcp_server_name}/${ev.name}` : kind === "custom" ? `Custom tool ${ev.name}` : `Tool ${ev.name}`) +
      (ev.session_thread_id ? ` · thread ${threads.name(ev.session_thread_id)}` : "");
    const card = who(label, `tool ${kind}`, h("details", { class: "input", open: true }, h("summary", {}, "Input"), h("pre", {}, pretty(ev.input))),
      ev.evaluated_permission === "ask" ? h("p", { class: "muted" }, "Permission: ask") : null, actions, result);
    card.dataset.toolUseId = ev.id;
    tools.set(ev.id, { card, actions, result, kind, ev });
    add(ev.id, card);
    if (pending.has(ev.id)) showActions(ev.id);
  }

  function showActions(toolID) {
    const t = tools.get(toolID);
    if (!t || closedBecause()) return;
    clear(t.actions);
    if (ro) {
      t.actions.append(h("p", { class: "muted", title: READ_ONLY_NOTE }, t.kind === "custom" ? "Waiting for a result from a key that may write." : "Waiting for approval from a key that may write."));
      return;
    }
    if (t.kind === "custom") {
      const answer = h("textarea", { rows: "2", name: "custom-result" });
      const isErr = h("input", { type: "checkbox" });
      const f = h("form", { class: "custom-answer" }, field(`Answer for ${t.ev.name}`, answer),
        h("div", { class: "field check" }, isErr, h("label", { for: isErr.id = `err-${toolID}` }, "Is an error")),
        h("button", { type: "submit" }, "Send result"));
      f.addEventListener("submit", (e) => {
        e.preventDefault();
        const b = f.querySelector("button");
        if (b.disabled) return;
        sendEvents([{ type: "user.custom_tool_result", custom_tool_use_id: toolID, content: [{ type: "text", text: answer.value }], is_error: isErr.checked }], [b], true);
      });
      t.actions.append(f);
      return;
    }
    const msg = h("input", { name: "deny-message", placeholder: "Why (the model reads this)" });
    const approve = h("button", { type: "button", class: "ok", onclick: () => sendEvents([{ type: "user.tool_confirmation", tool_use_id: toolID, result: "allow" }], [approve, deny], true) }, "Approve");
    const deny = h("button", { type: "button", class: "danger", onclick: () => {
      const c = { type: "user.tool_confirmation", tool_use_id: toolID, result: "deny" };
      if (msg.value.trim()) c.deny_message = msg.value.trim();
      sendEvents([c], [approve, deny], true);
    } }, "Deny");
    t.actions.append(h("div", { class: "row approve" }, approve, deny, field("Deny message", msg)));
  }

  function settle(toolID, note, cls) {
    pending.delete(toolID);
    const t = tools.get(toolID);
    if (!t) return;
    clear(t.actions);
    if (note) t.actions.append(h("p", { class: cls }, note));
  }

  function result(toolID, ev) {
    pending.delete(toolID);
    const t = tools.get(toolID);
    if (t?.actions.querySelector("button")) clear(t.actions); // keep "Approved"
    const body = folded(textOf(ev.content) || ev.result || "", ev.is_error ? "err" : "");
    const el = h("div", { class: ev.is_error ? "result is-error" : "result" }, h("div", { class: "muted" }, ev.is_error ? "Error result" : "Result"), body);
    if (t) clear(t.result).append(el); else add(ev.id, who("Tool result", "tool", el));
  }

  function onEvent(ev, seq) {
    if (seq !== null) { threads.onEvent(ev); outcomes.onEvent(ev); }
    switch (ev.type) {
      case "event_start": {
        const kind = ev.event.type === "agent.thinking" ? "thinking" : "agent";
        const body = h("div", { class: "text streaming" });
        const el = kind === "thinking" ? who("Thinking…", "thinking", h("details", {}, h("summary", {}, "Thinking"), body)) : who("Agent", "agent", body);
        el.dataset.preview = "1";
        add(ev.event.id, el);
        return;
      }
      case "event_delta": {
        const el = nodes.get(ev.event_id);
        if (el?.dataset.preview) el.querySelector(".text").append(ev.delta?.content?.text || "");
        follow();
        return;
      }
      case "user.message": {
        const queued = ev.processed_at === null;
        add(ev.id, who("You", `user${queued ? " queued" : ""}${ev.flushed ? " flushed" : ""}`, h("div", { class: "text" }, textOf(ev.content)),
          ev.flushed ? h("p", { class: "muted" }, "Not processed: flushed after the turn failed.") : queued ? h("p", { class: "muted" }, "queued") : null));
        return;
      }
      case "user.interrupt": add(ev.id, h("li", { class: "ev sys" }, "Interrupted")); return;
      case "agent.message": add(ev.id, who("Agent", "agent", agentText(ev.content))); return;
      case "agent.thinking": add(ev.id, who("Thinking", "thinking", h("details", {}, h("summary", {}, "Thinking"), h("div", { class: "text" }, textOf(ev.content) || "(hidden)")))); return;
      case "agent.tool_use": toolCard(ev, "builtin"); return;
      case "agent.mcp_tool_use": toolCard(ev, "mcp"); return;
      case "agent.custom_tool_use": toolCard(ev, "custom"); return;
      case "agent.tool_result": result(ev.tool_use_id, ev); return;
      case "agent.mcp_tool_result": result(ev.mcp_tool_use_id, ev); return;
      case "user.tool_result": result(ev.tool_use_id, ev); return;
      case "user.custom_tool_result": {
        settle(ev.custom_tool_use_id);
        const t = tools.get(ev.custom_tool_use_id);
        const el = h("div", { class: ev.is_error ? "result is-error" : "result" }, h("div", { class: "muted" }, "Your answer"), folded(textOf(ev.content), ""));
        if (t) clear(t.result).append(el);
        return;
      }
      case "user.tool_confirmation":
        settle(ev.tool_use_id, ev.result === "allow" ? "Approved" : `Denied${ev.deny_message ? ": " + ev.deny_message : ""}`, ev.result === "allow" ? "ok" : "err");
        return;
      case "span.model_request_start": starts.set(ev.id, ev.processed_at); return;
      case "span.model_request_end": {
        const u = ev.model_usage || {};
        const t0 = starts.get(ev.model_request_start_id);
        const ms = t0 && ev.processed_at ? Date.parse(ev.processed_at) - Date.parse(t0) : null;
        add(ev.id, h("li", { class: "ev span muted" },
          `Model call · ${sess.agent?.model?.id || ""} · ${u.input_tokens ?? 0} in / ${u.output_tokens ?? 0} out tokens` +
          (u.cache_read_input_tokens ? ` (${u.cache_read_input_tokens} cached)` : "") + (ms !== null ? ` · ${(ms / 1000).toFixed(2)} s` : "") +
          (ev.is_error ? " · failed" : "")));
        return;
      }
      case "session.error": {
        const e = ev.error || {};
        const rs = e.retry_status?.type || "";
        add(ev.id, h("li", { class: `ev session-error rs-${rs}`, role: "alert" },
          h("div", { class: "who" }, `Error · ${e.type}`),
          h("p", {}, e.message),
          h("p", { class: "meaning" }, h("strong", {}, rs), " — ", ERROR_MEANING[rs] || "")));
        return;
      }
      case "session.status_running": stopReason = null; setStatus("running"); stopLine.textContent = ""; return;
      case "session.status_rescheduled": setStatus("rescheduling"); add(ev.id, h("li", { class: "ev sys muted" }, `Rescheduling${ev.reason ? ": " + ev.reason : ""}`)); return;
      case "session.status_terminated": stopReason = null; setStatus("terminated"); stopLine.textContent = "Terminated: this session cannot continue; start a new one."; return;
      case "session.status_idle": {
        stopReason = ev.stop_reason?.type || null;
        setStatus("idle");
        stopLine.textContent = stopReason ? `Stopped: ${stopReason.replaceAll("_", " ")}` : "Idle";
        for (const tid of ev.stop_reason?.event_ids || []) { pending.add(tid); showActions(tid); }
        return;
      }
      case "session.thread_created": add(ev.id, h("li", { class: "ev sys muted" }, `Thread ${threads.name(ev.session_thread_id)} started`)); return;
      case "session.thread_status_running": case "session.thread_status_idle":
      case "session.thread_status_rescheduled": case "session.thread_status_terminated":
        add(ev.id, threadStatusLine(ev, threads.name(ev.session_thread_id)));
        return;
      case "agent.thread_message_sent": case "agent.thread_message_received": add(ev.id, threadMessage(ev)); return;
      case "user.define_outcome":
        add(ev.id, who("Outcome", "user outcome", h("div", { class: "text" }, ev.description || ""),
          h("p", { class: "muted" }, `Graded against its rubric, up to ${ev.max_iterations ?? 3} iterations`)));
        return;
      case "span.outcome_evaluation_start": add(ev.id, h("li", { class: "ev span muted" }, `Grading the work (iteration ${ev.iteration})…`)); return;
      case "span.outcome_evaluation_ongoing": return;
      case "span.outcome_evaluation_end":
        add(ev.id, h("li", { class: "ev sys muted" }, `Outcome ${(ev.result || "").replaceAll("_", " ")} (iteration ${ev.iteration})`));
        return;
      case "session.usage": clear(usage).append(usageText(ev.usage)); return;
      case "session.updated": if (ev.title !== undefined && ev.title !== null) title.textContent = ev.title; return;
      case "session.deleted": deleted = true; stopLine.textContent = ""; setStatus("deleted"); return;
      default:
        if (seq !== null) add(ev.id, h("li", { class: "ev sys muted" }, ev.type));
    }
  }

  controls();
  const stop = stream(id, {
    from: 0, onEvent,
    onState: (s, err) => { conn.textContent = s === "live" ? "live" : s === "reconnecting" ? "reconnecting…" : `stream ended${err ? ": " + err.message : ""}`; },
  });
  return () => { stop(); threads.stop(); window.removeEventListener("scroll", onScroll); };
}
