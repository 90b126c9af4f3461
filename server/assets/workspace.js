// Gantry: the machine page's terminal (xterm.js over a WebSocket) and live
// log. Served by Gantry at /vendor/gantry-workspace.js, with xterm.js
// itself at /vendor/xterm.js (no CDN). Mounts on [data-gantry-terminal]
// and [data-gantry-logs] once live.js has taken the page over (it sets
// `data-hydrated` on <body>), and unmounts (closing
// the connection) when the page navigates away from them.
(function () {
  'use strict';
  if (window.GantryWorkspace) {
    window.GantryWorkspace.scan();
    return;
  }

  /** Lines the live log keeps; older ones are dropped. */
  const LOG_LINES_MAX = 2000;
  /** After "the machine stopped/restarts": ask again this often, this long. */
  const RETRY_EVERY_MS = 2000;
  const RETRY_FOR_MS = 10 * 60 * 1000;
  /** Close codes from the server (gantry_platform::workspace::close_code). */
  const MACHINE_STOPPED = 4001;

  const scripts = {};
  function loadScript(src) {
    if (!scripts[src]) {
      scripts[src] = new Promise((resolve, reject) => {
        const s = document.createElement('script');
        s.src = src;
        s.onload = resolve;
        s.onerror = () => reject(new Error('cannot load ' + src));
        document.head.appendChild(s);
      });
    }
    return scripts[src];
  }
  function loadCss(href) {
    if (document.querySelector('link[data-gantry-css="' + href + '"]')) return;
    const l = document.createElement('link');
    l.rel = 'stylesheet';
    l.href = href;
    l.dataset.gantryCss = href;
    document.head.appendChild(l);
  }
  function loadXterm() {
    loadCss('/vendor/xterm.css');
    return loadScript('/vendor/xterm.js').then(() => loadScript('/vendor/addon-fit.js'));
  }

  const encoder = new TextEncoder();

  class TerminalPanel {
    constructor(root) {
      this.root = root;
      this.id = root.dataset.machineId;
      this.status = root.querySelector('[data-role="status"]');
      this.screen = root.querySelector('[data-role="screen"]');
      this.openBtn = root.querySelector('[data-action="connect"]');
      this.closeBtn = root.querySelector('[data-action="disconnect"]');
      this.term = null;
      this.fit = null;
      this.ws = null;
      this.retry = null;
      this.disposed = false;
      this.openBtn.addEventListener('click', () => this.connect());
      this.closeBtn.addEventListener('click', () => this.disconnect());
      this.setState('idle', 'Not connected.');
    }

    setState(state, text) {
      this.root.dataset.state = state;
      this.status.textContent = text;
      const live = state === 'open' || state === 'connecting';
      this.openBtn.disabled = live;
      this.closeBtn.disabled = !(live || state === 'waiting');
      this.openBtn.textContent = this.term ? 'Reconnect' : 'Open terminal';
    }

    async ensureTerm() {
      if (this.term) return;
      await loadXterm();
      const term = new window.Terminal({
        cursorBlink: true,
        fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace',
        fontSize: 14,
        scrollback: 5000,
        theme: { background: '#101418', foreground: '#e4e7eb' },
      });
      const fit = new window.FitAddon.FitAddon();
      term.loadAddon(fit);
      this.screen.classList.add('open');
      term.open(this.screen);
      try { fit.fit(); } catch (_) { /* not laid out yet */ }
      term.onData((d) => this.send(encoder.encode(d)));
      term.onBinary((d) => {
        const b = new Uint8Array(d.length);
        for (let i = 0; i < d.length; i++) b[i] = d.charCodeAt(i) & 255;
        this.send(b);
      });
      term.onResize(({ cols, rows }) => this.control({ resize: { cols, rows } }));
      term.attachCustomKeyEventHandler((e) => this.keys(e));
      this.resizeObserver = new ResizeObserver(() => {
        try { fit.fit(); } catch (_) { /* hidden */ }
      });
      this.resizeObserver.observe(this.screen);
      this.term = term;
      this.fit = fit;
    }

    /** Ctrl+Shift+C copies the selection, Ctrl+Shift+V pastes; all other
     * keys (Ctrl+C included) go to the shell. */
    keys(e) {
      if (e.type !== 'keydown' || !e.ctrlKey || !e.shiftKey) return true;
      if (e.code === 'KeyC') {
        const text = this.term.getSelection();
        if (text && navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
        return false;
      }
      if (e.code === 'KeyV') {
        if (navigator.clipboard && navigator.clipboard.readText) {
          navigator.clipboard.readText().then((t) => this.term.paste(t)).catch(() => {});
        }
        return false;
      }
      return true;
    }

    send(bytes) {
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(bytes);
    }

    control(message) {
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
    }

    /** Null when a terminal can open now, else the server's reason. */
    async preflight() {
      const res = await fetch('/machines/' + this.id + '/terminal', {
        credentials: 'same-origin',
        headers: { Accept: 'application/json' },
        // A session that ended is sent to the sign-in page: followed, that
        // page's 200 would read as "ready".
        redirect: 'manual',
      });
      if (res.type === 'opaqueredirect') return 'your session has ended; please sign in again';
      if (res.ok) return null;
      return (await res.text()) || 'HTTP ' + res.status;
    }

    async connect() {
      this.stopRetry();
      if (this.ws || this.disposed) return;
      this.setState('connecting', 'Connecting…');
      try {
        await this.ensureTerm();
      } catch (e) {
        this.setState('error', 'The terminal could not load: ' + e.message);
        return;
      }
      let why;
      try {
        why = await this.preflight();
      } catch (_) {
        why = 'the server cannot be reached';
      }
      if (this.disposed || this.ws) return;
      if (why) {
        this.setState('closed', 'Cannot open a terminal: ' + why);
        return;
      }
      try { this.fit.fit(); } catch (_) { /* hidden */ }
      const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const url = proto + '//' + location.host + '/machines/' + this.id + '/terminal?cols=' + this.term.cols + '&rows=' + this.term.rows;
      const ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      this.ws = ws;
      ws.onopen = () => {
        this.setState('open', 'Connected.');
        // The screen opens below its buttons, often below the fold; xterm
        // does not draw while it is out of view, so bring it into view.
        this.screen.scrollIntoView({ block: 'nearest' });
        this.term.focus();
      };
      ws.onmessage = (e) => {
        if (typeof e.data !== 'string') this.term.write(new Uint8Array(e.data));
      };
      ws.onclose = (e) => this.closed(ws, e);
    }

    closed(ws, e) {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.disposed) return;
      const reason = e.reason || (e.code === 1006 ? 'the connection was lost' : 'closed (code ' + e.code + ')');
      this.term.write('\r\n\x1b[2m[' + reason + ']\x1b[0m\r\n');
      this.root.dataset.closeCode = String(e.code);
      if (e.code === MACHINE_STOPPED) {
        this.setState('waiting', 'Closed: ' + reason + '. Reconnecting when the machine runs again…');
        this.startRetry();
      } else {
        this.setState('closed', 'Closed: ' + reason + '.');
      }
    }

    startRetry() {
      const until = Date.now() + RETRY_FOR_MS;
      const tick = async () => {
        this.retry = null;
        if (this.disposed || this.ws) return;
        let why;
        try {
          why = await this.preflight();
        } catch (_) {
          why = 'the server cannot be reached';
        }
        if (this.disposed || this.root.dataset.state !== 'waiting') return;
        if (!why) {
          this.term.write('\x1b[2m[reconnecting]\x1b[0m\r\n');
          this.connect();
        } else if (Date.now() > until) {
          this.setState('closed', 'The machine did not come back: ' + why);
        } else {
          this.retry = setTimeout(tick, RETRY_EVERY_MS);
        }
      };
      this.retry = setTimeout(tick, RETRY_EVERY_MS);
    }

    stopRetry() {
      if (this.retry) clearTimeout(this.retry);
      this.retry = null;
    }

    disconnect() {
      this.stopRetry();
      if (this.ws) {
        this.ws.close(1000, 'closed by the user');
      } else {
        this.setState('closed', 'Closed.');
      }
    }

    dispose() {
      this.disposed = true;
      this.stopRetry();
      if (this.ws) {
        const ws = this.ws;
        this.ws = null;
        ws.close(1000, 'the page was left');
      }
      if (this.resizeObserver) this.resizeObserver.disconnect();
      if (this.term) this.term.dispose();
    }
  }

  class LogPanel {
    constructor(root) {
      this.root = root;
      this.id = root.dataset.machineId;
      this.pre = root.querySelector('[data-role="log"]');
      this.status = root.querySelector('[data-role="status"]');
      this.button = root.querySelector('[data-action="follow"]');
      this.source = null;
      this.button.disabled = false;
      this.button.addEventListener('click', () => (this.source ? this.stop('Stopped following.') : this.follow()));
      root.dataset.state = 'idle';
    }

    follow() {
      this.pre.textContent = '';
      const source = new EventSource('/machines/' + this.id + '/logs?follow=1&tail=200');
      this.source = source;
      this.root.dataset.state = 'following';
      this.button.textContent = 'Stop following';
      this.status.textContent = 'Following (the last ' + LOG_LINES_MAX + ' lines are kept)…';
      source.onmessage = (e) => this.append(e.data);
      source.addEventListener('end', (e) => this.stop(e.data));
      source.onerror = () => {
        if (this.source === source) this.stop('The log stream was interrupted.');
      };
    }

    append(line) {
      const pre = this.pre;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.appendChild(document.createTextNode(line + '\n'));
      while (pre.childNodes.length > LOG_LINES_MAX) pre.removeChild(pre.firstChild);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }

    stop(text) {
      if (this.source) this.source.close();
      this.source = null;
      this.root.dataset.state = 'stopped';
      this.button.textContent = 'Follow';
      this.status.textContent = text;
    }

    dispose() {
      if (this.source) this.source.close();
      this.source = null;
    }
  }

  const panels = new Map();
  function scan() {
    // live.js must have taken the page over (it morphs it in place) before
    // its elements are touched.
    if (!document.body || document.body.dataset.hydrated !== 'true') return;
    for (const [el, panel] of panels) {
      if (!el.isConnected) {
        panel.dispose();
        panels.delete(el);
      }
    }
    document.querySelectorAll('[data-gantry-terminal]').forEach((el) => {
      if (!panels.has(el)) panels.set(el, new TerminalPanel(el));
    });
    document.querySelectorAll('[data-gantry-logs]').forEach((el) => {
      if (!panels.has(el)) panels.set(el, new LogPanel(el));
    });
  }

  let pending = null;
  const observer = new MutationObserver(() => {
    if (!pending) pending = setTimeout(() => { pending = null; scan(); }, 50);
  });
  observer.observe(document.documentElement, { childList: true, subtree: true, attributes: true, attributeFilter: ['data-hydrated'] });
  window.GantryWorkspace = { scan };
  scan();
})();
