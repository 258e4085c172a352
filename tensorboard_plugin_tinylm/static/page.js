// The Attention tab's answers computed in the page: the exported page's transport. answering(data) gives index.js an
// `ask(route, body, signal)` that answers the routes "runs", "attention" and "generate" with the JSON that
// tensorboard_plugin_tinylm/answers.py answers, computed here from the runs' weights (viewer/page.py exports them).
//
// The model's forward is TinyLM's (model/tinylm.py, model/attention.py) in Float64 over the float32 weights:
// embeddings and learned positions (or none), pre-LayerNorm blocks of single-head attention through the task's mask
// (model/mask.py's Mask: the causal triangle, a prefix LM's prefix open both ways; scaled or not, masked or not,
// QK-norm, softcap, a finite mask value, with or without projections) and MLP, the LM head. What the answers compute
// of it is viewer/'s, ported line by line: readings.py (the text read and cut, each row's statistics and verdict),
// predictions.py (the loss strips, the top five, the counterfactual looks and their sentence), generation.py (text
// written; sampled here with the page's own generator, so only the likeliest text matches sample.py's). Every
// message and sentence is the Python one to the character: Python's repr and number formats are ported below.

// ---- the routes -----------------------------------------------------------------------------------------------

export function answering(data) {
  const engine = { data, models: new Map(), constants: data.constants };
  return async (route, body, signal) => {
    if (signal?.aborted) throw new Error("aborted");
    try {
      if (route === "runs") return copied(data.runs);
      const request = body === undefined ? undefined : copied(body); // as the server reads it: JSON
      if (route === "attention") return attention(engine, request);
      if (route === "generate") return generate(engine, request);
      return { error: `./${route}: no such route in this page` };
    } catch (error) {
      if (error instanceof BadRequest) return { error: error.message, ...error.fields };
      return { error: `the page could not answer (${error.name}: ${String(error.message).split("\n")[0]})` };
    }
  };
}

class BadRequest extends Error {
  constructor(message, fields = {}) {
    super(message);
    this.fields = fields;
  }
}

class DataError extends Error {}

function attention(engine, request) {
  request = fields(request, "run, text and layer");
  const { entry, model } = runAt(engine, request);
  const text = request.text;
  const layer = has(request, "layer") ? request.layer : 0;
  const blanks = checkedBlanks(request);
  const temperature = checkedTemperature(engine, request);
  if (typeof text !== "string") throw new BadRequest("text: must be a string");
  const n = model.config.n_layer;
  const problem = layerProblem(layer, n);
  if (problem) throw new BadRequest(problem);
  let reading;
  try {
    reading = read(engine, model, text, blanks);
  } catch (error) {
    if (error instanceof DataError) throw new BadRequest(error.message);
    throw error;
  }
  const predictions = predict(engine, model, reading, layer, temperature);
  const V = model.config.vocab_size;
  return {
    run: entry.name,
    step: model.step,
    task: model.task.name,
    continues_text: model.task.continues_text,
    words: copied(model.task.words),
    blanks: reading.ids.flatMap((token, i) => (token === model.task.blank ? [i] : [])),
    ...traceJson(engine, model, reading, layer),
    file: model.file,
    steps: copied(entry.steps),
    run_note: model.run_note,
    temperature,
    vocab_size: V,
    uniform_loss: rounded(Math.log(V)),
    ...predictions,
  };
}

function generate(engine, request) {
  request = fields(request, "run, text and tokens");
  const { entry, model } = runAt(engine, request);
  const { text, tokens } = request;
  const seed = has(request, "seed") ? request.seed : engine.constants.seed;
  const temperature = checkedTemperature(engine, request);
  const task = model.task;
  const blanks = checkedBlanks(request);
  const most = engine.data.runs.max_generate;
  const wrong = !isInt(tokens) || !(tokens >= 1 && tokens <= most);
  if (task.continues_text && wrong) {
    throw new BadRequest(`tokens=${repr(tokens)}: must be a whole number from 1 to ${most}`);
  }
  const seedProblem = seedProblemOf(engine, seed);
  if (seedProblem) throw new BadRequest(seedProblem);
  if (typeof text !== "string" || !text) throw new BadRequest("text: give the text to continue (a string, not empty)");
  const length = codePoints(text).length;
  const maxChars = engine.data.runs.max_chars;
  if (length > maxChars) throw new BadRequest(`text: ${thousands(length)} characters; at most ${thousands(maxChars)}`);
  let prompt;
  try {
    prompt = hide(model, encode(model, text, "text"), blanks, "blanks").ids;
  } catch (error) {
    if (error instanceof DataError) throw new BadRequest(error.message);
    throw error;
  }
  const problem = blanksProblem(model, prompt, "text");
  if (problem) throw new BadRequest(problem);
  const ids = write(model, prompt, tokens, temperature, seed);
  const written = task.continues_text
    ? ids.slice(prompt.length)
    : ids.filter((_, i) => prompt[i] === task.blank);
  const blockSize = model.config.block_size;
  const context = prompt.length <= blockSize ? "" : `the model reads the text's last ${blockSize} tokens as context`;
  return {
    run: entry.name,
    step: model.step,
    file: model.file,
    prompt: text,
    continuation: decode(model, written),
    tokens: written.map((i) => model.tok.labels[i]),
    text: decode(model, ids),
    filled: !task.continues_text,
    note: context,
    temperature,
    seed,
  };
}

// A JSON value copied, so that what index.js does with an answer never reaches the page's data.
function copied(value) {
  return JSON.parse(JSON.stringify(value));
}

function has(object, key) {
  return Object.prototype.hasOwnProperty.call(object, key);
}

function fields(request, names) {
  if (request === null || typeof request !== "object" || Array.isArray(request)) {
    throw new BadRequest(`the request must be a JSON object with ${names}`);
  }
  return request;
}

