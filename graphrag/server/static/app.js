// The page: ask (answers streamed as written, cited or not, rendered as Markdown), see why (what the answer rested
// on, outlined in the graph), explore the graph, manage documents. Everything goes through the
// server's JSON API; text from the index is only ever set as textContent or drawn on the canvas,
// never parsed as HTML. A server with an API key answers 401: the page then asks for the key,
// keeps it for this tab (sessionStorage) and sends it as X-API-Key itself (the server takes no
// Basic auth, which a browser would resend to it on its own). Endpoints a server does not offer
// (its OpenAPI document lists what it does) hide the feature that needs them.
"use strict";

const $ = id => document.getElementById(id);
const KEY = "graphrag-api-key";
const WORKSPACE = "graphrag-workspace";
const PAGE_SIZE = 20;
const POPULAR = 40;   // entities drawn when the page opens
const EXPAND = 40;    // neighbours added by one expand
const SUGGEST = 12;   // names offered while typing

// A header carries bytes: the key's UTF-8 bytes, one character each.
const keyHeaders = () => {
  const key = sessionStorage.getItem(KEY);
  return key ? {"X-API-Key": String.fromCharCode(...new TextEncoder().encode(key))} : {};
};

// The workspace chosen (X-Workspace on every request); none: the server's own index.
const workspaceHeaders = () => {
  const name = sessionStorage.getItem(WORKSPACE);
  return name ? {"X-Workspace": name} : {};
};

async function request(path, options = {}) {
  const headers = {...(options.headers || {}), ...keyHeaders(), ...workspaceHeaders()};
  const response = await fetch(path, {...options, headers});
  if (response.status === 401) $("key-form").hidden = false;
  return response;
}

class APIError extends Error {
  constructor(status, body, statusText) {
    super(`${body.error || status}: ${body.message || statusText}`);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const response = await request(path, options);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new APIError(response.status, body, response.statusText);
  return body;
}

function postJSON(path, data) {
  return api(path, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(data)});
}

function element(tag, text, className) {
  const el = document.createElement(tag);
  if (text !== undefined && text !== null) el.textContent = text;
  if (className) el.className = className;
  return el;
}

