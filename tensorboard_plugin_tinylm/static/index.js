// The Attention tab. TensorBoard loads this module into the tab's iframe and calls render(). Routes are relative to
// the iframe's base, /data/plugin/tinylm_attention/: ./runs lists the runs, ./attention answers one run's weights,
// losses and predictions at one step, ./generate continues the text (the contract: /work/notes/viewer-api.md).
// Plain JavaScript, no build step, nothing fetched from elsewhere.

// matplotlib's "Blues", as the Images tab's attn/pattern draws the weights (trainer/diagnostics.py pattern_figure).
const BLUES = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"];
// matplotlib's "YlOrRd" for a token's loss in nats: pale where the model expected the next token, dark red where it
// was surprised; a different map from the weights' so that the two are never read for each other.
const YLORRD = ["#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026", "#800026"];
const FUTURE = "rgba(255, 127, 14, 0.6)"; // tab:orange hatching, j > i
const DIAGONAL = "#d62728"; // tab:red, dashed, j = i
const TYPING_PAUSE_MS = 120; // a request when typing (or dragging the step selector) pauses this long
const FIGURE_PX = 520; // the heat map's side for a long text; short texts get larger cells
const PANELS_AT_START = 4; // runs ticked when the tab opens
const PROMPT_SHOWN = 60; // characters of the prompt shown before a continuation
const GENERATE_TOKENS = 100; // the continuation's length when the tab opens
const SEED = 1337; // sample.py's default
const TEMPERATURE_TITLE =
  "Divides the logits before the softmax: below 1 sharpens the shown prediction, above 1 flattens it; " +
  "the continuation samples at it";

