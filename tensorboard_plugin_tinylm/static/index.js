// The Attention tab. TensorBoard loads this module into the tab's iframe and calls render(). Routes are relative to
// the iframe's base, /data/plugin/tinylm_attention/: ./runs lists the runs, ./attention answers one run's weights.
// Plain JavaScript, no build step, nothing fetched from elsewhere.

// matplotlib's "Blues", as the Images tab's attn/pattern draws the weights (trainer/diagnostics.py pattern_figure).
const BLUES = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"];
const FUTURE = "rgba(255, 127, 14, 0.6)"; // tab:orange hatching, j > i
const DIAGONAL = "#d62728"; // tab:red, dashed, j = i
const TYPING_PAUSE_MS = 120; // a request when typing pauses this long, not at every key
const FIGURE_PX = 520; // the heat map's side for a long text; short texts get larger cells
const PANELS_AT_START = 4; // runs ticked when the tab opens

const state = { runs: [], panels: new Map(), text: "", timer: null };

export async function render() {
  const style = document.createElement("link");
  style.rel = "stylesheet";
  style.href = "./style.css";
  document.head.append(style);
  document.body.innerHTML = `
    <main class="tab">
      <section class="controls">
        <label class="text-label" for="text">Text <span class="count"></span></label>
        <textarea id="text" rows="2" spellcheck="false"></textarea>
        <p class="hint">Each ticked run reads the text through its checkpoint. Point at a row of a heat map (query i)
          to see its weights over the text and the lesson's steps; click to keep it.</p>
        <div class="runs" role="group" aria-label="Runs"></div>
      </section>
      <section class="panels"></section>
    </main>`;
  const box = document.getElementById("text");
  box.addEventListener("input", () => {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => setText(box.value), TYPING_PAUSE_MS);
  });
  const listing = await getJson("./runs");
  if (listing.error) {
    document.querySelector(".runs").append(message("error", listing.error));
    return;
  }
  state.runs = listing.runs;
  box.value = state.text = listing.text;
  countCharacters(listing.max_chars);
  box.addEventListener("input", () => countCharacters(listing.max_chars));
  drawRunList();
  state.runs.filter(readable).slice(0, PANELS_AT_START).forEach((run) => openPanel(run));
}

function readable(run) {
  return run.checkpoint && !run.problem;
}

function countCharacters(max) {
  const length = document.getElementById("text").value.length;
  const count = document.querySelector(".count");
  count.textContent = `${length.toLocaleString()} characters`;
  count.classList.toggle("over", length > max);
}

function setText(text) {
  state.text = text;
  for (const panel of state.panels.values()) request(panel);
}

function drawRunList() {
  const list = document.querySelector(".runs");
  list.replaceChildren();
  if (!state.runs.length) list.append(message("error", "No runs under the logdir: train one (python train.py)."));
  for (const run of state.runs) {
    const row = document.createElement("label");
    row.className = "run";
    row.dataset.run = run.name;
    const box = document.createElement("input");
    box.type = "checkbox";
    box.disabled = !readable(run);
    box.checked = state.panels.has(run.name);
    box.addEventListener("change", () => (box.checked ? openPanel(run) : closePanel(run.name)));
    const what = run.problem || (run.checkpoint ? `${run.checkpoint}, step ${run.step}` : "no checkpoint");
    row.append(box, span("name", run.name), span("label", run.label), span(run.problem ? "meta bad" : "meta", what));
    list.append(row);
  }
}

function openPanel(run) {
  if (state.panels.has(run.name)) return;
  const element = document.createElement("article");
  element.className = "panel";
  element.dataset.run = run.name;
  const panel = { run, element, layer: 0, data: null, query: null, pinned: false, cell: null, seq: 0, abort: null };
  state.panels.set(run.name, panel);
  document.querySelector(".panels").append(element);
  syncCheckbox(run.name, true);
  request(panel);
}

function closePanel(name) {
  const panel = state.panels.get(name);
  if (!panel) return;
  panel.abort?.abort();
  panel.element.remove();
  state.panels.delete(name);
  syncCheckbox(name, false);
}

function syncCheckbox(name, checked) {
  const box = [...document.querySelectorAll(".run")].find((row) => row.dataset.run === name)?.querySelector("input");
  if (box) box.checked = checked;
}

