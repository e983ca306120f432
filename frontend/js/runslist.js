// The Analytics runs list: every change of a run pushes its row (analysis_row.html) to the
// `analyses` topic. live.js swaps the rows this page shows; a row it does not show is a run
// queued since the page loaded (from another browser, the API or a schedule), which this
// module inserts in its place, newest first, on the first page only (later pages would
// shift under the reader), and only when the list shows its cluster (the table's
// data-cluster; empty: every cluster's). The count follows, the page keeps its size.
const table = document.getElementById("analysis-runs");
const ROW_PREFIX = "analysis-row-";

function runId(row) {
  return Number(row.id.slice(ROW_PREFIX.length));
}

function parseRow(html) {
  const template = document.createElement("template");
  template.innerHTML = `<table><tbody>${html}</tbody></table>`;
  return template.content.querySelector(`tr[id^="${ROW_PREFIX}"]`);
}

function insert(body, row) {
  const perPage = Number(table.dataset.perPage);
  const rows = [...body.querySelectorAll(`tr[id^="${ROW_PREFIX}"]`)];
  const after = rows.find((shown) => runId(shown) < runId(row));
  if (!after && rows.length >= perPage) return; // older than the whole page: not ours
  document.getElementById("analysis-runs-empty")?.remove();
  body.insertBefore(row, after || null);
  row.classList.add("changed");
  if (rows.length + 1 > perPage) rows[rows.length - 1].remove();
  const count = document.getElementById("analysis-runs-count");
  if (count) count.textContent = String(Number(count.textContent) + 1);
}

if (table && table.dataset.liveInsert === "1") {
  document.addEventListener("live:message", (event) => {
    const message = event.detail;
    if (message.type !== "fragment" || !message.id.startsWith(ROW_PREFIX)) return;
    if (document.getElementById(message.id)) return; // shown: live.js swapped it
    const row = parseRow(message.html);
    if (!row || row.id !== message.id) return;
    const shown = table.dataset.cluster;
    if (shown && row.dataset.cluster !== shown) return; // another cluster's run
    insert(table.tBodies[0], row);
  });
}
