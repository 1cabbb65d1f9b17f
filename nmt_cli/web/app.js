// The page of `nmt serve`: pick a model, translate lines through /v1/translate, and show the
// selected sentence's attention over words and its n-best alternatives. No external files.
"use strict";

// A source word counts as attended when it has the row's largest weight or at least this much.
const ATTENDED = 0.2;
const $ = (id) => document.getElementById(id);
const state = { models: [], keyRequired: false, results: [], selected: -1 };

function languageName(code) {
  try { return new Intl.DisplayNames(["en"], { type: "language" }).of(code) || code; }
  catch (e) { return code; }
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function currentModel() {
  return state.models.find((m) => m.id === $("model").value) || state.models[0];
}

function showModel() {
  const m = currentModel();
  if (!m) return;
  $("src-lang").textContent = languageName(m.source);
  $("tgt-lang").textContent = languageName(m.target);
  $("beam").value = m.beam_size;
  const facts = [`recipe ${m.recipe}`];
  if (m.step !== null) facts.push(`step ${m.step}`);
  if (m.valid_bleu !== null) facts.push(`val BLEU ${m.valid_bleu.toFixed(1)}`);
  facts.push(`beam ${m.beam_size}`);
  $("model-facts").textContent = facts.join(" · ");
}

async function loadModels() {
  const answer = await fetch("/v1/models").then((r) => r.json());
  state.models = answer.models;
  state.keyRequired = answer.api_key_required;
  $("key-box").hidden = !state.keyRequired;
  const select = $("model");
  select.textContent = "";
  for (const m of state.models) {
    const option = el("option", "", `${languageName(m.source)} → ${languageName(m.target)}` +
      (state.models.filter((x) => x.source === m.source && x.target === m.target).length > 1 ? ` (${m.id})` : ""));
    option.value = m.id;
    select.appendChild(option);
  }
  showModel();
}

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").classList.toggle("error", !!isError);
}

async function translate() {
  // Plain text: each line a paragraph (the server cuts it into sentences); HTML: one document.
  const html = $("format").value === "html";
  const lines = html ? [$("source").value] : $("source").value.split("\n");
  const todo = lines.map((line, i) => [line, i]).filter(([line]) => line.trim());
  if (!todo.length) { setStatus("Nothing to translate.", true); return; }
  const m = currentModel();
  const beam = Math.max(1, parseInt($("beam").value, 10) || m.beam_size);
  const nbest = Math.min(beam, Math.max(1, parseInt($("nbest").value, 10) || 1));
  const body = { model: m.id, src: todo.map(([line]) => line), beam_size: beam, nbest,
                 alignments: !html, attention: !html, format: html ? "html" : "text" };
  if (state.keyRequired) body.api_key = $("api-key").value;
  $("translate").disabled = true;
  setStatus("Translating…");
  const started = performance.now();
  try {
    const response = await fetch("/v1/translate", { method: "POST", headers: { "Content-Type": "application/json" },
                                                    body: JSON.stringify(body) });
    const answer = await response.json();
    if (!response.ok) { setStatus(answer.error || `HTTP ${response.status}`, true); return; }
    state.results = lines.map(() => null);
    todo.forEach(([, i], k) => { state.results[i] = { source: lines[i], ...answer.translations[k] }; });
    const count = answer.translations.reduce((n, t) => n + (t.segments || 1), 0);
    const cut = answer.translations.some((t) => t.cut) ? " · a sentence was cut at the model's limit" : "";
    $("timing").textContent = `${count} sentence${count > 1 ? "s" : ""} · ${Math.round(performance.now() - started)} ms${cut}`;
    setStatus("");
    renderSegments();
    select(state.results.findIndex((r) => r));
  } catch (e) {
    setStatus(`The server did not answer (${e.message}).`, true);
  } finally {
    $("translate").disabled = false;
  }
}

function renderSegments() {
  const list = $("segments");
  list.textContent = "";
  state.results.forEach((r, i) => {
    const item = el("li", r ? "segment" : "segment empty");
    if (r) {
      item.appendChild(el("span", "segment-text", r.text));
      item.appendChild(el("span", "segment-score", r.score.toFixed(2)));
      if (r.confidence !== null && r.confidence !== undefined) {
        const c = el("span", "segment-score segment-confidence", `${Math.round(100 * r.confidence)}%`);
        c.title = "confidence: the geometric mean of the tokens' probabilities";
        item.appendChild(c);
      }
      item.addEventListener("click", () => select(i));
    }
    item.dataset.index = i;
    list.appendChild(item);
  });
}

function attendedColumns(row) {
  const best = row.indexOf(Math.max(...row));
  return row.map((w, i) => i === best || w >= ATTENDED);
}

