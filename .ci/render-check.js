// What a reader of a rendered PR comment would check (.ci/render-comments loads this into the
// page after cmark-gfm's HTML): the Mermaid charts render with no error; no literal backslash
// or backtick shows outside code; every checks table fits the 800 px comment with no cell
// wrapped, so its State column is in view; a failing or unjudged headline names what failed. The verdict goes into
// <pre id="prgate-check"> ("ok" or the problems, one per "; "), and the page's height into
// <pre id="prgate-height"> for the screenshot; what is worth knowing but not a failure (a scope
// table whose long paths scroll) into <pre id="prgate-notes">.
(async () => {
  const problems = [];
  const notes = [];
  for (const details of document.querySelectorAll("details")) details.open = true;

  const charts = [...document.querySelectorAll('pre[lang="mermaid"]')].map((pre) => {
    const div = document.createElement("div");
    div.className = "mermaid";
    div.textContent = pre.textContent;
    pre.replaceWith(div);
    return div;
  });
  if (charts.length > 0) {
    try {
      mermaid.initialize({ startOnLoad: false, theme: "default" });
      await mermaid.run({ nodes: charts, suppressErrors: true });
    } catch (error) {
      problems.push(`mermaid threw: ${error}`);
    }
  }
  charts.forEach((chart, index) => {
    const svg = chart.querySelector("svg");
    // The SVG's own <style> names error classes too: read only its texts.
    const text = svg ? [...svg.querySelectorAll("text")].map((t) => t.textContent).join(" ") : "";
    if (!svg) problems.push(`chart ${index + 1}: no SVG`);
    else if (/error/i.test(text) || svg.querySelector(".error-icon, .error-text"))
      problems.push(`chart ${index + 1}: mermaid error: ${text.slice(0, 120)}`);
    else if (svg.querySelectorAll("rect").length < 2 || svg.querySelectorAll("path").length < 1)
      problems.push(`chart ${index + 1}: no bars or no lines`);
  });

  // Text nodes outside code: a backslash or a backtick there is an escape that showed.
  const walker = document.createTreeWalker(document.querySelector("article"), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest("code, pre, .mermaid, svg")) continue;
    const text = node.textContent;
    if (/[\\`]/.test(text)) problems.push(`literal escape outside code: ${text.trim().slice(0, 80)}`);
  }

  const width = document.documentElement.clientWidth;
  for (const table of document.querySelectorAll("article table")) {
    const head = table.querySelector("th");
    const name = head ? head.textContent.trim() : "";
    const state = [...table.querySelectorAll("th")].find((th) => th.textContent.trim() === "State");
    // The checks' tables must fit; the scope's (long paths) may scroll: see notes.
    if (table.scrollWidth > table.clientWidth + 1)
      (state ? problems : notes).push(`table "${name}" scrolls: ${table.scrollWidth} px in ${table.clientWidth} px`);
    // A checks table reads row by row: no cell of it wraps (an interval over three lines).
    if (state)
      for (const cell of table.querySelectorAll("td, th")) {
        const line = parseFloat(getComputedStyle(cell).lineHeight) || 24;
        const padding = parseFloat(getComputedStyle(cell).paddingTop) + parseFloat(getComputedStyle(cell).paddingBottom);
        if (cell.clientHeight - padding > line * 1.5) {
          problems.push(`table "${name}": the cell "${cell.textContent.trim()}" wraps`);
          break;
        }
      }
    if (state && state.getBoundingClientRect().right > width)
      problems.push(`table "${name}": the State column is outside the ${width} px view`);
  }

  const headline = document.querySelector("article h2");
  if (!headline) problems.push("no headline");
  else {
    const text = headline.textContent.trim();
    if (/^(❌|🛑)/.test(text) && !/ — \S/.test(text))
      problems.push(`the headline does not name what failed: ${text}`);
  }

  const report = (id, value) => {
    const pre = document.createElement("pre");
    pre.id = id;
    pre.textContent = value;
    document.body.appendChild(pre);
  };
  report("prgate-height", String(Math.ceil(document.querySelector("article").getBoundingClientRect().height) + 20));
  report("prgate-notes", notes.join("; "));
  report("prgate-check", problems.length === 0 ? "ok" : problems.join("; "));
})();
