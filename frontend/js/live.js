// The client side of the control center's live protocol (frontend/README.md, "Live updates").
//
// One websocket per page, to /ws/live/?topics=a,b. The page names its topics in
// <body data-live-topics="overview topic:orders"> (space-separated). The server pushes
// JSON messages; this module swaps server-rendered HTML fragments in by element id, shows
// and clears banners, re-emits data messages as DOM events for charts, and keeps an
// indicator (#live-indicator) saying whether the page is live. It reconnects on its own
// with capped, jittered exponential backoff; on every (re)connect the server re-sends the
// current fragments of the subscribed topics, so a page that missed updates catches up.
//
// Page scripts can use the same connection:
//   import { live } from "/static/js/live.js";
//   live.subscribe("group.orders");
//   document.addEventListener("live:data", (e) => draw(e.detail));

import { applyRows, followRows } from "./liverows.js";

const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 15000;
// Close codes with which the server says "do not come back" (4401: sign in first,
// 4403: not allowed). Anything else is a fault worth retrying.
const FINAL_CLOSE_CODES = new Set([4401, 4403]);
// Where insertAdjacentHTML puts a fragment for each "swap" value; "outer" and "inner"
// replace the element or its children.
const ADJACENT = { beforeend: "beforeend", afterbegin: "afterbegin" };

export class LiveConnection {
  constructor({ path = "/ws/live/", topics = [], doc = document, win = window } = {}) {
    this.path = path;
    this.topics = new Set(topics);
    this.doc = doc;
    this.win = win;
    this.socket = null;
    this.attempt = 0;
    this.reconnecting = false; // true once a socket was opened: later ones resync
    this.retryTimer = null;
    this.stopped = false;
    // Standing requests (the Messages page's tail): sent now and again on every reconnect,
    // each time built afresh, so a tail resumes from what the page already shows.
    this.requests = new Map();
    this.followed = new Set();
  }

  url() {
    const scheme = this.win.location.protocol === "https:" ? "wss" : "ws";
    // Each topic is encoded on its own, so a comma inside a group id stays a %2C.
    const topics = [...this.topics].map(encodeURIComponent).join(",");
    // After the first socket, ask the server for what the page may have missed meanwhile
    // (the cluster banner, the current fragments): pushes are only sent on change.
    const resync = this.reconnecting ? "&resync=1" : "";
    return `${scheme}://${this.win.location.host}${this.path}?topics=${topics}${resync}`;
  }

  start() {
    this.stopped = false;
    this.open();
    // Back online after a network change: retry now rather than at the next backoff step.
    this.win.addEventListener("online", () => this.retryNow());
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    if (this.socket) this.socket.close(1000);
    this.setState("offline", "live updates stopped");
  }

  // Topics followed after the page loaded (a list's rows): sent as messages, and again
  // after every reconnect, rather than in the socket's URL.
  subscribe(...topics) {
    const added = topics.filter((t) => !this.topics.has(t) && !this.followed.has(t));
    if (added.length === 0) return;
    for (const topic of added) this.followed.add(topic);
    this.send({ type: "subscribe", topics: added });
  }

  unsubscribe(...topics) {
    const removed = topics.filter((t) => this.followed.delete(t) || this.topics.delete(t));
    if (removed.length > 0) this.send({ type: "unsubscribe", topics: removed });
  }

  request(key, build) {
    this.requests.set(key, build);
    this.send(build());
  }

  cancel(key, message) {
    if (this.requests.delete(key)) this.send(message);
  }

