// Live time-series charts through uPlot (vendored: vendor/uplot/README.md). uPlot styles its
// elements through the CSSOM (element.style), which the console's CSP allows; it writes no
// inline style attribute, so its legend keeps its colours.
import { h } from "./dom.js";

let loading = null;
const WINDOW_S = 60; // the time axis spans at least a minute, however few the points

// uPlot's script and stylesheet, added to the page once, from the broker itself.
export function loadUPlot() {
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      document.head.append(h("link", { rel: "stylesheet", href: "vendor/uplot/uPlot.min.css" }));
      const script = h("script", { src: "vendor/uplot/uPlot.iife.min.js" });
      script.addEventListener("load", () => resolve(window.uPlot));
      script.addEventListener("error", () => reject(new Error("uPlot did not load")));
      document.head.append(script);
    });
  }
  return loading;
}

function number(value) {
  if (value === null || value === undefined) return "-";
  return value >= 100 ? value.toFixed(0) : value.toFixed(value >= 10 ? 1 : 2);
}

function timeRange(min, max) {
  const end = Number.isFinite(max) ? max : Date.now() / 1000;
  return [Math.min(Number.isFinite(min) ? min : end, end - WINDOW_S), end];
}

// A chart of the last `points` samples of each series against time: a time axis, the unit on
// the value axis, a legend in the series' colours showing the values under the cursor.
export class TimeChart {
  constructor(series, { unit, id, points = 150, height = 200 } = {}) {
    this.unit = unit;
    this.points = points;
    this.height = height;
    this.series = series;
    this.data = [[], ...series.map(() => [])];
    this.el = h("div", { class: "chart", id });
    this.el.chart = this; // for the browser tests: the axes are pixels on a canvas
    this.plot = null;
    this.resizes = new ResizeObserver(() => this.fit());
    this.resizes.observe(this.el);
  }

  options(width) {
    const unit = this.unit;
    return {
      width,
      height: this.height,
      scales: {
        x: { time: true, range: (u, min, max) => timeRange(min, max) },
        y: { range: (u, min, max) => [0, Math.max(1, max * 1.15)] } },
      axes: [
        { stroke: "#667085", grid: { stroke: "#eaecf0" } },
        { label: unit, stroke: "#667085", grid: { stroke: "#eaecf0" }, size: 60,
          values: (u, values) => values.map(number) },
      ],
      series: [
        { label: "time", value: (u, at) => (at ? new Date(at * 1000).toLocaleTimeString() : "-") },
        ...this.series.map((s) => ({
          label: s.label, stroke: s.color, width: 2, dash: s.dash, points: { show: false },
          value: (u, v) => `${number(v)} ${unit}`,
        })),
      ],
      legend: { live: true, markers: { fill: (u, i) => (i ? this.series[i - 1].color : null) } },
      cursor: { drag: { x: false, y: false } },
    };
  }

  async fit() {
    const width = this.el.clientWidth;
    if (!width) return;
    if (this.plot) { this.plot.setSize({ width, height: this.height }); return; }
    const uPlot = await loadUPlot();
    if (this.plot) return;
    this.plot = new uPlot(this.options(width), this.data, this.el);
  }

  // One sample of every series (in the order given), at `at` seconds since the epoch.
  push(values, at = Date.now() / 1000) {
    this.data[0].push(at);
    values.forEach((value, i) => this.data[i + 1].push(Number.isFinite(value) ? value : null));
    if (this.data[0].length > this.points) this.data.forEach((column) => column.shift());
    if (this.plot) this.plot.setData(this.data);
  }

  destroy() {
    this.resizes.disconnect();
    if (this.plot) this.plot.destroy();
  }
}
