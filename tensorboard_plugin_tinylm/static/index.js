// The Attention tab. TensorBoard loads this module into the tab's iframe and calls render() (plugin.py exports it by
// name there; the module's own export is its default, { render }). Routes are relative to the iframe's base,
// /data/plugin/tinylm_attention/: ./runs lists the runs, ./attention answers one run's weights, losses and
// predictions at one step, ./generate continues the text (or fills its blanks, for a run that does not continue one);
// tensorboard_plugin_tinylm/answers.py's runs(), attention() and generate() build every field this page reads.
// Plain JavaScript in one file with no imports, no build step, nothing fetched from elsewhere; the routes are asked
// in one function (askServer) and the tab is drawn into the element render() is given.
//
// The same module draws the panel in a notebook: anywidget (tensorboard_plugin_tinylm/widget.py) imports it and calls
// render({model, el}); the routes then go to the kernel as the widget's messages (askKernel), not to a server.
// And in the one-file page that export.py writes: the page calls render({ask, el}) with its own transport, which
// answers the routes in the page from the exported weights (page.js), and styles the panel with style.css inlined.
//
// A panel is a list of views, each one part of the panel, held by reference: { show, point, always, stop }.
// show(answer) builds the part for an ./attention answer and returns its nodes (none: the part is not shown); it
// gets the readable answers, and also none yet and an {error} where `always`. point(answer, at) updates the part for
// the pointed query, at = { i, pinned }. stop() ends what the view has under way when the panel closes. A new part
// of the panel is one more view in panelViews().
//
// What the panel says of a run's task is the server's: each answer's `words` (viewer/words.py) holds every phrase
// that differs between tasks, some of them templates whose {names} the panel fills in (say()); nothing here names a
// task. A run whose words say how to hide a token (words.blank_how) reads a text with blanks: typed in it, or tokens
// the person hides by position, per panel (panel.question.blanks, for the text they were hidden in); the answer's
// `blanks` are the positions hidden. A run that does not continue a text (answer.continues_text false) writes by
// filling those blanks.

// matplotlib's "Blues", as the Images tab's attn/pattern draws the weights (trainer/diagnostics.py pattern_figure).
const BLUES = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"];
// matplotlib's "YlOrRd" for a token's loss in nats: pale where the model expected its target, dark red where it
// was surprised; a different map from the weights' so that the two are never read for each other.
const YLORRD = ["#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026", "#800026"];
const HIDDEN = "rgba(255, 127, 14, 0.6)"; // tab:orange hatching, the keys the task's mask hides
const DIAGONAL = "#d62728"; // tab:red, dashed, j = i
const WIDGET_CLASS = "tinylm-attention"; // widget.py scopes style.css to it
const TYPING_PAUSE_MS = 120; // a request to a server when typing (or dragging the step selector) pauses this long
const FIGURE_PX = 520; // the heat map's side for a long text; short texts get larger cells
const PANELS_AT_START = 4; // runs ticked when the tab opens
const PROMPT_SHOWN = 60; // characters of the prompt shown before a continuation
const GENERATE_TOKENS = 100; // the continuation's length when the tab opens
const SEED = 1337; // sample.py's default
const CONTINUE = "Continue the text"; // the button until a run's answer says what it writes
const TEMPERATURE_TITLE =
  "Divides the logits before the softmax: below 1 sharpens the shown prediction, above 1 flattens it; " +
  "the continuation samples at it";
const HINT =
  "Each ticked run reads the text through its checkpoint. Point at a row of a heat map (query i), or at a token " +
  "of a loss strip, to see what that query reads and predicts; click to keep it.";
// The counterfactual looks: answers.py's name for each, and the panel's; the masked look's is the task's, which the
// answer sends (answer.words.masked).
const LOOKS = [
  ["trained", "as trained"],
  ["masked", null],
  ["uniform", "uniform"],
  ["no_look", "no look"],
];

// TensorBoard calls render() with nothing: the tab fills the iframe's page. A host that passes an element gets the
// tab drawn into it. anywidget passes the widget's model too: the panel asks the kernel, in an element of the
// widget's class, which its stylesheet (style.css inside that class) styles; what it returns ends the panel. A host
// that passes `ask` answers the routes itself, as askServer's callers expect, and brings the stylesheet; one that
// answers in the page itself passes a shorter `pause` (ms), since no request then waits on a network.
async function render({ model, ask, el = document.body, pause = TYPING_PAUSE_MS } = {}) {
  if (ask) {
    await openTab(el, ask, pause);
    return undefined;
  }
  if (!model) {
    el.ownerDocument.head.append(h("link", { rel: "stylesheet", href: "./style.css" }));
    await openTab(el, askServer);
    return undefined;
  }
  el.classList.add(WIDGET_CLASS);
  const kernel = askKernel(model);
  const tab = await openTab(el, kernel);
  return () => {
    tab.later.stop();
    for (const name of [...tab.panels.keys()]) closePanel(tab, name);
    kernel.stop();
  };
}

// The module's one export, anywidget's entry (0.9 on) and the exported page's (start.js); TensorBoard's loader, which
// calls a render() exported by name, is served this module with that export added (plugin.py).
export default { render };

// How the tab asks a route: TensorBoard's server, a GET without a body, else a POST of the body as JSON. The one
// place that knows the transport; an answer the tab cannot read comes back as {error}.
async function askServer(route, body, signal) {
  const options = { headers: { "Content-Type": "application/json" }, signal };
  if (body !== undefined) Object.assign(options, { method: "POST", body: JSON.stringify(body) });
  const response = await fetch(`./${route}`, options);
  try {
    return await response.json();
  } catch {
    return { error: `./${route}: HTTP ${response.status} without an answer the tab can read` };
  }
}

// How the panel asks a route in a notebook: a message to the widget's kernel, {id, route, body}, answered by one
// message {id, answer} (widget.py). The messages come back in any order; an aborted question's answer is dropped.
function askKernel(model) {
  const waiting = new Map();
  let asked = 0;
  const answered = ({ id, answer }) => {
    waiting.get(id)?.(answer);
    waiting.delete(id);
  };
  model.on("msg:custom", answered);
  const ask = (route, body, signal) =>
    new Promise((resolve, reject) => {
      const id = ++asked;
      waiting.set(id, resolve);
      signal?.addEventListener("abort", () => {
        waiting.delete(id);
        reject(new Error("aborted"));
      });
      model.send({ id, route, body });
    });
  ask.stop = () => {
    model.off("msg:custom", answered);
    waiting.clear();
  };
  return ask;
}

// The latest request wins: an asker sends one question at a time, a new one aborting the one before, and hands back
// the answer to the newest only (null for the others); a request that failed answers {error}.
function latest(ask) {
  let current = null;
  const asker = async (route, body) => {
    current?.abort();
    const mine = (current = new AbortController());
    let answer;
    try {
      answer = await ask(route, body, mine.signal);
    } catch (error) {
      answer = { error: `the server did not answer (${error.message})` };
    }
    return mine === current ? answer : null;
  };
  asker.stop = () => {
    current?.abort();
    current = null;
  };
  return asker;
}

