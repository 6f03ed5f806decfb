#include "report/page_assets.h"

namespace qjoule::report::detail {

const std::string_view kErrorCaptureScript = R"JS(
(function () {
  var counts = window.qjouleReportCounts = {errors: 0, csp: 0};
  function show() {
    var status = document.getElementById('qjoule-report-status');
    if (!status) return;
    status.setAttribute('data-errors', String(counts.errors));
    status.setAttribute('data-csp-violations', String(counts.csp));
  }
  window.qjouleReportShowCounts = show;
  window.addEventListener('error', function () { counts.errors++; show(); }, true);
  window.addEventListener('unhandledrejection', function () { counts.errors++; show(); });
  document.addEventListener('securitypolicyviolation', function () { counts.csp++; show(); }, true);
  var consoleError = console.error;
  console.error = function () { counts.errors++; show(); return consoleError.apply(console, arguments); };
})();
)JS";

const std::string_view kPageScript = R"JS(
(function () {
  var status = document.getElementById('qjoule-report-status');

  // A chart counts as drawn when its canvas holds at least one non-transparent pixel.
  function hasPixels(canvas) {
    if (!canvas.width || !canvas.height) return false;
    var pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    for (var i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) return true;
    return false;
  }

  function tooltipLabel(context) {
    var raw = context.raw, name = raw && typeof raw === 'object' && raw.name ? raw.name + ': ' : '';
    return (context.dataset.label || '') + ': ' + name + context.formattedValue;
  }

  function drawCharts() {
    var data = JSON.parse(document.getElementById('qjoule-report-data').textContent);
    var canvases = document.querySelectorAll('canvas[data-chart]');
    status.setAttribute('data-charts-expected', String(canvases.length));
    if (typeof Chart === 'undefined') { console.error('qjoule report: Chart.js did not load'); return; }
    Chart.defaults.animation = false;
    var drawn = 0;
    Array.prototype.forEach.call(canvases, function (canvas) {
      var id = canvas.getAttribute('data-chart');
      try {
        var config = data.charts[id];
        config.options.plugins.tooltip = {callbacks: {label: tooltipLabel}};
        var chart = new Chart(canvas, config);
        // The points (bars) Chart.js laid out for the runs, roof lines apart: what a test can count.
        var points = 0;
        chart.data.datasets.forEach(function (d, i) { if (!d.showLine) points += chart.getDatasetMeta(i).data.length; });
        canvas.setAttribute('data-points', String(points));
        if (hasPixels(canvas)) drawn++;
        else console.error('qjoule report: chart ' + id + ' drew nothing');
      } catch (e) {
        console.error('qjoule report: chart ' + id + ': ' + e);
      }
    });
    status.setAttribute('data-charts-drawn', String(drawn));
  }

  // Click a header to sort by that column (again to reverse); numbers sort as numbers and before text.
  function makeSortable(table) {
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (header, column) {
      header.addEventListener('click', function () {
        var ascending = header.getAttribute('aria-sort') !== 'ascending';
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute('aria-sort'); });
        header.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[column].textContent.trim(), y = b.cells[column].textContent.trim();
          var nx = parseFloat(x), ny = parseFloat(y);
          if (isNaN(nx) !== isNaN(ny)) return isNaN(nx) ? 1 : -1;
          var order = isNaN(nx) ? x.localeCompare(y) : nx - ny;
          return ascending ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  try {
    Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), makeSortable);
    drawCharts();
  } catch (e) {
    console.error('qjoule report: ' + e);
  }
  // Violations are reported asynchronously: count them once the page has settled.
  function finish() {
    window.qjouleReportShowCounts();
    status.setAttribute('data-done', '1');
  }
  if (document.readyState === 'complete') setTimeout(finish, 50);
  else window.addEventListener('load', function () { setTimeout(finish, 50); });
})();
)JS";

const std::string_view kPageStyle = R"CSS(
body { font-family: "DejaVu Sans", system-ui, sans-serif; margin: 1.5em auto; max-width: 1300px; padding: 0 1em;
       color: #1a1a1a; background: #fff; }
h1 { margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.6em; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.2em 1em; }
dl.facts dt { font-weight: bold; }
dl.facts dd { margin: 0; }
.box { border: 2px solid; border-radius: 6px; padding: 0.6em 1em; margin: 1em 0; }
.box h2, .box h3 { margin: 0.3em 0; border: none; }
.warn { border-color: #d08a00; background: #fff7e0; }
.skipped { border-color: #b00020; background: #fdecee; }
.ok { border-color: #2c7a2c; background: #eef8ee; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; }
th { background: #f0f0f0; cursor: pointer; user-select: none; white-space: nowrap; }
th[aria-sort="ascending"]::after { content: " \25B2"; }
th[aria-sort="descending"]::after { content: " \25BC"; }
td.num { text-align: right; white-space: nowrap; }
td.unavailable { color: #8a5a00; font-style: italic; white-space: normal; max-width: 28em; }
tr.emulated td { color: #666; }
.table-wrap { overflow-x: auto; }
figure.chart { margin: 1em 0 2em; }
.canvas-box { position: relative; height: 360px; }
figcaption, .note { font-size: 0.85em; color: #444; }
.note-only { border: 1px dashed #aaa; padding: 0.5em 1em; }
code { background: #f4f4f4; padding: 0 0.2em; }
footer { margin-top: 3em; font-size: 0.8em; color: #666; }
)CSS";

}  // namespace qjoule::report::detail
