// What a reader of prgate's history page would check (.ci/render-history loads this after the
// page's own scripts, in a copy of the page): every chart was drawn by Chart.js, each merged PR
// and anchor run a point inside its chart with its interval, the budget line across it; the
// points per chart (reported for the script to compare with the ledger itself); nothing wider
// than the view (800 px, or a phone's 390 px), no table past it; the text readable against the
// page in the light or the dark colour scheme; and nothing from the data became markup (no
// element but the page's own). It never writes to the console: any console line is the page's.
//
// Results go into hidden <pre> elements: #prgate-check ("ok" or the problems, "; " between),
// #prgate-points (one line a chart: "speed|MODEL|C|merged=N|anchor=M" or
// "accuracy|MODEL|BENCHMARK|merged=N|anchor=M"), #prgate-scheme ("light" or "dark") and
// #prgate-height (the page's height, for the screenshot).
(() => {
  const problems = [];
  const dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
  const width = document.documentElement.clientWidth;
  for (const details of document.querySelectorAll("details")) details.open = true;

  const { parse, contrast, report } = window.prgateCheck;

  const points = [];
  const source = document.getElementById("prgate-history-data");
  const data = source ? JSON.parse(source.textContent) : { charts: [] };
  const canvases = document.querySelectorAll("canvas[data-chart]");
  if (typeof Chart === "undefined") problems.push("Chart.js did not load");
  const drawn = window.prgateCharts || [];
  if (drawn.length !== data.charts.length || canvases.length !== data.charts.length)
    problems.push(`${data.charts.length} charts in the data, ${canvases.length} canvases, ${drawn.length} drawn`);
  const inside = (element, area) =>
    element && Number.isFinite(element.x) && Number.isFinite(element.y) &&
    element.x >= area.left - 1 && element.x <= area.right + 1 &&
    element.y >= area.top - 1 && element.y <= area.bottom + 1;
  for (const { spec, chart } of drawn) {
    const name = `${spec.model} ${spec.cell}`;
    if (Chart.getChart(chart.canvas) !== chart) problems.push(`${name}: not a live chart`);
    const area = chart.chartArea;
    if (!area || area.right - area.left < 100 || area.bottom - area.top < 100)
      problems.push(`${name}: a chart area of ${area ? `${area.right - area.left}x${area.bottom - area.top}` : "none"}`);
    const line = chart.getDatasetMeta(0).data;
    const bars = chart.getDatasetMeta(1).data;
    const budget = chart.getDatasetMeta(2).data;
    const anchors = chart.getDatasetMeta(3).data;
    let merged = 0;
    let anchored = 0;
    spec.points.forEach((point, index) => {
      if (!inside(line[index], area)) problems.push(`${name}: point ${point.label} is not drawn inside the chart`);
      if (point.kind === "pr") merged += 1;
      if (point.kind === "anchor") {
        if (inside(anchors[index], area)) anchored += 1;
        else problems.push(`${name}: the anchor run ${point.label} is not drawn`);
      }
      if (point.kind !== "reference") {
        const bar = bars[index];
        if (!bar || !Number.isFinite(bar.base) || Math.abs(bar.base - bar.y) < 0.5)
          problems.push(`${name}: point ${point.label} has no interval drawn`);
      }
    });
    const levels = new Set(budget.map((element) => Math.round(element.y)));
    if (budget.length !== spec.points.length || levels.size !== 1)
      problems.push(`${name}: the budget line is not one level across the chart`);
    const line_budget = chart.scales.y.getPixelForValue(spec.budget);
    if (budget.length && Math.abs(budget[0].y - line_budget) > 1)
      problems.push(`${name}: the budget line is not at ${spec.budget}`);
    if (chart.canvas.getBoundingClientRect().right > width + 0.5)
      problems.push(`${name}: the chart ends past the ${width} px view`);
    const kind = spec.kind === "speed" ? `speed|${spec.model}|${spec.cell.replace(/^c=/, "")}` : `accuracy|${spec.model}|${spec.cell}`;
    points.push(`${kind}|merged=${merged}|anchor=${anchored}`);
  }

  // Nothing wider than the view, no table past it.
  if (document.documentElement.scrollWidth > width + 1)
    problems.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${width} px view`);
  for (const box of document.querySelectorAll(".table-box")) {
    if (box.getBoundingClientRect().right > width + 0.5)
      problems.push(`a table ends at ${Math.ceil(box.getBoundingClientRect().right)} px, past the ${width} px view`);
  }
  // Text readable on the page's ground (WCAG 2.1 1.4.3: 4.5:1).
  const ground = parse(getComputedStyle(document.body).backgroundColor) || [255, 255, 255, 1];
  for (const element of document.querySelectorAll("h1, h2, p, td, th, figcaption, summary, a")) {
    const colour = parse(getComputedStyle(element).color);
    if (colour && contrast(colour, ground) < 4.5) {
      problems.push(`"${element.textContent.trim().slice(0, 40)}" has contrast ${contrast(colour, ground).toFixed(2)}:1`);
      break;
    }
  }
  // Nothing from the data became markup: the page's own elements only.
  if (document.querySelector("img, iframe, object, embed"))
    problems.push(`an element from the data: ${document.querySelector("img, iframe, object, embed").outerHTML.slice(0, 80)}`);
  const scripts = [...document.querySelectorAll("script")].filter((script) => !/(history-check|check-helpers)\.js$/.test(script.src));
  if (scripts.length !== 3) problems.push(`${scripts.length} scripts, not the page's 3`);
  for (const link of document.querySelectorAll("a[href]")) {
    if (!/^(https?:|#|assets\/)/.test(link.getAttribute("href")))
      problems.push(`a link to ${link.getAttribute("href").slice(0, 60)}`);
  }

  report("prgate-height", String(Math.ceil(document.documentElement.scrollHeight) + 20));
  report("prgate-scheme", dark ? "dark" : "light");
  report("prgate-points", points.sort().join("\n"));
  report("prgate-check", problems.length === 0 ? "ok" : problems.join("; "));
})();