// Runs `then` once calls to it pause for `ms`: typing, dragging the step selector. With no pause, at once, in the
// event's own task: a timer set after a key waits for the browser to paint the frame that the key started.
function paused(ms) {
  let timer = null;
  const later = (then) => {
    clearTimeout(timer);
    if (ms === 0) then();
    else timer = setTimeout(then, ms);
  };
  later.stop = () => clearTimeout(timer);
  return later;
}

// The tab: the controls on top, then one panel per ticked run. `tab` holds what the panels share: the transport and
// its typing pause, the controls, the text as of the last pause, the open panels and the losses' colour scale;
// returned once the runs are listed.
async function openTab(root, ask, pause = TYPING_PAUSE_MS) {
  const controls = controlsView();
  const shelf = h("section", { class: "panels" });
  const later = paused(pause);
  const tab = { ask, pause, later, controls, shelf, text: "", panels: new Map(), boxes: new Map(), scale: {} };
  root.replaceChildren(h("main", { class: "tab" }, controls.element, shelf));
  const askAll = () => {
    tab.text = controls.text.value;
    for (const panel of tab.panels.values()) request(panel);
  };
  const soon = () => {
    tab.later(askAll);
    for (const panel of tab.panels.values()) panel.element.classList.add("loading"); // a new answer is coming
  };
  controls.text.addEventListener("input", soon);
  controls.temperature.addEventListener("input", soon);
  controls.generate.addEventListener("click", () => continueAll(tab));
  for (const box of [controls.tokens, controls.seed]) {
    box.addEventListener("keydown", (event) => event.key === "Enter" && continueAll(tab));
  }
  const listing = await latest(ask)("runs");
  if (listing.error) {
    controls.runs.append(message("error", listing.error));
    return tab;
  }
  controls.tokens.title = `1 to ${listing.max_generate}`;
  controls.temperature.title += ` (${listing.temperatures[0]} to ${listing.temperatures[1]})`;
  controls.text.value = tab.text = listing.text;
  const count = () => countCharacters(controls, listing.max_chars);
  count();
  controls.text.addEventListener("input", count);
  listRuns(tab, listing.runs);
  for (const run of listing.runs.filter(readable).slice(0, PANELS_AT_START)) openPanel(tab, run);
  return tab;
}

function controlsView() {
  const input = (id, value, size, attributes) => h("input", { id, value, size, ...attributes });
  const text = h("textarea", { id: "text", rows: 2, spellcheck: "false" });
  const count = span("count", "");
  const temperature = input("temperature", "1", 5, { inputmode: "decimal", spellcheck: "false" });
  temperature.title = TEMPERATURE_TITLE;
  const generate = h("button", { id: "generate", type: "button" }, CONTINUE);
  const tokens = input("tokens", GENERATE_TOKENS, 4, { inputmode: "numeric", "aria-label": "Tokens to write" });
  const seed = input("seed", SEED, 6, { inputmode: "numeric", "aria-label": "Seed" });
  const runs = h("div", { class: "runs", role: "group", "aria-label": "Runs" });
  const length = h("span", { class: "length" }, " by ", tokens, " tokens");
  const settings = h("div", { class: "settings" }, h("label", {}, "Temperature ", temperature));
  settings.append(h("span", { class: "continue" }, generate, length, ", seed ", seed));
  const label = h("label", { class: "text-label", for: "text" }, "Text ", count);
  const blankHint = message("hint blank-hint", "");
  blankHint.hidden = true; // until a panel's run hides tokens
  const hints = [message("hint", HINT), blankHint];
  const element = h("section", { class: "controls" }, label, text, settings, ...hints, runs);
  return { element, text, count, temperature, generate, length, tokens, seed, runs, blankHint };
}

// The controls fit the open panels: the blanks' line where a run hides tokens, the button says what the runs write
// (each run's words.write, one of each), and the length is asked where a run continues the text. A panel's run
// writes as its last readable answer said; one never read continues.
function fitControls(tab) {
  const panels = [...tab.panels.values()];
  const { generate, length, blankHint } = tab.controls;
  const writes = [...new Set(panels.map((panel) => panel.words?.write ?? CONTINUE))].sort();
  generate.textContent = writes.map((write, k) => (k ? write[0].toLowerCase() + write.slice(1) : write)).join(" / ");
  generate.textContent ||= CONTINUE;
  length.hidden = panels.length > 0 && panels.every((panel) => panel.words && !panel.continues);
  const hint = panels.map((panel) => panel.words?.blank_hint).find(Boolean);
  blankHint.textContent = hint ?? "";
  blankHint.hidden = !hint;
}

// Whether a run hides tokens behind a blank, as its words say: they tell how.
function hidesTokens(answer) {
  return Boolean(answer && !answer.error && answer.words.blank_how);
}

// A phrase of the task's words with its {names} filled in from `values`.
function say(template, values) {
  return template.replace(/\{(\w+)\}/g, (_, name) => values[name]);
}

function countCharacters(controls, max) {
  const length = controls.text.value.length;
  controls.count.textContent = `${length.toLocaleString()} character${length === 1 ? "" : "s"}`;
  controls.count.classList.toggle("over", length > max);
}

function readable(run) {
  return run.checkpoint && !run.problem;
}

// A setting typed in a box: the number it reads as, else the text itself, which the server names in its one line
// ("temperature='abc': ..."), so that the page and the terminal word a bad value alike.
function typed(box) {
  const value = box.value.trim();
  return /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value) ? Number(value) : value;
}

function listRuns(tab, runs) {
  const list = tab.controls.runs;
  if (!runs.length) list.append(message("error", "No runs under the logdir: train one (python train.py)."));
  for (const run of runs) {
    const box = h("input", { type: "checkbox" });
    box.disabled = !readable(run);
    box.addEventListener("change", () => (box.checked ? openPanel(tab, run) : closePanel(tab, run.name)));
    tab.boxes.set(run.name, box);
    const what = run.problem || (run.checkpoint ? `${run.checkpoint}, step ${run.step}` : "no checkpoint");
    const row = h("label", { class: "run", "data-run": run.name }, box, span("name", run.name));
    row.append(span("label", run.label), span(run.problem ? "meta bad" : "meta", what));
    if (!run.problem && run.note) row.append(span("meta note", run.note));
    list.append(row);
  }
}

// A panel: one run read at one step, drawn by its views. It asks ./attention for the text in the controls, at its
// question's layer and step, with the tokens hidden in it by position (for the text `hiddenIn`), and keeps the
// latest answer and the pointed query.
function openPanel(tab, run) {
  if (tab.panels.has(run.name)) return;
  const element = h("article", { class: "panel", "data-run": run.name });
  const question = { layer: 0, step: null, blanks: [] };
  const panel = { tab, run, element, answer: null, at: { i: null, pinned: false }, question, hiddenIn: "" };
  panel.words = null; // its run's words and whether it continues a text, as its last readable answer said
  panel.continues = true;
  panel.asker = latest(tab.ask);
  panel.generation = generationView(panel);
  panel.views = panelViews(panel);
  tab.panels.set(run.name, panel);
  tab.shelf.append(element);
  tab.boxes.get(run.name).checked = true;
  request(panel);
}