// The run the request names at its step (null: the run's default checkpoint), among the runs the page holds.
function runAt(engine, request) {
  const run = has(request, "run") ? request.run : null;
  const step = has(request, "step") ? request.step : null;
  const entry = engine.data.runs.runs.find((listed) => listed.name === run);
  if (typeof run !== "string" || !run || !entry) throw new BadRequest(`run ${repr(run)}: no such run in this page`);
  if (step !== null && !isInt(step)) {
    throw new BadRequest(`step=${repr(step)}: must be a whole number, or null for the run's default checkpoint`);
  }
  const wanted = step === null ? entry.step : step;
  const models = engine.data.models[entry.name];
  if (!has(models, String(wanted))) {
    const kept = entry.steps.map((s) => String(s.step)).join(", ") || "none";
    throw new BadRequest(`step=${repr(step)}: ${entry.name} kept no checkpoint at that step (kept: ${kept})`, {
      steps: copied(entry.steps),
    });
  }
  const key = `${entry.name}\u0000${wanted}`;
  if (!engine.models.has(key)) engine.models.set(key, prepared(models[String(wanted)]));
  return { entry, model: engine.models.get(key) };
}

function checkedBlanks(request) {
  const blanks = has(request, "blanks") ? request.blanks : [];
  if (!Array.isArray(blanks) || !blanks.every(isInt)) {
    throw new BadRequest(`blanks=${repr(blanks)}: must be a list of token positions, whole numbers`);
  }
  return blanks;
}

function checkedTemperature(engine, request) {
  const temperature = has(request, "temperature") ? request.temperature : 1.0;
  const problem = temperatureProblem(engine, temperature);
  if (problem) throw new BadRequest(problem);
  return temperature;
}

// viewer/generation.py's temperature_problem and seed_problem.
function temperatureProblem(engine, temperature, setting = "temperature") {
  const [low, high] = engine.data.runs.temperatures;
  if (typeof temperature !== "number") return `${setting}=${repr(temperature)}: must be a number`;
  if (!Number.isFinite(temperature)) return `${setting}=${pyStr(temperature)}: must be a finite number`;
  if (temperature <= 0) return `${setting}=${pyStr(temperature)}: must be positive`;
  if (!(low <= temperature && temperature <= high)) {
    return `${setting}=${pyStr(temperature)}: must be between ${floatRepr(low)} and ${general(high, 6)}`;
  }
  return "";
}

function seedProblemOf(engine, seed, setting = "seed") {
  if (!isInt(seed)) return `${setting}=${repr(seed)}: must be a whole number`;
  const [low, high] = engine.constants.seeds;
  const value = BigInt(pyStr(seed));
  if (!(BigInt(low) <= value && value <= BigInt(high))) {
    return `${setting}=${pyStr(seed)}: must be between ${low} and ${high}`;
  }
  return "";
}

// viewer/readings.py's layer_problem.
function layerProblem(layer, n, setting = "layer") {
  if (!isInt(layer)) return `${setting}=${repr(layer)}: must be a whole number`;
  if (!(layer >= 0 && layer < n)) {
    return `${setting}=${pyStr(layer)}: this model has ${n} layer${n > 1 ? "s" : ""} (${setting}=0 to ${n - 1})`;
  }
  return "";
}

// ---- a text read (viewer/readings.py) -------------------------------------------------------------------------

function read(engine, model, text, blanks, setting = "text", blanksSetting = "blanks") {
  if (!text) throw new DataError(`${setting}: empty; give the text whose attention to show`);
  const length = codePoints(text).length;
  const maxChars = engine.data.runs.max_chars;
  if (length > maxChars) {
    throw new DataError(
      `${setting}: ${thousands(length)} characters; at most ${thousands(maxChars)} (the model reads its first tokens)`,
    );
  }
  const { ids, hidden } = hide(model, encode(model, text, setting), blanks, blanksSetting);
  const blockSize = model.config.block_size;
  const kept = ids.slice(0, blockSize);
  const following = ids.length > blockSize ? ids[blockSize] : null;
  const forward = forwardAll(model, kept, null);
  return {
    ids: kept,
    labels: kept.map((i) => model.tok.labels[i]),
    given: ids.length,
    blockSize,
    forward,
    targets: targetsOf(model, kept, following, hidden),
    following,
  };
}

function traceJson(engine, model, reading, layer) {
  const traced = reading.forward.layers[layer].attended;
  const T = reading.ids.length;
  const matrix = (values) =>
    Array.from({ length: T }, (_, i) => Array.from(values.subarray(i * T, (i + 1) * T), rounded));
  const config = model.config;
  return {
    layer,
    n_layer: config.n_layer,
    d_k: config.d_k,
    scale: config.scale,
    causal: config.causal,
    softcap: config.softcap,
    block_size: reading.blockSize,
    tokens: reading.labels,
    note: cutNote(reading),
    hidden_keys: reading.ids.map((_, i) => reading.ids.flatMap((_, j) => (hides(model, i, j) ? [j] : []))),
    targets_ahead: targetKey(model, 0) > 0,
    mask_note: maskNote(model, reading),
    raw: matrix(traced.raw),
    fed: matrix(traced.fed),
    weights: matrix(traced.weights),
    stats: rowStatistics(traced.weights, T),
    saturated: engine.constants.saturated,
    verdicts: reading.ids.map((_, i) => verdict(engine, model, reading, layer, i)),
  };
}

function cutNote(reading) {
  if (reading.given <= reading.ids.length) return "";
  const context = `model.block_size=${reading.blockSize}`;
  return `cut to its first ${reading.ids.length} of ${reading.given} tokens: the model's context is ${context}`;
}

// answers.py's mask_note: where the prefix of the task's mask ends.
function maskNote(model, reading) {
  const prefix = model.task.prefix;
  const length = reading.ids.length;
  if (prefix <= 1) return "";
  if (length <= prefix) {
    return `the text's ${length} tokens lie inside the prefix of ${prefix}: each reads every other both ways`;
  }
  const last = prefix - 1;
  return (
    `the prefix ends at token ${last}: tokens 0 to ${last} read each other both ways, ` +
    "each later one reads up to itself"
  );
}

