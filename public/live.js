// Gantry's pages are rendered on the server only; this module makes them
// live without shipping the pages to the browser. It
//  - follows links and posts forms with fetch, and puts the answer into the
//    page with `morph` (what the user typed, ticked or focused stays where
//    the server's HTML did not change it);
//  - refreshes a page that has a `[data-live]` element: every 2 s while one
//    says "busy", every 10 s otherwise; never while the tab is hidden (a
//    check it missed runs when it is shown again), never two at once;
//  - asks before a form with `data-confirm` posts;
//  - loads the wasm only for pages with islands (upload, terminal), and
//    hydrates islands that a later answer brings.
// Without JavaScript every link and form still works as plain HTML.

const BUSY_MS = 2000;
const IDLE_EVERY = 5;

// ---- morph: make the page's DOM match new HTML, keeping what it can ----

// Rows that can move (a row added above) are matched by `data-key`, an id
// or their `data-name` (the rows of every list carry one), so what was
// typed into a row stays with that row.
function keyOf(node) {
  if (node.nodeType !== Node.ELEMENT_NODE) return null;
  const key = node.getAttribute("data-key");
  if (key) return "k:" + key;
  if (node.id) return "#" + node.id;
  const name = node.getAttribute("data-name");
  return name ? node.tagName + ":" + name : null;
}

function sameKind(a, b) {
  if (a.nodeType !== b.nodeType) return false;
  if (a.nodeType !== Node.ELEMENT_NODE) return true;
  return a.tagName === b.tagName && a.getAttribute("type") === b.getAttribute("type") && !keyOf(a) && !keyOf(b);
}

function islandKey(el) {
  return el.getAttribute("data-component") + "\u0000" + (el.getAttribute("data-props") || "");
}

function morphAttributes(from, to) {
  for (const attr of Array.from(from.attributes)) {
    // An open <details> is the user's choice, not the server's.
    if (attr.name === "open" && from.tagName === "DETAILS") continue;
    if (!to.hasAttribute(attr.name)) from.removeAttribute(attr.name);
  }
  for (const attr of Array.from(to.attributes)) {
    if (from.getAttribute(attr.name) !== attr.value) from.setAttribute(attr.name, attr.value);
  }
}

function morphNode(from, to) {
  if (from.nodeType !== Node.ELEMENT_NODE) {
    if (from.nodeValue !== to.nodeValue) from.nodeValue = to.nodeValue;
    return from;
  }
  // The terminal and the followed log belong to workspace.js.
  if (from.hasAttribute("data-gantry-terminal") || from.hasAttribute("data-gantry-logs")) return from;
  if (from.tagName === "LEPTOS-ISLAND") {
    // An island owns its DOM; it is replaced only when its props change.
    if (islandKey(from) === islandKey(to)) return from;
    const fresh = adopt(to);
    from.replaceWith(fresh);
    return fresh;
  }
  morphAttributes(from, to);
  // Setting the `value`/`checked` attributes above changes what a control
  // shows only until the user edits it (the browser's dirty flag), so a
  // refresh never overwrites what is being typed.
  morphChildren(from, to);
  return from;
}

// A node the old page did not have. Scripts from parsed HTML never run, so
// a script it brings (`/vendor/gantry-workspace.js`) is made afresh, once.
function adopt(node) {
  const copy = document.importNode(node, true);
  if (copy.nodeType !== Node.ELEMENT_NODE) return copy;
  if (copy.tagName === "SCRIPT") return runnable(copy);
  for (const old of Array.from(copy.querySelectorAll("script"))) old.replaceWith(runnable(old));
  return copy;
}

function runnable(script) {
  const src = script.getAttribute("src");
  if (!src || loadedScripts.has(src)) return script;
  loadedScripts.add(src);
  const fresh = document.createElement("script");
  for (const attr of Array.from(script.attributes)) fresh.setAttribute(attr.name, attr.value);
  return fresh;
}

const loadedScripts = new Set(Array.from(document.querySelectorAll("script[src]"), (s) => s.getAttribute("src")));

// The keyed rows inside an element: two containers (a card, a table)
// holding the same rows are the same container, wherever it moved.
let keysInside = new WeakMap(); // afresh for every morph
function innerKeys(el) {
  if (el.nodeType !== Node.ELEMENT_NODE) return null;
  let keys = keysInside.get(el);
  if (!keys) {
    keys = new Set();
    for (const d of el.querySelectorAll("[data-key],[id],[data-name]")) keys.add(keyOf(d));
    keysInside.set(el, keys);
  }
  return keys;
}

function overlaps(a, b) {
  if (!a || !b) return false;
  for (const k of a) if (b.has(k)) return true;
  return false;
}