function panelViews(panel) {
  return [
    headerView(panel),
    stepView(panel),
    { always: true, show: (answer) => [answer?.error ?? answer?.moved].filter(Boolean).map(errorLine(answer)) },
    { show: switches },
    blanksView(panel),
    attentionView(panel),
    stripsView(panel),
    predictionView(panel),
    counterfactualView(),
    panel.generation,
    stepsView(),
  ];
}

function closePanel(tab, name) {
  const panel = tab.panels.get(name);
  if (!panel) return;
  panel.asker.stop();
  for (const view of panel.views) view.stop?.();
  panel.element.remove();
  tab.panels.delete(name);
  tab.boxes.get(name).checked = false;
  rescale(tab);
  fitControls(tab);
}

async function request(panel) {
  const { element, tab } = panel;
  element.classList.add("loading");
  const text = tab.text;
  if (panel.hiddenIn !== text) panel.question.blanks = []; // positions hidden in another text
  const temperature = typed(tab.controls.temperature);
  const answer = await panel.asker("attention", { run: panel.run.name, text, ...panel.question, temperature });
  if (!answer) return; // a newer question is on its way
  if (movedToKept(panel, answer)) return request(panel);
  [answer.moved, panel.moved] = [panel.moved, ""]; // said with the answer at the step it moved to
  element.classList.remove("loading");
  element.dataset.text = text; // what it shows: the page tests wait on it
  panel.answer = answer;
  if (!answer.error) {
    [panel.words, panel.continues] = [answer.words, answer.continues_text];
    element.dataset.step = answer.step;
    const { i, pinned } = panel.at;
    if (i === null || i >= answer.tokens.length || !pinned) panel.at = { i: firstQuery(answer), pinned: false };
  }
  fitControls(tab);
  if (!rescale(tab)) show(panel); // a new colour scale redraws every panel, this one included
}

// A run that trains thins its kept checkpoints: a step gone since the panel listed it answers with the steps kept
// now, and the panel moves to the latest of them up to the one asked for (the earliest kept, if none is), saying so.
function movedToKept(panel, answer) {
  const asked = panel.question.step;
  const kept = (answer.error && answer.steps ? answer.steps : []).map((entry) => entry.step);
  if (asked === null || asked === undefined || !kept.length || kept.includes(asked)) return false;
  panel.run.steps = answer.steps;
  panel.question.step = kept.filter((step) => step <= asked).at(-1) ?? kept[0];
  panel.moved = `${answer.error}; showing step ${panel.question.step}`;
  return true;
}

// The query a panel points at unless one is kept: as attend.py, the last token, or the last blank where the text
// has one.
function firstQuery(answer) {
  return answer.blanks.length ? answer.blanks.at(-1) : answer.tokens.length - 1;
}

// Every view's part for the panel's answer, in the views' order, the pointed query drawn in them before they join
// the page: setting the heat map's font brings the page's style up to date first, without them to restyle yet.
function show(panel) {
  const { answer, element } = panel;
  const good = answer && !answer.error;
  const parts = panel.views.flatMap((view) => (good || view.always ? view.show(answer) : []));
  follow(panel);
  element.replaceChildren(...parts);
}

// One pointed query per panel: the heat map's rows and the strips' tokens both move it, and every view follows.
function point(panel, i) {
  if (!panel.at.pinned) panel.at = { i, pinned: false };
  follow(panel);
}

function pin(panel, i) {
  panel.at = { i, pinned: !(panel.at.pinned && panel.at.i === i) };
  follow(panel);
}

// A click on token i (the heat map's row, a strip's token) keeps it as the query; with shift, in a run that hides
// tokens, it hides the token behind the blank, or shows it again.
function clicked(panel, i, event) {
  if (event.shiftKey && hideable(panel, i)) toggleHidden(panel, i);
  else pin(panel, i);
}

// Whether token i of the panel's text can be hidden or shown again: not a blank typed in the text.
function hideable(panel, i) {
  const { answer, question } = panel;
  return hidesTokens(answer) && (!answer.blanks.includes(i) || question.blanks.includes(i));
}

// Hides token i behind the blank, or shows it again, and asks again with query i kept.
function toggleHidden(panel, i) {
  const { blanks } = panel.question;
  panel.question.blanks = blanks.includes(i) ? blanks.filter((k) => k !== i) : [...blanks, i].sort((a, b) => a - b);
  panel.hiddenIn = panel.element.dataset.text; // the text whose tokens these positions count
  panel.at = { i, pinned: true };
  request(panel);
}

function follow(panel) {
  const { answer, at } = panel;
  if (!answer || answer.error || at.i === null) return;
  for (const view of panel.views) view.point?.(answer, at);
}

// One colour scale for the losses of every panel: 0 to twice the largest ln(vocab) among them (a uniform guess sits
// in the middle), rounded up to the key's ticks. Returns whether it changed, and then redraws every panel.
function rescale(tab) {
  const answers = [...tab.panels.values()].map((panel) => panel.answer);
  const uniform = answers.map((answer) => answer?.uniform_loss).filter((u) => typeof u === "number");
  const rough = uniform.length ? Math.max(1, 2 * Math.max(...uniform)) : null;
  const tick = rough && Math.ceil(rough / 6); // at most 6 ticks on the key
  const top = rough && Math.ceil(rough / tick) * tick;
  if (top === tab.scale.top) return false;
  tab.scale = { top, tick };
  for (const panel of tab.panels.values()) show(panel);
  return true;
}

function headerView(panel) {
  const { run } = panel;
  const close = h("button", { class: "close", title: "Remove this panel", "aria-label": `Remove ${run.name}` }, "×");
  close.addEventListener("click", () => closePanel(panel.tab, run.name));
  const title = h("div", { class: "title" }, span("label", run.label || run.name), span("name", run.name));
  let layers = null; // a model of several layers gets a choice of layer, kept through a bad answer
  return {
    always: true,
    show(answer) {
      if (!layers && answer?.n_layer > 1) layers = layerSelect(panel, answer.n_layer);
      return [h("header", {}, title, ...(layers ? [layers] : []), close)];
    },
  };
}

function layerSelect(panel, count) {
  const select = h("select", { class: "layer", "aria-label": "Layer" });
  for (let layer = 0; layer < count; layer++) select.add(new Option(`layer ${layer}`, layer));
  select.value = panel.question.layer;
  select.addEventListener("change", () => {
    panel.question.layer = Number(select.value);
    request(panel);
  });
  return select;
}