function button(text, onClick, className) {
  const b = element("button", text, className);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

const sourcesOf = documents => (documents || []).map(d => d.source || d.id).join(", ");
const showError = err => { $("status").textContent = err.message; };

// The server's endpoints ("get /graph/labels", "post /jobs/{}/cancel"), from its OpenAPI document
// (public, like the page): a feature whose endpoint is not there is not offered.
let endpoints = new Set();
const offers = (method, path) => endpoints.has(`${method} ${path}`);

async function loadEndpoints() {
  const schema = await fetch("/openapi.json").then(r => r.ok ? r.json() : {paths: {}}).catch(() => ({paths: {}}));
  endpoints = new Set(Object.entries(schema.paths || {}).flatMap(([path, methods]) =>
    Object.keys(methods).map(method => `${method} ${path.replace(/\{[^}]*\}/g, "{}")}`)));
}

$("key-form").addEventListener("submit", event => {
  event.preventDefault();
  sessionStorage.setItem(KEY, $("key").value);
  $("key").value = "";
  $("key-form").hidden = true;
  start();  // what a keyed server refused at first is asked for again, with the key
});

async function refreshStatus() {
  try {
    const health = await api("/health");
    $("status").textContent = `${health.documents} document(s)` + (health.read_only ? " · read-only" : "");
    document.body.classList.toggle("read-only", Boolean(health.read_only));
  } catch (err) {
    showError(err);
  }
}

// ---------------------------------------------------------------- ask

// The query modes the server offers (its registry), each titled with its description.
async function loadModes() {
  const select = $("mode");
  select.replaceChildren();
  for (const mode of await api("/modes")) {
    const option = element("option", mode.name);
    option.value = mode.name;
    option.title = mode.description;
    select.append(option);
  }
  describeMode();
}

function describeMode() {
  const option = $("mode").selectedOptions[0];
  $("mode-help").textContent = option ? `${option.value}: ${option.title}` : "";
}
$("mode").addEventListener("change", describeMode);

let references = new Map();
let retrieval = null;

function citationLink(n) {
  if (!references.has(n)) return null;
  const link = element("a", String(n), "citation");
  link.href = `#source-${n}`;
  link.dataset.n = String(n);
  link.title = sourcesOf(references.get(n).documents);
  link.addEventListener("click", event => { event.preventDefault(); openPassage(references.get(n), link); });
  return link;
}

function showAnswer(text) {
  $("answer").replaceChildren(renderMarkdown(text, {citation: citationLink}));
}

function showReferences() {
  const list = $("references");
  list.replaceChildren();
  for (const [n, ref] of references) {
    const item = element("li");
    item.value = n;
    item.id = `source-${n}`;
    const link = element("a", sourcesOf(ref.documents) || "source", "reference");
    link.href = "#";
    link.addEventListener("click", event => { event.preventDefault(); openPassage(ref, link); });
    item.append(link, element("span", ` ${ref.excerpt || ""}`, "muted"));
    list.append(item);
  }
  $("references-title").hidden = !references.size;
}

// Where a passage sits: its document and title, pages and headings (the chunk's metadata). The
// headings are the paths spanned ("Guide", "Guide > Pilots"): a path another extends is left out.
function whereabouts(record, fallback) {
  const parts = [record.source || fallback];
  if (record.title && record.title !== parts[0]) parts.push(`“${record.title}”`);
  const pages = record.pages || [];
  if (pages.length) {
    const first = Math.min(...pages), last = Math.max(...pages);
    parts.push(first === last ? `page ${first}` : `pages ${first}–${last}`);
  }
  const headings = record.headings || [];
  const deepest = headings.filter(h => !headings.some(other => other !== h && other.startsWith(h)));
  if (deepest.length) parts.push(`§ ${deepest.join("; ")}`);
  return parts.filter(Boolean).join(" · ");
}

let passageOpener = null;

// A cited passage ({chunk_id} or {report_id}, with an excerpt and documents) opened in full.
async function openPassage(ref, opener) {
  passageOpener = opener || null;
  const label = ref.number ? `[${ref.number}] ` : "";
  const source = sourcesOf(ref.documents);
  $("passage-title").textContent = label + (source || (ref.report_id ? `community report ${ref.report_id}` : ""));
  $("passage-where").textContent = "";
  $("passage-text").textContent = ref.excerpt || "";
  $("passage").hidden = false;
  $("passage").focus();
  try {
    if (ref.chunk_id) {
      const chunk = await api(`/chunks/${encodeURIComponent(ref.chunk_id)}`);
      $("passage-text").textContent = chunk.content || ref.excerpt || "";
      $("passage-where").textContent = whereabouts(chunk, source);
    } else if (ref.report_id) {
      const report = await api(`/reports/${encodeURIComponent(ref.report_id)}`);
      $("passage-text").textContent = report.report_string || ref.excerpt || "";
    }
  } catch (err) {
    $("passage-text").textContent = `${ref.excerpt || ""}\n\n(${err.message})`;
  }
}

function closePassage() {
  $("passage").hidden = true;
  if (passageOpener) passageOpener.focus();
}
$("passage-close").addEventListener("click", closePassage);
$("passage").addEventListener("keydown", event => { if (event.key === "Escape") closePassage(); });

// Server-sent events from POST /query: "data" pieces of text, then "done", or an "error"; a
// "references" event (the cited sources, when a server streams them) links the citations.
async function streamAnswer(body, onText) {
  const response = await request("/query", {method: "POST", headers: {"Content-Type": "application/json"},
                                            body: JSON.stringify(body)});
  if (!response.ok) {
    const error = await response.json().catch(() => ({}));
    throw new APIError(response.status, error, response.statusText);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "", text = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      const payload = data.length ? JSON.parse(data.join("\n")) : {};
      if (event === "error") throw new Error(`${payload.error}: ${payload.message}`);
      if (event === "references") references = new Map((payload.references || []).map(r => [r.number, r]));
      if (event === "message" && payload.text !== undefined) {
        text += payload.text;
        onText(text);
      }
    }
  }
  return text;
}

// The answer re-rendered at most once a frame while pieces arrive.
function renderer() {
  let frame = 0, latest = "";
  const draw = () => { frame = 0; showAnswer(latest); };
  return {
    update(text) { latest = text; if (!frame) frame = requestAnimationFrame(draw); },
    flush(text) { if (frame) cancelAnimationFrame(frame); latest = text; draw(); },
  };
}

