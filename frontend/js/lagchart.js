// A consumer group's lag history: total lag (messages) and max lag in seconds over the
// chosen window, from the collector's history. The page embeds the first data; whenever a
// live push refreshes the group's summary, the chart reloads its window from the JSON API.
import uPlot from "../vendor/uplot/uPlot.esm.js";

const holder = document.getElementById("lag-chart");
const source = document.getElementById("lag-data");
let chart = null;
// The chosen window, [since, until] in epoch seconds: the x axis spans it. Left to uPlot, a
// single point's time axis stretched over years, and a few points over only themselves.
let span = null;

function asColumns(data) {
  return [data.t, data.lag, data.seconds];
}

function showEmpty() {
  holder.textContent = holder.dataset.empty;
  holder.classList.add("chart-empty");
}

function build(data) {
  const css = getComputedStyle(document.documentElement);
  const accent = css.getPropertyValue("--accent").trim() || "#2f6fed";
  const second = css.getPropertyValue("--err").trim() || "#cf222e";
  const axis = { stroke: css.getPropertyValue("--muted").trim(), grid: { stroke: css.getPropertyValue("--line").trim() } };
  holder.textContent = "";
  holder.classList.remove("chart-empty");
  const options = {
    width: Math.max(320, holder.clientWidth),
    height: 240,
    scales: { x: { time: true, range: () => [span.since, span.until] } },
    series: [
      {},
      { label: "total lag (messages)", stroke: accent, width: 2, scale: "msg" },
      { label: "max lag (s)", stroke: second, width: 1.5, scale: "s" },
    ],
    axes: [axis, { ...axis, scale: "msg", label: "messages" }, { ...axis, scale: "s", side: 1, label: "seconds", grid: { show: false } }],
  };
  chart = new uPlot(options, asColumns(data), holder);
  holder.uplot = chart; // for the console and the browser tests
  new ResizeObserver(() => chart.setSize({ width: Math.max(320, holder.clientWidth), height: 240 })).observe(holder);
}

function draw(data) {
  span = { since: data.since, until: data.until };
  if (!data.t.length) {
    if (chart) { chart.destroy(); chart = null; }
    showEmpty();
  } else if (chart) {
    chart.setData(asColumns(data));
  } else {
    build(data);
  }
}

async function reload() {
  try {
    const response = await fetch(holder.dataset.historyUrl, { headers: { Accept: "application/json" } });
    if (response.ok) draw(await response.json());
  } catch (error) {
    console.warn("lag chart: could not reload the history", error);
  }
}

if (holder && source) {
  draw(JSON.parse(source.textContent));
  document.addEventListener("live:swapped", (event) => {
    if (event.detail.id === "group-summary") reload();
  });
}
