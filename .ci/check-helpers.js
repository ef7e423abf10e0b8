// What the render checks share (.ci/render-check.js and .ci/history-check.js; the page loads
// this script before either): window.prgateCheck holds parse (CSS's rgb()/rgba() or #rrggbb as
// [r, g, b, alpha], or null), luminance and contrast (WCAG 2.1's relative luminance and contrast
// ratio), and report (a result written into a hidden <pre id=…> for the script to read).
window.prgateCheck = (() => {
  const parse = (text) => {
    const value = (text || "").trim().toLowerCase();
    let match = value.match(/^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/);
    if (match) return [parseInt(match[1], 16), parseInt(match[2], 16), parseInt(match[3], 16), 1];
    match = value.match(/^rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)$/);
    if (match) return [+match[1], +match[2], +match[3], match[4] === undefined ? 1 : +match[4]];
    return null;
  };
  const luminance = (colour) => {
    const [r, g, b] = colour.slice(0, 3).map((c) => {
      const v = c / 255;
      return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const contrast = (a, b) => {
    const [la, lb] = [luminance(a), luminance(b)];
    return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
  };
  const report = (id, value) => {
    const pre = document.createElement("pre");
    pre.id = id;
    pre.hidden = true;
    pre.textContent = value;
    document.body.appendChild(pre);
  };
  return { parse, luminance, contrast, report };
})();