// The step selector: a slider over the checkpoints the run kept, one position per step (steps/step-N.pt, best.pt,
// last.pt; files of one step hold the same weights). Moving it redraws the whole panel at that step: the attention,
// the strips, the prediction. Kept on a bad answer: another step can be chosen.
function stepView(panel) {
  const slider = h("input", { type: "range", class: "step", min: 0, "aria-label": "Checkpoint step" });
  const readout = span("step-readout", "");
  const row = h("div", { class: "step-row" }, span("step-label", "checkpoint"), slider, readout);
  let steps = byStep(panel.run.steps);
  const describe = () => {
    const { step, files } = steps[Number(slider.value)];
    readout.textContent = `step ${step} · ${files.join(", ")} · ${Number(slider.value) + 1} of ${steps.length}`;
  };
  const later = paused(panel.tab.pause);
  slider.addEventListener("input", () => {
    describe();
    panel.question.step = steps[Number(slider.value)].step;
    panel.element.classList.add("loading");
    later(() => request(panel));
  });
  const show = (answer) => {
    const shown = answer && !answer.error ? answer.step : null;
    if (shown !== null) steps = byStep(answer.steps);
    if (!steps.length) return [];
    slider.max = steps.length - 1;
    const wanted = panel.question.step ?? shown ?? panel.run.step;
    const index = steps.findIndex((entry) => entry.step === wanted);
    slider.value = Math.max(0, index);
    slider.disabled = steps.length < 2;
    describe();
    return [row];
  };
  return { always: true, show, stop: later.stop };
}

function byStep(files) {
  const steps = [];
  for (const { step, file } of files) {
    const same = steps.find((known) => known.step === step);
    if (same) same.files.push(file);
    else steps.push({ step, files: [file] });
  }
  return steps;
}

// The line of the run's switches, how it reads in its task's words (its mask applied or lifted), and the notes: the
// run's ("best.pt: damaged (...); reading last.pt"), the text's (cut to block_size) and the mask's (where a prefix
// ends).
function switches(answer) {
  const parts = [
    `${answer.file}, step ${answer.step}`,
    answer.causal ? answer.words.applied : answer.words.lifted,
    answer.scale ? `scaled by 1/√${answer.d_k}` : `unscaled, d_k ${answer.d_k}`,
  ];
  if (answer.softcap) parts.push(`capped at ${answer.softcap}`);
  const oneHot = answer.stats.max_weight.filter((weight) => weight > answer.saturated).length;
  parts.push(`${oneHot} of ${answer.tokens.length} rows one-hot (largest weight above ${answer.saturated})`);
  const lines = [message("meta", parts.join(" · "))];
  for (const note of [answer.run_note, answer.note, answer.mask_note]) if (note) lines.push(message("note", note));
  return lines;
}

// The blanks of a run that hides tokens: how to make one (its words), and the tokens hidden by position in this
// panel, each a button that shows it again.
function blanksView(panel) {
  const show = (answer) => {
    if (!hidesTokens(answer)) return [];
    const lines = [message("blanks-how", answer.words.blank_how)];
    const hidden = panel.question.blanks.filter((i) => i < answer.tokens.length);
    if (hidden.length) {
      const shown = hidden.map((i) => {
        const token = answer.strips[0].predictions[i].next;
        const button = h("button", { type: "button", class: "unhide", "data-query": i }, `${i} ${quote(token)} ×`);
        button.title = `Show ${quote(token)} again`;
        button.addEventListener("click", () => toggleHidden(panel, i));
        return button;
      });
      lines.push(h("p", { class: "hidden-tokens" }, "Hidden by position in this text: ", ...shown));
    }
    return lines;
  };
  return { show };
}

// A part of the panel a person can fold away (to compare many runs' strips and predictions): one <details> through
// the panel's redraws, so it stays as folded as it was.
function foldable(name, summary) {
  const title = h("summary", {}, summary);
  const details = h("details", { class: `fold ${name}`, open: "" });
  return { details, title, fill: (...parts) => details.replaceChildren(title, ...parts) };
}

// Where each query looks: the heat map (queries down, keys across), the pointed cell's weight, the query's weights
// over the text, its row's words and statistics.
function attentionView(panel) {
  const fold = foldable("attention", "Attention: where each query looks (the heat map, query i down)");
  const [cellLine, verdict, stats] = ["cell", "verdict", "stats"].map((name) => message(name, ""));
  let map = null;
  let pieces = [];
  const show = (answer) => {
    map = heatmap(panel, answer.tokens);
    pieces = answer.tokens.map((token, j) => h("span", { class: "token", "data-key": j }, token));
    const text = h("div", { class: "over-text", "aria-label": "The query's weights over the text" });
    pieces.forEach((piece, j) => text.append(piece, ...(answer.tokens[j].endsWith("↵") ? [h("br")] : [])));
    fold.fill(h("div", { class: "figure" }, map.canvas), cellLine, text, verdict, stats);
    return [fold.details];
  };
  const point = (answer, at) => {
    const { i } = at;
    const row = answer.weights[i];
    map.draw(answer, i);
    pieces.forEach((piece, j) => {
      piece.style.background = blues(row[j]);
      piece.style.color = row[j] > 0.5 ? "#fff" : "#111";
      piece.classList.toggle("query", j === i);
      piece.classList.toggle("leak", leaks(answer, i, j));
      piece.title = `a[${i},${j}] = ${row[j].toFixed(3)}`;
    });
    cellLine.textContent = cellWords(answer, map.cell, at);
    verdict.textContent = answer.verdicts[i];
    verdict.hidden = !answer.verdicts[i];
    const top = row.indexOf(Math.max(...row));
    const { entropy, max_weight: largest } = answer.stats;
    stats.textContent =
      `row i=${i}: entropy ${entropy[i].toFixed(3)} nats · largest weight ${largest[i].toFixed(3)} ` +
      `(j=${top} ${quote(answer.tokens[top])}) · weight ${sides(answer, i)}`;
  };
  return { show, point };
}

// Where query i's weight sits: before it, on itself and after it, in its task's words for the two sides.
function sides(answer, i) {
  const [before, after] = [answer.stats.past_mass[i], answer.stats.future_mass[i]];
  const [itself, words] = [1 - before - after, answer.words];
  const parts = [[before, words.before], [itself, "itself"], [after, words.after]];
  return parts.map(([weight, where]) => `${weight.toFixed(3)} on ${where}`).join(", ");
}

// Whether key j is hidden from query i by the task's mask (answers.py's `hidden_keys`: per query, the keys it hides).
function isHidden(answer, i, j) {
  return answer.hidden_keys[i].includes(j);
}

// Whether key j is a leak for query i: hidden by the task's mask, which this run does not apply, where the targets
// lie ahead (where a query's target is itself, hidden behind the blank, the keys after it are no leak).
function leaks(answer, i, j) {
  return !answer.causal && answer.targets_ahead && isHidden(answer, i, j);
}

