// The Kafka Connect pages: the element with data-connect-view (the connector list's table,
// or a connector's status card) is kept up to date over the page's websocket. The page asks
// for its view ({"type": "connect", "view": ...}), again after every reconnect; the server's
// one watch per process reads the worker and pushes the view's fragment when it changes
// (controlcenter/connectwatch.py), which live.js swaps in like any pushed fragment.
import { live } from "./live.js";

const element = document.querySelector("[data-connect-view]");
if (element) {
  const view = element.dataset.connectView;
  live.request("connect", () => ({ type: "connect", view }));
  // These pages follow no event group besides the cluster banner, so live.js left the
  // connection closed: open it.
  if (!live.socket && live.topics.size === 0) live.start();
}
