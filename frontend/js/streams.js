// A stream query's page: its progress (StreamingQuery.lastProgress after each batch) as uPlot
// charts, from the points rendered into the page and then each `stream-progress` message the
// query's task pushes over the page's live socket (frontend/README.md, "Live updates").
import uPlot from "../vendor/uplot/uPlot.esm.js";
import "./live.js";

const script = document.getElementById("streams-script");
const queryId = Number(script?.dataset.query);
const source = document.getElementById("stream-progress");
const points = source ? JSON.parse(source.textContent) : [];
const MAX_POINTS = 120;

const CHARTS = [
  { id: "chart-rates", series: [["input rows/s", "input_rows_per_second"], ["processed rows/s", "processed_rows_per_second"]] },
  { id: "chart-duration", series: [["batch ms", "batch_duration_ms"]] },
  { id: "chart-state", series: [["state rows", "state_rows"], ["lag", "lag"]] },
];
const charts = new Map();

function seconds(point) {
  const t = Date.parse(point.timestamp);
  return Number.isNaN(t) ? 0 : t / 1000;
}

function columns(spec) {
  return [points.map(seconds), ...spec.series.map(([, key]) => points.map((p) => (p[key] ?? null)))];
}

function options(holder, spec) {
  const css = getComputedStyle(document.documentElement);
  const colours = [css.getPropertyValue("--accent").trim() || "#2f6fed", css.getPropertyValue("--ok").trim() || "#1a7f37"];
  const axis = { stroke: css.getPropertyValue("--muted").trim(), grid: { stroke: css.getPropertyValue("--line").trim() } };
  return {
    width: Math.max(320, holder.clientWidth),
    height: 200,
    series: [{}, ...spec.series.map(([label], i) => ({ label, stroke: colours[i % 2], width: 2 }))],
    axes: [axis, axis],
  };
}

function draw(spec) {
  const holder = document.getElementById(spec.id);
  if (!holder) return;
  if (points.length < 2) {
    holder.textContent = holder.dataset.empty;
    holder.classList.add("chart-empty");
    return;
  }
  let chart = charts.get(spec.id);
  if (!chart) {
    holder.textContent = "";
    holder.classList.remove("chart-empty");
    chart = new uPlot(options(holder, spec), columns(spec), holder);
    charts.set(spec.id, chart);
    new ResizeObserver(() => chart.setSize({ width: Math.max(320, holder.clientWidth), height: 200 })).observe(holder);
  } else chart.setData(columns(spec));
  holder.dataset.points = String(points.length);
}

function text(id, value) {
  const element = document.getElementById(id);
  if (element) element.textContent = value ?? "—";
}

function add(point) {
  const last = points[points.length - 1];
  if (last && last.timestamp === point.timestamp) return;
  points.push(point);
  if (points.length > MAX_POINTS) points.splice(0, points.length - MAX_POINTS);
  CHARTS.forEach(draw);
  text("stream-watermark", point.watermark);
  text("stream-batch", point.batch_id);
  text("stream-points", points.length);
}

document.addEventListener("live:message", (event) => {
  const message = event.detail;
  if (message.type === "stream-progress" && message.query === queryId) add(message.point);
});
CHARTS.forEach(draw);