function highlight(j) {
  const r = state.results[state.selected];
  const table = $("heatmap");
  table.querySelectorAll(".active, .attended").forEach((n) => n.classList.remove("active", "attended"));
  if (j < 0 || !r) return;
  const marks = attendedColumns(r.attention.weights[j]);
  table.querySelectorAll(`[data-row="${j}"]`).forEach((n) => n.classList.add("active"));
  document.querySelectorAll(`.target-words [data-j="${j}"]`).forEach((n) => n.classList.add("active"));
  marks.forEach((on, i) => {
    if (!on) return;
    table.querySelectorAll(`td[data-row="${j}"][data-col="${i}"], th[data-col="${i}"]`)
      .forEach((n) => n.classList.add("attended"));
    document.querySelectorAll(`.source-words [data-i="${i}"]`).forEach((n) => n.classList.add("attended"));
  });
}

function wordSpans(container, words, key) {
  container.textContent = "";
  words.forEach((w, k) => {
    const span = el("span", "word", w);
    span.dataset[key] = k;
    if (key === "j") {
      span.addEventListener("mouseenter", () => highlight(k));
      span.addEventListener("mouseleave", () => highlight(-1));
    }
    container.appendChild(span);
    container.appendChild(document.createTextNode(" "));
  });
}

function select(i) {
  if (i < 0) return;
  state.selected = i;
  document.querySelectorAll(".segment").forEach((n) => n.classList.toggle("selected", Number(n.dataset.index) === i));
  const r = state.results[i];
  $("detail").hidden = false;
  $("prefix").value = r.text;
  const att = r.attention;
  const table = $("heatmap");
  table.textContent = "";
  wordSpans($("pair-source"), att ? att.source_words : [], "i");
  wordSpans($("pair-target"), att ? att.target_words : [], "j");
  if (att) {
    const head = el("tr");
    head.appendChild(el("th", "corner"));
    att.source_words.forEach((w, col) => {
      const th = el("th", "src-word", w);
      th.dataset.col = col;
      head.appendChild(th);
    });
    table.appendChild(head);
    att.weights.forEach((row, j) => {
      const tr = el("tr");
      const label = el("th", "tgt-word", att.target_words[j]);
      label.dataset.row = j;
      tr.appendChild(label);
      row.forEach((w, col) => {
        const td = el("td", "cell");
        td.dataset.row = j;
        td.dataset.col = col;
        td.dataset.w = w;
        td.style.setProperty("--w", Math.sqrt(w).toFixed(3));
        td.title = `${att.target_words[j]} ← ${att.source_words[col]}: ${w.toFixed(2)}`;
        tr.appendChild(td);
      });
      tr.addEventListener("mouseenter", () => highlight(j));
      tr.addEventListener("mouseleave", () => highlight(-1));
      table.appendChild(tr);
    });
  }
  const list = $("nbest-list");
  list.textContent = "";
  r.nbest.forEach((alt, k) => {
    const item = el("li", k === 0 ? "alt best" : "alt");
    item.appendChild(el("span", "alt-text", alt.text));
    item.appendChild(el("span", "alt-score", alt.score.toFixed(2)));
    list.appendChild(item);
  });
}

// Prefix completion: the translation's beginning as edited is kept, the rest translated again.
async function complete() {
  const i = state.selected;
  const r = state.results[i];
  if (!r) return;
  const m = currentModel();
  const beam = Math.max(1, parseInt($("beam").value, 10) || m.beam_size);
  const nbest = Math.min(beam, Math.max(1, parseInt($("nbest").value, 10) || 1));
  const body = { model: m.id, src: [r.source], prefix: [$("prefix").value], beam_size: beam,
                 nbest, alignments: true, attention: true };
  if (state.keyRequired) body.api_key = $("api-key").value;
  $("complete").disabled = true;
  try {
    const response = await fetch("/v1/translate", { method: "POST", headers: { "Content-Type": "application/json" },
                                                    body: JSON.stringify(body) });
    const answer = await response.json();
    if (!response.ok) { setStatus(answer.error || `HTTP ${response.status}`, true); return; }
    state.results[i] = { source: r.source, ...answer.translations[0] };
    setStatus("");
    renderSegments();
    select(i);
  } catch (e) {
    setStatus(`The server did not answer (${e.message}).`, true);
  } finally {
    $("complete").disabled = false;
  }
}

function updateChars() {
  const n = $("source").value.length;
  $("chars").textContent = n ? `${n} characters` : "";
}

document.addEventListener("DOMContentLoaded", () => {
  $("translate").addEventListener("click", translate);
  $("model").addEventListener("change", showModel);
  $("complete").addEventListener("click", complete);
  $("prefix").addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); complete(); }
  });
  $("source").addEventListener("input", updateChars);
  $("source").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); }
  });
  loadModels().catch((e) => setStatus(`Could not load the models (${e.message}).`, true));
});
