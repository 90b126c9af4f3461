// Gantry's pages are rendered on the server only; this module makes them
// live without shipping the pages to the browser. It
//  - follows links and posts forms with fetch, and puts the answer into the
//    page with Idiomorph (what the user typed, ticked or focused stays where
//    the server's HTML did not change it);
//  - refreshes a page that has a `[data-live]` element: every 2 s while one
//    says "busy", every 10 s otherwise; never while the tab is hidden (a
//    check it missed runs when it is shown again), never two at once;
//  - asks before a form with `data-confirm` posts;
//  - loads the wasm only for pages with islands (upload, terminal), and
//    hydrates islands that a later answer brings.
// Without JavaScript every link and form still works as plain HTML.

import { Idiomorph } from "/vendor/idiomorph.js";

const BUSY_MS = 2000;
const IDLE_EVERY = 5;

// ---- morph: make the page's DOM match new HTML, keeping what it can ----
// Idiomorph (npm, served at /vendor/idiomorph.js) does the keyed morph;
// what it may change is decided here.

// Rows that can move (a row added above) are matched by `data-key`, an id
// or their `data-name` (the rows of every list carry one), so what was
// typed into a row stays with that row. Idiomorph matches by id, and an
// element by the ids inside it (a card, a table holding the same rows is
// the same container, wherever it moved): for the morph, a keyed row gets
// an id made of its tag, `data-testid` and key (unique in its page).
const KEY_ID = "gantry~";

function keyRows(root) {
  const seen = new Map();
  for (const el of root.querySelectorAll("[data-key]:not([id]),[data-name]:not([id])")) {
    if (el.closest("leptos-island,[data-gantry-terminal],[data-gantry-logs]")) continue;
    const key = el.getAttribute("data-key");
    const name = key ? "k:" + key : "n:" + el.getAttribute("data-name");
    const base = KEY_ID + encodeURIComponent([el.tagName, el.getAttribute("data-testid") || "", name].join("|"));
    const n = (seen.get(base) || 0) + 1;
    seen.set(base, n);
    el.id = n === 1 ? base : base + "~" + n;
  }
}

function islandKey(el) {
  return el.getAttribute("data-component") + "\u0000" + (el.getAttribute("data-props") || "");
}

// What the user set: changed here only as attributes, which move what a
// control shows only until the user edits it (the browser's dirty flag), so
// a refresh never overwrites what is being typed, ticked or chosen.
const USER_SET = { INPUT: ["value", "checked"], TEXTAREA: ["value"], OPTION: ["selected"] };

function morphCallbacks(replaced) {
  return {
    beforeNodeMorphed(from, to) {
      if (from.nodeType !== Node.ELEMENT_NODE) return true;
      // The terminal and the followed log belong to workspace.js.
      if (from.hasAttribute("data-gantry-terminal") || from.hasAttribute("data-gantry-logs")) return false;
      // An island owns its DOM; it is replaced only when its props change.
      // A control of another type is another control. (Replaced after the
      // morph: Idiomorph goes on from this node.)
      const island = from.tagName === "LEPTOS-ISLAND";
      const other = island
        ? islandKey(from) !== islandKey(to)
        : from.tagName === "INPUT" && from.getAttribute("type") !== to.getAttribute("type");
      if (other) replaced.push([from, to]);
      return !other && !island;
    },
    beforeAttributeUpdated(name, el, how) {
      // An open <details> is the user's choice, not the server's.
      if (name === "open" && how === "remove" && el.tagName === "DETAILS") return false;
      return !USER_SET[el.tagName]?.includes(name);
    },
    afterNodeMorphed(from, to) {
      if (from.tagName !== "INPUT" && from.tagName !== "OPTION") return;
      for (const name of USER_SET[from.tagName]) {
        const value = to.getAttribute(name);
        if (value === null) from.removeAttribute(name);
        else if (from.getAttribute(name) !== value) from.setAttribute(name, value);
      }
    },
  };
}

// Scripts from parsed HTML never run, so a script a new page brings
// (`/vendor/gantry-workspace.js`) is made afresh, once.
const loadedScripts = new Set(Array.from(document.querySelectorAll("script[src]"), (s) => s.getAttribute("src")));

function runNewScripts() {
  for (const script of document.body.querySelectorAll("script[src]")) {
    const src = script.getAttribute("src");
    if (loadedScripts.has(src)) continue;
    loadedScripts.add(src);
    const fresh = document.createElement("script");
    for (const attr of Array.from(script.attributes)) fresh.setAttribute(attr.name, attr.value);
    script.replaceWith(fresh);
  }
}

function morphDocument(html) {
  const doc = new DOMParser().parseFromString(html, "text/html");
  if (doc.title !== document.title) document.title = doc.title;
  keyRows(document.body);
  keyRows(doc.body);
  const replaced = [];
  // The body's own attributes (`data-hydrated`, `data-polls`) are live.js'.
  Idiomorph.morph(document.body, doc.body.childNodes, { morphStyle: "innerHTML", callbacks: morphCallbacks(replaced) });
  for (const [from, to] of replaced) if (from.isConnected) from.replaceWith(document.importNode(to, true));
  for (const el of document.body.querySelectorAll(`[id^="${KEY_ID}"]`)) el.removeAttribute("id");
  runNewScripts();
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
  // A refused form keeps what was typed (the page that says why is marked
  // by the server: X-Gantry-Outcome); one that worked starts empty, as the
  // server renders it.
  if (form && response.headers.get("X-Gantry-Outcome") !== "refused") form.reset();
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
