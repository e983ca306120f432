// The Messages page's live tail: while the box is ticked, ask the server every two seconds
// for messages past the positions it last reported, with the page's filters, and put them
// on top of the table. The server reads them through clusterclient, bounded like a page.
const box = document.getElementById("live-tail");
const rows = document.getElementById("message-rows");
const form = document.getElementById("browse-form");
const PERIOD_MS = 2000;
let timer = null;

async function poll() {
  const params = new URLSearchParams(new FormData(form));
  params.set("positions", box.dataset.positions);
  try {
    const response = await fetch(`${box.dataset.tailUrl}?${params}`, { headers: { Accept: "application/json" } });
    const body = await response.json();
    if (!response.ok) throw new Error(typeof body.error === "string" ? body.error : response.statusText);
    box.dataset.positions = body.positions;
    if (body.count) {
      const empty = rows.querySelector("td.empty");
      if (empty) empty.parentElement.remove();
      rows.insertAdjacentHTML("afterbegin", body.html);
    }
    box.parentElement.title = "";
  } catch (error) {
    box.parentElement.title = `tail paused: ${error.message}`;
  }
  if (box.checked) timer = setTimeout(poll, PERIOD_MS);
}

if (box && rows && form) {
  box.addEventListener("change", () => {
    clearTimeout(timer);
    if (box.checked) poll();
  });
}