  send(message) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(message));
    }
  }

  open() {
    this.setState(this.attempt === 0 ? "connecting" : "reconnecting", "connecting");
    const socket = new WebSocket(this.url());
    this.reconnecting = true;
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.setState("live", "connected");
      if (this.followed.size > 0) this.send({ type: "subscribe", topics: [...this.followed] });
      for (const build of this.requests.values()) this.send(build());
    });
    socket.addEventListener("message", (event) => {
      // A message proves the server accepted us: start the backoff from the beginning.
      this.attempt = 0;
      this.handle(event.data);
    });
    socket.addEventListener("close", (event) => this.closed(socket, event));
  }

  closed(socket, event) {
    if (socket !== this.socket || this.stopped) return;
    this.socket = null;
    if (FINAL_CLOSE_CODES.has(event.code)) {
      this.setState("offline", event.reason || "not allowed to receive live updates");
      return;
    }
    const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** this.attempt);
    const delay = ceiling / 2 + Math.random() * (ceiling / 2);
    this.attempt += 1;
    this.setState("reconnecting", `connection lost; retrying in ${Math.round(delay / 1000)} s`);
    this.retryTimer = setTimeout(() => this.open(), delay);
  }

  retryNow() {
    if (this.stopped || this.socket) return;
    clearTimeout(this.retryTimer);
    this.open();
  }

  handle(raw) {
    let message;
    try {
      message = JSON.parse(raw);
    } catch {
      console.warn("live: a message that is not JSON", raw);
      return;
    }
    const handler = HANDLERS[message.type];
    if (handler) handler(this.doc, message, this);
    this.doc.dispatchEvent(new CustomEvent("live:message", { detail: message }));
  }

  setState(state, detail) {
    const indicator = this.doc.getElementById("live-indicator");
    if (!indicator) return;
    indicator.dataset.state = state;
    indicator.title = detail;
    const label = indicator.querySelector(".label");
    if (label) label.textContent = state;
  }
}

export function applyFragment(doc, { id, html, swap = "outer" }) {
  const element = doc.getElementById(id);
  if (!element) return false; // this page does not show that fragment
  if (swap === "outer") element.outerHTML = html;
  else if (swap === "inner") element.innerHTML = html;
  else if (ADJACENT[swap]) element.insertAdjacentHTML(ADJACENT[swap], html);
  else return false;
  doc.dispatchEvent(new CustomEvent("live:swapped", { detail: { id, swap } }));
  return true;
}

export function applyBanner(doc, { key, level = "error", text = "", active = true }) {
  const id = `banner-${key}`;
  let banner = doc.getElementById(id);
  if (!active) {
    if (banner) banner.remove();
    return;
  }
  if (!banner) {
    const slot = doc.getElementById("banners");
    if (!slot) return;
    banner = doc.createElement("div");
    banner.id = id;
    banner.setAttribute("role", "alert");
    slot.append(banner);
  }
  banner.className = `banner banner-${level}`;
  banner.textContent = text; // plain text: a broker's error message is never HTML
}

const HANDLERS = {
  fragment: applyFragment,
  banner: applyBanner,
  rows: applyRows,
  data: (doc, message) => doc.dispatchEvent(new CustomEvent("live:data", { detail: message })),
};

// A fragment pushed over the socket is rendered without a request, so its forms carry no
// CSRF token (the Brokers page's commands, say); a post form without one takes the page's
// (base.html's meta) as it is submitted: the form's data is read after this event.
export function addCsrfToken(event) {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.method !== "post") return;
  if (form.querySelector("input[name=csrfmiddlewaretoken]")) return;
  const token = form.ownerDocument.querySelector("meta[name=csrf-token]")?.content;
  if (!token) return;
  const input = form.ownerDocument.createElement("input");
  Object.assign(input, { type: "hidden", name: "csrfmiddlewaretoken", value: token });
  form.append(input);
}
document.addEventListener("submit", addCsrfToken);

function topicsOf(doc) {
  return (doc.body.dataset.liveTopics || "").split(/\s+/).filter(Boolean);
}

// The page's one connection, opened when the page names topics to follow.
export const live = new LiveConnection({
  path: document.body.dataset.livePath || "/ws/live/",
  topics: topicsOf(document),
});
if (live.topics.size > 0) {
  followRows(document, live);
  live.start();
} else live.setState("off", "this page has no live updates");
