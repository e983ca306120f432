// The Messages page's live tail: while the box is ticked, the page's websocket carries the
// topic's new records, filtered by the page's filters, as rows for the top of the table
// (controlcenter/livetail.py reads them once for every browser tailing the topic). The
// request names where the page's read ended; after a reconnect it is sent again from the
// newest row shown, so nothing in between is lost (within the server's catch-up bound).
import { live } from "./live.js";

const box = document.getElementById("live-tail");
const rows = document.getElementById("message-rows");
const form = document.getElementById("browse-form");
const MAX_TAILED_ROWS = 1000; // the page keeps this many tailed rows, dropping the oldest
const FILTERS = ["partition", "key", "value", "header"];

function positions() {
  const next = new Map();
  for (const pair of box.dataset.positions.split(",").filter(Boolean)) {
    const [partition, offset] = pair.split(":").map(Number);
    next.set(partition, offset);
  }
  for (const row of rows.querySelectorAll("tr.tailed")) {
    const partition = Number(row.dataset.partition);
    const offset = Number(row.dataset.offset) + 1;
    if (!(next.get(partition) >= offset)) next.set(partition, offset);
  }
  return [...next].map(([partition, offset]) => `${partition}:${offset}`).join(",");
}

function tailRequest() {
  const fields = new FormData(form);
  const filters = Object.fromEntries(FILTERS.map((name) => [name, fields.get(name) || ""]));
  return { type: "tail", topic: box.dataset.topic, positions: positions(), filters };
}

function tailed(event) {
  if (event.detail.id !== "message-rows") return;
  const empty = rows.querySelector("td.empty");
  if (empty) empty.parentElement.remove();
  const shown = rows.querySelectorAll("tr.tailed");
  for (let i = MAX_TAILED_ROWS; i < shown.length; i += 1) shown[i].remove();
}

// The server stopped or refused the tail (its "tail" banner says why): untick the box.
function refused(event) {
  const message = event.detail;
  if (message.type !== "banner" || message.key !== "tail" || !message.active) return;
  box.checked = false;
  live.cancel("tail", { type: "untail" });
}

if (box && rows && form) {
  document.addEventListener("live:swapped", tailed);
  document.addEventListener("live:message", refused);
  box.addEventListener("change", () => {
    document.getElementById("banner-tail")?.remove();
    if (box.checked) live.request("tail", tailRequest);
    else live.cancel("tail", { type: "untail" });
  });
}