// model/statistics.py's entropy, max_weight, past_share and future_share of each row.
function rowStatistics(weights, T) {
  const stats = { entropy: [], max_weight: [], past_mass: [], future_mass: [] };
  for (let i = 0; i < T; i++) {
    let entropy = 0;
    let largest = -Infinity;
    let past = 0;
    let future = 0;
    for (let j = 0; j < T; j++) {
      const a = weights[i * T + j];
      if (a > 0) entropy -= a * Math.log(a);
      largest = Math.max(largest, a);
      if (j < i) past += a;
      if (j > i) future += a;
    }
    stats.entropy.push(entropy + 0); // 0, not -0
    stats.max_weight.push(largest);
    stats.past_mass.push(past);
    stats.future_mass.push(future);
  }
  return stats;
}

function verdict(engine, model, reading, layer, query) {
  const T = reading.ids.length;
  const row = reading.forward.layers[layer].attended.weights.subarray(query * T, (query + 1) * T);
  const target = targetKey(model, query);
  const shown = target < T && reading.ids[target] === reading.targets[query];
  const words = [];
  let hidden = 0;
  for (let j = 0; j < T; j++) if (hides(model, query, j)) hidden += row[j];
  if (shown && row[target] > engine.constants.leak) {
    const share = `${fixed(row[target], 2)} of the weight sits on token ${target}`;
    words.push(`${share}, the very token it is asked to predict: the leak`);
  } else if (target > query && hidden > engine.constants.leak) {
    words.push("most of the weight sits on future tokens (j > i) that the task's mask hides");
  }
  const largest = Math.max(...row);
  if (largest > engine.constants.saturated) {
    words.push(`one-hot: the softmax is saturated (largest weight ${fixed(largest, 4)})`);
  }
  return words.join("; ");
}

// ---- the tasks (task/next_token.py, task/fill_blank.py, task/prefix_lm.py): what a position predicts, how a text
// hides tokens, the mask it is read through ------------------------------------------------------------------------

function fillsBlanks(model) {
  return model.task.name === "fill_blank";
}

// A prefix LM scores only the tokens after its prefix: its first positions predict tokens inside it.
function readsAPrefix(model) {
  return model.task.name === "prefix_lm";
}

// model/mask.py's Mask.hidden_keys: whether key j is hidden from query i, j > i outside the prefix of the task's mask.
function hides(model, i, j) {
  return j > i && j >= model.task.prefix;
}

function targetKey(model, query) {
  return fillsBlanks(model) ? query : query + 1;
}

function targetsOf(model, ids, following, hidden) {
  if (fillsBlanks(model)) return ids.map((_, i) => (hidden.has(i) ? hidden.get(i) : null));
  const next = [...ids.slice(1), following];
  if (readsAPrefix(model)) return next.map((target, i) => (i < model.task.prefix - 1 ? null : target));
  return next;
}

function stripTargets(model, ids, targets) {
  if (!fillsBlanks(model)) return targets;
  return ids.map((token, i) => (token === model.task.blank ? targets[i] : token));
}

function guess(model, ids, query) {
  return fillsBlanks(model) && ids[query] === model.task.blank;
}

function nothingToScore(model, labels) {
  if (fillsBlanks(model)) return "the text is all blanks: no token of it to hide and score";
  if (readsAPrefix(model)) {
    return (
      `the text's ${labels.length} tokens end inside the prefix of ${model.task.prefix} (task.prefix_share of ` +
      "model.block_size), where nothing is scored: give more"
    );
  }
  return `the text is one token (${repr(labels[0])}): there is no next token to score`;
}

// The text's tokens; a run that fills blanks reads the marker as the blank and "\_" as the marker itself, the text
// cut at each of them (task/fill_blank.py's encode).
function encode(model, text, setting) {
  if (!fillsBlanks(model)) return encodeKnown(model, text, setting);
  const marker = "_";
  const ids = [];
  let piece = "";
  for (const part of text.split(/(\\_|_)/)) {
    if (part === marker) {
      if (piece) ids.push(...encodeKnown(model, piece, setting));
      ids.push(model.task.blank);
      piece = "";
    } else piece += part === `\\${marker}` ? marker : part;
  }
  if (piece) ids.push(...encodeKnown(model, piece, setting));
  if (!ids.length) throw new DataError(`${setting}: empty; give the text whose attention to show`);
  return ids;
}

function hide(model, ids, positions, setting) {
  if (!fillsBlanks(model)) {
    if (positions.length) {
      throw new DataError(`${setting}: this run hides no token (task=${model.task.name}); task=fill_blank runs do`);
    }
    return { ids, hidden: new Map() };
  }
  const outside = positions.filter((i) => !(i >= 0 && i < ids.length));
  if (outside.length) {
    throw new DataError(`${setting}: position ${pyStr(outside[0])} is outside the text's ${ids.length} tokens`);
  }
  const blank = model.task.blank;
  const hidden = new Map();
  for (const i of positions) if (ids[i] !== blank) hidden.set(i, ids[i]);
  return { ids: ids.map((token, i) => (hidden.has(i) ? blank : token)), hidden };
}

// data/tokenizer.py's encode_known for the character tokenizer: the added tokens found whole first ([UNK] typed is
// the unknown token), then a token a character; characters never seen in training refused, and text not Unicode.
function encodeKnown(model, text, setting) {
  const problem = notUnicode(text, setting);
  if (problem) throw new DataError(problem);
  const { vocab, added, unknown } = model.tok;
  const chars = codePoints(text);
  const ids = [];
  const unseen = new Set();
  for (let at = 0; at < chars.length; ) {
    const whole = added.find(([content]) => startsAt(chars, at, content));
    if (whole) {
      const [content, id] = whole;
      ids.push(id);
      if (id === unknown) unseen.add(content);
      at += codePoints(content).length;
      continue;
    }
    const id = vocab.get(chars[at]);
    ids.push(id ?? unknown);
    if (id === undefined || id === unknown) unseen.add(chars[at]);
    at += 1;
  }
  if (unseen.size) {
    const listed = [...unseen].sort(byCodePoints).map(repr).join(", ");
    throw new DataError(`${setting}: ${listed} never occurred in this model's training text`);
  }
  return ids;
}