const state = { runs: [], panels: new Map(), text: "", timer: null, lossTop: null, lossTick: null, maxGenerate: null };

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
        <div class="settings">
          <label>Temperature <input id="temperature" value="1" size="5" inputmode="decimal" spellcheck="false"
            title="${TEMPERATURE_TITLE}"></label>
          <span class="continue">
            <button id="generate" type="button">Continue the text</button>
            by <input id="tokens" value="${GENERATE_TOKENS}" size="4" inputmode="numeric" aria-label="Tokens to write">
            tokens, seed <input id="seed" value="${SEED}" size="6" inputmode="numeric" aria-label="Seed">
          </span>
        </div>
        <p class="hint">Each ticked run reads the text through its checkpoint. Point at a row of a heat map (query i),
          or at a token of a loss strip, to see what that query reads and predicts; click to keep it.</p>
        <div class="runs" role="group" aria-label="Runs"></div>
      </section>
      <section class="panels"></section>
    </main>`;
  const box = document.getElementById("text");
  box.addEventListener("input", () => soon(() => setText(box.value)));
  const temperature = document.getElementById("temperature");
  temperature.addEventListener("input", () => soon(requestAll));
  document.getElementById("generate").addEventListener("click", () => generateAll());
  for (const id of ["tokens", "seed"]) {
    document.getElementById(id).addEventListener("keydown", (event) => event.key === "Enter" && generateAll());
  }
  const listing = await getJson("./runs");
  if (listing.error) {
    document.querySelector(".runs").append(message("error", listing.error));
    return;
  }
  state.runs = listing.runs;
  state.maxGenerate = listing.max_generate ?? null;
  if (state.maxGenerate) document.getElementById("tokens").title = `1 to ${state.maxGenerate}`;
  if (listing.temperatures) temperature.title += ` (${listing.temperatures[0]} to ${listing.temperatures[1]})`;
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
  count.textContent = `${length.toLocaleString()} character${length === 1 ? "" : "s"}`;
  count.classList.toggle("over", length > max);
}

// A request for every panel once typing pauses; the panels show at once that a new answer is coming.
function soon(then) {
  clearTimeout(state.timer);
  state.timer = setTimeout(then, TYPING_PAUSE_MS);
  for (const panel of state.panels.values()) panel.element.classList.add("loading");
}

function setText(text) {
  state.text = text;
  requestAll();
}

function requestAll() {
  for (const panel of state.panels.values()) request(panel);
}

// A setting typed in a box: the number it reads as, else the text itself, which the server names in its one line
// ("temperature='abc': ..."), so that the page and the terminal word a bad value alike.
function typed(id) {
  const value = document.getElementById(id).value.trim();
  return /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value) ? Number(value) : value;
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
    if (!run.problem && run.note) row.append(span("meta note", run.note));
    list.append(row);
  }
}

function openPanel(run) {
  if (state.panels.has(run.name)) return;
  const element = document.createElement("article");
  element.className = "panel";
  element.dataset.run = run.name;
  const panel = { run, element, layer: 0, step: null, data: null, query: null, pinned: false, cell: null };
  Object.assign(panel, { seq: 0, abort: null, steps: run.steps || [], nLayer: 1, stepTimer: null });
  Object.assign(panel, { generation: null, generationSeq: 0, generationAbort: null, folded: new Set() });
  state.panels.set(run.name, panel);
  document.querySelector(".panels").append(element);
  syncCheckbox(run.name, true);
  request(panel);
}

function closePanel(name) {
  const panel = state.panels.get(name);
  if (!panel) return;
  panel.abort?.abort();
  panel.generationAbort?.abort();
  panel.element.remove();
  state.panels.delete(name);
  syncCheckbox(name, false);
  rescale();
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
    const { layer, step } = panel;
    const body = JSON.stringify({ run: panel.run.name, text, layer, step, temperature: typed("temperature") });
    data = await getJson("./attention", { method: "POST", body, signal: panel.abort.signal });
  } catch (error) {
    if (error.name === "AbortError") return;
    data = { error: `the server did not answer (${error.message})` };
  }
  if (seq !== panel.seq) return; // a newer text is on its way
  panel.element.classList.remove("loading");
  panel.element.dataset.text = text; // what it shows: the page tests wait on it
  panel.data = data;
  if (!data.error) {
    panel.element.dataset.step = data.step;
    panel.steps = data.steps || panel.steps;
    panel.nLayer = data.n_layer;
    if (panel.query === null || panel.query >= data.tokens.length || !panel.pinned) {
      panel.query = data.tokens.length - 1; // the last token, as attend.py
      panel.pinned = false;
    }
  }
  if (!rescale()) drawPanel(panel); // a new colour scale redraws every panel, this one included
}

async function getJson(url, options = {}) {
  const response = await fetch(url, { headers: { "Content-Type": "application/json" }, ...options });
  try {
    return await response.json();
  } catch {
    return { error: `${url}: HTTP ${response.status} without an answer the tab can read` };
  }
}

// One colour scale for the losses of every panel: 0 to twice the largest ln(vocab) among them (a uniform guess sits
// in the middle), rounded up to the key's ticks. Returns whether it changed, and then redraws every panel.
function rescale() {
  const uniform = [...state.panels.values()].map((p) => p.data?.uniform_loss).filter((u) => typeof u === "number");
  const rough = uniform.length ? Math.max(1, 2 * Math.max(...uniform)) : null;
  const every = rough && Math.ceil(rough / 6); // at most 6 ticks on the key
  const top = rough && Math.ceil(rough / every) * every;
  if (top === state.lossTop) return false;
  state.lossTop = top;
  state.lossTick = every;
  for (const panel of state.panels.values()) drawPanel(panel);
  return true;
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
  if (panel.nLayer > 1) header.append(layerSelect(panel));
  header.append(close);
  element.append(header);
  if (panel.steps.length) element.append(stepSelector(panel)); // kept on a bad answer: another step can be chosen
  if (!data) return;
  if (data.error) {
    element.append(message("error", data.error));
    return;
  }
  const switches = [
    `${data.file ?? run.checkpoint}, step ${data.step}`,
    data.causal ? "masked (causal)" : "unmasked: reads the future",
    data.scale ? `scaled by 1/√${data.d_k}` : `unscaled, d_k ${data.d_k}`,
  ];
  if (data.softcap) switches.push(`capped at ${data.softcap}`);
  const oneHot = data.stats.max_weight.filter((weight) => weight > data.saturated).length;
  switches.push(`${oneHot} of ${data.tokens.length} rows one-hot (largest weight above ${data.saturated})`);
  element.append(message("meta", switches.join(" · ")));
  if (data.run_note) element.append(message("note", data.run_note)); // "best.pt: damaged (...); reading last.pt"
  if (data.note) element.append(message("note", data.note));
  const looks = [heatmap(panel), message("cell", ""), overText(panel), message("verdict", ""), message("stats", "")];
  element.append(fold(panel, "attention", "Attention: where each query looks (the heat map, query i down)", looks));
  if (data.strips) element.append(lossStrips(panel), predictionBox(panel), counterfactualLine());
  element.append(generationBox(panel), fold(panel, "steps", "", [stepsTable()]));
  showQuery(panel);
}

// A part of the panel a person can fold away (to compare many runs' strips and predictions); it stays folded
// through the panel's redraws.
function fold(panel, name, summary, parts) {
  const details = document.createElement("details");
  details.className = `fold ${name}`;
  details.open = !panel.folded.has(name);
  const title = document.createElement("summary");
  title.textContent = summary;
  details.append(title, ...parts);
  details.addEventListener("toggle", () => (details.open ? panel.folded.delete(name) : panel.folded.add(name)));
  return details;
}

function layerSelect(panel) {
  const select = document.createElement("select");
  select.className = "layer";
  select.setAttribute("aria-label", "Layer");
  for (let layer = 0; layer < panel.nLayer; layer++) select.add(new Option(`layer ${layer}`, layer));
  select.value = panel.layer;
  select.addEventListener("change", () => {
    panel.layer = Number(select.value);
    request(panel);
  });
  return select;
}

// The step selector: a slider over the checkpoints the run kept, one position per step (steps/step-N.pt, best.pt,
// last.pt; files of one step hold the same weights). Moving it redraws the whole panel at that step: the attention,
// the strips, the prediction.
function stepSelector(panel) {
  const steps = [];
  for (const entry of panel.steps) {
    const same = steps.find((known) => known.step === entry.step);
    if (same) same.files.push(entry.file);
    else steps.push({ step: entry.step, files: [entry.file] });
  }
  const row = document.createElement("div");
  row.className = "step-row";
  const slider = document.createElement("input");
  slider.type = "range";
  slider.className = "step";
  slider.min = 0;
  slider.max = steps.length - 1;
  slider.setAttribute("aria-label", "Checkpoint step");
  const shown = panel.data && !panel.data.error ? panel.data.step : null;
  const wanted = panel.step ?? shown ?? panel.run.step;
  slider.value = Math.max(0, steps.findIndex((entry) => entry.step === wanted));
  slider.disabled = steps.length < 2;
  const readout = span("step-readout", "");
  const describe = () => {
    const entry = steps[Number(slider.value)];
    const position = `${Number(slider.value) + 1} of ${steps.length}`;
    readout.textContent = `step ${entry.step} · ${entry.files.join(", ")} · ${position}`;
  };
  describe();
  slider.addEventListener("input", () => {
    describe();
    panel.step = steps[Number(slider.value)].step;
    panel.element.classList.add("loading");
    clearTimeout(panel.stepTimer);
    panel.stepTimer = setTimeout(() => request(panel), TYPING_PAUSE_MS);
  });
  row.append(span("step-label", "checkpoint"), slider, readout);
  return row;
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
    point(panel, i);
  });
  canvas.addEventListener("click", (event) => {
    const { i } = at(event);
    if (i !== null) pin(panel, i);
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

// One pointed query per panel: the heat map's rows and the strips' tokens both move it, and everything follows.
function point(panel, i) {
  if (!panel.pinned) panel.query = i;
  showQuery(panel);
}

function pin(panel, i) {
  panel.pinned = !(panel.pinned && panel.query === i);
  panel.query = i;
  showQuery(panel);
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

// The loss strips: the text once per setting, each token coloured by the loss of predicting the token after it
// (nats, one scale for every panel), the mean beside it named after the curve it matches, and the scale's key.
function lossStrips(panel) {
  const { data } = panel;
  const part = document.createElement("div");
  part.className = "strips";
  part.append(
    message(
      "strips-caption",
      "Each token coloured by the loss of predicting the token after it (the text's last token has none):",
    ),
  );
  for (const strip of data.strips) {
    const row = document.createElement("div");
    row.className = "strip";
    row.dataset.tag = strip.tag;
    const head = document.createElement("div");
    head.className = "strip-head";
    const counted = strip.losses.filter((loss) => loss !== null).length;
    head.append(
      span("strip-name", strip.name),
      span("strip-tag", strip.tag),
      span("mean", strip.mean === null ? "—" : strip.mean.toFixed(3)),
      span("strip-unit", strip.mean === null ? "nothing to score" : `nats, the mean over ${counted} next tokens`),
    );
    const tokens = document.createElement("div");
    tokens.className = "strip-tokens";
    data.tokens.forEach((token, i) => {
      const piece = span("token", token);
      piece.dataset.query = i;
      const loss = strip.losses[i];
      if (loss === null) {
        piece.classList.add("none");
        piece.title = `${quote(token)}: the text ends here, no next token to score`;
      } else {
        piece.style.background = lossColour(loss);
        piece.style.color = loss / state.lossTop > 0.55 ? "#fff" : "#111";
        piece.title = `${quote(token)} → ${quote(strip.predictions[i].next)}: loss ${loss.toFixed(3)} nats`;
      }
      piece.addEventListener("mousemove", () => point(panel, i));
      piece.addEventListener("click", () => pin(panel, i));
      tokens.append(piece);
      if (token.endsWith("↵")) tokens.append(document.createElement("br"));
    });
    row.append(head, tokens);
    part.append(row);
  }
  part.append(lossKey(data.uniform_loss, data.vocab_size), message("strip-point", ""));
  if (data.problem) part.append(message("error problem", data.problem));
  return part;
}

// The colour key of the losses: the ramp from 0 to the shared top, whole nats marked below it and a uniform guess,
// ln(vocab_size), marked above it.
function lossKey(uniform, vocab) {
  const top = state.lossTop;
  const key = document.createElement("div");
  key.className = "loss-key";
  const bar = document.createElement("div");
  bar.className = "ramp";
  bar.style.background = `linear-gradient(to right, ${YLORRD.join(", ")})`;
  const marker = document.createElement("span");
  marker.className = "uniform-mark";
  marker.style.left = `${(100 * uniform) / top}%`;
  bar.append(marker);
  const above = document.createElement("div");
  above.className = "key-above";
  const guess = span("uniform-label", `ln ${vocab} = ${uniform.toFixed(2)}: a uniform guess`);
  guess.style.left = `${(100 * uniform) / top}%`;
  above.append(guess);
  const below = document.createElement("div");
  below.className = "key-below";
  const every = state.lossTick;
  for (let nats = 0; nats <= top; nats += every) {
    const tick = span("tick", nats === top ? `${nats}+` : `${nats}`);
    tick.style.left = `${(100 * nats) / top}%`;
    if (nats === top) tick.classList.add("last");
    below.append(tick);
  }
  const scale = document.createElement("div");
  scale.className = "key-scale";
  scale.append(above, bar, below);
  key.append(scale, span("key-words", "loss, nats: one scale for every panel"));
  return key;
}

// The pointed query's prediction: the top five next tokens and the actual next one, as trained and (a run trained
// without the mask) with the mask put back, side by side, at the temperature of the controls.
function predictionBox(panel) {
  const box = document.createElement("div");
  box.className = "prediction";
  box.append(message("prediction-caption", ""));
  const columns = document.createElement("div");
  columns.className = "columns";
  for (const strip of panel.data.strips) {
    const column = document.createElement("div");
    column.className = "setting";
    column.dataset.tag = strip.tag;
    const table = document.createElement("table");
    table.className = "top";
    column.append(span("setting-name", strip.name), table, message("actual", ""));
    columns.append(column);
  }
  box.append(columns);
  return box;
}

function counterfactualLine() {
  const box = document.createElement("div");
  box.className = "counterfactual";
  box.append(message("cf-caption", ""), message("cf-numbers", ""), message("cf-words", ""));
  return box;
}

// Everything that follows query i: the heat map's outline, the row over the text, the table of steps, the words,
// the strips' outline, the prediction and the counterfactual line.
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
  if (data.strips) {
    showStrips(element, data, i);
    showPrediction(element, data, i);
    showCounterfactual(element, data, i);
  }
  fillSteps(element.querySelector(".fold.steps"), data, i);
}

function showStrips(element, data, i) {
  element.querySelectorAll(".strip-tokens .token").forEach((piece) => {
    piece.classList.toggle("query", Number(piece.dataset.query) === i);
  });
  const next = data.strips[0].predictions[i].next; // a text cut to block_size still has one at its last position
  const parts = data.strips.map((strip) => {
    const guess = strip.predictions[i].top[0];
    const loss = strip.losses[i];
    return `${strip.name} ${loss === null ? "" : `${loss.toFixed(3)} nats, `}predicts ${quote(guess[0])}`;
  });
  element.querySelector("p.strip-point").textContent =
    `i=${i} ${quote(data.tokens[i])} → ` +
    (next === null ? "the text ends here: " : `${quote(next)}: `) +
    parts.join(" · ");
}

function showPrediction(element, data, i) {
  const temperature = data.temperature ?? typed("temperature"); // what the answer was computed at
  element.querySelector("p.prediction-caption").textContent =
    `After i=${i} ${quote(data.tokens[i])}, the next token: the top five at temperature ${temperature}` +
    (data.strips.length > 1 ? ", as trained and with the mask put back" : "");
  data.strips.forEach((strip, k) => {
    const column = element.querySelectorAll(".prediction .setting")[k];
    const prediction = strip.predictions[i];
    const table = column.querySelector("table.top");
    table.replaceChildren();
    for (const [label, p] of prediction.top) {
      const line = table.insertRow();
      line.className = label === prediction.next ? "choice actual" : "choice";
      line.insertCell().append(span("token", label));
      const bar = document.createElement("span");
      bar.className = "pbar";
      bar.style.width = `${(p * 100).toFixed(1)}px`;
      line.insertCell().append(bar);
      line.insertCell().textContent = probability(p);
      line.cells[0].className = "guess";
      line.cells[1].className = "bar-cell";
      line.cells[2].className = "p";
    }
    const { next, p_next: chance, loss } = prediction;
    column.querySelector("p.actual").textContent =
      next === null
        ? "the text ends here: no next token to score"
        : `next ${quote(next)}: p ${probability(chance)} · loss ${loss.toFixed(3)} nats` +
          (temperature === 1 ? "" : " (at temperature 1)");
  });
}

function showCounterfactual(element, data, i) {
  const look = data.counterfactuals?.[i];
  const caption = element.querySelector("p.cf-caption");
  const numbers = element.querySelector("p.cf-numbers");
  const words = element.querySelector("p.cf-words");
  numbers.replaceChildren();
  if (!look) {
    caption.textContent = `What the look gives query ${i}: the text ends here, so there is no next token to compare.`;
    words.textContent = "";
    return;
  }
  caption.textContent =
    `What the look gives: p(${quote(data.strips[0].predictions[i].next)} next) with query ${i}'s weights, ` +
    "the model run again" +
    (data.n_layer > 1 ? ` (layer ${data.layer})` : "");
  const kinds = [
    ["trained", "as trained"],
    ["masked", "future masked"],
    ["uniform", "uniform"],
    ["silent", "no attention"],
  ];
  kinds.forEach(([kind, name], k) => {
    if (k) numbers.append(" · ");
    const part = span("cf", "");
    part.dataset.kind = kind;
    part.append(span("cf-name", `${name} `), span("cf-p", probability(look[kind])));
    numbers.append(part);
  });
  words.textContent = look.words;
}