// The named workspaces (GET /workspaces, where the server has them) offered beside the default.
async function loadWorkspaces() {
  if (!offers("get", "/workspaces")) return;
  const names = (await api("/workspaces")).map(w => w.name);
  const chosen = sessionStorage.getItem(WORKSPACE) || "";
  if (chosen && !names.includes(chosen)) names.push(chosen);
  const select = $("workspace");
  select.replaceChildren(select.options[0], ...names.map(name => {
    const option = element("option", name);
    option.value = name;
    return option;
  }));
  select.value = chosen;
  $("workspace-choice").hidden = false;
}

// Another workspace is another index: what the page shows of the last one is cleared, then loaded.
$("workspace").addEventListener("change", () => {
  const name = $("workspace").value;
  if (name) sessionStorage.setItem(WORKSPACE, name); else sessionStorage.removeItem(WORKSPACE);
  references = new Map();
  retrieval = null;
  showReferences();
  $("answer").replaceChildren();
  $("why").hidden = true;
  $("passage").hidden = true;
  $("jobs").replaceChildren();
  documents.offset = 0;
  graph.clear();
  start();
});

$("ask-form").addEventListener("submit", async event => {
  event.preventDefault();
  const body = {question: $("question").value, mode: $("mode").value};
  $("ask").disabled = true;
  $("answer").setAttribute("aria-busy", "true");
  $("answer").replaceChildren(element("p", "…", "muted"));
  references = new Map();
  showReferences();
  $("passage").hidden = true;
  $("why").hidden = true;
  const why = postJSON("/retrieve", body).then(showWhy).catch(() => { retrieval = null; });
  try {
    // Streamed either way; a cited answer's references come as an event once its text has come.
    const cited = $("cite").checked ? {with_references: true} : {};
    const view = renderer();
    view.flush(await streamAnswer({...body, ...cited, stream: true}, text => view.update(text)));
    showReferences();
  } catch (err) {
    $("answer").replaceChildren(element("p", err.message, "error"));
  } finally {
    $("ask").disabled = false;
    $("answer").setAttribute("aria-busy", "false");
  }
  await why;
});

// ---------------------------------------------------------------- why this answer

function showWhy(found) {
  retrieval = found;
  const entities = found.entities || [], relations = found.relations || [], chunks = found.chunks || [];
  if (!entities.length && !relations.length && !chunks.length) return;
  $("why-entities").replaceChildren(...entities.map(e => {
    const item = element("li");
    item.append(button(e.name, () => { showEntityByName(e.name); $("graph").focus(); }, "chip"));
    item.firstChild.style.borderColor = typeColour(e.type);
    return item;
  }));
  $("why-relations").replaceChildren(...relations.map(r => {
    const item = element("li");
    item.append(element("strong", r.source), " — ", element("strong", r.target),
                element("span", r.description ? `: ${r.description}` : "", "muted"));
    return item;
  }));
  $("why-passages").replaceChildren(...chunks.map(c => {
    const item = element("li");
    const link = element("a", whereabouts(c, sourcesOf(c.documents)) || c.id, "reference");
    link.href = "#";
    link.addEventListener("click", e => {
      e.preventDefault();
      openPassage({chunk_id: c.id, documents: c.documents, excerpt: c.content}, link);
    });
    item.append(link);
    return item;
  }));
  $("why").hidden = false;
  highlightWhy();
}

function highlightWhy() {
  if (!retrieval) return Promise.resolve();
  return graph.highlight(retrieval.entities || [], retrieval.relations || []);
}

$("why-show").addEventListener("click", () => {
  highlightWhy().then(() => $("explore-section").scrollIntoView());
});

// ---------------------------------------------------------------- explore

let graph = null;

function showEntity(entity) {
  const info = $("entity-info");
  const swatch = element("span", "", "swatch");
  swatch.style.background = typeColour(entity.type);
  const type = element("p", "", "muted");
  type.append(swatch, ` ${entity.type || "UNKNOWN"}` + (entity.degree !== undefined ? ` · degree ${entity.degree}` : ""));
  info.replaceChildren(element("h3", entity.name), type);
  for (const line of String(entity.description || "").split("\n").flatMap(part => part.split(FIELD_SEPARATOR))) {
    if (line.trim()) info.append(element("p", line));
  }
  const sources = sourcesOf(entity.documents);
  if (sources) info.append(element("p", `from: ${sources}`, "muted"));
  info.append(button("expand", () => expand(entity.name), "expand"));
}