function startsAt(chars, at, content) {
  const wanted = codePoints(content);
  return wanted.every((c, k) => chars[at + k] === c);
}

// data/tokenizer.py's not_unicode: a lone surrogate, or one that stands for a byte of the command line.
function notUnicode(text, setting) {
  let at = 0;
  for (const char of text) {
    const code = char.codePointAt(0);
    if (code >= 0xd800 && code <= 0xdfff) {
      const what =
        code >= 0xdc80 && code <= 0xdcff
          ? `the byte 0x${(code - 0xdc00).toString(16).padStart(2, "0")}, which is not UTF-8`
          : `U+${code.toString(16).toUpperCase().padStart(4, "0")}, a lone surrogate (half of a UTF-16 pair)`;
      return `${setting}: not valid Unicode: character ${at} (counting from 0) is ${what}; give the text as UTF-8`;
    }
    at += 1;
  }
  return "";
}

function decode(model, ids) {
  return ids.map((i) => model.tok.pieces[i]).join("");
}

// viewer/generation.py's blanks_problem.
function blanksProblem(model, ids, setting) {
  if (model.task.continues_text) return "";
  if (!ids.includes(model.task.blank)) {
    return (
      `${setting}: this run fills blanks (task=${model.task.name}) and does not continue a text: mark each missing ` +
      "token with _ (a literal _ is \\_)"
    );
  }
  const blockSize = model.config.block_size;
  if (ids.length > blockSize) {
    return `${setting}: ${ids.length} tokens; a model that fills blanks reads at most model.block_size=${blockSize}`;
  }
  return "";
}

// ---- predictions (viewer/predictions.py) -------------------------------------------------------------------------

function predict(engine, model, reading, layer, temperature) {
  const targets = stripTargets(model, reading.ids, reading.targets);
  const logits = model.task.strips.map((kind) => stripLogits(model, reading, kind.causal));
  const strips = model.task.strips.map((kind, s) => strip(engine, model, kind, logits[s], targets, temperature));
  const looks = counterfactuals(engine, model, reading, layer, logits[0]);
  const scored = targets.some((target) => target !== null);
  return { strips, counterfactuals: looks, problem: scored ? "" : nothingToScore(model, reading.labels) };
}

// Each position's logits as the task reads its prediction there: the text's own forward for next-token prediction
// (`causal` as TinyLM's forward takes it), the text with that position blanked for a run that fills blanks.
function stripLogits(model, reading, causal) {
  const { ids, forward } = reading;
  if (!fillsBlanks(model)) return causal === null ? forward.logits : forwardAll(model, ids, causal).logits;
  const blank = model.task.blank;
  return ids.map((token, i) => {
    if (token === blank) return forward.logits[i];
    return changedForward(model, forward, i, { input: embedded(model, blank, i) });
  });
}

// log softmax(logits)[target], as torch's log_softmax computes it, without the other entries.
function logProbability(logits, target) {
  const top = Math.max(...logits);
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - top);
  return logits[target] - (Math.log(sum) + top);
}

// The `k` likeliest ids of `p`, likeliest first, the lower id first among equals: a sort of every id by p, cut to k,
// with one pass over them.
function likeliest(p, k) {
  const top = [];
  for (let id = 0; id < p.length; id++) {
    const full = top.length === k;
    if (full && !(p[id] > p[top[k - 1]])) continue;
    let at = full ? k - 1 : top.length;
    for (; at > 0 && p[top[at - 1]] < p[id]; at--) top[at] = top[at - 1];
    top[at] = id;
  }
  return top;
}