// Continue the text: each open panel's run writes N tokens after it, at its step, with the controls' temperature and
// seed (the same sampling as sample.py); the answer stays in the panel, marked when the text or step has moved on.
function generateAll() {
  for (const panel of state.panels.values()) generate(panel);
}

async function generate(panel) {
  panel.generationAbort?.abort();
  panel.generationAbort = new AbortController();
  const seq = ++panel.generationSeq;
  const asked = { run: panel.run.name, text: state.text, step: panel.step, tokens: typed("tokens") };
  Object.assign(asked, { temperature: typed("temperature"), seed: typed("seed") });
  panel.generation = { asked, answer: null };
  showGeneration(panel);
  let answer;
  try {
    const body = JSON.stringify(asked);
    answer = await getJson("./generate", { method: "POST", body, signal: panel.generationAbort.signal });
  } catch (error) {
    if (error.name === "AbortError") return;
    answer = { error: `the server did not answer (${error.message})` };
  }
  if (seq !== panel.generationSeq) return;
  panel.generation.answer = answer;
  showGeneration(panel);
}

function generationBox(panel) {
  const box = document.createElement("div");
  box.className = "generation";
  showGeneration(panel);
  return box;
}

function showGeneration(panel) {
  const box = panel.element.querySelector(".generation");
  if (!box) return;
  box.replaceChildren();
  const generation = panel.generation;
  box.hidden = !generation;
  if (!generation) return;
  const { asked, answer } = generation;
  box.classList.toggle("loading", !answer);
  panel.element.dataset.generated = answer ? "yes" : "";
  if (!answer) {
    box.append(message("gen-caption", `writing ${asked.tokens} tokens…`));
    return;
  }
  if (answer.error) {
    box.append(message("error", answer.error));
    return;
  }
  box.append(
    message(
      "gen-caption",
      `Continued by ${answer.tokens.length} tokens at step ${answer.step} (${answer.file}), temperature ` +
        `${answer.temperature ?? asked.temperature}, seed ${answer.seed ?? asked.seed}:`,
    ),
  );
  const prompt = answer.prompt.length > PROMPT_SHOWN ? `…${answer.prompt.slice(-PROMPT_SHOWN)}` : answer.prompt;
  const text = document.createElement("p");
  text.className = "continuation";
  text.append(span("prompt", prompt), span("written", answer.continuation));
  box.append(text);
  if (answer.note) box.append(message("note", answer.note)); // the model read only the text's last block_size tokens
  const shown = panel.data && !panel.data.error ? panel.data.step : answer.step;
  if (asked.text !== state.text || shown !== answer.step) {
    box.append(message("note", "written for an earlier text or step: Continue the text again"));
  }
}

