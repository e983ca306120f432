// A run's page: follows its status live (progress bar, then the ending), catches up on
// what was pushed before the socket listened, reloads once the run ends so its results
// render, and draws the result's charts with uPlot.
import uPlot from "../vendor/uplot/uPlot.esm.js";
import { applyFragment } from "./live.js";

const state = document.getElementById("run-state");

async function catchUp() {
  try {
    const response = await fetch(state.dataset.statusUrl, { headers: { Accept: "text/html" } });
    if (response.ok) applyFragment(document, { id: state.dataset.statusId, html: await response.text() });
  } catch (error) {
    console.warn("analysis: could not fetch the run's status", error);
  }
}

function followStatus() {
  if (!state || state.dataset.finished === "1") return;
  document.addEventListener("live:swapped", (event) => {
    if (event.detail.id !== state.dataset.statusId) return;
    const current = document.getElementById(state.dataset.statusId);
    if (current && current.dataset.finished === "1") window.location.reload();
  });
  // Whenever the socket becomes live (first time or after a reconnect), fetch the status
  // once: a change pushed while nobody listened is not pushed again.
  const indicator = document.getElementById("live-indicator");
  if (indicator) {
    new MutationObserver(() => { if (indicator.dataset.state === "live") catchUp(); })
      .observe(indicator, { attributes: true, attributeFilter: ["data-state"] });
  }
}

const PALETTE = ["--accent", "--err", "--ok", "--warn", "--stop"];

function drawChart(holder, chart) {
  const xs = chart.x || [];
  const names = Object.keys(chart.y || {});
  if (!xs.length || !names.length) {
    holder.textContent = holder.dataset.empty;
    holder.classList.add("chart-empty");
    return;
  }
  const css = getComputedStyle(document.documentElement);
  const colour = (i) => css.getPropertyValue(PALETTE[i % PALETTE.length]).trim() || "#2f6fed";
  const axis = { stroke: css.getPropertyValue("--muted").trim(), grid: { stroke: css.getPropertyValue("--line").trim() } };
  const categories = typeof xs[0] === "string"; // partitions, keys, groups: one bar each
  const shape = categories ? barShape(xs, names, colour, axis) : lineShape(names, colour, axis);
  const size = () => {
    const width = Math.max(320, holder.clientWidth);
    return { width, height: shape.height(width) };
  };
  const x = categories ? xs.map((_, i) => i) : xs;
  const plot = new uPlot({ ...size(), ...shape.options }, [x, ...names.map((n) => chart.y[n])], holder);
  holder.dataset.kind = categories ? "bars" : "lines";
  holder.plot = plot; // for tests and the console
  new ResizeObserver(() => plot.setSize(size())).observe(holder);
}

const PLOT_HEIGHT = 200; // the plot's own height, without the time or label axis
const LABEL_FONT = "12px system-ui, -apple-system, sans-serif"; // measured, then drawn
const Y_AXIS_PX = 60;

function lineShape(names, colour, axis) {
  return {
    height: () => PLOT_HEIGHT + 40,
    options: {
      scales: { x: { time: true } },
      series: [{ label: "time" }, ...names.map((name, i) => ({ label: name, stroke: colour(i), width: 2 }))],
      axes: [axis, axis],
    },
  };
}

// Categories as bars (uPlot's bars path): one slot per label, each bar centred in its slot
// (the x range is padded by half a slot, so the first and last labels are not cut at the
// edges), the y axis from zero, and labels turned upright when they would not fit side by
// side: upright, a label takes height (the chart grows by it), never width a neighbour or
// the canvas edge would cut. The jobs' category charts have one series each.
function barShape(xs, names, colour, axis) {
  const bars = uPlot.paths.bars({ size: [0.7, 64], align: 0 });
  const labelPx = textWidth(xs);
  const upright = (width) => labelPx + 8 > (width - Y_AXIS_PX) / xs.length; // css px per slot
  const axisPx = (width) => (upright(width) ? labelPx + 16 : 40);
  return {
    height: (width) => PLOT_HEIGHT + axisPx(width),
    options: {
      scales: {
        x: { time: false, range: () => [-0.5, xs.length - 0.5] },
        y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      legend: { show: names.length > 1 },
      cursor: { points: { show: false } },
      series: [
        { label: "", value: (u, i) => (i == null ? "" : xs[i] ?? "") },
        ...names.map((name, i) => ({ label: name, fill: colour(i), stroke: colour(i), width: 0, paths: bars, points: { show: false } })),
      ],
      axes: [
        {
          ...axis,
          font: LABEL_FONT,
          grid: { show: false },
          splits: () => xs.map((_, i) => i),
          values: (u, ticks) => ticks.map((t) => xs[t] ?? ""),
          rotate: (u) => (upright(u.width) ? 90 : 0),
          size: (u) => axisPx(u.width),
          gap: 6,
        },
        axis,
      ],
    },
  };
}

function textWidth(labels) {
  const context = document.createElement("canvas").getContext("2d");
  context.font = LABEL_FONT;
  return Math.ceil(Math.max(...labels.map((label) => context.measureText(String(label)).width)));
}

function drawCharts() {
  const source = document.getElementById("analysis-charts");
  if (!source) return;
  const charts = JSON.parse(source.textContent);
  for (const holder of document.querySelectorAll(".analysis-chart")) {
    const chart = charts[holder.dataset.chart];
    if (chart) drawChart(holder, chart);
  }
}

followStatus();
drawCharts();