function cellWords(answer, cell, at) {
  if (!cell) return at.pinned ? `query ${at.i} kept: click it again to follow the pointer` : "";
  const { i, j } = cell;
  const { weights, tokens } = answer;
  const after = j > i ? ` (j > i: ${answer.words.after})` : "";
  const reading = `query ${quote(tokens[i])} reading key ${quote(tokens[j])}`;
  return `a[${i},${j}] = ${weights[i][j].toFixed(3)}: ${reading}${after}`;
}

// The heat map's canvas, sized for the tokens: pointing at a row points at that query (and at a cell, names its
// weight), a click keeps the query. draw(answer, i) paints it with query i outlined.
function heatmap(panel, tokens) {
  const layout = heatmapLayout(tokens);
  const { size, cell, width, height } = layout;
  const canvas = h("canvas", { class: "heatmap" });
  const ratio = window.devicePixelRatio || 1;
  Object.assign(canvas, { width: width * ratio, height: height * ratio });
  Object.assign(canvas.style, { width: `${width}px`, height: `${height}px` });
  Object.assign(canvas.dataset, { left: layout.left, top: layout.top, cell, size }); // the page tests point with it
  const context = canvas.getContext("2d");
  context.scale(ratio, ratio);
  const map = { canvas, cell: null, draw: (answer, i) => drawHeatmap(context, layout, answer, i, map.cell) };
  const at = (event) => {
    const bounds = canvas.getBoundingClientRect();
    const i = Math.floor((event.clientY - bounds.top - layout.top) / cell);
    const j = Math.floor((event.clientX - bounds.left - layout.left) / cell);
    return { i: i >= 0 && i < size ? i : null, j: j >= 0 && j < size ? j : null };
  };
  canvas.addEventListener("mousemove", (event) => {
    const { i, j } = at(event);
    if (i === null) return;
    map.cell = j === null ? null : { i, j };
    point(panel, i);
  });
  canvas.addEventListener("click", (event) => {
    const { i } = at(event);
    if (i !== null) clicked(panel, i, event);
  });
  canvas.addEventListener("mouseleave", () => {
    map.cell = null;
    follow(panel);
  });
  return map;
}

function heatmapLayout(tokens) {
  const size = tokens.length;
  const cell = Math.max(8, Math.min(28, Math.floor(FIGURE_PX / size)));
  const font = Math.max(8, Math.min(13, cell - 2));
  const upright = tokens.every((token) => [...token].length === 1);
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = `${font}px monospace`;
  const left = Math.ceil(Math.max(...tokens.map((token) => measure.measureText(token).width))) + 6;
  const top = upright ? font + 6 : left;
  return { size, cell, font, upright, left, top, width: left + size * cell + 1, height: top + size * cell + 1 };
}

function drawHeatmap(context, layout, answer, query, pointed) {
  const { size, cell, left, top, width, height } = layout;
  context.clearRect(0, 0, width, height);
  // The cells written as the canvas's own pixels in one call, at every key typed: no rectangle a cell (its colour set
  // as text), no second canvas scaled up.
  const ratio = context.getTransform().a; // device pixels a CSS pixel: putImageData writes device pixels
  context.putImageData(cellPixels(answer.weights, cell * ratio), Math.round(left * ratio), Math.round(top * ratio));
  if (answer.targets_ahead) drawHidden(context, layout, answer.hidden_keys); // as attn/pattern hatches them
  context.save();
  context.strokeStyle = DIAGONAL;
  context.setLineDash([4, 3]);
  context.beginPath();
  context.moveTo(left, top);
  context.lineTo(left + size * cell, top + size * cell);
  context.stroke();
  context.restore();
  drawLabels(context, layout, answer.tokens, query);
  context.strokeStyle = "#000";
  context.lineWidth = 2;
  context.strokeRect(left + 1, top + query * cell + 1, size * cell - 2, cell - 2);
  if (pointed) {
    context.strokeStyle = "#e377c2";
    context.strokeRect(left + pointed.j * cell, top + pointed.i * cell, cell, cell);
  }
}

// The heat map's cells as an image `side` device pixels a cell (not always a whole number): each cell's colour on
// BLUES for its weight, its edges rounded to the nearest pixel.
function cellPixels(weights, side) {
  const size = weights.length;
  const edges = Array.from({ length: size + 1 }, (_, k) => Math.round(k * side));
  const width = edges[size];
  const pixels = new ImageData(width, width);
  const words = new Uint32Array(pixels.data.buffer); // a pixel's four bytes as one number
  const bytes = new Uint8Array(4);
  const word = new Uint32Array(bytes.buffer);
  for (let i = 0; i < size; i++) {
    const row = new Uint32Array(width);
    for (let j = 0; j < size; j++) {
      bytes.set([...channels(BLUES, weights[i][j]), 255]);
      row.fill(word[0], edges[j], edges[j + 1]);
    }
    for (let y = edges[i]; y < edges[i + 1]; y++) words.set(row, y * width);
  }
  return pixels;
}

// The keys the task's mask hides, each query's row of them (the causal triangle's staircase above the diagonal, a
// prefix LM's after its prefix), hatched as in the Images tab.
function drawHidden(context, { size, cell, left, top }, hiddenKeys) {
  context.save();
  context.beginPath();
  hiddenKeys.forEach((keys, i) => {
    for (const j of keys) context.rect(left + j * cell, top + i * cell, cell, cell);
  });
  context.clip();
  context.strokeStyle = HIDDEN;
  context.lineWidth = 1;
  context.beginPath();
  for (let offset = -size * cell; offset < size * cell; offset += 6) {
    context.moveTo(left + offset, top + size * cell);
    context.lineTo(left + offset + size * cell, top);
  }
  context.stroke();
  context.restore();
}