function stepsTable() {
  const part = document.createElement("div");
  part.className = "steps-part";
  const box = document.createElement("div");
  box.className = "steps-box"; // a long text's 64 keys scroll here, the heat map stays in view
  const table = document.createElement("table");
  table.className = "steps";
  box.append(table);
  part.append(box);
  return part;
}

function fillSteps(box, data, i) {
  const scaled = data.scale ? `÷ √${data.d_k}` : "unscaled";
  const division = data.scale
    ? `divide by √d<sub>k</sub> = √${data.d_k} = ${Math.sqrt(data.d_k).toFixed(3)}`
    : "<b>unscaled</b>: this run feeds the raw scores to the softmax";
  const cap = data.softcap ? `, then cap at ${data.softcap}·tanh(s/${data.softcap})` : "";
  box.querySelector("summary").innerHTML =
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

function ramp(colours, position) {
  const at = Math.min(Math.max(position, 0), 1) * (colours.length - 1);
  const low = Math.floor(at);
  const high = Math.min(low + 1, colours.length - 1);
  const mix = at - low;
  const [a, b] = [colours[low], colours[high]].map((hex) => [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16)));
  return `rgb(${a.map((value, k) => Math.round(value + (b[k] - value) * mix)).join(",")})`;
}

function blues(weight) {
  return ramp(BLUES, weight);
}

function lossColour(loss) {
  return ramp(YLORRD, loss / state.lossTop);
}

function probability(p) {
  if (p === null) return "—";
  if (p === 0) return "0";
  return p >= 0.00095 ? p.toFixed(3) : p.toExponential(1); // 0.00099 reads 0.001, not 1.0e-3
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