function softmax(logits, temperature = 1) {
  const scaled = Array.from(logits, (x) => x / temperature);
  const top = Math.max(...scaled);
  const e = scaled.map((x) => Math.exp(x - top));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

function strip(engine, model, kind, logits, targets, temperature) {
  const labels = model.tok.labels;
  const losses = targets.map((target, i) => (target === null ? null : -logProbability(logits[i], target)));
  const predictions = logits.map((row, i) => {
    const p = softmax(row, temperature);
    const top = likeliest(p, engine.constants.top).map((id) => [labels[id], rounded(p[id])]);
    const target = targets[i];
    if (target === null) return { top, next: null, p_next: null, loss: null };
    return { top, next: labels[target], p_next: rounded(p[target]), loss: rounded(losses[i]) };
  });
  const scored = losses.filter((loss) => loss !== null);
  const mean = scored.length ? scored.reduce((a, b) => a + b, 0) / scored.length : null;
  return {
    name: kind.name,
    tag: kind.tag,
    causal: kind.causal === null ? model.config.causal : kind.causal,
    losses: losses.map(rounded),
    mean: rounded(mean),
    predictions,
  };
}

// Query i's rows of weights at `layer` for (b) its future masked, (c) uniform over the keys it may see, (d) none.
function counterfactualRows(model, reading, layer, i) {
  const T = reading.ids.length;
  const fed = reading.forward.layers[layer].attended.fed.subarray(i * T, (i + 1) * T);
  const masked = softmax(Array.from(fed, (x, j) => (hides(model, i, j) ? -Infinity : x)));
  const visible = Array.from({ length: T }, (_, j) => (!model.config.causal || !hides(model, i, j) ? 1 : 0));
  const count = visible.reduce((a, b) => a + b, 0);
  return { masked, uniform: visible.map((v) => v / count), no_look: new Array(T).fill(0) };
}

// Every query's counterfactual looks as answered (null where it has no target), each computed when first read: the
// panel reads only the pointed query's, and each query's three looks run the rest of the model three times, more
// work than the forward itself for every key typed. JSON.stringify of the answer reads, and so computes, them all.
function counterfactuals(engine, model, reading, layer, logits) {
  const { ids, targets } = reading;
  const asked = targets.map((target, i) => (target !== null || !guess(model, ids, i) ? target : argmax(logits[i])));
  const found = [];
  asked.forEach((target, i) => {
    if (target === null) {
      found[i] = null;
      return;
    }
    let look = null;
    const get = () => (look ??= counterfactual(engine, model, reading, layer, logits[i], i, target));
    Object.defineProperty(found, i, { get, enumerable: true });
  });
  return found;
}

// Query i's look at `target`: its probability as trained and with each counterfactual row, and their sentence.
function counterfactual(engine, model, reading, layer, logits, i, target) {
  const T = reading.ids.length;
  const rows = counterfactualRows(model, reading, layer, i);
  const trained = reading.forward.layers[layer].attended.weights.subarray(i * T, (i + 1) * T);
  const numbers = { trained: softmax(logits)[target] };
  for (const kind of engine.constants.counterfactuals) {
    // A row equal to the trained one (the future masked where the mask wrote minus infinity) needs no forward.
    const same = rows[kind].every((a, j) => a === trained[j]);
    const looked = same ? logits : changedForward(model, reading.forward, i, { layer, row: rows[kind] });
    numbers[kind] = softmax(looked)[target];
  }
  const label = model.tok.labels[target];
  const sentence = words(engine, model, label, numbers, model.config.causal);
  const shown = Object.fromEntries(Object.entries(numbers).map(([kind, p]) => [kind, rounded(p)]));
  return { ...shown, target: label, words: sentence };
}

function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

function far(engine, x, y) {
  return x >= engine.constants.far * y && x - y >= engine.constants.notable;
}

function close(engine, x, y) {
  return Math.abs(x - y) <= Math.max(engine.constants.close * Math.max(x, y), 0.01);
}

// What the four probabilities say, in one sentence: viewer/predictions.py's words().
function words(engine, model, label, numbers, causal) {
  const right = model.task.words;
  const [a, b, c, d] = ["trained", ...engine.constants.counterfactuals].map((kind) => probability(numbers[kind]));
  const { trained, masked, uniform, no_look: noLook } = numbers;
  const name = `p(${repr(label)})`;
  if (!causal && far(engine, trained, masked)) return `${right.hiding} takes ${name} from ${a} to ${b}: ${right.read}`;
  if (!causal && trained - masked >= engine.constants.part) {
    return `${right.hiding} takes ${name} from ${a} to ${b}: ${right.partly}`;
  }
  if (!causal && far(engine, masked, trained)) {
    return `${right.hiding} raises ${name} from ${a} to ${b}: ${right.elsewhere}`;
  }
  const most = Math.max(trained, masked, uniform, noLook);
  if (most < engine.constants.unexpected) {
    const highest = probability(most);
    return `${name} is at most ${highest} whichever way it looks (${a} as trained): it does not expect it here`;
  }
  if (close(engine, trained, noLook)) {
    return `without the look ${name} is ${d} (${a} as trained): the residual alone predicts it`;
  }
  if (close(engine, trained, uniform)) {
    return (
      `uniform weights give ${name} ${c} (${a} as trained, ${d} without the look): that it looks matters, not where`
    );
  }
  if (trained > uniform) {
    return (
      `where it looks raises ${name} from ${c} (uniform weights) to ${a} (${d} without the look): the look matters`
    );
  }
  return `its look lowers ${name}: ${a} as trained, ${c} with uniform weights, ${d} without the look`;
}

// viewer/predictions.py's probability(): "1.00, 0.43, 0.031, 0.0029, 2.1e-05".
function probability(p) {
  return p >= 0.1 ? fixed(p, 2) : general(p, 2);
}

// ---- writing (viewer/generation.py) ----------------------------------------------------------------------------

// The prompt continued by `tokens` tokens, reading at most block_size of context, or its blanks filled, each token
// drawn from the softmax of the logits / temperature with the page's generator seeded by `seed`.
function write(model, prompt, tokens, temperature, seed) {
  const draw = generator(seed);
  if (!model.task.continues_text) {
    const { logits } = forwardAll(model, prompt, null);
    const filled = (token, i) => (token === model.task.blank ? sample(softmax(logits[i], temperature), draw) : token);
    return prompt.map(filled);
  }
  const ids = [...prompt];
  const blockSize = model.config.block_size;
  for (let n = 0; n < tokens; n++) {
    const context = ids.slice(-blockSize);
    const logits = forwardAll(model, context, null, [context.length - 1]).logits[context.length - 1];
    ids.push(sample(softmax(logits, temperature), draw));
  }
  return ids;
}

function sample(p, draw) {
  let u = draw();
  for (let i = 0; i < p.length; i++) {
    u -= p[i];
    if (u < 0) return i;
  }
  return argmax(p); // what rounding left over
}

// SplitMix64 over the seed as a 64-bit word: numbers in [0, 1) with 53 random bits.
function generator(seed) {
  const mask = (1n << 64n) - 1n;
  let state = BigInt(pyStr(seed)) & mask;
  return () => {
    state = (state + 0x9e3779b97f4a7c15n) & mask;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  };
}

// ---- the model (model/tinylm.py, model/attention.py) -------------------------------------------------------------

// One checkpoint's JSON (viewer/page.py's page_model) made ready: its weights as Float64Arrays by layer.
function prepared(json) {
  const binary = atob(json.weights.base64);
  const bytes = new Uint8Array(binary.length);
  for (let k = 0; k < binary.length; k++) bytes[k] = binary.charCodeAt(k);
  const view = new DataView(bytes.buffer);
  const tensor = (name) => {
    const found = json.weights.tensors[name];
    if (!found) return null;
    const size = found.shape.reduce((a, b) => a * b, 1);
    const values = new Float64Array(size);
    for (let k = 0; k < size; k++) values[k] = view.getFloat32((found.offset + k) * 4, true);
    return values;
  };
  const config = json.config;
  const layers = Array.from({ length: config.n_layer }, (_, l) => {
    const at = (name) => tensor(`blocks.${l}.${name}`);
    return {
      ln: [at("ln_attn.weight"), at("ln_attn.bias")],
      Wq: at("attn.W_Q.weight"),
      Wk: at("attn.W_K.weight"),
      Wv: at("attn.W_V.weight"),
      Wo: at("attn.W_O.weight"),
      qNorm: at("attn.q_norm.weight"),
      kNorm: at("attn.k_norm.weight"),
      lnMlp: [at("ln_mlp.weight"), at("ln_mlp.bias")],
      up: [at("mlp.0.weight"), at("mlp.0.bias")],
      down: [at("mlp.2.weight"), at("mlp.2.bias")],
    };
  });
  const tokens = json.tokenizer.tokens;
  const added = Object.entries(json.tokenizer.added).sort((x, y) => codePoints(y[0]).length - codePoints(x[0]).length);
  const vocab = new Map();
  tokens.forEach((token, id) => {
    if (!has(json.tokenizer.added, token)) vocab.set(token, id);
  });
  return {
    step: json.step,
    file: json.file,
    run_note: json.run_note,
    config,
    task: json.task,
    tok: { ...json.tokenizer, vocab, added },
    d: config.d_model,
    dk: config.d_k, // without projections d_k and d_v are d_model (model_problems)
    dv: config.d_v,
    tokenEmbedding: tensor("token_embedding.weight"),
    positionEmbedding: tensor("position_embedding.weight"),
    layers,
    lnF: [tensor("ln_f.weight"), tensor("ln_f.bias")],
    head: tensor("lm_head.weight"),
    forwards: new Map(), // its latest whole forward for each `causal` (forwardAll)
  };
}

// Token `token`'s embedding at position `position`: the residual stream's start there.
function embedded(model, token, position) {
  const d = model.d;
  const x = new Float64Array(d);
  const positions = model.positionEmbedding; // none where model.positions=none
  for (let c = 0; c < d; c++) {
    x[c] = model.tokenEmbedding[token * d + c] + (positions ? positions[position * d + c] : 0);
  }
  return x;
}

function layerNorm(x, weight, bias) {
  const d = x.length;
  let mean = 0;
  for (let c = 0; c < d; c++) mean += x[c];
  mean /= d;
  let variance = 0;
  for (let c = 0; c < d; c++) variance += (x[c] - mean) ** 2;
  const inverse = 1 / Math.sqrt(variance / d + 1e-5); // torch.nn.LayerNorm's eps
  const y = new Float64Array(d);
  for (let c = 0; c < d; c++) y[c] = (x[c] - mean) * inverse * weight[c] + (bias ? bias[c] : 0);
  return y;
}

// y = W x + b for W of shape (out, in), as torch.nn.Linear; in four partial sums, which a JavaScript engine runs
// side by side, where one sum waits for each addition before the next.
function linear(x, W, b, out) {
  const d = x.length;
  const whole = d - (d % 4);
  const y = new Float64Array(out);
  for (let o = 0; o < out; o++) {
    const row = o * d;
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    let c = 0;
    for (; c < whole; c += 4) {
      s0 += W[row + c] * x[c];
      s1 += W[row + c + 1] * x[c + 1];
      s2 += W[row + c + 2] * x[c + 2];
      s3 += W[row + c + 3] * x[c + 3];
    }
    let sum = (b ? b[o] : 0) + (s0 + s1) + (s2 + s3);
    for (; c < d; c++) sum += W[row + c] * x[c];
    y[o] = sum;
  }
  return y;
}

// GELU with the exact erf (torch.nn.GELU's default).
function gelu(x) {
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
}

// erf to double precision: its Taylor series near 0, the continued fraction of erfc further out.
function erf(x) {
  const a = Math.abs(x);
  if (a < 2.5) {
    let term = x;
    let sum = x;
    for (let n = 1; Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
      term *= (-x * x) / n;
      sum += term / (2 * n + 1);
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  }
  let fraction = a;
  for (let k = 60; k >= 1; k--) fraction = a + k / 2 / fraction;
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / fraction;
  return Math.sign(x) * (1 - erfc);
}

// A position's q, k and v at layer l from its residual stream x: LayerNorm, then W^Q, W^K, W^V (q and k normed);
// x itself three times without projections.
function project(model, l, x) {
  const layer = model.layers[l];
  const h = layerNorm(x, ...layer.ln);
  if (!model.config.projections) return { q: h, k: h, v: h };
  let q = linear(h, layer.Wq, null, model.dk);
  let k = linear(h, layer.Wk, null, model.dk);
  if (layer.qNorm) [q, k] = [layerNorm(q, layer.qNorm, null), layerNorm(k, layer.kNorm, null)];
  return { q, k, v: linear(h, layer.Wv, null, model.dv) };
}

// attention() for query i over keys ks: its raw scores, what the softmax is fed and its weights, `causal` and `mask`
// as the layer reads them for this forward (mixed() then weighs the values).
function attend(model, q, ks, i, causal, mask) {
  const { scale, softcap } = model.config;
  const T = ks.length;
  const raw = new Float64Array(T);
  const fed = new Float64Array(T);
  const divisor = Math.sqrt(q.length);
  for (let j = 0; j < T; j++) {
    let s = score(q, ks[j]);
    raw[j] = s;
    if (scale) s /= divisor;
    if (softcap) s = softcap * Math.tanh(s / softcap);
    fed[j] = causal && hides(model, i, j) ? mask : s;
  }
  return { raw, fed, weights: Float64Array.from(softmax(fed)) };
}

// q . k, the raw score.
function score(q, k) {
  let s = 0;
  for (let c = 0; c < q.length; c++) s += q[c] * k[c];
  return s;
}

// The values mixed by the weights: sum_j a_j v_j.
function mixed(weights, vs) {
  const out = new Float64Array(vs[0].length);
  for (let j = 0; j < vs.length; j++) {
    if (weights[j] === 0) continue;
    for (let c = 0; c < out.length; c++) out[c] += weights[j] * vs[j][c];
  }
  return out;
}

// The rest of block l at one position: W^O, the residual, the MLP.
function finish(model, l, x, out) {
  const layer = model.layers[l];
  const mixed = model.config.projections ? linear(out, layer.Wo, null, model.d) : out;
  const y = new Float64Array(model.d);
  for (let c = 0; c < model.d; c++) y[c] = x[c] + mixed[c];
  if (!model.config.mlp) return y;
  const hidden = linear(layerNorm(y, ...layer.lnMlp), layer.up[0], layer.up[1], layer.up[1].length).map(gelu);
  const back = linear(hidden, layer.down[0], layer.down[1], model.d);
  for (let c = 0; c < model.d; c++) y[c] += back[c];
  return y;
}

function logitsOf(model, x) {
  return linear(layerNorm(x, ...model.lnF), model.head, null, model.config.vocab_size);
}

// What the mask writes, and whether it masks, for this forward: `causal` null as the model was trained, true the
// true mask (minus infinity) forced on, false none.
function maskOf(model, causal) {
  const trained = model.config.mask_value === null ? -Infinity : model.config.mask_value;
  return { causal: causal === null ? model.config.causal : causal, mask: causal === null ? trained : -Infinity };
}

// TinyLM's forward on `ids`, keeping every layer's input, q, k, v and attention (raw, fed, weights of every query
// row, as the flattened (T, T) matrices of the trace); the logits of the positions `wanted` (every one by default),
// the last layer computing those rows alone. A whole forward stays as the model's latest for its `causal`, and the
// next one through the same mask takes from it what cannot have changed (`unchanged`): a key typed at the end of a
// text under the causal mask then computes one position's projections, MLP and logits, not every one's, and of the
// other rows' attention only the raw scores of the keys that changed (which the mask hides from them); unmasked, the
// first layer's projections of the tokens before it.
function forwardAll(model, ids, causal, wanted = null) {
  const T = ids.length;
  const { causal: masks, mask } = maskOf(model, causal);
  const before = wanted ? null : model.forwards.get(causal);
  const { same, settled } = before ? unchanged(model, before, ids, masks, mask) : { same: 0, settled: 0 };
  if (settled === T && before.ids.length === T) return before;
  let xs = ids.map((token, i) => (i < same ? before.layers[0].xs[i] : embedded(model, token, i)));
  const layers = [];
  const n = model.config.n_layer;
  for (let l = 0; l < n; l++) {
    const reused = l ? settled : same; // the positions whose input to this layer is as before
    const projected = xs.map((x, i) => (i < reused ? before.layers[l].projected[i] : project(model, l, x)));
    const ks = projected.map((p) => p.k);
    const vs = projected.map((p) => p.v);
    const outputs = l === n - 1 ? before?.xs : before?.layers[l + 1].xs; // as the settled rows leave the layer
    const rows = l === n - 1 && wanted ? wanted : ids.map((_, i) => i);
    const attended = { raw: new Float64Array(T * T), fed: new Float64Array(T * T), weights: new Float64Array(T * T) };
    const next = xs.slice();
    for (const i of rows) {
      if (i < settled) {
        settle(before.layers[l].attended, before.ids.length, attended, i, settled, projected[i].q, ks, mask);
        next[i] = outputs[i];
        continue;
      }
      const result = attend(model, projected[i].q, ks, i, masks, mask);
      attended.raw.set(result.raw, i * T);
      attended.fed.set(result.fed, i * T);
      attended.weights.set(result.weights, i * T);
      next[i] = finish(model, l, xs[i], mixed(result.weights, vs));
    }
    layers.push({ xs, projected, attended });
    xs = next;
  }
  const logits = [];
  for (const i of wanted ?? ids.map((_, k) => k)) logits[i] = i < settled ? before.logits[i] : logitsOf(model, xs[i]);
  const forward = { ids, causal, layers, xs, logits };
  if (!wanted) model.forwards.set(causal, forward);
  return forward;
}

// What a forward of `ids` takes as it is from `before`, a forward through the same mask: the positions before the
// first token that differs (`same`) enter the first layer as before; of those, the ones no later key reaches leave
// every layer as before (`settled`): all of them for the same ids; else where the causal mask hides the later keys
// entirely, which it does only where it writes minus infinity (a finite mask value leaves the hidden keys a weight)
// and the prefix it opens both ways ends by then; none otherwise.
function unchanged(model, before, ids, masks, mask) {
  const shorter = Math.min(before.ids.length, ids.length);
  let same = 0;
  while (same < shorter && before.ids[same] === ids[same]) same++;
  if (same === ids.length && same === before.ids.length) return { same, settled: same };
  return { same, settled: masks && mask === -Infinity && model.task.prefix <= same ? same : 0 };
}

// Settled row i's attention into `attended`, T keys wide, from `before`, a forward's of `wide` keys: as before up to
// `settled`; from there the keys that changed, which the mask hides from it, their raw scores computed (q the row's
// query, ks the keys).
function settle(before, wide, attended, i, settled, q, ks, mask) {
  const T = ks.length;
  for (const part of ["raw", "fed", "weights"]) {
    attended[part].set(before[part].subarray(i * wide, i * wide + settled), i * T);
  }
  for (let j = settled; j < T; j++) {
    attended.raw[i * T + j] = score(q, ks[j]);
    attended.fed[i * T + j] = mask;
  }
}

// The logits at position i of a forward that differs from `base` (forwardAll's, as trained) at position i alone:
// given `input`, its residual stream enters the first layer as that vector (the token there replaced); given `layer`
// and `row`, query i mixes the values at that layer with `row` instead of its own weights. Only position i changes
// there, so the layers before reuse the base's work, and the next layer recomputes position i's key and value alone.
function changedForward(model, base, i, { input = null, layer = 0, row = null }) {
  const n = model.config.n_layer;
  const { causal, mask } = maskOf(model, base.causal);
  let changed = input; // position i's residual stream entering layer l, the others the base's
  let xs = null; // every position's, once more than position i has changed
  let l = layer;
  if (row) {
    const { projected } = base.layers[layer];
    changed = finish(model, layer, base.layers[layer].xs[i], mixed(row, projected.map((p) => p.v)));
    l = layer + 1;
  }
  for (; l < n; l++) {
    const last = l === n - 1;
    let projected;
    if (xs === null) {
      projected = base.layers[l].projected.slice();
      projected[i] = project(model, l, changed);
      xs = base.layers[l].xs.slice();
      xs[i] = changed;
    } else {
      projected = xs.map((x) => project(model, l, x));
    }
    const ks = projected.map((p) => p.k);
    const vs = projected.map((p) => p.v);
    const next = xs.slice();
    for (const q of last ? [i] : xs.map((_, k) => k)) {
      next[q] = finish(model, l, xs[q], mixed(attend(model, projected[q].q, ks, q, causal, mask).weights, vs));
    }
    xs = next;
  }
  return logitsOf(model, xs === null ? changed : xs[i]);
}

// ---- Python's ways of writing values ---------------------------------------------------------------------------

// A JSON number is a Python int where json.loads reads it as one: JSON.stringify writes whole numbers below 1e21
// without an exponent.
function isInt(value) {
  return typeof value === "number" && Number.isInteger(value) && Math.abs(value) < 1e21;
}

// str() of a JSON value as Python holds it (an int, a float, a str...).
function pyStr(value) {
  if (typeof value === "string") return value;
  if (typeof value === "number") return isInt(value) ? JSON.stringify(value) : floatRepr(value);
  return repr(value);
}

// repr() of a JSON value as Python holds it.
function repr(value) {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return pyStr(value);
  if (typeof value === "string") return strRepr(value);
  if (Array.isArray(value)) return `[${value.map(repr).join(", ")}]`;
  return `{${Object.entries(value)
    .map(([key, item]) => `${strRepr(key)}: ${repr(item)}`)
    .join(", ")}}`;
}

const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

function strRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = quote;
  for (const char of text) {
    const code = char.codePointAt(0);
    if (char === quote || char === "\\") out += `\\${char}`;
    else if (char === "\t") out += "\\t";
    else if (char === "\n") out += "\\n";
    else if (char === "\r") out += "\\r";
    else if (code < 0x20 || code === 0x7f) out += `\\x${hex(code, 2)}`;
    else if (code < 0x7f || char === " " || !UNPRINTABLE.test(char)) out += char;
    else if (code < 0x100) out += `\\x${hex(code, 2)}`;
    else if (code < 0x10000) out += `\\u${hex(code, 4)}`;
    else out += `\\U${hex(code, 8)}`;
  }
  return out + quote;
}

function hex(code, width) {
  return code.toString(16).padStart(width, "0");
}

// Python's repr of a float: the shortest digits that read back, in positional notation from 1e-4 to 1e16.
function floatRepr(x) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  const [mantissa, exponent] = Math.abs(x).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const power = Number(exponent);
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  if (power >= -4 && power < 16) {
    if (power < 0) return `${sign}0.${"0".repeat(-power - 1)}${digits}`;
    const whole = digits.padEnd(power + 1, "0");
    const fraction = digits.slice(power + 1);
    return `${sign}${whole.slice(0, power + 1)}.${fraction || "0"}`;
  }
  const shown = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  return `${sign}${shown}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
}

// A finite double exactly as a decimal: value = digits / 10^scale, digits a BigInt.
function exactly(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const bits = view.getBigUint64(0);
  const biased = Number(bits >> 52n);
  const fraction = bits & ((1n << 52n) - 1n);
  const mantissa = biased ? fraction | (1n << 52n) : fraction;
  const power = (biased || 1) - 1075; // x = mantissa * 2^power
  if (power >= 0) return { digits: mantissa << BigInt(power), scale: 0 };
  return { digits: mantissa * 5n ** BigInt(-power), scale: -power };
}

// digits / 10^drop rounded half to even, as Python's formatting rounds the exact value.
function roundedAway(digits, drop) {
  if (drop <= 0) return digits * 10n ** BigInt(-drop);
  const unit = 10n ** BigInt(drop);
  const [q, r] = [digits / unit, digits % unit];
  return 2n * r > unit || (2n * r === unit && q % 2n === 1n) ? q + 1n : q;
}

// f"{x:.{places}f}".
function fixed(x, places) {
  const { digits, scale } = exactly(x);
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  const whole = roundedAway(digits, scale - places).toString().padStart(places + 1, "0");
  const point = whole.length - places;
  return places ? `${sign}${whole.slice(0, point)}.${whole.slice(point)}` : `${sign}${whole}`;
}

// f"{x:.{precision}g}".
function general(x, precision) {
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const { digits, scale } = exactly(x);
  const sign = x < 0 ? "-" : "";
  const length = digits.toString().length;
  let kept = roundedAway(digits, length - precision).toString();
  let power = length - scale - 1;
  if (kept.length > precision) {
    kept = kept.slice(0, precision);
    power += 1;
  }
  if (power >= -4 && power < precision) {
    const places = precision - 1 - power;
    const text = places > 0 ? fixed(Math.abs(x), places) : kept.slice(0, power + 1).padEnd(power + 1, "0");
    return sign + (text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text);
  }
  const tail = kept.slice(1).replace(/0+$/, "");
  const shown = tail ? `${kept[0]}.${tail}` : kept[0];
  return `${sign}${shown}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
}

// answers.py's rounded(): DIGITS decimals as Python's round() gives them; null for none, -inf or nan.
function rounded(x) {
  if (x === null || !Number.isFinite(x)) return null;
  const scaled = x * 1e7;
  const nearest = Math.round(scaled);
  if (Math.abs(Math.abs(scaled - Math.trunc(scaled)) - 0.5) > 1e-6 && Math.abs(scaled) < 2 ** 52) {
    return nearest / 1e7 || 0;
  }
  return Number(fixed(x, 7)) || 0;
}

// f"{n:,}".
function thousands(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

// A text's characters (code points), a lone surrogate one of them.
function codePoints(text) {
  return Array.from(text);
}

function byCodePoints(a, b) {
  const [x, y] = [codePoints(a), codePoints(b)];
  for (let k = 0; k < Math.min(x.length, y.length); k++) {
    const difference = x[k].codePointAt(0) - y[k].codePointAt(0);
    if (difference) return difference;
  }
  return x.length - y.length;
}

export const forTests = { prepared, forwardAll, probability, repr, fixed };
