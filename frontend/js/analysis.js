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
  const labels = typeof xs[0] === "string";  // categories (partitions, keys): plot by index
  const x = labels ? xs.map((_, i) => i) : xs;
  const options = {
    width: Math.max(320, holder.clientWidth),
    height: 240,
    scales: { x: { time: !labels } },
    series: [{ label: labels ? "" : "time" }, ...names.map((name, i) => ({ label: name, stroke: colour(i), width: 2 }))],
    axes: [labels ? { ...axis, values: (u, ticks) => ticks.map((t) => xs[t] ?? "") } : axis, axis],
  };
  const plot = new uPlot(options, [x, ...names.map((n) => chart.y[n])], holder);
  new ResizeObserver(() => plot.setSize({ width: Math.max(320, holder.clientWidth), height: 240 })).observe(holder);
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
