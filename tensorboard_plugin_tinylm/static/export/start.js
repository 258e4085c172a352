// The one-file page's start, its only script that the page runs as written (viewer/page_file.py inlines it and
// allows it by its hash). The rest of the code is text in the #tinylm-code block: each module is imported from a Blob
// URL of its text, uPlot loaded as the classic script it is. Then the curves are drawn (curves.js) and the Attention
// tab's own render() draws the panel, asking its routes of page.js, which answers them in the page.

const read = (id) => JSON.parse(document.getElementById(id).textContent);
const code = read("tinylm-code");
const url = (name) => URL.createObjectURL(new Blob([code[name]], { type: "text/javascript" }));

function classic(name) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.onload = resolve;
    script.onerror = () => reject(new Error(`${name} did not load`));
    script.src = url(name);
    document.head.append(script);
  });
}

async function start() {
  const [index, page, curves] = await Promise.all([
    import(url("index.js")),
    import(url("page.js")),
    import(url("curves.js")),
    classic("uPlot"),
  ]);
  // No typing pause (index.js waits 120 ms for a server): the page answers in itself, as soon as a key is typed.
  const shown = index.default.render({
    ask: page.answering(read("tinylm-answers")),
    el: document.getElementById("attention"),
    pause: 0,
  });
  curves.drawCurves(document.getElementById("curves"), read("tinylm-curves"), window.uPlot);
  await shown;
}

start().catch((error) => {
  const line = document.createElement("p");
  line.className = "page-error";
  line.textContent = `This page could not start in this browser: ${error.message}`;
  document.body.prepend(line);
  throw error;
});