// Labels: keys across the top, queries down the side, whitespace drawn (␣ ↵).
function drawLabels(context, { size, cell, font, upright, left, top }, tokens, query) {
  context.font = `${font}px monospace`;
  context.textBaseline = "middle";
  for (let k = 0; k < size; k++) {
    const middle = k * cell + cell / 2;
    context.textAlign = "right";
    context.fillStyle = k === query ? "#000" : "#555";
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
}

// The loss strips: the text once per setting, each token coloured by the loss of predicting its target (the task's
// words say which) (nats, one scale for every panel), beside it this text's mean of those terms, the terms whose mean
// over the validation windows is its curve (the strip's tag); the task's note on them; the scale's key; the pointed
// token's line.
function stripsView(panel) {
  const pointLine = message("strip-point", "");
  let strips = [];
  const show = (answer) => {
    const caption = message("strips-caption", answer.words.strip_caption);
    strips = answer.strips.map((strip) => lossStrip(panel, answer, strip));
    const part = h("div", { class: "strips" }, caption, ...strips.map((s) => s.row));
    if (answer.words.strip_note) part.append(message("strip-note", answer.words.strip_note));
    part.append(lossKey(panel.tab.scale, answer.uniform_loss, answer.vocab_size), pointLine);
    if (answer.problem) part.append(message("error problem", answer.problem));
    return [part];
  };
  const point = (answer, { i }) => {
    for (const { pieces } of strips) pieces.forEach((piece, k) => piece.classList.toggle("query", k === i));
    const parts = answer.strips.map((strip) => {
      const loss = strip.losses[i];
      const guess = strip.predictions[i].top[0][0];
      return `${strip.name} ${loss === null ? "" : `${loss.toFixed(3)} nats, `}predicts ${quote(guess)}`;
    });
    pointLine.textContent = `i=${i} ${quote(answer.tokens[i])}${targetWords(answer, i)}: ${parts.join(" · ")}`;
  };
  return { show, point };
}

// What query i is asked to predict, as the pointed token's line says it: a blank " hides 'f'" (or its token is
// unknown, typed in the text); another token as its task's words say (" → 'r'").
function targetWords(answer, i) {
  const next = answer.strips[0].predictions[i].next; // a text cut to block_size still has one at its last position
  if (answer.blanks.includes(i)) return next === null ? " (typed: its token unknown)" : ` hides ${quote(next)}`;
  return say(answer.words.points, { target: next === null ? answer.words.missing : quote(next) });
}

function lossStrip(panel, answer, strip) {
  const { top } = panel.tab.scale;
  const counted = strip.losses.filter((loss) => loss !== null).length;
  const mean = strip.mean === null ? "—" : strip.mean.toFixed(3);
  const unit = strip.mean === null ? "nothing to score" : `nats, ${counted} tokens`;
  const terms = span("strip-unit", `${unit} — the terms `);
  terms.append(span("strip-tag", strip.tag), " averages"); // over the validation windows: this text is not its curve
  const head = h("div", { class: "strip-head" }, span("strip-name", strip.name), ": mean over this text ");
  head.append(span("mean", mean), " ", terms);
  const line = h("div", { class: "strip-tokens" });
  const pieces = answer.tokens.map((token, i) => {
    const piece = h("span", { class: "token", "data-query": i }, token);
    const loss = strip.losses[i];
    if (loss === null) {
      piece.classList.add("none");
      piece.title = `${quote(token)}: ${answer.words.missing}, no ${answer.words.target} to score`;
    } else {
      piece.style.background = ramp(YLORRD, loss / top);
      piece.style.color = loss / top > 0.55 ? "#fff" : "#111";
      piece.title = `${quote(token)}${targetWords(answer, i)}: loss ${loss.toFixed(3)} nats`;
    }
    piece.classList.toggle("blank", answer.blanks.includes(i));
    piece.addEventListener("mousemove", () => point(panel, i));
    piece.addEventListener("click", (event) => clicked(panel, i, event));
    line.append(piece, ...(token.endsWith("↵") ? [h("br")] : []));
    return piece;
  });
  return { row: h("div", { class: "strip", "data-tag": strip.tag }, head, line), pieces };
}

// The colour key of the losses: the ramp from 0 to the shared top, whole nats marked below it and a uniform guess,
// ln(vocab_size), marked above it.
function lossKey({ top, tick }, uniform, vocab) {
  const at = (nats) => `${(100 * nats) / top}%`;
  const marker = span("uniform-mark", "");
  marker.style.left = at(uniform);
  const bar = h("div", { class: "ramp" }, marker);
  bar.style.background = `linear-gradient(to right, ${YLORRD.join(", ")})`;
  const guess = span("uniform-label", `ln ${vocab} = ${uniform.toFixed(2)}: a uniform guess`);
  guess.style.left = at(uniform);
  const below = h("div", { class: "key-below" });
  for (let nats = 0; nats <= top; nats += tick) {
    const mark = span(nats === top ? "tick last" : "tick", nats === top ? `${nats}+` : `${nats}`);
    mark.style.left = at(nats);
    below.append(mark);
  }
  const scale = h("div", { class: "key-scale" }, h("div", { class: "key-above" }, guess), bar, below);
  return h("div", { class: "loss-key" }, scale, span("key-words", "loss, nats: one scale for every panel"));
}

// The pointed query's prediction: the top five for its target and the actual one, as trained and (a run trained
// without the mask) with the mask put back, side by side, at the temperature the answer was computed at; for a run
// that hides tokens, a button that hides it, or shows it again.
function predictionView(panel) {
  const caption = message("prediction-caption", "");
  const hide = h("button", { type: "button", class: "hide" });
  hide.addEventListener("click", () => toggleHidden(panel, Number(hide.dataset.query)));
  let columns = [];
  const show = (answer) => {
    columns = answer.strips.map((strip) => {
      const table = h("table", { class: "top" });
      const actual = message("actual", "");
      const element = h("div", { class: "setting", "data-tag": strip.tag }, span("setting-name", strip.name));
      element.append(table, actual);
      return { element, table, actual };
    });
    const side = h("div", { class: "columns" }, ...columns.map((column) => column.element));
    return [h("div", { class: "prediction" }, h("div", { class: "prediction-head" }, caption, hide), side)];
  };
  const point = (answer, { i }) => {
    caption.textContent = predictionCaption(answer, i);
    hide.hidden = !hideable(panel, i);
    hide.dataset.query = i;
    hide.textContent = answer.blanks.includes(i)
      ? `Show ${quote(answer.strips[0].predictions[i].next)} again`
      : `Hide ${quote(answer.tokens[i])} behind the blank`;
    answer.strips.forEach((strip, k) => {
      const { top, next } = strip.predictions[i];
      columns[k].table.replaceChildren(...top.map(([label, p]) => choice(label, p, label === next)));
      columns[k].actual.textContent = actualToken(answer, strip.predictions[i]);
    });
  };
  return { show, point };
}

function predictionCaption(answer, i) {
  const at = `i=${i} ${quote(answer.tokens[i])}`;
  const five = `the top five at temperature ${answer.temperature}`;
  if (!answer.blanks.includes(i)) {
    const both = answer.strips.length > 1 ? ", as trained and with the mask put back" : "";
    return say(answer.words.top_caption, { at, five, both });
  }
  const hiding = answer.strips[0].predictions[i].next;
  const which = hiding === null ? `typed at i=${i}` : `at i=${i}, hiding ${quote(hiding)}`;
  return `The blank ${which}: its ${five.slice(4)}`;
}

// The query's target and its probability and loss; or why it has none.
function actualToken(answer, { next, p_next: chance, loss }) {
  const { missing, target } = answer.words;
  if (next === null) return `${missing}: no ${target} to score`;
  const at = answer.temperature === 1 ? "" : " (at temperature 1)";
  return `${target} ${quote(next)}: p ${probability(chance)} · loss ${loss.toFixed(3)} nats${at}`;
}

function choice(label, p, actual) {
  const bar = span("pbar", "");
  bar.style.width = `${(p * 100).toFixed(1)}px`;
  return h(
    "tr",
    { class: actual ? "choice actual" : "choice" },
    h("td", { class: "guess" }, span("token", label)),
    h("td", { class: "bar-cell" }, bar),
    h("td", { class: "p" }, probability(p)),
  );
}

// What the look gives the pointed query: its target's probability (a typed blank's likeliest token's) with its row
// of weights as trained, with the keys its task's mask hides taken away, uniform and none at all, the model run
// again; and the server's sentence about them.
function counterfactualView() {
  const [caption, numbers, words] = ["cf-caption", "cf-numbers", "cf-words"].map((name) => message(name, ""));
  const show = () => [h("div", { class: "counterfactual" }, caption, numbers, words)];
  const point = (answer, { i }) => {
    const look = answer.counterfactuals[i];
    numbers.replaceChildren();
    caption.textContent = lookCaption(answer, i);
    words.textContent = look ? look.words : "";
    if (!look) return;
    LOOKS.forEach(([kind, name], k) => {
      if (k) numbers.append(" · ");
      const part = h("span", { class: "cf", "data-kind": kind }, span("cf-name", `${name ?? answer.words.masked} `));
      numbers.append(part);
      part.append(span("cf-p", probability(look[kind])));
    });
  };
  return { show, point };
}

function lookCaption(answer, i) {
  const look = answer.counterfactuals[i];
  const layer = answer.n_layer > 1 ? ` (layer ${answer.layer})` : "";
  if (!look) {
    const why = answer.words.no_counterfactual; // the task's
    return `${why[0].toUpperCase()}${why.slice(1)}.`;
  }
  const guessed = answer.strips[0].predictions[i].next === null ? ", its likeliest" : "";
  return (
    `What the look gives query ${i}: p(${quote(look.target)}${guessed}) with its weights ` +
    `(${sides(answer, i)}), the model run again${layer}`
  );
}

// Continue the text: each open panel's run writes N tokens after it, at its step, with the controls' temperature and
// seed (the same sampling as sample.py), or fills the blanks of the text, those hidden in its panel included (a run
// that does not continue a text); the answer stays in the panel, marked when the text, step or blanks have moved on.
function continueAll(tab) {
  const { tokens, temperature, seed } = tab.controls;
  for (const panel of tab.panels.values()) {
    const { step, blanks } = panel.question;
    const asked = { run: panel.run.name, text: tab.text, step, blanks, tokens: typed(tokens) };
    panel.generation.write({ ...asked, temperature: typed(temperature), seed: typed(seed) });
  }
}

function generationView(panel) {
  const box = h("div", { class: "generation" });
  const asker = latest(panel.tab.ask);
  let asked = null;
  let answer = null;
  const draw = () => {
    box.hidden = !asked;
    box.classList.toggle("loading", Boolean(asked && !answer));
    panel.element.dataset.generated = answer ? "yes" : "";
    box.replaceChildren(...(asked ? continuation(panel, asked, answer) : []));
  };
  const write = async (question) => {
    [asked, answer] = [question, null];
    draw();
    const written = await asker("generate", question);
    if (!written) return;
    answer = written;
    draw();
  };
  const show = () => {
    draw();
    return [box];
  };
  return { show, write, stop: asker.stop };
}

function continuation(panel, asked, answer) {
  if (!answer) return [message("gen-caption", panel.words ? say(panel.words.writing, asked) : "writing…")];
  if (answer.error) return [message("error", answer.error)];
  if (answer.filled) return filling(panel, asked, answer);
  const caption =
    `Continued by ${answer.tokens.length} tokens at step ${answer.step} (${answer.file}), temperature ` +
    `${answer.temperature}, seed ${answer.seed}:`;
  const prompt = answer.prompt.length > PROMPT_SHOWN ? `…${answer.prompt.slice(-PROMPT_SHOWN)}` : answer.prompt;
  const parts = [message("gen-caption", caption)];
  parts.push(h("p", { class: "continuation" }, span("prompt", prompt), span("written", answer.continuation)));
  if (answer.note) parts.push(message("note", answer.note)); // the model read only the text's last block_size tokens
  const shown = panel.answer && !panel.answer.error ? panel.answer.step : answer.step;
  if (asked.text !== panel.tab.text || shown !== answer.step) {
    parts.push(message("note", `written for an earlier text or step: ${panel.words?.write ?? CONTINUE} again`));
  }
  return parts;
}

// A run's blanks filled: the text's tokens with each blank's filling marked, where the panel still shows the text,
// step and blanks they were filled for; else the filled text as it decodes, marked as written for an earlier one.
function filling(panel, asked, answer) {
  const n = answer.tokens.length;
  const caption =
    `Filled ${n} blank${n === 1 ? "" : "s"} at step ${answer.step} (${answer.file}), temperature ` +
    `${answer.temperature}, seed ${answer.seed}:`;
  const shown = panel.answer;
  const current =
    Boolean(shown && !shown.error) &&
    asked.text === panel.element.dataset.text &&
    asked.blanks.join() === panel.question.blanks.join() &&
    shown.step === answer.step &&
    shown.blanks.length === n;
  const box = h("p", { class: "continuation filled" });
  if (current) {
    const fillings = [...answer.tokens];
    box.append(
      ...shown.tokens.map((token, i) => (shown.blanks.includes(i) ? span("written", fillings.shift()) : token)),
    );
  } else box.append(answer.text);
  const parts = [message("gen-caption", caption), box];
  const again = `filled for an earlier text, step or blanks: ${panel.words?.write ?? CONTINUE} again`;
  if (!current) parts.push(message("note", again));
  return parts;
}

// The lesson's steps for the pointed query: q_i·k_j, the scores the softmax is fed, its weights, each key a row; a
// long text's keys scroll in their box, which opens on the key read most, the heat map staying in view. The table
// is built when the part is in view and open: below the heat map, a table of every key is most of what a key typed
// would redraw, while the text box and the heat maps are what the window shows.
function stepsView() {
  const fold = foldable("steps", "");
  const table = h("table", { class: "steps" });
  const scroller = h("div", { class: "steps-box" }, table);
  fold.fill(h("div", { class: "steps-part" }, scroller));
  let pointed = null; // the answer and query to draw once in view
  let inView = false;
  const draw = () => {
    if (!pointed || !inView || !fold.details.open) return;
    const { answer, i } = pointed;
    pointed = null;
    fold.title.replaceChildren(...lessonSteps(answer, i));
    const row = answer.weights[i];
    const largest = row.indexOf(Math.max(...row));
    const hidden = answer.causal ? answer.hidden_keys[i] : [];
    const keys = answer.tokens.flatMap((_, j) => (hidden.includes(j) ? [] : [j]));
    const lines = keys.map((j) => keyRow(answer, i, j, j === largest));
    if (hidden.length) {
      const after = afterQuery(hidden, i, answer) ? " (j > i)" : "";
      const rest = `j = ${spans(hidden)}: hidden by the mask${after}, weight exactly 0`;
      lines.push(h("tr", { class: "hidden-keys" }, h("td", { colspan: 6 }, rest)));
    }
    table.replaceChildren(stepsHead(answer), h("tbody", {}, ...lines));
    table.dataset.query = i; // what it shows: the page tests wait on it
    // In the next frame: read now, the offsets would force a layout of the page for each panel, key after key.
    requestAnimationFrame(() => {
      scroller.scrollTop = Math.max(0, (lines[keys.indexOf(largest)]?.offsetTop ?? 0) - scroller.clientHeight / 2);
    });
  };
  const watcher = new IntersectionObserver(([entry]) => {
    inView = entry.isIntersecting;
    draw();
  });
  watcher.observe(fold.details);
  fold.details.addEventListener("toggle", draw);
  const point = (answer, { i }) => {
    pointed = { answer, i };
    delete table.dataset.query;
    draw();
  };
  return { show: () => [fold.details], point, stop: () => watcher.disconnect() };
}

// Key positions in ascending order as runs: "4 to 12", "3, 5 to 9".
function spans(keys) {
  const runs = [];
  for (const j of keys) {
    const last = runs[runs.length - 1];
    if (last && last[1] === j - 1) last[1] = j;
    else runs.push([j, j]);
  }
  return runs.map(([first, end]) => (first === end ? `${first}` : `${first} to ${end}`)).join(", ");
}

// Whether the keys hidden from query i are exactly those after it, the causal triangle's row.
function afterQuery(hidden, i, answer) {
  return hidden.length === answer.tokens.length - 1 - i && hidden.every((j) => j > i);
}

function lessonSteps(answer, i) {
  const { d_k: dk, softcap } = answer;
  const division = answer.scale
    ? [`divide by √d_k = √${dk} = ${Math.sqrt(dk).toFixed(3)}`]
    : [bold("unscaled"), ": this run feeds the raw scores to the softmax"];
  const steps = [
    ["score q_i·k_j"],
    [...division, softcap ? `, then cap at ${softcap}·tanh(s/${softcap})` : ""],
    ["softmax: a_ij"],
    ["y_i = Σ_j a_ij v_j: the values mixed in these proportions"],
  ];
  const numbered = steps.flatMap((step, k) => [k ? " · " : "", bold(`${k + 1}`), " ", ...step.flatMap(subscripted)]);
  return [`The lesson's steps for query i=${i} ${quote(answer.tokens[i])}: `, ...numbered];
}

function stepsHead(answer) {
  const fed = answer.softcap ? "capped" : answer.scale ? `÷ √${answer.d_k}` : "unscaled";
  const names = ["j", "token", "q_i·k_j", fed, "a_ij", ""];
  return h("thead", {}, h("tr", {}, ...names.map((name) => h("th", {}, ...subscripted(name)))));
}

function keyRow(answer, i, j, largest) {
  const weight = answer.weights[i][j];
  const bar = span("bar", "");
  Object.assign(bar.style, { width: `${(weight * 60).toFixed(1)}px`, background: blues(0.35 + weight * 0.65) });
  const mark = h("td", { class: "mark" }, bar, ...(leaks(answer, i, j) ? [span("leak", "future")] : []));
  const cells = [
    h("td", { class: "j" }, j),
    h("td", { class: "token" }, answer.tokens[j]),
    h("td", { class: "raw" }, number(answer.raw[i][j])),
    h("td", { class: "fed" }, number(answer.fed[i][j])),
    h("td", { class: "weight" }, weight.toFixed(3)),
  ];
  return h("tr", { "data-key": j, ...(largest ? { class: "largest" } : {}) }, ...cells, mark);
}

// Each ramp's colours as [r, g, b], parsed once: a heat map asks for thousands of cells at every key.
const CHANNELS = new Map();

// The colour at `position` (0 to 1) along the ramp `colours`, as [r, g, b].
function channels(colours, position) {
  if (!CHANNELS.has(colours)) {
    CHANNELS.set(colours, colours.map((hex) => [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16))));
  }
  const at = Math.min(Math.max(position, 0), 1) * (colours.length - 1);
  const low = Math.floor(at);
  const high = Math.min(low + 1, colours.length - 1);
  const mix = at - low;
  const [a, b] = [CHANNELS.get(colours)[low], CHANNELS.get(colours)[high]];
  return a.map((value, k) => Math.round(value + (b[k] - value) * mix));
}

