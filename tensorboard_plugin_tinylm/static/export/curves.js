// The one-file page's curves: the charts of TensorBoard's Custom Scalars for the exported runs, as
// viewer/page_curves.py read them from the runs' events, drawn with uPlot (inlined from static/vendor/). Every point
// as logged, unsmoothed; each run in the colour TensorBoard gives it, each tag of a chart in a line style of its own.
// Texts from the runs (names, labels, tags) are set as text, never as HTML.

const WIDTH = 420; // a chart's width where the page is wide (three in a row at 1400 px); narrower on a phone
const NARROWEST = 260;
const HEIGHT = 240;
const LABEL_CHARS = 28; // the most of a y axis's label that fits beside a chart HEIGHT tall
const DASHES = [[], [8, 4], [2, 3], [12, 3, 2, 3]]; // the chart's first tag solid, the second dashed, ...
const MARKERS = ["solid", "dashed", "dotted", "double"]; // each one's legend marker, as CSS draws a border

// Draws curves = {sections: [{title, charts: [{title, series: [{run, tag, steps, values}]}]}], colours, labels} into
// `el`, the first section (a preset's own charts) open and the others folded, as TensorBoard's first view opens on it.
export function drawCurves(el, curves, uPlot) {
  const heading = element("h2", "Curves");
  const about = element(
    "p",
    "From the runs' TensorBoard events, every point as logged (TensorBoard's smoothing 0). Point at a chart to read " +
      "its values; drag across it to zoom, double-click to zoom out.",
  );
  about.className = "hint";
  el.replaceChildren(heading, about);
  if (!curves.sections.length) el.append(element("p", "The runs' events hold none of these curves."));
  curves.sections.forEach((section, index) => {
    const fold = element("details");
    fold.open = index === 0;
    fold.append(element("summary", section.title));
    const grid = element("div");
    grid.className = "charts";
    fold.append(grid);
    el.append(fold);
    for (const chart of section.charts) grid.append(drawChart(chart, curves, uPlot, el));
  });
}

function drawChart(chart, curves, uPlot, el) {
  const figure = element("figure");
  figure.className = "chart";
  figure.dataset.title = chart.title;
  figure.append(element("figcaption", chart.title));
  const tags = [...new Set(chart.series.map((one) => one.tag))];
  const width = Math.max(NARROWEST, Math.min(WIDTH, el.clientWidth - 32));
  const style = (one) => tags.indexOf(one.tag) % DASHES.length; // its line style's place in DASHES and MARKERS
  const options = {
    width,
    height: HEIGHT,
    legend: { markers: { dash: (plot, index) => MARKERS[style(chart.series[index - 1])] } },
    scales: { x: { time: false } },
    axes: [{ label: "step" }, { label: axisLabel(tags), size: 60 }],
    series: [
      { label: "step" },
      ...chart.series.map((one) => ({
        label: `${curves.labels[one.run] || one.run}: ${one.tag}`,
        stroke: curves.colours[one.run],
        width: 1.5,
        dash: DASHES[style(one)],
      })),
    ],
  };
  const data = uPlot.join(chart.series.map((one) => [one.steps, one.values]));
  new uPlot(options, data, figure);
  figure.dataset.points = String(chart.series.reduce((sum, one) => sum + one.steps.length, 0));
  return figure;
}

// The y axis names the chart's tags, or where they are too many to fit its height, their common part ("grad/…"); the
// legend below names each.
function axisLabel(tags) {
  const all = tags.join(", ");
  if (all.length <= LABEL_CHARS) return all;
  const common = tags.reduce((prefix, tag) => {
    let same = 0;
    while (same < prefix.length && prefix[same] === tag[same]) same++;
    return prefix.slice(0, same);
  });
  return `${common.slice(0, common.lastIndexOf("/") + 1)}…`;
}

function element(tag, text) {
  const made = document.createElement(tag);
  if (text !== undefined) made.textContent = text;
  return made;
}
