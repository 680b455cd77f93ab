// Draws every [data-chart] element with uPlot: on load and after htmx swaps a fragment in.
(function () {
  "use strict";
  const palette = ["#1d7a46", "#b3261e", "#5b6673", "#9a6200", "#2457c5", "#7b3fb0"];

  function draw(root) {
    root.querySelectorAll("[data-chart]").forEach(function (element) {
      if (element.dataset.drawn === "1") return;
      const spec = JSON.parse(element.dataset.chart);
      const series = [{}].concat(spec.labels.map(function (label, index) {
        return { label: label, stroke: palette[index % palette.length], width: 2 };
      }));
      const options = {
        width: Math.max(element.clientWidth, 300),
        height: 200,
        series: series,
        axes: [{}, { label: spec.unit || "" }],
        scales: { x: { time: spec.time !== false } },
      };
      new uPlot(options, [spec.x].concat(spec.y), element);
      element.dataset.drawn = "1";
    });
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSwap", function (event) { draw(event.target); });
})();
