// Draws every [data-chart] element with uPlot: on load and after htmx swaps a fragment in.
(function () {
  "use strict";
  const palette = ["#1d7a46", "#b3261e", "#5b6673", "#9a6200", "#2457c5", "#7b3fb0"];
  const DAY_S = 86400;

  // A time as the rest of the console says it: UTC, 24-hour; with the date when the chart spans days.
  function utc(seconds, span) {
    const iso = new Date(seconds * 1000).toISOString();
    return span > DAY_S ? iso.slice(5, 10) + " " + iso.slice(11, 16) : iso.slice(11, 16);
  }

  // The legend's value: the hovered point's, else the latest one's (never a bare "--").
  function shown(format) {
    return function (plot, value, series, index) {
      if (value == null && index == null) {
        const values = plot.data[series];
        value = values.length ? values[values.length - 1] : null;
      }
      return value == null ? "" : format(value);
    };
  }

  function draw(root) {
    root.querySelectorAll("[data-chart]").forEach(function (element) {
      if (element.dataset.drawn === "1") return;
      const spec = JSON.parse(element.dataset.chart);
      const time = spec.time !== false;
      const span = spec.x.length ? spec.x[spec.x.length - 1] - spec.x[0] : 0;
      const x = time
        ? { label: "UTC", value: shown(function (at) { return utc(at, span) + " UTC"; }) }
        : {};
      const series = [x].concat(spec.labels.map(function (label, index) {
        return {
          label: label,
          stroke: palette[index % palette.length],
          width: 2,
          value: shown(function (value) { return value.toFixed(2); }),
        };
      }));
      const options = {
        width: Math.max(element.clientWidth, 300),
        height: 200,
        series: series,
        axes: [
          time ? { label: "UTC", values: function (plot, splits) {
            return splits.map(function (at) { return utc(at, span); });
          } } : {},
          { label: spec.unit || "" },
        ],
        scales: { x: { time: time } },
      };
      element.chart = new uPlot(options, [spec.x].concat(spec.y), element);
      element.dataset.drawn = "1";
    });
  }

  // A refused refresh (429: the worker is busy answering reads) waits, longer each time, and says so.
  const MOST_WAIT_S = 60;

  function say(element, text) {
    let notice = element.previousElementSibling;
    if (!notice || !notice.classList.contains("busy")) {
      if (text === null) return;
      notice = document.createElement("p");
      notice.className = "notice busy";
      notice.setAttribute("role", "status");
      element.parentNode.insertBefore(notice, element);
    }
    if (text === null) notice.remove();
    else notice.textContent = text;
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    if (Number(event.detail.elt.dataset.waitUntil || 0) > Date.now()) event.preventDefault();
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    const element = event.detail.elt;
    const answer = event.detail.xhr;
    if (answer.status === 429) {
      const asked = Number(answer.getResponseHeader("Retry-After")) || 0;
      const wait = Math.min(Math.max(asked, Number(element.dataset.backoff || 1) * 2), MOST_WAIT_S);
      element.dataset.backoff = String(wait);
      element.dataset.waitUntil = String(Date.now() + wait * 1000);
      say(element, "The worker is busy answering reads (429 too many reads): what this shows is " +
        "not refreshed; the next try is in " + wait + " s.");
    } else if (event.detail.successful && element.dataset.backoff) {
      delete element.dataset.backoff;
      delete element.dataset.waitUntil;
      say(element, null);
    }
  });

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSwap", function (event) { draw(event.target); });
})();