async function showEntityByName(name) {
  try {
    const entity = await api(`/graph/entity/${encodeURIComponent(name)}`);
    showEntity(entity);
    graph.pick(entity.name);
  } catch (err) {
    $("entity-info").replaceChildren(element("p", err.message, "error"));
  }
}

// A node's neighbours (GET /graph/neighbors): added around it, with the relations that reach them.
async function expand(name) {
  try {
    const found = await api(`/graph/neighbors/${encodeURIComponent(name)}?depth=1&limit=${EXPAND}`);
    const relations = found.map(n => n.via).filter(Boolean);
    if (graph.cy.getElementById(name).empty()) graph.add([{name, degree: found.length}]);
    graph.add(found, relations, name);
    await connect(found.map(n => n.name).concat([name]));
    await graph.layout(false);
    graph.pick(name);
  } catch (err) {
    $("entity-info").replaceChildren(element("p", err.message, "error"));
  }
}

// The relations among some drawn names (POST /graph/subgraph at depth 0) added as edges.
async function connect(names) {
  if (!names.length) return;
  const sub = await postJSON("/graph/subgraph", {names, depth: 0, max_nodes: names.length}).catch(() => null);
  if (sub) graph.add(sub.entities || [], sub.relations || []);
}

// The entity's neighbourhood drawn afresh (POST /graph/subgraph).
async function explore(name) {
  const sub = await postJSON("/graph/subgraph", {names: [name], depth: 1, max_nodes: 200});
  graph.clear();
  graph.add(sub.entities || [], sub.relations || []);
  await graph.layout(true);
  await showEntityByName(name);
}

// Names like the text typed: the label index (prefix and fuzzy) where the server has one, else
// the entities whose descriptions are nearest.
function suggestions(text) {
  return offers("get", "/graph/labels") ? api(`/graph/labels?q=${encodeURIComponent(text)}&limit=${SUGGEST}`)
                                        : api(`/graph/search?q=${encodeURIComponent(text)}&top_k=${SUGGEST}`);
}

let typing = 0;
$("entity").addEventListener("input", () => {
  clearTimeout(typing);
  const text = $("entity").value.trim();
  if (text.length < 2) return;
  typing = setTimeout(async () => {
    const found = await suggestions(text).catch(() => []);
    $("entity-suggestions").replaceChildren(...found.map(e => {
      const option = element("option");
      option.value = e.name;
      option.label = `${e.type || ""}${e.degree !== undefined ? ` · ${e.degree}` : ""}`;
      return option;
    }));
  }, 200);
});

$("explore-form").addEventListener("submit", async event => {
  event.preventDefault();
  const text = $("entity").value.trim();
  $("matches").replaceChildren();
  try {
    const entity = await api(`/graph/entity/${encodeURIComponent(text)}`);
    await explore(entity.name);
  } catch (err) {
    // Not a name: offer the names like it.
    const found = await suggestions(text).catch(() => []);
    $("matches").append(element("span", found.length ? "Did you mean: " : err.message, "muted"));
    for (const entity of found) $("matches").append(button(entity.name, () => explore(entity.name), "match"));
  }
});

$("graph-clear").addEventListener("click", () => {
  graph.clear();
  $("entity-info").replaceChildren(element("p", "Cleared.", "muted"));
});

// The node list beside the canvas: every drawn node, heaviest first, as buttons (the graph by keyboard).
function listNodes() {
  const nodes = graph.nodes().sort((a, b) => (b.why - a.why) || (b.degree - a.degree) || a.name.localeCompare(b.name));
  $("node-count").textContent = `(${nodes.length})`;
  $("node-list").replaceChildren(...nodes.map(n => {
    const item = element("li");
    const pick = button(n.name, () => showEntityByName(n.name), n.why ? "node why" : "node");
    pick.style.borderLeftColor = typeColour(n.type);
    pick.setAttribute("aria-pressed", String(n.selected));
    pick.title = `${n.type} · degree ${n.degree} (Enter to show; the expand button adds its neighbours)`;
    item.append(pick);
    return item;
  }));
  $("legend").replaceChildren(...graph.types().map(type => {
    const item = element("span", "", "legend-item");
    const swatch = element("span", "", "swatch");
    swatch.style.background = typeColour(type);
    item.append(swatch, type);
    return item;
  }));
}

