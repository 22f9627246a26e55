// The page: ask (answers with clickable citations), explore the graph, manage documents.
// Everything goes through the server's JSON API; text from the index is only ever set as
// textContent, never parsed as HTML. A server with an API key answers 401: the page then asks
// for the key, keeps it for this tab (sessionStorage) and sends it as X-API-Key itself (the
// server takes no Basic auth, which a browser would resend to it on its own).
"use strict";

const $ = id => document.getElementById(id);
const KEY = "graphrag-api-key";

// A header carries bytes: the key's UTF-8 bytes, one character each.
const keyHeaders = () => {
  const key = sessionStorage.getItem(KEY);
  return key ? {"X-API-Key": String.fromCharCode(...new TextEncoder().encode(key))} : {};
};

async function request(path, options = {}) {
  const response = await fetch(path, {...options, headers: {...(options.headers || {}), ...keyHeaders()}});
  if (response.status === 401) $("key-form").hidden = false;
  return response;
}

async function api(path, options = {}) {
  const response = await request(path, options);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Error(`${body.error || response.status}: ${body.message || response.statusText}`);
  }
  return body;
}

$("key-form").addEventListener("submit", event => {
  event.preventDefault();
  sessionStorage.setItem(KEY, $("key").value);
  $("key").value = "";
  $("key-form").hidden = true;
  // A keyed server refused the first load: what it refused is asked for again with the key.
  if (!$("mode").options.length) loadModes().catch(err => { $("status").textContent = err.message; });
  refreshDocuments().catch(err => { $("status").textContent = err.message; });
});

function postJSON(path, data) {
  return api(path, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(data)});
}

function element(tag, text, className) {
  const el = document.createElement(tag);
  if (text !== undefined) el.textContent = text;
  if (className) el.className = className;
  return el;
}

async function refreshStatus() {
  try {
    const health = await api("/health");
    $("status").textContent = `${health.documents} document(s)` + (health.read_only ? " · read-only" : "");
  } catch (err) {
    $("status").textContent = err.message;
  }
}

// ---------------------------------------------------------------- ask

// The query modes the server offers (its registry), each titled with its description.
async function loadModes() {
  for (const mode of await api("/modes")) {
    const option = element("option", mode.name);
    option.value = mode.name;
    option.title = mode.description;
    $("mode").append(option);
  }
}

let references = new Map();

function showAnswer(text) {
  const answer = $("answer");
  answer.replaceChildren();
  let last = 0;
  for (const match of text.matchAll(/\[(\d+)\]/g)) {
    answer.append(text.slice(last, match.index));
    const n = Number(match[1]);
    if (references.has(n)) {
      const link = element("a", `[${n}]`, "citation");
      link.href = "#";
      link.dataset.n = String(n);
      link.addEventListener("click", event => { event.preventDefault(); openPassage(n); });
      answer.append(link);
    } else {
      answer.append(match[0]);
    }
    last = match.index + match[0].length;
  }
  answer.append(text.slice(last));
}

function showReferences() {
  const list = $("references");
  list.replaceChildren();
  for (const [n, ref] of references) {
    const item = element("li");
    item.value = n;
    const link = element("a", (ref.documents || []).map(d => d.source || d.id).join(", ") || "source", "reference");
    link.href = "#";
    link.addEventListener("click", event => { event.preventDefault(); openPassage(n); });
    item.append(link, element("span", ` ${ref.excerpt || ""}`, "muted"));
    list.append(item);
  }
}

async function openPassage(n) {
  const ref = references.get(n);
  const where = (ref.documents || []).map(d => d.source || d.id).join(", ");
  $("passage-title").textContent = `[${n}] ${where}`;
  $("passage-text").textContent = ref.excerpt || "";
  $("passage").hidden = false;
  try {
    const record = ref.chunk_id ? await api(`/chunks/${encodeURIComponent(ref.chunk_id)}`)
                                : await api(`/reports/${encodeURIComponent(ref.report_id)}`);
    $("passage-text").textContent = record.content || record.report_string || ref.excerpt || "";
  } catch (err) {
    $("passage-text").textContent = `${ref.excerpt || ""}\n\n(${err.message})`;
  }
}

$("passage-close").addEventListener("click", () => { $("passage").hidden = true; });

