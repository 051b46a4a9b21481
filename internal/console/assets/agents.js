// Agents: the list, the form (or JSON) that creates one, and an agent's
// versions with a diff between two of them.
import { get, post, qs } from "./api.js";
import { h, append, clear, ago, errorBox, field, pretty, confirmDialog, toast } from "./util.js";
import { writeControl } from "./access.js";

export async function agentsPage(main) {
  const r = await get("/v1/agents" + qs({ limit: 100 }));
  append(main, [h("div", { class: "head" }, h("h1", {}, "Agents"), writeControl(h("a", { class: "button", href: "#/agents/new" }, "New agent"))),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, ["Name", "Model", "Version", "Updated"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, r.data.map((a) => h("tr", {}, h("td", {}, h("a", { href: `#/agents/${a.id}` }, a.name), h("div", { class: "id" }, a.id)),
        h("td", {}, a.model?.id), h("td", {}, String(a.version)), h("td", { title: a.updated_at }, ago(a.updated_at))))))),
    r.data.length ? null : h("p", { class: "muted" }, "No agents yet.")]);
}

export function newAgentPage(main) {
  const name = h("input", { name: "name", required: true, maxlength: "256" });
  const model = h("input", { name: "model", required: true, value: "scripted", list: "models" });
  const system = h("textarea", { name: "system", rows: "3" });
  const toolset = h("input", { type: "checkbox", name: "toolset", checked: true });
  const policy = h("select", { name: "policy" }, h("option", { value: "always_allow" }, "always_allow: run tools without asking"),
    h("option", { value: "always_ask" }, "always_ask: wait for approval on each call"));
  const json = h("textarea", { name: "json", rows: "14", class: "code", spellcheck: "false" });
  const out = h("div");
  const build = () => {
    const body = { name: name.value, model: model.value };
    if (system.value.trim()) body.system = system.value;
    if (toolset.checked) body.tools = [{ type: "agent_toolset_20260401", default_config: { enabled: true, permission_policy: { type: policy.value } } }];
    return body;
  };
  const modeForm = h("input", { type: "radio", name: "mode", value: "form", checked: true, id: "mode-form" });
  const modeJSON = h("input", { type: "radio", name: "mode", value: "json", id: "mode-json" });
  // Each way of describing the agent is a fieldset, disabled while hidden:
  // a disabled control is not validated, so the form's required fields do
  // not block a JSON submission (nor the reverse).
  const formPart = h("fieldset", { class: "plain" }, field("Name", name), field("Model", model, "claude-…, openai/<model> or scripted"),
    h("datalist", { id: "models" }, ["scripted", "claude-sonnet-4-5", "claude-opus-4-1"].map((m) => h("option", { value: m }))),
    field("System prompt", system),
    h("div", { class: "field check" }, toolset, h("label", { for: toolset.id = "f-toolset" }, "Built-in tools (bash, read, write, edit, glob, grep)")),
    field("Permission policy", policy));
  const jsonPart = h("fieldset", { class: "plain", hidden: true, disabled: true }, field("Agent JSON (the body of POST /v1/agents)", json));
  const sync = () => {
    if (modeJSON.checked && !json.value.trim()) json.value = pretty(build());
    formPart.hidden = formPart.disabled = modeJSON.checked;
    jsonPart.hidden = jsonPart.disabled = !modeJSON.checked;
  };
  modeForm.addEventListener("change", sync);
  modeJSON.addEventListener("change", sync);
  const form = h("form", { class: "card" }, h("h1", {}, "New agent"),
    h("fieldset", { class: "row" }, h("legend", {}, "Describe it with"), modeForm, h("label", { for: "mode-form" }, "a form"), modeJSON, h("label", { for: "mode-json" }, "JSON")),
    formPart, jsonPart, h("button", { type: "submit" }, "Create agent"), out);
  writeControl(form);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    try {
      let body = build();
      if (modeJSON.checked) {
        try { body = JSON.parse(json.value); } catch (err) { throw new Error(`The agent JSON does not parse: ${err.message}`); }
      }
      const a = await post("/v1/agents", body);
      toast(`Agent ${a.name} created`);
      location.hash = `#/agents/${a.id}`;
    } catch (err) { out.append(errorBox(err)); }
  });
  main.append(form);
  name.focus();
}

// diffLines is a longest-common-subsequence line diff.
export function diffLines(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  const n = x.length, m = y.length;
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([" ", x[i]]); i++; j++; } else if (L[i + 1][j] >= L[i][j + 1]) out.push(["-", x[i++]]); else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  return out;
}

const volatile = (v) => { const c = { ...v }; delete c.updated_at; delete c.created_at; return c; };

export async function agentPage(main, id) {
  const a = await get(`/v1/agents/${id}`);
  const vs = (await get(`/v1/agents/${id}/versions` + qs({ limit: 100 }))).data;
  const from = h("select", { name: "from" }, vs.map((v) => h("option", { value: v.version }, `v${v.version}`)));
  const to = h("select", { name: "to" }, vs.map((v) => h("option", { value: v.version }, `v${v.version}`)));
  if (vs.length > 1) from.value = String(vs[1].version);
  to.value = String(vs[0]?.version ?? a.version);
  const diff = h("pre", { class: "diff", "aria-label": "Differences" });
  const show = () => {
    const A = vs.find((v) => String(v.version) === from.value), B = vs.find((v) => String(v.version) === to.value);
    clear(diff).append(...diffLines(pretty(volatile(A)), pretty(volatile(B))).map(([k, l]) => h("span", { class: k === "+" ? "add" : k === "-" ? "del" : "" }, `${k} ${l}\n`)));
  };
  from.addEventListener("change", show);
  to.addEventListener("change", show);
  const archive = h("button", { type: "button", class: "danger", onclick: async () => {
    if (!(await confirmDialog(`Archive agent ${a.name}? New sessions can no longer use it.`, "Archive"))) return;
    try { await post(`/v1/agents/${id}/archive`); toast("Agent archived"); location.hash = "#/agents"; } catch (err) { toast(err.message, "error"); }
  } }, "Archive");
  writeControl(archive);
  main.append(h("p", {}, h("a", { href: "#/agents" }, "← Agents")),
    h("div", { class: "head" }, h("h1", {}, a.name), h("span", { class: "badge" }, `v${a.version}`), a.archived_at ? h("span", { class: "badge" }, "archived") : null),
    h("p", { class: "id" }, a.id), h("div", { class: "row" }, writeControl(h("a", { class: "button", href: "#/sessions/new" }, "Start a session")), archive),
    h("h2", {}, "Current version"), h("pre", { class: "code" }, pretty(a)),
    h("h2", {}, "Compare versions"), h("div", { class: "row" }, field("From", from), field("To", to)), diff);
  show();
  return null;
}
