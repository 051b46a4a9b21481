// How the content of events renders: plain text, an agent's Markdown,
// long output folded.
import { h } from "./util.js";
import { markdown } from "./markdown.js";

const FOLD_CHARS = 1500, FOLD_LINES = 20;

export function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).map((b) => (b.type === "text" ? b.text : b.type === "image" ? "[image]" : b.type === "document" ? `[document ${b.title || ""}]` : "")).join("");
}

// agentText renders an agent message's blocks as Markdown, a paragraph
// break between two blocks.
export function agentText(content) {
  const blocks = typeof content === "string" ? [content] : (content || []).map((b) => textOf([b]));
  return h("div", { class: "text md" }, markdown(blocks.filter(Boolean).join("\n\n")));
}

export function folded(text, cls) {
  const pre = h("pre", { class: cls }, text);
  const lines = text.split("\n").length;
  if (text.length <= FOLD_CHARS && lines <= FOLD_LINES) return pre;
  return h("details", { class: "fold" }, h("summary", {}, `Output: ${lines} lines, ${text.length} characters`), pre);
}