function ramp(colours, position) {
  return `rgb(${channels(colours, position).join(",")})`;
}

function blues(weight) {
  return ramp(BLUES, weight);
}

// A probability as viewer/predictions.py's probability(p) writes it, to the character: f"{p:.2f}" from 0.1, else
// f"{p:.2g}" (0.031, 0.0029, 2.1e-05), so the panel's numbers read as the server's sentence. Python rounds the
// double's exact value half to even, where JS's toFixed and toPrecision round a tie up and write exponents
// unpadded: the digits are rounded here from the exact expansion (toExponential(99) shows any tie whole).
function probability(p) {
  if (p === null) return "—";
  if (p === 0) return "0";
  const [mantissa, exponent] = p.toExponential(99).split("e");
  const digits = mantissa.replace(".", "");
  const power = Number(exponent); // p = d.ddd × 10^power
  if (p >= 0.1) return pointed(halfEven(digits, power + 3), -2); // two decimals
  const kept = halfEven(digits, 2); // two significant digits, "100" where 0.0996 carried to 0.10
  const e = power + kept.length - 2;
  if (e < -4) return `${pointed(kept.slice(0, 2), -1).replace(/\.0$/, "")}e-${String(-e).padStart(2, "0")}`;
  return pointed(kept.slice(0, 2), e - 1).replace(/\.?0+$/, "");
}