// The most connected entities, drawn when the page opens (where the server lists them).
async function drawPopular() {
  if (!offers("get", "/graph/popular")) return;
  const popular = await api(`/graph/popular?limit=${POPULAR}`);
  if (!popular.length || graph.cy.nodes().length) return;
  graph.add(popular);
  await connect(popular.map(e => e.name));
  await graph.layout(true);
}

// ---------------------------------------------------------------- documents and jobs

const documents = {offset: 0, status: "", q: ""};

function describeDocumentStatus(doc) {
  if (!doc.status) return "indexed";
  let text = doc.status;
  if (doc.status === "processing" && doc.stage) {
    text += ` · ${doc.stage}`;
    if (doc.progress !== undefined && doc.progress !== null) {
      text += typeof doc.progress === "number" ? ` ${Math.round(doc.progress * 100)}%`
                                                : ` ${doc.progress.done}/${doc.progress.total}`;
    }
  }
  if (doc.failed_chunks) text += ` · ${doc.failed_chunks} failed chunk(s)`;
  return text;
}

async function refreshDocuments() {
  const params = new URLSearchParams({offset: documents.offset, limit: PAGE_SIZE});
  if (documents.status) params.set("status", documents.status);
  if (documents.q) params.set("q", documents.q);
  const response = await request(`/documents?${params}`);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new APIError(response.status, body, response.statusText);
  let rows = body, total = Number(response.headers.get("X-Total-Count"));
  if (!response.headers.has("X-Total-Count")) {  // a server that pages nothing: paged and filtered here
    rows = body.filter(d => (!documents.status || (d.status || "indexed") === documents.status)
                            && (!documents.q || String(d.source || "").toLowerCase().includes(documents.q.toLowerCase())));
    total = rows.length;
    rows = rows.slice(documents.offset, documents.offset + PAGE_SIZE);
  }
  const tbody = $("documents").querySelector("tbody");
  tbody.replaceChildren(...rows.map(documentRow));
  const first = total ? documents.offset + 1 : 0;
  $("doc-range").textContent = `${first}–${documents.offset + rows.length} of ${total}`;
  $("doc-prev").disabled = documents.offset === 0;
  $("doc-next").disabled = documents.offset + rows.length >= total;
  refreshStatus();
}

function documentRow(doc) {
  const row = element("tr");
  row.dataset.id = doc.id;
  row.dataset.status = doc.status || "indexed";
  const status = element("td", describeDocumentStatus(doc), `status status-${doc.status || "indexed"}`);
  if (doc.error) status.title = typeof doc.error === "string" ? doc.error : `${doc.error.error}: ${doc.error.message}`;
  const actions = element("td", undefined, "actions");
  if (offers("post", "/documents/reprocess") && ["failed", "cancelled"].includes(doc.status)) {
    actions.append(button("reprocess", () => reprocess([doc.id]), "reprocess"));
  }
  if (offers("delete", "/documents/{}")) actions.append(button("delete", async () => {
    if (!confirm(`Delete ${doc.source || doc.id} and what only it contributed?`)) return;
    try {
      watchJob(await api(`/documents/${encodeURIComponent(doc.id)}`, {method: "DELETE"}));
    } catch (err) {
      alert(err.message);
    }
  }, "delete"));
  const updated = doc.updated ? new Date(typeof doc.updated === "number" ? doc.updated * 1000 : doc.updated) : null;
  row.append(element("td", doc.source || ""), status, element("td", String(doc.chars ?? "")),
             element("td", String(doc.chunks ?? "")),
             element("td", updated && !isNaN(updated) ? updated.toLocaleString() : ""),
             element("td", doc.id, "mono"), actions);
  if (doc.error) row.cells[1].append(element("div", status.title, "error small"));
  return row;
}