function morphChildren(parent, source) {
  const incoming = Array.from(source.childNodes);
  const wanted = new Set();
  for (const n of incoming) {
    const k = keyOf(n);
    if (k) wanted.add(k);
  }
  const keyed = new Map();
  for (const n of Array.from(parent.childNodes)) {
    const k = keyOf(n);
    if (!k) continue;
    if (wanted.has(k) && !keyed.has(k)) keyed.set(k, n);
    else n.remove();
  }
  let cursor = parent.firstChild;
  incoming.forEach((next, i) => {
    const k = keyOf(next);
    let match = null;
    if (k) {
      match = keyed.get(k) || null;
      keyed.delete(k);
    } else {
      const mine = innerKeys(next);
      // The old container that holds this one's rows, if it is further on
      // (something new was put above it)...
      if (mine && mine.size) {
        for (let c = cursor; c && !match; c = c.nextSibling) {
          if (!keyOf(c) && sameKind(c, next) && overlaps(innerKeys(c), mine)) match = c;
        }
      }
      // ...else the one in its place, unless that holds rows a later one has.
      if (!match && cursor && sameKind(cursor, next)) {
        const theirs = innerKeys(cursor);
        const later = theirs && theirs.size && incoming.slice(i + 1).some((n) => !keyOf(n) && overlaps(theirs, innerKeys(n)));
        if (!later) match = cursor;
      }
    }
    if (match) {
      if (match === cursor) cursor = cursor.nextSibling;
      else parent.insertBefore(match, cursor);
      morphNode(match, next);
    } else {
      parent.insertBefore(adopt(next), cursor);
    }
  });
  while (cursor) {
    const after = cursor.nextSibling;
    cursor.remove();
    cursor = after;
  }
}

function morphDocument(html) {
  const doc = new DOMParser().parseFromString(html, "text/html");
  keysInside = new WeakMap();
  if (doc.title !== document.title) document.title = doc.title;
  morphChildren(document.body, doc.body);
  liftNoJsBoxes();
  hydrateIslands();
}

// The boxes a form without JavaScript needs ticked: the dialog asks instead.
function liftNoJsBoxes() {
  for (const box of document.querySelectorAll("input[data-nojs-required]")) box.required = false;
}

// ---- islands: the wasm, loaded only where a page has one ----

let wasm = null;

function hydrateIslands() {
  const islands = Array.from(document.querySelectorAll("leptos-island")).filter((el) => !el.gantryHydrated);
  if (islands.length === 0) {
    document.body.setAttribute("data-hydrated", "true");
    return Promise.resolve();
  }
  // Not interactive until the new islands are.
  document.body.removeAttribute("data-hydrated");
  const boot = document.querySelector("script[data-wasm]");
  wasm = wasm || import(boot.getAttribute("data-js")).then(async (mod) => {
    await mod.default({ module_or_path: boot.getAttribute("data-wasm") });
    mod.hydrate();
    return mod;
  });
  return wasm.then((mod) => {
    for (const el of islands) {
      if (el.gantryHydrated || !el.isConnected) continue;
      el.gantryHydrated = true;
      const start = mod[el.getAttribute("data-component")];
      if (start) start(el);
      else console.warn("no island named", el.getAttribute("data-component"));
    }
    document.body.setAttribute("data-hydrated", "true");
  });
}

// ---- navigation: links, forms and history through fetch ----

let navigation = null; // the AbortController of the navigation in flight

function isPage(response) {
  return (response.headers.get("content-type") || "").startsWith("text/html");
}

async function navigate(request, { push = true, form = null } = {}) {
  if (navigation) navigation.abort();
  if (poll.controller) poll.controller.abort();
  const controller = (navigation = new AbortController());
  let response;
  try {
    response = await fetch(request, { signal: controller.signal });
  } catch (e) {
    if (controller.signal.aborted) return;
    if (navigation === controller) navigation = null;
    // A post is never sent twice: the first may have arrived. The page
    // stays as it is, with what was typed, and says so.
    if (form) notice("Could not reach the server: what you sent may not have arrived. Check the page, then try again.");
    else location.assign(request.url);
    return;
  }
  if (!isPage(response)) {
    // Not a page (a download, a bare error): its body is not read here.
    if (navigation === controller) navigation = null;
    controller.abort();
    if (request.method === "GET") location.assign(response.url);
    else notice(`The server answered ${response.status} without a page; check the page, then try again.`);
    return;
  }
  const html = await response.text();
  if (navigation !== controller) return;
  navigation = null;
  const url = new URL(response.url);
  // A refused form keeps what was typed (its error comes back in the
  // URL); one that worked starts empty, as the server renders it.
  if (form && !url.searchParams.has("__err")) form.reset();
  const samePage = url.pathname === location.pathname;
  if (push && url.href !== location.href) history.pushState(null, "", url.href);
  else if (!push || url.href !== location.href) history.replaceState(null, "", url.href);
  morphDocument(html);
  if (!samePage && !url.hash) window.scrollTo(0, 0);
  restartPolling();
}

function linkRequest(event) {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return null;
  const a = event.target.closest && event.target.closest("a[href]");
  if (!a || a.target || a.hasAttribute("download") || a.getAttribute("rel") === "external") return null;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/api/") || url.pathname.startsWith("/pkg/")) return null;
  // A jump within this page.
  if (url.pathname === location.pathname && url.search === location.search && url.hash) return null;
  return new Request(url.href, { headers: { Accept: "text/html" } });
}