$("ask-form").addEventListener("submit", async event => {
  event.preventDefault();
  $("ask").disabled = true;
  $("answer").textContent = "…";
  $("references").replaceChildren();
  $("passage").hidden = true;
  try {
    const result = await postJSON("/query", {question: $("question").value, mode: $("mode").value,
                                             with_references: true});
    references = new Map((result.references || []).map(r => [r.number, r]));
    showAnswer(result.answer);
    showReferences();
  } catch (err) {
    $("answer").textContent = err.message;
  } finally {
    $("ask").disabled = false;
  }
});

// ---------------------------------------------------------------- explore

// The neighbourhood is drawn by the same renderer as `graphrag export --format html`
// (GET /graph/view); clicking a node adds it to the seeds and draws again.
let seeds = [];

function showEntity(entity) {
  const info = $("entity-info");
  info.replaceChildren(element("h3", entity.name), element("p", entity.type, "muted"),
                       element("p", entity.description || ""));
  const sources = (entity.documents || []).map(d => d.source || d.id).join(", ");
  if (sources) info.append(element("p", `from: ${sources}`, "muted"));
}

// The drawing is fetched (with the key) and shown as the frame's document; its only script is
// the renderer's own, which the server's Content-Security-Policy allows by its hash.
async function drawNeighbourhood() {
  const query = seeds.map(s => `names=${encodeURIComponent(s)}`).join("&");
  const response = await request(`/graph/view?${query}&depth=1&max_nodes=60`);
  if (!response.ok) throw new Error(`${response.status}: ${response.statusText}`);
  $("graph").srcdoc = await response.text();
}

$("graph").addEventListener("load", () => {
  const drawing = $("graph").contentDocument;
  if (!drawing) return;
  for (const node of drawing.querySelectorAll(".node")) {
    node.style.cursor = "pointer";
    node.addEventListener("click", () => expand(node.dataset.name));
  }
});

async function expand(name) {
  try {
    const entity = await api(`/graph/entity/${encodeURIComponent(name)}`);
    if (!seeds.includes(entity.name)) seeds.push(entity.name);
    showEntity(entity);
    await drawNeighbourhood();
  } catch (err) {
    $("entity-info").textContent = err.message;
  }
}

$("explore-form").addEventListener("submit", async event => {
  event.preventDefault();
  const text = $("entity").value.trim();
  $("matches").replaceChildren();
  seeds = [];
  try {
    await api(`/graph/entity/${encodeURIComponent(text)}`);
    await expand(text);
  } catch (err) {
    // Not a name: offer the entities whose descriptions are nearest the text.
    const found = await api(`/graph/search?q=${encodeURIComponent(text)}&top_k=8`).catch(() => []);
    $("matches").append(element("span", found.length ? "Did you mean: " : err.message, "muted"));
    for (const entity of found) {
      const button = element("button", entity.name, "match");
      button.type = "button";
      button.addEventListener("click", () => { seeds = []; expand(entity.name); });
      $("matches").append(button);
    }
  }
});

// ---------------------------------------------------------------- documents and jobs

async function refreshDocuments() {
  const documents = await api("/documents");
  const body = $("documents").querySelector("tbody");
  body.replaceChildren();
  for (const doc of documents) {
    const row = element("tr");
    row.dataset.id = doc.id;
    const remove = element("button", "delete", "delete");
    remove.type = "button";
    remove.addEventListener("click", async () => {
      if (!confirm(`Delete ${doc.source || doc.id} and what only it contributed?`)) return;
      try {
        watchJob(await api(`/documents/${encodeURIComponent(doc.id)}`, {method: "DELETE"}));
      } catch (err) {
        alert(err.message);
      }
    });
    const cell = element("td");
    cell.append(remove);
    row.append(element("td", doc.source || ""), element("td", doc.id, "mono"), element("td", String(doc.chars)),
               element("td", String(doc.chunks)), cell);
    body.append(row);
  }
  refreshStatus();
}

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
  const item = element("li", describeJob(job), "job");
  item.dataset.id = job.id;
  $("jobs").prepend(item);
  const poll = async () => {
    const now = await api(`/jobs/${job.id}`);
    item.textContent = describeJob(now);
    item.dataset.status = now.status;
    if (now.status === "queued" || now.status === "running") {
      setTimeout(poll, 400);
    } else {
      refreshDocuments();
    }
  };
  poll();
}

$("upload-form").addEventListener("submit", async event => {
  event.preventDefault();
  const files = $("file").files;
  if (!files.length) return;
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  try {
    watchJob(await api("/documents/files", {method: "POST", body: form}));
    $("file").value = "";
  } catch (err) {
    alert(err.message);
  }
});

loadModes().catch(err => { $("status").textContent = err.message; });
refreshDocuments().catch(err => { $("status").textContent = err.message; });
