// A session's outcomes on its page: each outcome a user.define_outcome
// set, with its state from the session's outcome_evaluations, and each of
// its evaluations (iteration, verdict, explanation, the grader's usage)
// from the span.outcome_evaluation_* events.
import { get } from "./api.js";
import { h, clear } from "./util.js";

function resultBadge(result) {
  return h("span", { class: `badge o-${result}` }, (result || "").replaceAll("_", " "));
}

function usageLine(u) {
  if (!u) return null;
  return h("p", { class: "muted usage" }, `Grader: ${u.input_tokens ?? 0} in / ${u.output_tokens ?? 0} out tokens` +
    (u.cache_read_input_tokens ? ` (${u.cache_read_input_tokens} cached)` : ""));
}

// outcomesPanel is hidden until the session has an outcome.
export function outcomesPanel(sessionID, sess) {
  const outcomes = new Map(); // outcome id -> { state, evals, rows: iteration -> element }
  const list = h("ol", { class: "outcomes" });
  const el = h("section", { class: "outcomes", "aria-label": "Outcome evaluations", hidden: true }, h("h2", {}, "Outcome evaluations"), list);

  function outcome(id, description) {
    let o = outcomes.get(id);
    if (o) return o;
    const state = h("span", { class: "state" }), evals = h("ol", { class: "evals" });
    const item = h("li", { class: "outcome" }, h("div", { class: "row" }, h("strong", {}, (description || "").slice(0, 200) || id), state),
      h("p", { class: "id" }, id), evals);
    item.dataset.outcomeId = id;
    o = { state, evals, rows: new Map() };
    outcomes.set(id, o);
    list.append(item);
    el.hidden = false;
    return o;
  }

  // show draws an entry of the session's outcome_evaluations.
  function show(oe) {
    clear(outcome(oe.outcome_id, oe.description).state).append(resultBadge(oe.result), ` · iteration ${oe.iteration}`);
  }
  for (const oe of sess.outcome_evaluations || []) show(oe);

  // refresh reads the outcomes' state again, one request at a time.
  let reading = null, again = false;
  async function refresh() {
    if (reading) { again = true; return; }
    reading = get(`/v1/sessions/${sessionID}`).then((s) => (s.outcome_evaluations || []).forEach(show)).catch(() => {});
    await reading;
    reading = null;
    if (again) { again = false; refresh(); }
  }

  function row(ev) {
    const o = outcome(ev.outcome_id);
    let r = o.rows.get(ev.iteration);
    if (!r) {
      r = h("li", { class: "eval" });
      r.dataset.iteration = ev.iteration;
      o.rows.set(ev.iteration, r);
      o.evals.append(r);
    }
    return r;
  }

  function onEvent(ev) {
    switch (ev.type) {
      case "user.define_outcome":
        if (ev.outcome_id && ev.processed_at) { outcome(ev.outcome_id, ev.description); refresh(); }
        return;
      case "span.outcome_evaluation_start":
        clear(row(ev)).append(h("span", { class: "muted" }, `Iteration ${ev.iteration}: grading…`));
        return;
      case "span.outcome_evaluation_end":
        clear(row(ev)).append(h("div", { class: "row" }, `Iteration ${ev.iteration}`, resultBadge(ev.result)),
          ev.explanation ? h("p", { class: "explanation" }, ev.explanation) : null, usageLine(ev.usage));
        refresh();
        return;
      case "session.status_idle":
        if (outcomes.size) refresh();
    }
  }
  return { el, onEvent };
}
