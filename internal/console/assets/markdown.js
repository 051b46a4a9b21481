// A small Markdown subset for the agent's messages, built as DOM nodes:
// paragraphs, headings (shown as bold lines), fenced code blocks, lists,
// inline code, emphasis and links to http(s) URLs. Nothing is parsed as
// HTML: every piece of the text enters the page as a text node, so a
// message that holds markup shows it as text.
import { h } from "./util.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const ITEM = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/;
const HEADING = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/;

// One alternative per inline form; the groups tell which matched.
// Emphasis with _ must stand apart from words (snake_case stays as it is).
const INLINE = new RegExp([
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/.source, // 1-2 code
  /\[([^\]\n]+)\]\(([^()\s]+)\)/.source, // 3-4 link
  /\*\*(?=\S)([\s\S]*?\S)\*\*/.source, // 5 strong
  /(?<![\w*])\*(?=[^\s*])([\s\S]*?[^\s*])\*(?![\w*])/.source, // 6 em
  /(?<!\w)__(?=\S)([\s\S]*?\S)__(?!\w)/.source, // 7 strong
  /(?<![\w_])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\w_])/.source, // 8 em
].join("|"), "g");

// safeURL returns an absolute http or https URL, or null for anything
// else (javascript:, data:, relative paths).
export function safeURL(s) {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch { return null; }
}

// inline renders the inline forms of one block of text.
export function inline(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[1]) out.push(h("code", {}, m[2]));
    else if (m[3] !== undefined) {
      const url = safeURL(m[4]);
      out.push(url ? h("a", { href: url, rel: "noopener noreferrer nofollow", target: "_blank" }, inline(m[3])) : m[0]);
    } else if (m[5] !== undefined || m[7] !== undefined) out.push(h("strong", {}, inline(m[5] ?? m[7])));
    else out.push(h("em", {}, inline(m[6] ?? m[8])));
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// list reads the list that starts at lines[i]: its items (an indented line
// continues the item above) up to a line that is neither. It returns the
// element and the index of the line after it.
function list(lines, i) {
  const ordered = /\d/.test(lines[i].match(ITEM)[1]);
  const start = ordered ? parseInt(lines[i].match(ITEM)[1], 10) : 1;
  const items = [];
  for (; i < lines.length; i++) {
    const m = lines[i].match(ITEM);
    if (m && /\d/.test(m[1]) === ordered) items.push([m[2]]);
    else if (/^\s+\S/.test(lines[i])) items.at(-1).push(lines[i].trim());
    else break;
  }
  const attrs = ordered && start !== 1 ? { start: String(start) } : {};
  return [h(ordered ? "ol" : "ul", attrs, items.map((it) => h("li", {}, inline(it.join("\n"))))), i];
}

// markdown renders text as a list of block elements.
export function markdown(text) {
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  const out = [];
  let para = [];
  const flush = () => {
    if (para.length) out.push(h("p", {}, inline(para.join("\n"))));
    para = [];
  };
  for (let i = 0; i < lines.length;) {
    const line = lines[i];
    const fence = line.match(FENCE);
    if (fence) {
      flush();
      const body = [];
      for (i++; i < lines.length && !lines[i].trimStart().startsWith(fence[1]); i++) body.push(lines[i]);
      out.push(h("pre", { class: "code" }, h("code", fence[2] ? { dataset: { lang: fence[2] } } : {}, body.join("\n"))));
      i++;
      continue;
    }
    if (ITEM.test(line)) {
      flush();
      let el;
      [el, i] = list(lines, i);
      out.push(el);
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      flush();
      out.push(h("p", { class: "md-h" }, h("strong", {}, inline(heading[1]))));
    } else if (!line.trim()) flush();
    else para.push(line);
    i++;
  }
  flush();
  return out;
}
