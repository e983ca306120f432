// Rows of a live list page (frontend/README.md, "Live updates", the `rows` message).
//
// A list page shows one page of a sorted, filtered list, and the server cannot render that
// page for every browser: it renders each changed object's row once and sends it to every
// page of the list. The page places it by its own view, which its table declares in
// data-live-rows (order, filter, whether it is the first or last page, its size), reading
// each row's values from its data-values; each row names its object in data-key.
//   - a shown row is replaced in place (the page keeps its order until it is reloaded);
//   - a deleted object's row (html null), or one that no longer matches, leaves the page;
//   - a row the page does not show yet is inserted where the order puts it, when that is
//     on this page (a full page then hands its last row on to the next one).
// The server sends a changed row to the row's own group (view.row_topic + "." + key,
// e.g. topics.orders) and only new and deleted ones to the list's group, so the page
// follows the group of each row it shows (followRows at start, then as rows come and go).

export function followRows(doc, connection) {
  for (const table of doc.querySelectorAll("table[data-live-rows]")) {
    const view = JSON.parse(table.dataset.liveRows);
    const body = table.tBodies[0];
    if (view.row_topic && body) {
      connection.subscribe(...keyedRows(body).map((row) => rowTopic(view, row)));
    }
  }
}

export function applyRows(doc, { table: id, rows = [] }, connection = null) {
  const table = doc.getElementById(id);
  const body = table && table.tBodies[0];
  if (!body) return false;
  const view = JSON.parse(table.dataset.liveRows || "{}");
  const follow = (row, on) => {
    if (connection && view.row_topic) {
      if (on) connection.subscribe(rowTopic(view, row));
      else connection.unsubscribe(rowTopic(view, row));
    }
  };
  for (const { key, html } of rows) placeRow(doc, body, view, key, html, follow);
  doc.dispatchEvent(new CustomEvent("live:swapped", { detail: { id, swap: "rows" } }));
  return true;
}

function placeRow(doc, body, view, key, html, follow) {
  const shown = keyedRows(body).find((row) => row.dataset.key === key);
  const row = html ? parseRow(doc, html) : null;
  const wanted = row !== null && matches(view.filter || {}, valuesOf(row));
  if (shown && wanted) shown.replaceWith(row);
  else if (shown) {
    shown.remove();
    follow(shown, false);
  } else if (wanted) insertSorted(body, view, row, follow);
}

function insertSorted(body, view, row, follow) {
  const rows = keyedRows(body);
  const values = valuesOf(row);
  const next = rows.find((other) => compare(view.order || [], values, valuesOf(other)) < 0);
  if (next === undefined) {
    // After every shown row: only the last page, with room left, ends with it.
    if (!view.last_page || rows.length >= view.per_page) return;
    body.append(row);
  } else {
    // Before the first row of a later page: it belongs to an earlier page.
    if (next === rows[0] && !view.first_page) return;
    next.before(row);
    if (rows.length + 1 > view.per_page) {
      const last = rows[rows.length - 1];
      last.remove();
      follow(last, false);
    }
  }
  follow(row, true);
  row.classList.add("changed");
  for (const empty of body.querySelectorAll("td.empty")) empty.parentElement.remove();
}

function rowTopic(view, row) {
  return `${view.row_topic}.${row.dataset.key}`;
}

function keyedRows(body) {
  return [...body.rows].filter((row) => row.dataset.key !== undefined);
}

function parseRow(doc, html) {
  const template = doc.createElement("template");
  template.innerHTML = html.trim();
  return template.content.firstElementChild;
}

function valuesOf(row) {
  return JSON.parse(row.dataset.values || "{}");
}

// The server's order: fields in turn, each 1 (ascending, nulls first) or -1 (descending,
// nulls last); strings by code unit, as SQLite compares them.
export function compare(order, a, b) {
  for (const [field, direction] of order) {
    const c = compareValues(a[field], b[field]);
    if (c !== 0) return c * direction;
  }
  return 0;
}

function compareValues(x, y) {
  if (x === y) return 0;
  if (x === null || x === undefined) return -1;
  if (y === null || y === undefined) return 1;
  return x < y ? -1 : 1;
}

// Filters: {field: {icontains: "text"}} or {field: {eq: value}}, all of them must hold.
export function matches(filter, values) {
  return Object.entries(filter).every(([field, test]) => {
    if ("icontains" in test) {
      return String(values[field] ?? "").toLowerCase().includes(test.icontains.toLowerCase());
    }
    return !("eq" in test) || values[field] === test.eq;
  });
}
