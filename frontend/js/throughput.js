// The topic page's throughput chart: messages and bytes in per second over the last hour,
// from the collector's history (rendered into the page as JSON by the server).
import uPlot from "../vendor/uplot/uPlot.esm.js";

const holder = document.getElementById("throughput-chart");
const source = document.getElementById("throughput-data");

function draw() {
  const data = JSON.parse(source.textContent);
  if (data.t.length < 2) {
    holder.textContent = holder.dataset.empty;
    holder.classList.add("chart-empty");
    return;
  }
  const css = getComputedStyle(document.documentElement);
  const accent = css.getPropertyValue("--accent").trim() || "#2f6fed";
  const second = css.getPropertyValue("--ok").trim() || "#1a7f37";
  const axis = { stroke: css.getPropertyValue("--muted").trim(), grid: { stroke: css.getPropertyValue("--line").trim() } };
  const options = {
    width: Math.max(320, holder.clientWidth),
    height: 220,
    series: [
      {},
      { label: "messages/s", stroke: accent, width: 2, scale: "msg" },
      { label: "bytes/s", stroke: second, width: 1.5, scale: "bytes" },
    ],
    axes: [axis, { ...axis, scale: "msg", label: "messages/s" }, { ...axis, scale: "bytes", side: 1, label: "bytes/s", size: 80, grid: { show: false } }],
  };
  const chart = new uPlot(options, [data.t, data.messages, data.bytes], holder);
  new ResizeObserver(() => chart.setSize({ width: Math.max(320, holder.clientWidth), height: 220 })).observe(holder);
}

if (holder && source) draw();