async function reprocess(ids) {
  try {
    const job = await postJSON("/documents/reprocess", {ids});
    if (job && job.id) watchJob(job);
    refreshDocuments();
  } catch (err) {
    alert(err.message);
  }
}

$("documents-filter").addEventListener("submit", event => {
  event.preventDefault();
  documents.status = $("doc-status").value;
  documents.q = $("doc-search").value.trim();
  documents.offset = 0;
  refreshDocuments().catch(showError);
});
$("doc-prev").addEventListener("click", () => {
  documents.offset = Math.max(0, documents.offset - PAGE_SIZE);
  refreshDocuments().catch(showError);
});
$("doc-next").addEventListener("click", () => {
  documents.offset += PAGE_SIZE;
  refreshDocuments().catch(showError);
});

function describeJob(job) {
  let text = `${job.description}: ${job.status}`;
  if (job.progress && job.status === "running") {
    text += ` (${job.progress.stage} ${job.progress.done}/${job.progress.total})`;
  }
  if (job.error) text += ` (${job.error.error}: ${job.error.message})`;
  if (job.stats && job.stats.seconds !== undefined) text += ` in ${job.stats.seconds}s`;
  return text;
}

function watchJob(job) {
  const item = element("li", undefined, "job");
  const text = element("span", describeJob(job));
  item.dataset.id = job.id;
  item.append(text);
  const cancel = button("cancel", async () => {
    try {
      await api(`/jobs/${encodeURIComponent(job.id)}/cancel`, {method: "POST"});
    } catch (err) {
      alert(err.message);
    }
  }, "cancel");
  if (offers("post", "/jobs/{}/cancel")) item.append(" ", cancel);
  $("jobs").prepend(item);
  const poll = async () => {
    const now = await api(`/jobs/${encodeURIComponent(job.id)}`);
    text.textContent = describeJob(now);
    item.dataset.status = now.status;
    if (now.status === "queued" || now.status === "running") {
      setTimeout(poll, 400);
    } else {
      cancel.remove();
      refreshDocuments().catch(showError);
    }
  };
  poll().catch(showError);
}

async function upload(files) {
  if (!files.length) return;
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  try {
    watchJob(await api("/documents/files", {method: "POST", body: form}));
    $("file").value = "";
  } catch (err) {
    alert(err.message);
  }
}

$("upload-form").addEventListener("submit", event => {
  event.preventDefault();
  upload($("file").files);
});

// Files dropped anywhere on the documents section are uploaded at once.
for (const name of ["dragenter", "dragover"]) {
  $("documents-section").addEventListener(name, event => {
    event.preventDefault();
    $("upload-form").classList.add("dragging");
  });
}
$("documents-section").addEventListener("dragleave", event => {
  if (!$("documents-section").contains(event.relatedTarget)) $("upload-form").classList.remove("dragging");
});
$("documents-section").addEventListener("drop", event => {
  event.preventDefault();
  $("upload-form").classList.remove("dragging");
  upload(event.dataTransfer.files);
});

// The suffixes the server's readers know (GET /readers), offered by the file picker.
async function loadReadable() {
  $("upload-form").hidden = !offers("post", "/documents/files");
  if (!offers("get", "/readers")) return;
  const {suffixes} = await api("/readers");
  $("file").accept = suffixes.join(",");
  $("readable").textContent = `Read as documents: ${suffixes.join(" ")}; any other file as plain text.`;
}

// ---------------------------------------------------------------- start

// Jobs queued or running when the page opens are watched like the page's own.
async function watchRunningJobs() {
  for (const job of await api("/jobs")) {
    if ((job.status === "queued" || job.status === "running") && !$("jobs").querySelector(`[data-id="${CSS.escape(job.id)}"]`)) {
      watchJob(job);
    }
  }
}

// Everything the page shows on opening; the body is marked data-ready once all have answered.
async function start() {
  await loadEndpoints();
  const loading = [loadWorkspaces(), watchRunningJobs(), loadModes(), refreshDocuments(), loadReadable(),
                   drawPopular()];
  loading.forEach(promise => promise.catch(showError));
  await Promise.allSettled(loading);
  document.body.dataset.ready = "true";
}

graph = new GraphView($("graph"), {onPick: showEntityByName, onExpand: expand, onChange: listNodes});
start();
