// prgate's history page (report/src/history.rs): draws each chain's chart with Chart.js from the
// data embedded in the page (#prgate-history-data). Each chart has the chained change after every
// merged PR (a point that links to the PR), its interval (a floating bar), the budget (a dashed
// line), and the anchor runs (diamonds, with their own interval). Text from the data only ever
// reaches the canvas or a text node, never HTML. The colours come from the page's CSS, so the
// charts follow the light or dark colour scheme; window.prgateCharts keeps the charts for tests.
(() => {
  "use strict";
  const source = document.getElementById("prgate-history-data");
  const data = JSON.parse(source.textContent);
  const style = getComputedStyle(document.documentElement);
  const colour = (name) => style.getPropertyValue(name).trim();
  const palette = {
    chain: colour("--chain"),
    interval: colour("--interval"),
    budget: colour("--budget"),
    anchor: colour("--anchor"),
    anchorInterval: colour("--anchor-interval"),
    text: colour("--text"),
    grid: colour("--grid"),
  };
  Chart.defaults.color = palette.text;
  Chart.defaults.borderColor = palette.grid;
  Chart.defaults.font.family = style.getPropertyValue("font-family");

  const signed = (value, unit) =>
    value === null || value === undefined ? "" : `${value > 0 ? "+" : ""}${value.toFixed(2)}${unit === "%" ? "%" : " pp"}`;
  const range = (low, high, unit) => `[${signed(low, unit)}, ${signed(high, unit)}]`;

  window.prgateCharts = [];
  for (const spec of data.charts) {
    const canvas = document.querySelector(`canvas[data-chart="${CSS.escape(spec.id)}"]`);
    if (!canvas) continue;
    const points = spec.points;
    const isAnchor = (point) => point.kind === "anchor";
    const chart = new Chart(canvas, {
      data: {
        labels: points.map((point) => point.label),
        datasets: [
          {
            type: "line",
            label: "chained change",
            data: points.map((point) => point.y),
            borderColor: palette.chain,
            backgroundColor: palette.chain,
            pointRadius: 4,
            pointHoverRadius: 7,
            borderWidth: 2,
            order: 1,
          },
          {
            type: "bar",
            label: "interval",
            data: points.map((point) => (point.low === null ? null : [point.low, point.high])),
            backgroundColor: palette.interval,
            barThickness: 5,
            order: 3,
          },
          {
            type: "line",
            label: `budget ${signed(spec.budget, spec.unit)}`,
            data: points.map(() => spec.budget),
            borderColor: palette.budget,
            borderDash: [6, 4],
            borderWidth: 2,
            pointRadius: 0,
            pointHitRadius: 0,
            order: 0,
          },
          {
            type: "line",
            label: "anchor run",
            data: points.map((point) => (isAnchor(point) ? point.own : null)),
            showLine: false,
            pointStyle: "rectRot",
            pointRadius: 8,
            pointHoverRadius: 10,
            borderColor: palette.anchor,
            backgroundColor: palette.anchor,
            order: 0,
          },
          {
            type: "bar",
            label: "anchor interval",
            data: points.map((point) => (isAnchor(point) ? [point.own_low, point.own_high] : null)),
            backgroundColor: palette.anchorInterval,
            barThickness: 10,
            order: 4,
          },
        ],
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: { ticks: { autoSkip: true, maxRotation: 0 } },
          y: {
            title: {
              display: true,
              text: spec.kind === "speed" ? "TPOT since the reference (%)" : "accuracy since the reference (points)",
            },
          },
        },
        plugins: {
          legend: { labels: { filter: (item) => item.text !== "anchor interval", boxWidth: 14 } },
          tooltip: {
            callbacks: {
              title: (items) => {
                const point = points[items[0].dataIndex];
                return point.pr ? `${point.label} ${point.title}` : `${point.label}: ${point.title}`;
              },
              label: (item) => {
                const point = points[item.dataIndex];
                switch (item.datasetIndex) {
                  case 0:
                    return `chained ${signed(point.y, spec.unit)} ${point.low === null ? "" : range(point.low, point.high, spec.unit)}`;
                  case 2:
                    return `budget ${signed(spec.budget, spec.unit)}`;
                  case 3:
                    return `anchor ${signed(point.own, spec.unit)} ${range(point.own_low, point.own_high, spec.unit)}: ${point.agrees ? "agrees, the chain is kept" : "disagrees, it replaced the chain"}`;
                  default:
                    return null;
                }
              },
              afterBody: (items) => {
                const point = points[items[0].dataIndex];
                return point.kind === "pr" ? [`its own change ${signed(point.own, spec.unit)} ${range(point.own_low, point.own_high, spec.unit)}`] : [];
              },
            },
          },
        },
        onClick: (event, elements, chart) => {
          const hit = chart.getElementsAtEventForMode(event, "nearest", { intersect: true }, true)[0];
          const point = hit && points[hit.index];
          if (point && point.url) window.open(point.url, "_blank", "noopener");
        },
        onHover: (event, elements, chart) => {
          const hit = chart.getElementsAtEventForMode(event, "nearest", { intersect: true }, true)[0];
          chart.canvas.style.cursor = hit && points[hit.index].url ? "pointer" : "default";
        },
      },
    });
    window.prgateCharts.push({ spec, chart });
  }
})();
