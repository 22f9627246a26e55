// A small Markdown renderer for answers: headings, paragraphs, lists, quotes, rules, pipe
// tables, fenced code, and ``` csv fences (the retrieved context a query without an LLM returns)
// drawn as tables. It builds DOM nodes and sets every piece of text as textContent: nothing of
// the answer is ever parsed as HTML, so markup in it shows as the characters it is.
// `citation(n)` turns a cited source number into a node (a link), or null to leave "[n]" as text.
"use strict";

const FENCE = /^\s*(```|~~~)\s*([\w-]*)\s*$/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
// "-----Entities-----": how a retrieved context titles its sections.
const SECTION = /^\s*-{3,}\s*([^-].*?)\s*-{3,}\s*$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^\s*>\s?(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;
// Inline: code spans, bold, emphasis, links, citations ([3] or [2, 5]), in that priority.
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|\*(?!\s)([^*]+?)\*|\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)|\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]/g;
// The engine joins the descriptions of one entity with this separator: shown as a line break.
const FIELD_SEPARATOR = "<SEP>";

function mdElement(tag, text, className) {
  const el = document.createElement(tag);
  if (text !== undefined) el.textContent = text;
  if (className) el.className = className;
  return el;
}

function renderInline(text, options, into) {
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) into.append(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[1] !== undefined) {
      into.append(mdElement("code", m[2]));
    } else if (m[3] !== undefined || m[4] !== undefined) {
      into.append(renderInline(m[3] ?? m[4], options, mdElement("strong")));
    } else if (m[5] !== undefined) {
      into.append(renderInline(m[5], options, mdElement("em")));
    } else if (m[6] !== undefined) {
      const link = renderInline(m[6], options, mdElement("a"));
      link.href = m[7];  // http(s) only (the pattern): never a javascript: URL
      link.rel = "noopener noreferrer";
      link.target = "_blank";
      into.append(link);
    } else {
      const numbers = m[8].split(",").map(n => Number(n.trim()));
      const links = numbers.map(n => options.citation ? options.citation(n) : null);
      if (links.every(link => link === null)) {
        into.append(m[0]);
      } else {
        into.append("[");
        numbers.forEach((n, i) => {
          if (i) into.append(", ");
          into.append(links[i] || String(n));
        });
        into.append("]");
      }
    }
  }
  if (last < text.length) into.append(text.slice(last));
  return into;
}

// RFC 4180: fields separated by commas, quoted with "" (a doubled quote inside), newlines
// allowed inside quotes.
function parseCSV(text) {
  const rows = [];
  let row = [], field = "", quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; }
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"' && field === "") {
      quoted = true;
    } else if (c === ",") {
      row.push(field); field = "";
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field); rows.push(row); row = []; field = "";
    } else {
      field += c;
    }
  }
  if (field !== "" || row.length) { row.push(field); rows.push(row); }
  return rows;
}

function table(header, rows, options) {
  const wrap = mdElement("div", undefined, "table-wrap");
  const t = mdElement("table", undefined, "md-table");
  const head = mdElement("tr");
  for (const cell of header) head.append(renderInline(cell, options, mdElement("th")));
  t.append(mdElement("thead"));
  t.tHead.append(head);
  const body = mdElement("tbody");
  for (const row of rows) {
    const tr = mdElement("tr");
    for (let i = 0; i < header.length; i++) {
      const cell = (row[i] ?? "").split(FIELD_SEPARATOR).join("\n");
      tr.append(renderInline(cell, options, mdElement("td")));
    }
    body.append(tr);
  }
  t.append(body);
  wrap.append(t);
  return wrap;
}

function pipeCells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map(c => c.trim());
}

function startsBlock(line, next) {
  return FENCE.test(line) || HEADING.test(line) || SECTION.test(line) || RULE.test(line) || ITEM.test(line)
    || QUOTE.test(line) || (line.includes("|") && next !== undefined && TABLE_RULE.test(next));
}

function renderMarkdown(text, options = {}) {
  const out = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) { i++; continue; }
    if ((m = FENCE.exec(line))) {
      const body = [];
      for (i++; i < lines.length && !(FENCE.exec(lines[i]) || [])[1]?.startsWith(m[1][0]); i++) body.push(lines[i]);
      i++;  // the closing fence (or the end: an answer still streaming)
      const rows = m[2].toLowerCase() === "csv" ? parseCSV(body.join("\n")) : null;
      if (rows && rows.length) {
        out.append(table(rows[0], rows.slice(1), options));
      } else {
        const pre = mdElement("pre");
        pre.append(mdElement("code", body.join("\n")));
        out.append(pre);
      }
    } else if ((m = HEADING.exec(line))) {
      out.append(renderInline(m[2], options, mdElement(`h${Math.min(m[1].length + 2, 6)}`)));
      i++;
    } else if ((m = SECTION.exec(line))) {
      out.append(mdElement("h4", m[1], "md-section"));
      i++;
    } else if (RULE.test(line)) {
      out.append(mdElement("hr"));
      i++;
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
      const header = pipeCells(line), rows = [];
      for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim(); i++) rows.push(pipeCells(lines[i]));
      out.append(table(header, rows, options));
    } else if (QUOTE.test(line)) {
      const body = [];
      for (; i < lines.length && (m = QUOTE.exec(lines[i])); i++) body.push(m[1]);
      const quote = mdElement("blockquote");
      quote.append(renderMarkdown(body.join("\n"), options));
      out.append(quote);
    } else if ((m = ITEM.exec(line))) {
      const ordered = /\d/.test(m[2]);
      const list = mdElement(ordered ? "ol" : "ul");
      if (ordered && Number.parseInt(m[2], 10) !== 1) list.start = Number.parseInt(m[2], 10);
      let item = null, itemText = [];
      const close = () => { if (item) list.append(renderInline(itemText.join("\n"), options, item)); };
      for (; i < lines.length && lines[i].trim(); i++) {
        const it = ITEM.exec(lines[i]);
        if (it && /\d/.test(it[2]) === ordered) {
          close();
          item = mdElement("li");
          itemText = [it[3]];
        } else if (it || (startsBlock(lines[i], lines[i + 1]) && !/^\s/.test(lines[i]))) {
          break;
        } else {
          itemText.push(lines[i].trim());
        }
      }
      close();
      out.append(list);
    } else {
      const body = [];
      for (; i < lines.length && lines[i].trim() && !(body.length && startsBlock(lines[i], lines[i + 1])); i++) {
        body.push(lines[i]);
      }
      out.append(renderInline(body.join("\n"), options, mdElement("p")));
    }
  }
  return out;
}
