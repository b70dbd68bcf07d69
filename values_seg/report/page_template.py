"""The Jinja2 template of the report's page (:mod:`values_seg.report.page` fills it): style,
the script that draws a metric cell (``vsCell``), the table of contents and the body."""

TEMPLATE = """<!DOCTYPE html>
{#- The report's page: values_seg.report.page fills it; everything it shows is embedded (no network access). -#}
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="values-seg{% for name, v in versions|dictsort %}; {{ name }} {{ v }}{% endfor %}">
<title>{{ title }}</title>
<style>
  :root { --fg: #1d232b; --muted: #5c6773; --line: #d8dee4; --accent: #2f6fb3; --ci: #9cc3ea; }
  body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); }
  nav#toc { position: fixed; top: 0; left: 0; bottom: 0; width: 250px; overflow-y: auto; padding: 16px 12px;
        border-right: 1px solid var(--line); background: #f6f8fa; font-size: 13px; box-sizing: border-box; }
  nav#toc a { display: block; color: var(--fg); text-decoration: none; padding: 2px 4px; border-radius: 4px; }
  nav#toc a:hover { background: #e6ebf0; }
  nav#toc a.h3 { padding-left: 18px; color: var(--muted); }
  nav#toc .title { font-weight: 600; margin-bottom: 8px; }
  main { margin-left: 250px; padding: 8px 32px 64px; max-width: 1500px; }
  h1 { font-size: 26px; margin: 16px 0 8px; }
  h2 { font-size: 21px; margin-top: 40px; padding-top: 8px; border-top: 2px solid var(--line); }
  h3 { font-size: 17px; margin-top: 28px; }
  code { background: #f0f2f4; padding: 1px 4px; border-radius: 3px; font-size: 90%; }
  blockquote { margin: 8px 0; padding: 4px 12px; border-left: 4px solid #e0a800; background: #fff8e1; }
  table.plain, main > table { border-collapse: collapse; }
  img.figure { max-width: 100%; height: auto; cursor: zoom-in; border: 1px solid var(--line); }
  .gallery { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 16px; }
  .gallery .card { border: 1px solid var(--line); border-radius: 6px; padding: 8px; background: #fbfcfd; }
  .gallery .card p { margin: 4px 0; font-size: 13px; }
  .gallery img.figure { width: 100%; }
  /* a click enlarges a figure (a gallery's too) to the window, its aspect kept; another click puts it back */
  img.figure.zoom, .gallery img.figure.zoom { position: fixed; inset: 2vh 2vw; width: 96vw; height: 96vh;
                    max-width: none; object-fit: contain; margin: 0; z-index: 1000; background: #fff;
                    cursor: zoom-out; box-shadow: 0 0 0 100vmax rgba(0, 0, 0, .6); }
  .dt-container { margin: 8px 0 16px; font-size: 13px; }
  td .cell { display: inline-flex; align-items: center; gap: 6px; white-space: nowrap; }
  /* the bars' axis under each metric header: the range of the column that its bars span */
  th[data-lo]::after { content: attr(data-lo) " ↔ " attr(data-hi); display: block; font-weight: 400;
                       font-size: 10px; color: var(--muted); white-space: nowrap; }
  div.dt-scroll-body th[data-lo]::after { display: none; }  /* DataTables' sizing copy of the header */
  td .cell .bar { position: relative; display: inline-block; width: 56px; height: 10px; background: #eef1f4;
                  border-radius: 2px; }
  td .cell .ci { position: absolute; top: 2px; height: 6px; background: var(--ci); border-radius: 2px; }
  td .cell .pt { position: absolute; top: 0; width: 2px; height: 10px; margin-left: -1px; background: var(--accent); }
  .dtsp-panesContainer { font-size: 12px; }
  div.dtsp-searchPane div.dt-scroll-body { max-height: 180px !important; }  /* six values without a scroll */
  footer { color: var(--muted); font-size: 12px; margin-top: 48px; }
</style>
<script>
  // one metric cell of an interactive table: "value;low;high;mark;std" (x 100, a part empty where
  // missing) or null; a bar shows the interval within the column's range [lo, hi], the numbers are
  // in the tooltip; sorting and searching see the value
  window.vsCell = function (d, type, lo, hi, meta) {
    const head = meta && meta.settings.aoHeader && meta.settings.aoHeader[0];  // DataTables 2: [row][column].cell
    const th = head && head[meta.col] && head[meta.col].cell;
    if (th && !th.hasAttribute("data-lo")) {  // the bars' axis, under the header (CSS th[data-lo])
      th.setAttribute("data-lo", lo.toFixed(2));
      th.setAttribute("data-hi", hi.toFixed(2));
      th.title = "bars: the value (line) and its interval (shade) on the scale " + lo.toFixed(2) + " to " +
        hi.toFixed(2) + ", this column's range";
    }
    if (d === null || d === undefined || d === "") { return type === "display" ? "" : null; }
    const parts = String(d).split(";");
    const num = (s) => (s === undefined || s === "" ? null : Number(s));
    const [v, l, h, sd] = [num(parts[0]), num(parts[1]), num(parts[2]), num(parts[4])];
    const mark = parts[3] || "";
    if (v === null || Number.isNaN(v)) { return type === "display" ? "" : null; }
    if (type === "filter") { return v.toFixed(2); }
    if (type !== "display") { return v; }
    const pos = (x) => Math.max(0, Math.min(100, (x - lo) / (hi - lo) * 100));
    let tip = v.toFixed(2), ci = "";
    if (l !== null && h !== null) {
      tip += " [" + l.toFixed(2) + ", " + h.toFixed(2) + "] (confidence interval)";
      ci = '<span class="ci" style="left:' + pos(l) + '%;width:' + (pos(h) - pos(l)) + '%"></span>';
    } else if (sd !== null) {
      tip += " ± " + sd.toFixed(2) + " (std over seeds)";
    }
    if (mark.includes("✓")) { tip += " ✓ compatible with the reference"; }
    if (parts[5]) { tip += " ⚠ not supported by the data: " + parts[5]; }
    return '<span class="cell" title="' + tip + '"><span class="num">' + v.toFixed(2) + (mark ? " " + mark : "") +
      '</span><span class="bar">' + ci + '<span class="pt" style="left:' + pos(v) + '%"></span></span></span>';
  };
  document.addEventListener("click", (e) => {
    if (e.target.matches && e.target.matches("img.figure")) { e.target.classList.toggle("zoom"); }
  });
</script>
</head>
<body>
<nav id="toc">
  <div class="title">{{ title }}</div>
  {% for entry in toc %}<a class="h{{ entry.level }}" href="#{{ entry.id }}">{{ entry.text }}</a>
  {% endfor %}
</nav>
<main>
{{ datatables }}
{{ body }}
<footer>Written by values-seg; tables: itables (DataTables), offline. Rebuild with <code>values-seg report</code>.</footer>
</main>
</body>
</html>
"""
