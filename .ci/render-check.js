// What a reader of a rendered PR comment would check (.ci/render-comments loads this into the
// page after cmark-gfm's HTML): the Mermaid charts render with no error, in the comment's own
// colours, each of them readable against what it sits on; no literal backslash or backtick
// shows outside code; every table fits the 800 px comment (no table scrolls or ends past the
// view), and a checks table has no cell wrapped, so its State column is in view; a failing or
// unjudged headline names what failed. The page is rendered in the light colour scheme or, with
// Chromium's --force-dark-mode, the dark one (GitHub's stylesheet follows prefers-color-scheme;
// Mermaid gets its dark theme, as GitHub gives it in dark mode).
//
// Results go into hidden <pre> elements: #prgate-check ("ok" or the problems, one per "; "),
// #prgate-scheme ("light" or "dark": what the page saw), #prgate-contrast (the least contrast
// ratio of a chart's graphics, or "none" without a chart) and #prgate-height (the page's
// height, for the screenshot).
(async () => {
  const problems = [];
  const dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
  for (const details of document.querySelectorAll("details")) details.open = true;

  const { parse, contrast, report } = window.prgateCheck;
  const hex = (colour) => "#" + colour.slice(0, 3).map((c) => Math.round(c).toString(16).padStart(2, "0")).join("");
  const opaque = (colour) => colour && colour[3] > 0.99;
  const pageGround = () => {
    for (const element of [document.querySelector("article"), document.body, document.documentElement]) {
      const colour = parse(getComputedStyle(element).backgroundColor);
      if (opaque(colour)) return colour;
    }
    return [255, 255, 255, 1];
  };

  const charts = [...document.querySelectorAll('pre[lang="mermaid"]')].map((pre) => {
    const source = pre.textContent;
    const div = document.createElement("div");
    div.className = "mermaid";
    div.textContent = source;
    pre.replaceWith(div);
    return { div, source };
  });
  if (charts.length > 0) {
    try {
      mermaid.initialize({ startOnLoad: false, theme: dark ? "dark" : "default" });
      await mermaid.run({ nodes: charts.map((chart) => chart.div), suppressErrors: true });
    } catch (error) {
      problems.push(`mermaid threw: ${error}`);
    }
  }
  let leastContrast = Infinity;
  charts.forEach(({ div, source }, index) => {
    const name = `chart ${index + 1}`;
    const svg = div.querySelector("svg");
    // The SVG's own <style> names error classes too: read only its texts.
    const text = svg ? [...svg.querySelectorAll("text")].map((t) => t.textContent).join(" ") : "";
    if (!svg) return problems.push(`${name}: no SVG`);
    if (/error/i.test(text) || svg.querySelector(".error-icon, .error-text"))
      return problems.push(`${name}: mermaid error: ${text.slice(0, 120)}`);
    if (svg.querySelectorAll("rect").length < 2 || svg.querySelectorAll("path").length < 1)
      return problems.push(`${name}: no bars or no lines`);

    // The series as drawn, in order: g.bar-plot-N (rects' fill) and g.line-plot-N (path's stroke).
    const series = [...svg.querySelectorAll('g[class^="bar-plot-"], g[class^="line-plot-"]')]
      .map((group) => {
        const bar = group.getAttribute("class").startsWith("bar-plot-");
        const shape = group.querySelector(bar ? "rect" : "path");
        const style = shape && getComputedStyle(shape);
        return {
          bar,
          index: +group.getAttribute("class").replace(/^\D+/, ""),
          colour: style && parse(bar ? style.fill : style.stroke),
        };
      })
      .sort((a, b) => a.index - b.index);
    if (series.some((one) => !one.colour)) return problems.push(`${name}: a series has no colour`);
    const background = svg.querySelector("rect.background");
    const own = background && parse(getComputedStyle(background).fill);
    const ground = opaque(own) ? own : pageGround();

    // Mermaid drew the comment's colours (a theme that overrode them would break the band,
    // whose bottom is painted in the ground's colour).
    const palette = (source.match(/"plotColorPalette":\s*"([^"]*)"/) || [, ""])[1]
      .split(",").map((c) => c.trim().toLowerCase()).filter(Boolean);
    const wanted = (source.match(/"backgroundColor":\s*"([^"]*)"/) || [, ""])[1].toLowerCase();
    if (wanted && hex(ground) !== wanted)
      problems.push(`${name}: the chart's ground is ${hex(ground)}, not the comment's ${wanted}`);
    series.forEach((one) => {
      if (palette[one.index] && hex(one.colour) !== palette[one.index])
        problems.push(`${name}: series ${one.index} drawn in ${hex(one.colour)}, not the comment's ${palette[one.index]}`);
    });

    // WCAG 2.1 1.4.11: a graphic's parts at least 3:1 against what they sit on. A series in the
    // ground's own colour paints the ground (the band's bottom) and is not a part. Bars are drawn
    // over each other, so each bar also needs 3:1 against the next one drawn over it.
    const check = (ratio, what) => {
      leastContrast = Math.min(leastContrast, ratio);
      if (ratio < 3) problems.push(`${name}: ${what} has contrast ${ratio.toFixed(2)}:1 (under 3:1)`);
    };
    const bars = series.filter((one) => one.bar);
    series.forEach((one) => {
      if (hex(one.colour) === hex(ground)) return;
      check(contrast(one.colour, ground), `series ${one.index} (${hex(one.colour)}) on ${hex(ground)}`);
    });
    bars.slice(1).forEach((over, at) => {
      const under = bars[at];
      check(contrast(over.colour, under.colour), `series ${over.index} (${hex(over.colour)}) over ${under.index} (${hex(under.colour)})`);
    });
    // Text: 4.5:1 (1.4.3).
    for (const label of svg.querySelectorAll("text")) {
      const colour = parse(getComputedStyle(label).fill);
      if (colour && contrast(colour, ground) < 4.5)
        problems.push(`${name}: the text "${label.textContent.slice(0, 40)}" (${hex(colour)}) has contrast ${contrast(colour, ground).toFixed(2)}:1 on ${hex(ground)}`);
    }
  });

  // Text nodes outside code: a backtick, or a backslash before ASCII punctuation (what Markdown
  // escapes: `\_`, `\[`, `\(`), there is an escape that showed. A backslash before a letter
  // or a digit is never an escape (CommonMark escapes only punctuation): it is the text's own,
  // as in a pattern a recipe requires (`kv from \S+`).
  const walker = document.createTreeWalker(document.querySelector("article"), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest("code, pre, .mermaid, svg")) continue;
    const text = node.textContent;
    if (/`|\\[!-\/:-@\[-`{-~]/.test(text)) problems.push(`literal escape outside code: ${text.trim().slice(0, 80)}`);
  }

  // Every table fits: GitHub's stylesheet lets a wide table scroll inside its box, which hides
  // its right-hand columns.
  const width = document.documentElement.clientWidth;
  for (const table of document.querySelectorAll("article table")) {
    const head = table.querySelector("th");
    const name = head ? head.textContent.trim() : "";
    if (table.scrollWidth > table.clientWidth + 1)
      problems.push(`table "${name}" scrolls: ${table.scrollWidth} px in ${table.clientWidth} px`);
    if (table.getBoundingClientRect().right > width + 0.5)
      problems.push(`table "${name}" ends at ${Math.ceil(table.getBoundingClientRect().right)} px, past the ${width} px view`);
    const state = [...table.querySelectorAll("th")].find((th) => th.textContent.trim() === "State");
    if (!state) continue;
    // A checks table reads row by row: no cell of it wraps (an interval over three lines).
    // A cell's own text is measured (a row is as tall as its tallest cell, so the cell's box
    // would blame every cell of a row for one that wraps).
    for (const cell of table.querySelectorAll("td, th")) {
      const line = parseFloat(getComputedStyle(cell).lineHeight) || 24;
      const text = document.createRange();
      text.selectNodeContents(cell);
      if (text.getBoundingClientRect().height > line * 1.5) {
        problems.push(`table "${name}": the cell "${cell.textContent.trim()}" wraps`);
        break;
      }
    }
    if (state.getBoundingClientRect().right > width)
      problems.push(`table "${name}": the State column is outside the ${width} px view`);
  }

  // Every other element fits too: a log block (a crash's last lines) that scrolls hides the
  // end of the line that says why the server died, and a long word can push a paragraph out.
  for (const element of document.querySelectorAll("article pre, article p, article li, article summary")) {
    if (element.closest("table, .mermaid, svg")) continue;
    const what = `${element.tagName.toLowerCase()} "${element.textContent.trim().slice(0, 60)}"`;
    if (element.scrollWidth > element.clientWidth + 1)
      problems.push(`${what} scrolls: ${element.scrollWidth} px in ${element.clientWidth} px`);
    else if (element.getBoundingClientRect().right > width + 0.5)
      problems.push(`${what} ends at ${Math.ceil(element.getBoundingClientRect().right)} px, past the ${width} px view`);
  }

  const headline = document.querySelector("article h2");
  if (!headline) problems.push("no headline");
  else {
    const text = headline.textContent.trim();
    if (/^(❌|🛑)/.test(text) && !/ — \S/.test(text))
      problems.push(`the headline does not name what failed: ${text}`);
  }

  report("prgate-height", String(Math.ceil(document.querySelector("article").getBoundingClientRect().height) + 20));
  report("prgate-scheme", dark ? "dark" : "light");
  report("prgate-contrast", Number.isFinite(leastContrast) ? leastContrast.toFixed(2) : "none");
  report("prgate-check", problems.length === 0 ? "ok" : problems.join("; "));
})();