async function request(panel) {
  panel.abort?.abort();
  panel.abort = new AbortController();
  const seq = ++panel.seq;
  panel.element.classList.add("loading");
  const text = state.text;
  let data;
  try {
    const body = JSON.stringify({ run: panel.run.name, text, layer: panel.layer });
    data = await getJson("./attention", { method: "POST", body, signal: panel.abort.signal });
  } catch (error) {
    if (error.name === "AbortError") return;
    data = { error: `the server did not answer (${error.message})` };
  }
  if (seq !== panel.seq) return; // a newer text is on its way
  panel.element.classList.remove("loading");
  panel.element.dataset.text = text; // what it shows: the page tests wait on it
  panel.data = data;
  if (!data.error && (panel.query === null || panel.query >= data.tokens.length || !panel.pinned)) {
    panel.query = data.tokens.length - 1; // the last token, as attend.py
    panel.pinned = false;
  }
  drawPanel(panel);
}

async function getJson(url, options = {}) {
  const response = await fetch(url, { headers: { "Content-Type": "application/json" }, ...options });
  try {
    return await response.json();
  } catch {
    return { error: `${url}: HTTP ${response.status} without an answer the tab can read` };
  }
}

function drawPanel(panel) {
  const { run, data, element } = panel;
  element.replaceChildren();
  const header = document.createElement("header");
  const close = document.createElement("button");
  close.className = "close";
  close.title = "Remove this panel";
  close.setAttribute("aria-label", `Remove ${run.name}`);
  close.textContent = "×";
  close.addEventListener("click", () => closePanel(run.name));
  const title = document.createElement("div");
  title.className = "title";
  title.append(span("label", run.label || run.name), span("name", run.name));
  header.append(title);
  if (data && !data.error && data.n_layer > 1) header.append(layerSelect(panel));
  header.append(close);
  element.append(header);
  if (!data) return;
  if (data.error) {
    element.append(message("error", data.error));
    return;
  }
  const switches = [
    `${run.checkpoint}, step ${data.step}`,
    data.causal ? "masked (causal)" : "unmasked: reads the future",
    data.scale ? `scaled by 1/√${data.d_k}` : `unscaled, d_k ${data.d_k}`,
  ];
  if (data.softcap) switches.push(`capped at ${data.softcap}`);
  const oneHot = data.stats.max_weight.filter((weight) => weight > data.saturated).length;
  switches.push(`${oneHot} of ${data.tokens.length} rows one-hot (largest weight above ${data.saturated})`);
  element.append(message("meta", switches.join(" · ")));
  if (data.note) element.append(message("note", data.note));
  element.append(heatmap(panel), message("cell", ""), overText(panel), message("verdict", ""), message("stats", ""));
  element.append(stepsTable());
  showQuery(panel);
}

function layerSelect(panel) {
  const select = document.createElement("select");
  select.className = "layer";
  select.setAttribute("aria-label", "Layer");
  for (let layer = 0; layer < panel.data.n_layer; layer++) select.add(new Option(`layer ${layer}`, layer));
  select.value = panel.layer;
  select.addEventListener("change", () => {
    panel.layer = Number(select.value);
    request(panel);
  });
  return select;
}

// The heat map: queries down, keys across, token labels on both axes, the future hatched and the diagonal dashed.
function heatmap(panel) {
  const { tokens } = panel.data;
  const size = tokens.length;
  const cell = Math.max(8, Math.min(28, Math.floor(FIGURE_PX / size)));
  const font = Math.max(8, Math.min(13, cell - 2));
  const upright = tokens.every((token) => [...token].length === 1);
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = `${font}px monospace`;
  const labelWidth = Math.ceil(Math.max(...tokens.map((token) => measure.measureText(token).width))) + 6;
  const left = labelWidth;
  const top = upright ? font + 6 : labelWidth;
  const canvas = document.createElement("canvas");
  canvas.className = "heatmap";
  const width = left + size * cell + 1;
  const height = top + size * cell + 1;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  Object.assign(canvas.dataset, { left, top, cell, size });
  const context = canvas.getContext("2d");
  context.scale(ratio, ratio);
  panel.draw = () => drawHeatmap(context, panel, { size, cell, font, upright, left, top, width, height });
  const at = (event) => {
    const bounds = canvas.getBoundingClientRect();
    const i = Math.floor((event.clientY - bounds.top - top) / cell);
    const j = Math.floor((event.clientX - bounds.left - left) / cell);
    return { i: i >= 0 && i < size ? i : null, j: j >= 0 && j < size ? j : null };
  };
  canvas.addEventListener("mousemove", (event) => {
    const { i, j } = at(event);
    if (i === null) return;
    panel.cell = j === null ? null : { i, j };
    if (!panel.pinned) panel.query = i;
    showQuery(panel);
  });
  canvas.addEventListener("click", (event) => {
    const { i } = at(event);
    if (i === null) return;
    panel.pinned = !(panel.pinned && panel.query === i);
    panel.query = i;
    showQuery(panel);
  });
  canvas.addEventListener("mouseleave", () => {
    panel.cell = null;
    showQuery(panel);
  });
  const figure = document.createElement("div");
  figure.className = "figure";
  figure.append(canvas);
  return figure;
}