// The first `keep` of a number's digits, rounded half to even on the digits after them.
function halfEven(digits, keep) {
  const head = BigInt(digits.slice(0, keep));
  const [next, rest] = [digits[keep], digits.slice(keep + 1)];
  return String(head + BigInt(next > "5" || (next === "5" && (/[1-9]/.test(rest) || head % 2n === 1n))));
}

// The integer written in `digits` times 10^shift (shift < 0), as a decimal.
function pointed(digits, shift) {
  const padded = digits.padStart(1 - shift, "0");
  return `${padded.slice(0, shift)}.${padded.slice(shift)}`;
}

function number(value) {
  return value === null ? "−∞" : value.toFixed(3);
}

function quote(token) {
  return `'${token}'`;
}

// An element with its attributes and children (text or nodes): the one way this page builds its HTML.
function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

function span(className, text) {
  return h("span", { class: className }, text);
}

// The error line of an answer, or the note that the panel moved off a step the run no longer keeps.
function errorLine(answer) {
  return (text) => message(answer?.error ? "error" : "note moved", text);
}

function message(className, text) {
  return h("p", { class: className }, text);
}

// Text with subscripts written as in x_ij: its pieces, each _word a <sub>; a node passes as it is.
function subscripted(piece) {
  return typeof piece === "string" ? piece.split(/_(\w+)/).map((part, k) => (k % 2 ? sub(part) : part)) : [piece];
}

function sub(text) {
  return h("sub", {}, text);
}

function bold(text) {
  return h("b", {}, text);
}