function formRequest(form, submitter) {
  const method = (submitter?.getAttribute("formmethod") || form.getAttribute("method") || "get").toUpperCase();
  const action = new URL(submitter?.getAttribute("formaction") || form.getAttribute("action") || location.href, location.href);
  if (action.origin !== location.origin || (method !== "GET" && method !== "POST")) return null;
  const data = new FormData(form, submitter || undefined);
  if (method === "GET") {
    action.search = new URLSearchParams(data).toString();
    return new Request(action.href, { headers: { Accept: "text/html" } });
  }
  const multipart = (form.getAttribute("enctype") || "").toLowerCase() === "multipart/form-data";
  const body = multipart ? data : new URLSearchParams(data);
  return new Request(action.href, { method, body, headers: { Accept: "text/html" } });
}

document.addEventListener("click", (event) => {
  const request = linkRequest(event);
  if (!request) return;
  event.preventDefault();
  navigate(request);
});

document.addEventListener("submit", (event) => {
  if (event.defaultPrevented) return;
  const form = event.target;
  if (form.hasAttribute("data-native")) return;
  // A second click while the first post is on its way posts nothing.
  if (form.gantryPending) {
    event.preventDefault();
    return;
  }
  const button = event.submitter;
  let question = button?.getAttribute("data-confirm") || form.getAttribute("data-confirm");
  // A second question for when a box of the form is ticked ("keep the volume").
  const box = button?.getAttribute("data-confirm-box");
  if (box && form.elements[box]?.checked) question = button.getAttribute("data-confirm-ticked") || question;
  if (question && !window.confirm(question)) {
    event.preventDefault();
    return;
  }
  const request = formRequest(form, event.submitter);
  if (!request) return;
  event.preventDefault();
  form.gantryPending = true;
  navigate(request, { form }).finally(() => {
    form.gantryPending = false;
  });
});

window.addEventListener("popstate", () => {
  navigate(new Request(location.href, { headers: { Accept: "text/html" } }), { push: false });
});

// A line at the top of the page about the connection; the next answer
// that arrives replaces the page's content, and the line with it.
function notice(text) {
  let line = document.getElementById("live-notice");
  if (!line) {
    line = document.createElement("p");
    line.id = "live-notice";
    line.className = "notice small";
    line.setAttribute("role", "alert");
    line.setAttribute("data-testid", "live-notice");
    const main = document.querySelector("main") || document.body;
    main.prepend(line);
  }
  line.textContent = text;
}

// ---- polling ----

const poll = { timer: null, periods: 0, missed: false, controller: null };

function liveState() {
  const marks = document.querySelectorAll("[data-live]");
  if (marks.length === 0) return null;
  return Array.from(marks).some((m) => m.getAttribute("data-live") === "busy") ? "busy" : "idle";
}

async function refresh() {
  if (poll.controller || navigation) return;
  const controller = (poll.controller = new AbortController());
  const here = location.href;
  try {
    const response = await fetch(here, { signal: controller.signal, headers: { Accept: "text/html", "X-Gantry-Poll": "1" } });
    if (response.redirected && new URL(response.url).pathname === "/login") {
      // The session ended: sign in again, then come back here.
      location.assign(response.url);
      return;
    }
    if (!response.ok || !isPage(response)) throw new Error(`the server answered ${response.status}`);
    const html = await response.text();
    // A navigation since the request started owns the page now.
    if (controller.signal.aborted || location.href !== here) return;
    morphDocument(html);
  } catch (e) {
    // Keep the page as it is (with what the user is doing) and say so.
    if (!controller.signal.aborted) notice(`Could not refresh (${e.message || "no connection"}); showing the last data received.`);
  } finally {
    if (poll.controller === controller) poll.controller = null;
    if (poll.again) {
      poll.again = false;
      setTimeout(refresh, 0);
    }
    const n = Number(document.body.getAttribute("data-polls") || 0);
    document.body.setAttribute("data-polls", String(n + 1));
  }
}

function restartPolling() {
  poll.periods = 0;
  if (poll.timer || liveState() === null) return;
  poll.timer = setInterval(() => {
    const state = liveState();
    if (state === null) {
      clearInterval(poll.timer);
      poll.timer = null;
      return;
    }
    poll.periods += 1;
    if (state === "busy" || poll.periods % IDLE_EVERY === 0) {
      if (document.hidden) poll.missed = true;
      else refresh();
    }
  }, BUSY_MS);
}

// An island changed what the page shows (an upload finished): refresh now,
// or right after the refresh in flight.
document.addEventListener("gantry:refresh", () => {
  if (poll.controller) poll.again = true;
  else refresh();
});

document.addEventListener("visibilitychange", () => {
  if (!document.hidden && poll.missed) {
    poll.missed = false;
    poll.periods = 0;
    refresh();
  }
});

// JavaScript runs: the stand-ins for dialogs go (see `confirm.rs`).
document.documentElement.classList.add("js");
liftNoJsBoxes();
restartPolling();
hydrateIslands();

// A field marked `data-select-all` (a new token's secret) selects its whole
// text when focused, ready to copy.
document.addEventListener("focusin", (event) => {
  const field = event.target;
  if (field instanceof HTMLInputElement && field.hasAttribute("data-select-all")) field.select();
});
