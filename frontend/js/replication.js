// The Replication page keeps itself current: every data-refresh-ms it fetches itself again
// and swaps in the new flows (offsets, checkpoints, states), without a reload. A fetch that
// fails leaves the page as it was and tries again at the next tick.
const flows = document.getElementById("flows");

async function refresh() {
  try {
    const answer = await fetch(window.location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" });
    if (!answer.ok) return;
    const page = new DOMParser().parseFromString(await answer.text(), "text/html");
    const fresh = page.getElementById("flows");
    if (fresh) {
      flows.innerHTML = fresh.innerHTML;
      flows.dataset.updated = String(Date.now());
    }
  } catch (error) {
    // the server is away for a moment: the next tick tries again
  } finally {
    setTimeout(refresh, Number(flows.dataset.refreshMs) || 5000);
  }
}

if (flows) setTimeout(refresh, Number(flows.dataset.refreshMs) || 5000);