function drawHeatmap(context, panel, layout) {
  const { tokens, weights } = panel.data;
  const { size, cell, font, upright, left, top, width, height } = layout;
  context.clearRect(0, 0, width, height);
  for (let i = 0; i < size; i++) {
    for (let j = 0; j < size; j++) {
      context.fillStyle = blues(weights[i][j]);
      context.fillRect(left + j * cell, top + i * cell, cell, cell);
    }
  }
  // The future, j > i: the staircase above the diagonal, hatched as in the Images tab.
  context.save();
  context.beginPath();
  context.moveTo(left + cell, top);
  for (let i = 0; i < size; i++) {
    context.lineTo(left + (i + 1) * cell, top + i * cell);
    context.lineTo(left + (i + 1) * cell, top + (i + 1) * cell);
  }
  context.lineTo(left + size * cell, top);
  context.closePath();
  context.clip();
  context.strokeStyle = FUTURE;
  context.lineWidth = 1;
  context.beginPath();
  for (let offset = -size * cell; offset < size * cell; offset += 6) {
    context.moveTo(left + offset, top + size * cell);
    context.lineTo(left + offset + size * cell, top);
  }
  context.stroke();
  context.restore();
  context.save();
  context.strokeStyle = DIAGONAL;
  context.setLineDash([4, 3]);
  context.beginPath();
  context.moveTo(left, top);
  context.lineTo(left + size * cell, top + size * cell);
  context.stroke();
  context.restore();
  // Labels: keys across the top, queries down the left, whitespace drawn (␣ ↵).
  context.fillStyle = "#333";
  context.font = `${font}px monospace`;
  context.textBaseline = "middle";
  for (let k = 0; k < size; k++) {
    const middle = k * cell + cell / 2;
    context.textAlign = "right";
    context.fillStyle = k === panel.query ? "#000" : "#555";
    context.fillText(tokens[k], left - 4, top + middle);
    context.save();
    if (upright) {
      context.textAlign = "center";
      context.fillText(tokens[k], left + middle, top / 2);
    } else {
      context.translate(left + middle, top - 4);
      context.rotate(-Math.PI / 2);
      context.textAlign = "left";
      context.fillText(tokens[k], 0, 0);
    }
    context.restore();
  }
  if (panel.query !== null) {
    context.strokeStyle = "#000";
    context.lineWidth = 2;
    context.strokeRect(left + 1, top + panel.query * cell + 1, size * cell - 2, cell - 2);
  }
  if (panel.cell) {
    context.strokeStyle = "#e377c2";
    context.lineWidth = 2;
    context.strokeRect(left + panel.cell.j * cell, top + panel.cell.i * cell, cell, cell);
  }
}

function overText(panel) {
  const text = document.createElement("div");
  text.className = "over-text";
  text.setAttribute("aria-label", "The query's weights over the text");
  panel.data.tokens.forEach((token, j) => {
    const piece = span("token", token);
    piece.dataset.key = j;
    text.append(piece);
    if (token.endsWith("↵")) text.append(document.createElement("br"));
  });
  return text;
}

function stepsTable() {
  const part = document.createElement("div");
  part.className = "steps-part";
  const box = document.createElement("div");
  box.className = "steps-box"; // a long text's 64 keys scroll here, the heat map stays in view
  const table = document.createElement("table");
  table.className = "steps";
  box.append(table);
  part.append(message("steps-caption", ""), box);
  return part;
}

// Everything that follows query i: the heat map's outline, the row over the text, the table of steps, the words.
function showQuery(panel) {
  const { data, element, query: i } = panel;
  if (!data || data.error || i === null) return;
  panel.draw();
  const row = data.weights[i];
  const future = (j) => j > i;
  element.querySelectorAll(".over-text .token").forEach((piece) => {
    const j = Number(piece.dataset.key);
    piece.style.background = blues(row[j]);
    piece.style.color = row[j] > 0.5 ? "#fff" : "#111";
    piece.classList.toggle("query", j === i);
    piece.classList.toggle("future", future(j) && !data.causal);
    piece.title = `a[${i},${j}] = ${row[j].toFixed(3)}`;
  });
  const cell = element.querySelector("p.cell");
  if (panel.cell) {
    const { i: ci, j: cj } = panel.cell;
    const weight = data.weights[ci][cj];
    cell.textContent = `a[${ci},${cj}] = ${weight.toFixed(3)}: query ${quote(data.tokens[ci])} reading key ${quote(
      data.tokens[cj],
    )}${cj > ci ? " (j > i: the future)" : ""}`;
  } else {
    cell.textContent = panel.pinned ? `query ${i} kept: click it again to follow the pointer` : "";
  }
  const verdict = element.querySelector("p.verdict");
  verdict.textContent = data.verdicts[i];
  verdict.hidden = !data.verdicts[i];
  const top = row.indexOf(Math.max(...row));
  const stats = data.stats;
  element.querySelector("p.stats").textContent =
    `row i=${i}: entropy ${stats.entropy[i].toFixed(3)} nats · largest weight ${stats.max_weight[i].toFixed(3)} ` +
    `(j=${top} ${quote(data.tokens[top])}) · future mass ${stats.future_mass[i].toFixed(3)}`;
  fillSteps(element.querySelector(".steps-part"), data, i);
}

function fillSteps(box, data, i) {
  const scaled = data.scale ? `÷ √${data.d_k}` : "unscaled";
  const division = data.scale
    ? `divide by √d<sub>k</sub> = √${data.d_k} = ${Math.sqrt(data.d_k).toFixed(3)}`
    : "<b>unscaled</b>: this run feeds the raw scores to the softmax";
  const cap = data.softcap ? `, then cap at ${data.softcap}·tanh(s/${data.softcap})` : "";
  box.querySelector(".steps-caption").innerHTML =
    `The lesson's steps for query i=${i} ${escape(quote(data.tokens[i]))}: ` +
    `<b>1</b> score q<sub>i</sub>·k<sub>j</sub> · <b>2</b> ${division}${cap} · <b>3</b> softmax: a<sub>ij</sub> · ` +
    `<b>4</b> y<sub>i</sub> = Σ<sub>j</sub> a<sub>ij</sub> v<sub>j</sub>: the values mixed in these proportions`;
  const table = box.querySelector("table.steps");
  const head = document.createElement("thead");
  head.innerHTML = `<tr><th>j</th><th>token</th><th>q<sub>i</sub>·k<sub>j</sub></th><th>${
    data.softcap ? "capped" : scaled
  }</th><th>a<sub>ij</sub></th><th></th></tr>`;
  const body = document.createElement("tbody");
  const row = data.weights[i];
  const largest = row.indexOf(Math.max(...row));
  const keys = data.causal ? i + 1 : data.tokens.length;
  for (let j = 0; j < keys; j++) {
    const line = document.createElement("tr");
    line.dataset.key = j;
    if (j === largest) line.className = "largest";
    const bar = `<span class="bar" style="width:${(row[j] * 60).toFixed(1)}px;background:${blues(0.35 + row[j] * 0.65)}"></span>`;
    line.innerHTML =
      `<td class="j">${j}</td><td class="token">${escape(data.tokens[j])}</td>` +
      `<td class="raw">${number(data.raw[i][j])}</td><td class="fed">${number(data.fed[i][j])}</td>` +
      `<td class="weight">${row[j].toFixed(3)}</td><td class="mark">${bar}${
        j > i ? '<span class="future">future</span>' : ""
      }</td>`;
    body.append(line);
  }
  if (data.causal && keys < data.tokens.length) {
    const rest = document.createElement("tr");
    rest.className = "masked";
    rest.innerHTML = `<td colspan="6">j = ${i + 1} to ${data.tokens.length - 1}: masked (j > i), weight exactly 0</td>`;
    body.append(rest);
  }
  table.replaceChildren(head, body);
  const focus = body.querySelector("tr.largest"); // in view without scrolling: the key the query reads most
  const scroller = box.querySelector(".steps-box");
  scroller.scrollTop = Math.max(0, focus.offsetTop - scroller.clientHeight / 2);
}

function blues(weight) {
  const position = Math.min(Math.max(weight, 0), 1) * (BLUES.length - 1);
  const low = Math.floor(position);
  const high = Math.min(low + 1, BLUES.length - 1);
  const mix = position - low;
  const [a, b] = [BLUES[low], BLUES[high]].map((hex) => [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16)));
  return `rgb(${a.map((value, k) => Math.round(value + (b[k] - value) * mix)).join(",")})`;
}

function number(value) {
  return value === null ? "−∞" : value.toFixed(3);
}

function quote(token) {
  return `'${token}'`;
}

function escape(text) {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

function span(className, text) {
  const element = document.createElement("span");
  element.className = className;
  element.textContent = text;
  return element;
}

function message(className, text) {
  const element = document.createElement("p");
  element.className = className;
  element.textContent = text;
  return element;
}
