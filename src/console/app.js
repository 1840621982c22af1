// The llmlimit console (docs/console.md): reads llmlimitd's JSON API every
// few seconds and shows limits, budgets, holds, denials and throughput, and
// lists and changes the gateway's keys (admin token).
// Every figure shown is one the server reported; the page only formats them.
// Every key, caller and error goes into the page as text (textContent,
// attributes), never as markup. The token lives in this closure only.
'use strict';

(() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const PAGE_LIMITS = 1000; // the server's bound per page (CONSOLE_LIMITS_PAGE_MAX)
  const BUDGET_CARDS = 8; // budgets with a chart: the first of the page
  const TOP_CALLERS = 5; // callers per budget card
  const ATTENTION_MAX = 12;
  const ALERTS_SHOWN = 20; // the newest alerts read for the attention panel
  const KEYS_PAGE = 1000; // keys listed: one page of GET /v1/admin/keys (its bound)
  const GRACE_MAX_S = 604800; // a rotation's grace at most (KEYS_GRACE_SECONDS_MAX)
  const KEY_BUDGETS = 50; // budgets the Keys panel reads (two requests each), in the keys' order

  const state = {
    token: null, // the bearer token, kept here and nowhere else
    refreshMs: 3000,
    timer: null,
    running: false,
    again: false, // a refresh was asked for while one ran
    prefix: '',
    kind: '',
    after: '', // the page's cursor (keys after it)
    status: null,
    limits: [],
    nextAfter: null,
    selected: null, // the key whose detail is open
    linked: null, // the key the address named (#limit=<key>), until another is chosen
    scrollToLinked: false, // scroll its row into view after the next drawing
    rows: new Map(), // key -> row of the limits table
    spend: new Map(), // key -> spend answer of a budget card
    keyRows: new Map(), // key id -> {tr, info, actions} of the keys table
    keysShown: null, // the last answers the keys table was drawn from
    confirmRevoke: null, // the key id whose Revoke asks to be confirmed
    refreshes: 0,
  };

  const $ = (id) => document.getElementById(id);

  // ---- the API -----------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code) {
      super(code);
      this.status = status;
      this.code = code;
    }
  }

  // Amounts go up to 2^63-1: integers past 2^53 are kept exact as BigInt
  // (JSON.parse's source text), everything else stays a number. A reviver
  // costs a call per value, so it runs only when a long number is there.
  function parseJson(text) {
    if (!/[0-9]{16}/.test(text)) return JSON.parse(text);
    return JSON.parse(text, (key, value, context) => {
      if (typeof value === 'number' && !Number.isSafeInteger(value) && context &&
          typeof context.source === 'string' && /^-?[0-9]+$/.test(context.source)) {
        return BigInt(context.source);
      }
      return value;
    });
  }

  // A read (GET), or a change with its JSON body (the Keys panel's actions).
  async function api(path, method, payload) {
    const headers = {};
    if (state.token !== null) headers.Authorization = 'Bearer ' + state.token;
    const init = {headers, cache: 'no-store', credentials: 'omit', redirect: 'error'};
    if (method !== undefined) init.method = method;
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(payload);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'llmlimitd did not answer');
    }
    const text = await response.text();
    let body = null;
    try {
      body = text ? parseJson(text) : null;
    } catch (e) {
      throw new ApiError(response.status, 'the answer is not JSON');
    }
    if (!response.ok) {
      const code = body && typeof body.error === 'string' ? body.error : 'HTTP ' + response.status;
      throw new ApiError(response.status, code);
    }
    return body;
  }

  const keyPath = (key) => encodeURIComponent(key);

  // ---- building the page: text only ----------------------------------------

  function el(tag, options, ...children) {
    const node = document.createElement(tag);
    if (options) {
      if (options.className) node.className = options.className;
      if (options.text !== undefined) node.textContent = String(options.text);
      if (options.title !== undefined) node.title = String(options.title);
      if (options.data) {
        for (const [name, value] of Object.entries(options.data)) node.dataset[name] = String(value);
      }
    }
    for (const child of children) node.append(child); // strings become text nodes
    return node;
  }

  function svg(tag, attributes) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      node.setAttribute(name, String(value));
    }
    return node;
  }

  function clear(node) {
    node.replaceChildren();
  }

  // Text that wraps only right after a separator (or not at all): each
  // segment up to and with its separator is a span that does not wrap
  // inside, with a <wbr> after it. Text nodes only: never markup.
  function segmented(text, separator) {
    const fragment = document.createDocumentFragment();
    const parts = String(text).split(separator);
    parts.forEach((part, i) => {
      fragment.append(el('span', {className: 'seg', text: part}));
      if (i + 1 < parts.length) fragment.append(document.createElement('wbr'));
    });
    return fragment;
  }

  // A key wraps only after a ':' (keys have '-', '/' and the like where a
  // browser would otherwise break).
  const keyNode = (key) => segmented(key, /(?<=:)/);

  // A caller or lease id wraps only after a punctuation mark ('nightly-' /
  // 'report'), never inside a word, however narrow its column.
  const nameNode = (name) => segmented(name, /(?<=[^A-Za-z0-9])/);

  // A table cell with a caller's name ('(none)' for leases that named none).
  const callerCell = (caller) => el('td', {className: 'caller'},
                                    caller === '' ? '(none)' : nameNode(caller));

  // A link to one limit: the page opens it from the address (#limit=<key>).
  const limitFragment = (key) => '#limit=' + encodeURIComponent(key);

  // The key the address names, or null (absent, malformed or not a key).
  function linkedKey() {
    const hash = window.location.hash;
    if (!hash.startsWith('#limit=')) return null;
    let key;
    try {
      key = decodeURIComponent(hash.slice('#limit='.length));
    } catch (e) {
      return null; // not percent-encoding
    }
    return /^[\x21-\x7e]{1,256}$/.test(key) ? key : null; // the server's key syntax
  }

  // ---- formatting (no figure is made up here) -------------------------------

  const big = (v) => (typeof v === 'bigint' ? v : BigInt(Math.trunc(Number(v))));

  function fmtInt(v) {
    const text = String(v);
    const negative = text.startsWith('-');
    const digits = negative ? text.slice(1) : text;
    return (negative ? '-' : '') + digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }

  // usd_micros as dollars, exactly: $1 is 1,000,000 usd_micros.
  function fmtUsd(micros) {
    let v = big(micros);
    const negative = v < 0n;
    if (negative) v = -v;
    let fraction = (v % 1000000n).toString().padStart(6, '0').replace(/0+$/, '');
    if (fraction.length < 2) fraction = fraction.padEnd(2, '0');
    return (negative ? '-' : '') + '$' + fmtInt(v / 1000000n) + '.' + fraction;
  }

  // A rate in dollars to the nearest cent (its exact figure is in the API).
  const fmtUsdCents = (micros) => fmtUsd((big(micros) + 5000n) / 10000n * 10000n);

  const isMoney = (unit) => unit === 'usd_micros';

  // An amount in its unit: money in dollars, anything else as an integer.
  const fmtAmount = (v, unit) => (isMoney(unit) ? fmtUsd(v) : fmtInt(v));

  function fmtDuration(ms) {
    const seconds = Math.floor(Math.max(0, Number(ms)) / 1000);
    if (seconds < 60) return seconds + ' s';
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes + ' m ' + (seconds % 60) + ' s';
    const hours = Math.floor(minutes / 60);
    if (hours < 48) return hours + ' h ' + String(minutes % 60).padStart(2, '0') + ' m';
    return Math.floor(hours / 24) + ' d ' + (hours % 24) + ' h';
  }

  const pad2 = (n) => String(n).padStart(2, '0');

  function fmtTime(ms) {
    const d = new Date(Number(ms));
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' +
           pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  function fmtUtc(ms) {
    const d = new Date(Number(ms));
    return d.getUTCFullYear() + '-' + pad2(d.getUTCMonth() + 1) + '-' + pad2(d.getUTCDate()) +
           ' ' + pad2(d.getUTCHours()) + ':' + pad2(d.getUTCMinutes()) + ' UTC';
  }

  // A fraction of the capacity for a bar, clamped to 0..1.
  function share(part, whole) {
    const w = Number(whole);
    if (!(w > 0)) return 0;
    return Math.min(1, Math.max(0, Number(part) / w));
  }

  // ---- status line and errors ------------------------------------------------

  function setConnection(stateName, text) {
    const pill = $('connection');
    pill.dataset.state = stateName;
    pill.textContent = text;
    document.body.dataset.state = stateName;
  }

  function showError(text) {
    const banner = $('error');
    banner.textContent = text;
    banner.hidden = false;
  }

  function hideError() {
    $('error').hidden = true;
    $('error').textContent = '';
  }

  // What the page shows when it may not see anything: no figures at all.
  function clearData() {
    state.status = null;
    state.limits = [];
    state.spend.clear();
    for (const row of state.rows.values()) row.tr.remove();
    state.rows.clear();
    $('limits-count').textContent = '';
    $('limits-empty').hidden = true;
    clear($('attention'));
    clear($('budgets'));
    clear(document.querySelector('#denials tbody'));
    clear($('sparkline'));
    for (const id of ['reserves-10s', 'reserves-60s', 'denials-10s', 'denials-60s',
                      'denials-total']) {
      $(id).textContent = '–';
    }
    $('server-info').textContent = '';
    $('detail-panel').hidden = true;
    $('page-next').hidden = true;
    $('page-first').hidden = true;
    $('page-note').textContent = '';
    clearKeys();
  }

  function handleError(error) {
    if (error instanceof ApiError && error.status === 401) {
      clearData();
      setConnection('unauthorized', 'token needed');
      showError(state.token === null
        ? 'This llmlimitd needs a token (401 ' + error.code + '): enter it with the Token button.'
        : 'The token was refused (401 ' + error.code + '): nothing is shown.');
      $('token-panel').hidden = false;
      return;
    }
    if (error instanceof ApiError && error.status === 0) {
      setConnection('offline', 'offline');
      showError('Cannot reach llmlimitd: ' + error.code + '. The figures below are from ' +
                $('updated').textContent.replace(/^updated /, '') + '.');
      return;
    }
    setConnection('error', 'error');
    showError(error instanceof ApiError
      ? 'llmlimitd answered ' + error.status + ': ' + error.code
      : 'The page failed: ' + String(error && error.message ? error.message : error));
  }

  // ---- throughput --------------------------------------------------------------

  // How many in the last seconds, with the rate per second under it. The
  // server gives the rate to a tenth, rounded down: a count too small to
  // make a tenth reads "< 0.1 /s", never 0 beside a count that is not.
  function countFigure(id, count, perSecond) {
    const rate = Number(perSecond) === 0 && Number(count) > 0 ? '< 0.1'
      : Number(perSecond).toFixed(1);
    $(id).replaceChildren(fmtInt(count), el('span', {className: 'sub', text: rate + ' /s'}));
  }

  function renderThroughput(status) {
    const t = status.throughput;
    countFigure('reserves-10s', t.reserves_10s, t.reserves_per_second_10s);
    countFigure('reserves-60s', t.reserves_60s, t.reserves_per_second_60s);
    countFigure('denials-10s', t.denials_10s, t.denials_per_second_10s);
    countFigure('denials-60s', t.denials_60s, t.denials_per_second_60s);
    $('denials-total').textContent = fmtInt(status.denials_total);
    const reserves = t.seconds.reserves, denials = t.seconds.denials;
    let top = 1;
    for (const v of reserves) top = Math.max(top, Number(v));
    const width = 300, height = 48, step = width / reserves.length;
    const chart = svg('svg', {viewBox: '0 0 ' + width + ' ' + height, role: 'img',
                              preserveAspectRatio: 'none', class: 'spark'});
    reserves.forEach((v, i) => {
      const h = (Number(v) / top) * height;
      const d = (Number(denials[i]) / top) * height;
      const title = svg('title');
      title.textContent = fmtTime(t.seconds.from_unix_ms + i * 1000) + ': ' + fmtInt(v) +
                          ' reserves, ' + fmtInt(denials[i]) + ' denials';
      const bar = svg('rect', {x: i * step, y: height - h, width: Math.max(1, step - 1),
                               height: h, class: 'reserves'});
      bar.append(title);
      chart.append(bar);
      if (d > 0) {
        chart.append(svg('rect', {x: i * step, y: height - d, width: Math.max(1, step - 1),
                                  height: d, class: 'denials'}));
      }
    });
    $('sparkline').replaceChildren(chart);
  }

  // ---- the limits table ------------------------------------------------------

  const COLUMNS = ['key', 'kind', 'status', 'bar', 'capacity', 'reserved', 'used', 'debt',
                   'available', 'resets', 'holds', 'oldest', 'soon', 'waiting'];
  const NUMERIC = new Set(['capacity', 'reserved', 'used', 'debt', 'available', 'holds', 'soon',
                           'waiting']);
  // Each column's name, from the table's header (in COLUMNS' order): on a
  // phone, where the header is hidden, it labels each value.
  const LABELS = new Map([...document.querySelectorAll('#limits .lrow.head > div')]
    .map((head, i) => [COLUMNS[i], head.textContent]));
  // Numeric columns are as wide as their widest figure on the page, so that
  // no figure is cut (money runs to 20 digits and more); each with the row
  // class that makes it bold.
  const FITTED = {capacity: null, reserved: null, used: null, debt: 'in-debt', available: 'out',
                  holds: null, soon: 'leaking', waiting: 'queued'};

  // A row keeps its cells' last figures in memory, so a refresh compares
  // there and writes the DOM only where something changed; a cell's second
  // line is made the first time it has one. (With 1,000 rows the page's
  // cost is the browser's layout of its nodes: fewer nodes, faster page.)
  function newCell(tr, column) {
    const td = document.createElement('div');
    td.className = NUMERIC.has(column) ? 'cell c-' + column + ' num' : 'cell c-' + column;
    td.setAttribute('role', 'cell');
    if (column !== 'key' && column !== 'bar') td.dataset.label = LABELS.get(column);
    tr.append(td);
    if (column === 'bar') {
      const bar = el('div', {className: 'bar'});
      const parts = {used: el('span', {className: 'used'}),
                     reserved: el('span', {className: 'reserved'}),
                     debt: el('span', {className: 'debt'})};
      bar.append(parts.used, parts.reserved, parts.debt);
      td.append(bar);
      return {td, parts};
    }
    const main = el('span', {className: column === 'key' ? 'main key' : 'main'});
    td.append(main);
    return {td, main, sub: null, value: null, text: null, subText: '', title: '',
            isKey: column === 'key'};
  }

  function newRow(key) {
    const tr = document.createElement('div');
    tr.className = 'lrow';
    tr.setAttribute('role', 'row');
    tr.dataset.key = key;
    tr.tabIndex = 0;
    const cells = {};
    for (const column of COLUMNS) cells[column] = newCell(tr, column);
    return {tr, cells};
  }

  // Writes a cell only where it changed.
  function setCell(cell, value, main, sub, title) {
    const v = String(value);
    sub = sub || '';
    title = title || '';
    if (cell.value !== v) {
      cell.value = v;
      cell.td.dataset.value = v;
    }
    if (cell.text !== main) {
      cell.text = main;
      if (cell.isKey) cell.main.replaceChildren(keyNode(main));
      else cell.main.textContent = main;
    }
    if (cell.subText !== sub) {
      cell.subText = sub;
      if (cell.sub === null) {
        cell.sub = el('span', {className: 'sub'});
        cell.td.append(cell.sub);
      }
      cell.sub.textContent = sub;
    }
    if (cell.title !== title) {
      cell.title = title;
      cell.td.title = title;
    }
  }

  // Money reads in dollars first, with the exact usd_micros under it.
  function amountCell(td, value, unit) {
    if (isMoney(unit)) {
      setCell(td, value, fmtUsd(value), fmtInt(value), String(value) + ' usd_micros');
    } else {
      setCell(td, value, fmtInt(value), '', String(value) + (unit ? ' ' + unit : ''));
    }
  }

  // A prepaid budget (period "none") has one period, to the year 10000.
  const PREPAID_END_MS = 253402300800000;
  function prepaid(usage) {
    return Number(usage.period_end_unix_ms) >= PREPAID_END_MS;
  }

  // A budget's period in its own zone's local time, as the server gives it.
  function localPeriod(limit) {
    return limit.period_start_local + ' to ' + limit.period_end_local;
  }

  function resetText(limit, now) {
    const at = limit.reset_at_unix_ms;
    if (limit.kind === 'budget') {
      if (prepaid(limit)) return ['never', 'prepaid: raise its capacity to top it up'];
      return ['period ends in ' + fmtDuration(at - now), 'this period: ' + localPeriod(limit)];
    }
    if (at === null) return ['–', 'holds nothing'];
    return ['in ' + fmtDuration(at - now),
            (limit.kind === 'rolling' ? 'the window frees capacity at ' : 'a hold expires at ') +
            fmtTime(at)];
  }

  function fillRow(row, limit, now) {
    const c = row.cells;
    const unit = limit.unit;
    setCell(c.key, limit.key, limit.key, limit.description, limit.key);
    setCell(c.kind, limit.kind, limit.kind,
            (limit.kind === 'rolling' ? limit.window_seconds + ' s window'
              : limit.kind === 'budget' ? (limit.period === 'none' ? 'prepaid' : 'per ' + limit.period)
                : limit.timeout_seconds + ' s timeout') + (unit ? ' · ' + unit : ''));
    const decreasing = limit.status === 'decreasing';
    setCell(c.status, limit.status, limit.status,
            decreasing ? 'to ' + fmtInt(limit.pending_decrease_to) : '');
    for (const column of ['capacity', 'reserved', 'used', 'debt', 'available']) {
      amountCell(c[column], limit[column], unit);
    }
    const used = share(limit.used, limit.capacity);
    const reserved = Math.min(share(limit.reserved, limit.capacity), 1 - used);
    const debt = Math.min(share(limit.debt, limit.capacity), 1 - used - reserved);
    const widths = [used, reserved, debt].map((f) => (f * 100).toFixed(2) + '%');
    const bar = c.bar;
    if (bar.widths === undefined || bar.widths.join() !== widths.join()) {
      bar.widths = widths;
      bar.parts.used.style.width = widths[0];
      bar.parts.reserved.style.width = widths[1];
      bar.parts.debt.style.width = widths[2];
      bar.td.title = fmtInt(limit.used) + ' used, ' + fmtInt(limit.reserved) + ' reserved, ' +
                     fmtInt(limit.debt) + ' debt of ' + fmtInt(limit.capacity);
    }
    const [reset, resetTitle] = resetText(limit, now);
    setCell(c.resets, limit.reset_at_unix_ms === null ? '' : limit.reset_at_unix_ms, reset, '',
            resetTitle);
    const holds = limit.holds;
    setCell(c.holds, holds.count, fmtInt(holds.count), '');
    setCell(c.oldest, holds.oldest_at_unix_ms === null ? '' : holds.oldest_at_unix_ms,
            holds.oldest_at_unix_ms === null ? '–' : fmtDuration(now - holds.oldest_at_unix_ms) + ' ago',
            '', holds.oldest_at_unix_ms === null ? ''
              : 'taken ' + fmtTime(holds.oldest_at_unix_ms) + ', expires ' +
                fmtTime(holds.oldest_expires_at_unix_ms));
    setCell(c.soon, holds.expiring_soon, (holds.exact ? '' : '≥') + fmtInt(holds.expiring_soon),
            '', holds.exact ? '' : 'counted among the first holds only');
    const waiters = limit.waiters;
    setCell(c.waiting, waiters.count, fmtInt(waiters.count),
            waiters.count > 0 ? 'oldest ' + fmtDuration(now - waiters.oldest_started_at_unix_ms) : '',
            waiters.count > 0 ? 'the oldest waiting reserve began ' +
              fmtTime(waiters.oldest_started_at_unix_ms) : '');
    row.tr.classList.toggle('queued', waiters.count > 0);
    row.tr.classList.toggle('out', big(limit.available) <= 0n); // toggles write only on change
    row.tr.classList.toggle('decreasing', decreasing);
    row.tr.classList.toggle('in-debt', big(limit.debt) > 0n);
    row.tr.classList.toggle('leaking', holds.expiring_soon > 0);
    row.tr.classList.toggle('selected', limit.key === state.selected);
    row.tr.classList.toggle('linked', limit.key === state.linked);
  }

  function renderLimits(page) {
    const tbody = $('limits-body');
    const seen = new Set();
    let previous = null;
    for (const limit of page.limits) {
      seen.add(limit.key);
      let row = state.rows.get(limit.key);
      if (row === undefined) {
        row = newRow(limit.key);
        state.rows.set(limit.key, row);
      }
      fillRow(row, limit, page.now_unix_ms);
      // Keep the server's order (by key) with as few moves as possible.
      const wanted = previous === null ? tbody.firstChild : previous.nextSibling;
      if (wanted !== row.tr) tbody.insertBefore(row.tr, wanted);
      previous = row.tr;
    }
    for (const [key, row] of state.rows) {
      if (!seen.has(key)) {
        row.tr.remove();
        state.rows.delete(key);
      }
    }
    fitColumns();
    const count = page.limits.length;
    $('limits-count').textContent = '(' + fmtInt(count) + (page.next_after !== null ? '+' : '') +
                                    ')';
    $('limits-empty').hidden = count > 0;
    $('page-next').hidden = page.next_after === null;
    $('page-first').hidden = state.after === '';
    $('page-note').textContent = page.next_after !== null
      ? 'Showing ' + fmtInt(count) + ' limits; more match: narrow the filter or go to the next page.'
      : state.after !== '' ? 'Keys after ' + state.after : '';
  }

  // The width of a text in a font, measured on a canvas (no layout of the
  // rows): every digit as a '0', the digits being tabular.
  const measure = {context: document.createElement('canvas').getContext('2d'), fonts: '',
                   widths: new Map()};

  function textWidth(text, font) {
    const id = font + '\n' + text;
    let width = measure.widths.get(id);
    if (width === undefined) {
      if (measure.widths.size > 20000) measure.widths.clear();
      measure.context.font = font;
      width = measure.context.measureText(text.replace(/[0-9]/g, '0')).width;
      measure.widths.set(id, width);
    }
    return width;
  }

  // Sets each numeric column's width (app.css: --capacity-px and the like)
  // to its widest figure or line under one; written only when it changed.
  function fitColumns() {
    const table = $('limits');
    const style = getComputedStyle(table);
    const sub = table.querySelector('.cell .sub');
    const subSize = sub !== null ? getComputedStyle(sub).fontSize : style.fontSize;
    const fonts = {normal: '400 ' + style.fontSize + ' ' + style.fontFamily,
                   bold: '700 ' + style.fontSize + ' ' + style.fontFamily,
                   sub: '400 ' + subSize + ' ' + style.fontFamily,
                   subBold: '700 ' + subSize + ' ' + style.fontFamily};
    const fontsId = Object.values(fonts).join();
    if (measure.fonts !== fontsId) {
      measure.fonts = fontsId;
      measure.widths.clear();
    }
    for (const [column, boldClass] of Object.entries(FITTED)) {
      let widest = 0;
      for (const row of state.rows.values()) {
        const cell = row.cells[column];
        const bold = boldClass !== null && row.tr.classList.contains(boldClass);
        widest = Math.max(widest, textWidth(cell.text, bold ? fonts.bold : fonts.normal));
        widest = Math.max(widest, textWidth(cell.subText, bold ? fonts.subBold : fonts.sub));
      }
      const px = String(Math.ceil(widest));
      if (table.dataset[column + 'Px'] !== px) {
        table.dataset[column + 'Px'] = px;
        table.style.setProperty('--' + column + '-px', px);
      }
    }
  }

  // ---- needs attention -------------------------------------------------------

  // A fired alert (docs/alerts.md) and how its delivery went.
  function alertText(alert) {
    const what = alert.type === 'budget.runout'
      ? 'alert: runs out before its period ends at its spend rate'
      : 'alert: reached ' + alert.at_percent + '% of its capacity';
    const delivery = {
      sent: 'sent',
      none: 'no webhook',
      failed: 'not delivered: ' + alert.last_error,
      pending: alert.attempts === 0 ? 'sending'
        : 'not delivered yet after ' + fmtInt(alert.attempts) +
          (alert.attempts === 1 ? ' attempt' : ' attempts') +
          (alert.last_error ? ': ' + alert.last_error : ''),
    }[alert.delivery] || alert.delivery;
    return what + ' (' + delivery + ')';
  }

  function attentionItems(status, page, alerts) {
    const items = [];
    const now = page.now_unix_ms;
    // Alerts of the periods running now, and any not delivered, newest first.
    for (const alert of alerts) {
      if (alert.period_end_unix_ms > now || alert.delivery === 'pending' ||
          alert.delivery === 'failed') {
        items.push(['alert', alert.key, alertText(alert)]);
      }
    }
    for (const limit of page.limits) {
      const amount = (v) => fmtAmount(v, limit.unit);
      if (big(limit.available) <= 0n) {
        items.push(['out', limit.key, 'is used up: available ' + amount(limit.available) +
                    (limit.kind === 'budget'
                      ? ' until ' + (prepaid(limit) ? 'its capacity is raised (prepaid)'
                        : limit.period_end_local)
                      : limit.reset_at_unix_ms !== null
                        ? ', capacity comes back in ' + fmtDuration(limit.reset_at_unix_ms - now)
                        : '')]);
      }
      if (limit.status === 'decreasing') {
        items.push(['decreasing', limit.key, 'is decreasing to ' +
                    fmtInt(limit.pending_decrease_to) + ': reserves on it are denied until it fits']);
      }
      if (big(limit.debt) > 0n) {
        items.push(['debt', limit.key, 'has debt ' + amount(limit.debt)]);
      }
      if (limit.holds.expiring_soon > 0) {
        items.push(['leak', limit.key, fmtInt(limit.holds.expiring_soon) +
                    (limit.holds.expiring_soon === 1 ? ' hold expires' : ' holds expire') +
                    ' within ' + fmtDuration(page.soon_ms) +
                    ' without a complete or release (a caller may be leaking)']);
      }
    }
    for (const [key, spend] of state.spend) {
      if (spend.runs_out_at_unix_ms !== null && big(spend.available) > 0n) {
        items.push(['runs-out', key, 'runs out in ' + fmtDuration(spend.runs_out_at_unix_ms - now) +
                    ' at the rate of its last ' + fmtDuration(spend.rate_window_ms) +
                    ', before its period ends']);
      }
    }
    const t = status.throughput;
    if (t.denials_60s > 0) {
      items.push(['denials', '', fmtInt(t.denials_60s) + ' of ' + fmtInt(t.reserves_60s) +
                  ' reserves denied in the last minute']);
    }
    return items;
  }

  function renderAttention(status, page, alerts) {
    const items = attentionItems(status, page, alerts);
    const list = $('attention');
    clear(list);
    if (items.length === 0) {
      list.append(el('li', {className: 'calm', text: 'Nothing needs attention among the limits shown.'}));
      return;
    }
    for (const [kind, key, text] of items.slice(0, ATTENTION_MAX)) {
      const li = el('li', {className: 'a-' + kind, data: {kind}});
      if (key !== '') {
        const link = el('button', {className: 'link key', title: 'show this limit'}, keyNode(key));
        link.type = 'button';
        link.addEventListener('click', () => select(key));
        li.append(link, ' ');
      }
      li.append(text);
      list.append(li);
    }
    if (items.length > ATTENTION_MAX) {
      list.append(el('li', {className: 'muted', text: 'and ' + (items.length - ATTENTION_MAX) +
                                                     ' more'}));
    }
  }

  // ---- budgets ---------------------------------------------------------------

  function spendChart(spend) {
    const width = 320, height = 120, left = 4, right = 316, top = 8, bottom = 108;
    let start = spend.period_start_unix_ms, end = spend.period_end_unix_ms;
    if (prepaid(spend)) {
      // One period to the year 10000: show what was watched, and as long again.
      start = spend.points.length > 0 ? Number(spend.points[0].at_unix_ms) : spend.now_unix_ms - 3600000;
      end = spend.now_unix_ms + Math.max(spend.now_unix_ms - start, 3600000);
    }
    // The capacity and what was spent set the scale; a projection past
    // them leaves the chart at its top edge (the SVG clips it).
    let yMax = Number(spend.capacity);
    for (const p of spend.points) yMax = Math.max(yMax, Number(p.spent));
    yMax = Math.max(yMax, Number(spend.spent));
    yMax = yMax > 0 ? yMax * 1.1 : 1;
    const x = (t) => left + ((Number(t) - start) / (end - start)) * (right - left);
    const y = (v) => bottom - (Number(v) / yMax) * (bottom - top);
    const chart = svg('svg', {viewBox: '0 0 ' + width + ' ' + height, class: 'chart',
                              role: 'img'});
    const label = svg('title');
    label.textContent = 'spend of ' + spend.key + ' over its period';
    chart.append(label);
    chart.append(svg('line', {x1: left, x2: right, y1: bottom, y2: bottom, class: 'axis'}));
    chart.append(svg('line', {x1: left, x2: right, y1: y(spend.capacity), y2: y(spend.capacity),
                              class: 'capacity'}));
    const points = spend.points.map((p) => x(p.at_unix_ms).toFixed(1) + ',' + y(p.spent).toFixed(1));
    points.push(x(spend.now_unix_ms).toFixed(1) + ',' + y(spend.spent).toFixed(1));
    chart.append(svg('polyline', {points: points.join(' '), class: 'spent'}));
    chart.append(svg('line', {x1: x(spend.now_unix_ms), x2: x(spend.now_unix_ms), y1: top,
                              y2: bottom, class: 'now'}));
    if (spend.projected_at_period_end !== null) {
      chart.append(svg('line', {x1: x(spend.now_unix_ms), y1: y(spend.spent), x2: x(end),
                                y2: y(spend.projected_at_period_end), class: 'projection'}));
    }
    if (spend.runs_out_at_unix_ms !== null) {
      const at = x(spend.runs_out_at_unix_ms);
      chart.append(svg('line', {x1: at, x2: at, y1: top, y2: bottom, class: 'runs-out'}));
    }
    return chart;
  }

  function figure(name, value, unit) {
    const money = isMoney(unit);
    const dd = el('dd', {text: money ? fmtUsd(value) : fmtInt(value), data: {value: String(value)}});
    dd.append(el('span', {className: 'sub', text: money ? fmtInt(value) + ' usd_micros' : unit}));
    return el('div', {data: {figure: name}}, el('dt', {text: name}), dd);
  }

  // The rate is what the budget spent in the last 10 minutes (the server's
  // window, rate_window_min_ms): a budget that stopped spending stops
  // running out once its last spend leaves the window.
  function projectionText(spend) {
    const amount = (v) => (isMoney(spend.unit) ? fmtUsd(v) : fmtInt(v));
    if (spend.rate_per_hour === null) {
      return 'Rate not known yet: it is what was spent in the last ' +
             fmtDuration(spend.rate_window_min_ms) + ', and llmlimitd has watched this budget ' +
             (spend.history_since_unix_ms === null ? 'for no time yet'
               : 'since ' + fmtTime(spend.history_since_unix_ms) + ' only') + '.';
    }
    const perHour = isMoney(spend.unit) ? fmtUsdCents(spend.rate_per_hour)
      : fmtInt(spend.rate_per_hour);
    const rate = 'Spent ' + amount(spend.rate_window_spent) + ' in the last ' +
                 fmtDuration(spend.rate_window_ms) + ' (' + perHour + ' per hour)';
    if (spend.runs_out_at_unix_ms === null) {
      return rate + ': at that rate it does not run out' +
             (prepaid(spend) ? '' : ' before ' + fmtUtc(spend.period_end_unix_ms)) + '.';
    }
    if (big(spend.available) <= 0n) return 'Used up. ' + rate + '.';
    return rate + ': at that rate it runs out in ' +
           fmtDuration(spend.runs_out_at_unix_ms - spend.now_unix_ms) + ', at ' +
           fmtTime(spend.runs_out_at_unix_ms) + '.';
  }

  // The projection as told, with the figures it was told from (read by tests).
  function projectionOf(spend) {
    const p = el('p', {className: 'projection-text', text: projectionText(spend)});
    p.dataset.ratePerHour = spend.rate_per_hour === null ? '' : String(spend.rate_per_hour);
    p.dataset.rateWindowSpent = spend.rate_window_spent === null ? ''
      : String(spend.rate_window_spent);
    p.dataset.runsOutInMs = spend.runs_out_at_unix_ms === null ? ''
      : String(spend.runs_out_at_unix_ms - spend.now_unix_ms);
    return p;
  }

  // An amount in a table: money in dollars, the exact figure in its title.
  const amountTd = (value, unit) => el('td', {className: 'num', text: fmtAmount(value, unit),
                                             title: fmtInt(value) + (unit ? ' ' + unit : ''),
                                             data: {value: String(value)}});

  // What a caller spent (used + debt, from the API): an overrun's debt is
  // the overrunning caller's, so the rows add up to the budget's spend.
  function spentCell(c, unit) {
    const td = amountTd(c.spent, unit);
    if (big(c.debt) > 0n) {
      td.append(el('span', {className: 'sub', text: 'incl. ' + fmtAmount(c.debt, unit) + ' debt'}));
    }
    return td;
  }

  function callersList(callers, unit) {
    if (callers === undefined) return el('p', {className: 'muted', text: 'Callers are not kept by this backend.'});
    if (callers === null) return el('p', {className: 'muted', text: 'Callers could not be read.'});
    if (callers.length === 0) return el('p', {className: 'muted', text: 'Nobody spent in this period.'});
    const table = el('table', {className: 'small callers'});
    table.append(el('thead', null, el('tr', null, el('th', {text: 'caller'}),
                                      el('th', {className: 'num', text: 'spent'}),
                                      el('th', {className: 'num', text: 'calls'}),
                                      el('th', {className: 'num', text: 'reserved'}))));
    const tbody = el('tbody');
    for (const c of callers.slice(0, TOP_CALLERS)) {
      tbody.append(el('tr', {data: {caller: c.caller}},
                      callerCell(c.caller),
                      spentCell(c, unit),
                      el('td', {className: 'num', text: fmtInt(c.calls),
                                data: {value: String(c.calls)}}),
                      amountTd(c.reserved, unit)));
    }
    table.append(tbody);
    const more = callers.length - TOP_CALLERS;
    const wrap = el('div', {className: 'table-wrap'}, table);
    if (more > 0) wrap.append(el('p', {className: 'muted', text: 'and ' + more + ' more callers'}));
    return wrap;
  }

  function budgetCard(spend, callers) {
    const card = el('article', {className: 'card', data: {key: spend.key}});
    const title = el('button', {className: 'link key', title: 'show this limit'}, keyNode(spend.key));
    title.type = 'button';
    title.addEventListener('click', () => select(spend.key));
    card.append(el('h3', null, title));
    const figures = el('dl', {className: 'figures small'});
    figures.append(figure('spent', spend.spent, spend.unit),
                   figure('capacity', spend.capacity, spend.unit),
                   figure('available', spend.available, spend.unit));
    card.append(figures, spendChart(spend));
    card.append(projectionOf(spend));
    card.append(el('p', {className: 'muted',
                         text: prepaid(spend) ? 'prepaid: never resets'
                           : 'period ' + fmtUtc(spend.period_start_unix_ms) + ' to ' +
                             fmtUtc(spend.period_end_unix_ms)}));
    card.append(el('h4', {text: 'Top callers this period'}), callersList(callers, spend.unit));
    return card;
  }

  async function loadBudgets(status, page) {
    const budgets = page.limits.filter((l) => l.kind === 'budget').slice(0, BUDGET_CARDS);
    const loads = budgets.map(async (limit) => {
      const spend = await api('/v1/console/spend/' + keyPath(limit.key));
      let callers;
      if (status.usage_by_caller) {
        try {
          callers = (await api('/v1/usage/' + keyPath(limit.key) + '?group_by=caller')).callers;
        } catch (e) {
          if (e.status === 401) throw e;
          callers = null;
        }
      }
      return {spend, callers};
    });
    return Promise.all(loads);
  }

  function renderBudgets(cards, page) {
    state.spend.clear();
    const container = $('budgets');
    const nodes = cards.map(({spend, callers}) => {
      state.spend.set(spend.key, spend);
      return budgetCard(spend, callers);
    });
    container.replaceChildren(...nodes);
    const total = page.limits.filter((l) => l.kind === 'budget').length;
    $('budgets-note').textContent = total === 0
      ? 'No budget among the limits shown.'
      : total > cards.length
        ? 'The first ' + cards.length + ' of ' + total + ' budgets shown; filter by key to see others.'
        : 'Spend history starts when llmlimitd starts. The rate is what a budget spent in the ' +
          'last ' + fmtDuration(cards.length > 0 ? cards[0].spend.rate_window_min_ms : 0) +
          '; the dashed line is where it leads by the period\'s end.';
  }

  // ---- denials -----------------------------------------------------------------

  function renderDenials(status, answer, now) {
    const tbody = document.querySelector('#denials tbody');
    if (!status.admin) {
      clear(tbody);
      $('denials-note').textContent = fmtInt(status.denials_total) +
        ' denials since start. Who was denied (callers, lease ids) needs the admin token.';
      return;
    }
    $('denials-note').textContent = answer.denials.length === 0
      ? 'No reserve has been denied since llmlimitd started.'
      : 'The latest ' + answer.denials.length + ' of ' + fmtInt(answer.denials_total) + ' denials.';
    const rows = answer.denials.map((d) => {
      const keys = el('td', {className: 'keys'});
      for (const k of d.keys) {
        // The unit is the limit's now (null: gone): money in dollars.
        keys.append(el('div', {title: fmtInt(k.amount) + (k.unit ? ' ' + k.unit : '')},
                       el('span', {className: 'key'}, keyNode(k.key)),
                       ' (' + fmtAmount(k.amount, k.unit) + ')'));
      }
      if (d.keys_total > d.keys.length) {
        keys.append(el('div', {className: 'muted', text: 'and ' + (d.keys_total - d.keys.length) + ' more'}));
      }
      return el('tr', {data: {id: d.id}},
                el('td', {text: fmtDuration(now - d.at_unix_ms) + ' ago', title: fmtTime(d.at_unix_ms)}),
                callerCell(d.caller),
                el('td', {className: 'lease'}, nameNode(d.lease_id)),
                keys,
                el('td', {className: 'error'}, d.error === '' ? 'capacity'
                  : el('span', {className: 'key'}, keyNode(d.error))),
                el('td', {className: 'num', text: d.retry_after_ms <= 0 ? '–'
                  : d.retry_after_ms < 1000 ? d.retry_after_ms + ' ms' : fmtDuration(d.retry_after_ms)}));
    });
    tbody.replaceChildren(...rows);
  }

  // ---- gateway -------------------------------------------------------------------

  function renderGateway(status, answer) {
    const table = $('gateway');
    if (!status.gateway_enabled) {
      table.hidden = true;
      $('gateway-tools').hidden = true;
      $('gateway-note').textContent =
        'Gateway mode is not enabled on this llmlimitd (llmlimitd --gateway-config FILE).';
      return;
    }
    const rows = (answer && Array.isArray(answer.keys) ? answer.keys : []).map((k) =>
      el('tr', null, el('td', {className: 'caller'}, nameNode(k.caller)), el('td', {text: k.model}),
         el('td', {className: 'num', text: fmtInt(k.requests)}),
         el('td', {className: 'num', text: fmtInt(k.tokens)}),
         el('td', {className: 'num', text: fmtUsd(k.usd_micros)}),
         el('td', {className: 'num', text: fmtInt(k.denials)})));
    table.querySelector('tbody').replaceChildren(...rows);
    table.hidden = false;
    // MCP tool calls by server and tool (docs/mcp.md), beside the model calls
    const tools = (answer && Array.isArray(answer.tools) ? answer.tools : []).map((t) =>
      el('tr', null, el('td', {className: 'caller'}, nameNode(t.server)),
         el('td', {className: 'caller'}, nameNode(t.tool)),
         el('td', {className: 'num', text: fmtInt(t.calls)}),
         el('td', {className: 'num', text: fmtInt(t.errors)}),
         el('td', {className: 'num', text: fmtUsd(t.usd_micros)}),
         el('td', {className: 'num', text: fmtInt(t.denials)})));
    const toolTable = $('gateway-tools');
    toolTable.querySelector('tbody').replaceChildren(...tools);
    toolTable.hidden = tools.length === 0;
    $('gateway-note').textContent = rows.length === 0 && tools.length === 0
      ? 'No gateway call yet.' : '';
  }

  // ---- keys (admin token) --------------------------------------------------------

  // The budgets a key's calls are reserved in that the key alone decides:
  // the gateway's templates naming no placeholder of one call ({model},
  // {upstream}, {mcp_server}, {tool}), with the key's {caller} and {team};
  // those whose default makes another kind of limit are left out.
  // The memory backend's callers past its first 16,384, counted together (no
  // key's caller can be it: a caller holds no white space).
  const OTHER_CALLERS = '(other callers)';
  const PER_CALL = /\{(model|upstream|mcp_server|tool)\}/;
  function keyLimitNames(templates, k) {
    const names = [];
    for (const t of templates) {
      if (PER_CALL.test(t.key) || (t.default_kind !== null && t.default_kind !== 'budget')) continue;
      if (t.key.includes('{team}') && typeof k.team !== 'string') continue;
      // A function as replacement: a caller's `$&` stays text.
      const name = t.key.replaceAll('{caller}', () => k.caller).replaceAll('{team}', () => k.team);
      if (!names.some((n) => n.name === name)) {
        names.push({name, defaultKind: t.default_kind, amount: t.amount});
      }
    }
    return names;
  }

  // One limit as the page lists it, and what each caller spent in it this
  // period (the period of the same reading); {missing} when no limit has
  // the key, {error} when it could not be read.
  async function readKeyLimit(status, name) {
    try {
      const page = await api('/v1/console/limits?limit=1&prefix=' + encodeURIComponent(name));
      const limit = page.limits.find((l) => l.key === name);
      if (limit === undefined) return {missing: true};
      if (limit.kind !== 'budget' || !status.usage_by_caller) return {limit};
      const callers = (await api('/v1/usage/' + keyPath(name) + '?group_by=caller&at_unix_ms=' +
                                 page.now_unix_ms)).callers;
      return {limit, callers};
    } catch (e) {
      if (e.status === 401) throw e;
      return {error: e instanceof ApiError ? e.status + ' ' + e.code : String(e)};
    }
  }

  // Each key's limits and the first KEY_BUDGETS of them read: per limit,
  // never per key (a thousand keys of one team read one budget).
  async function loadKeySpend(status, keys) {
    let templates;
    try {
      templates = (await api('/v1/console/gateway/limits')).limits;
    } catch (e) {
      if (e.status === 401) throw e;
      return {error: e instanceof ApiError ? e.status + ' ' + e.code : String(e)};
    }
    const byKey = new Map(), read = new Map();
    for (const k of keys) {
      const names = keyLimitNames(templates, k);
      byKey.set(k.id, names);
      for (const n of names) if (!read.has(n.name) && read.size < KEY_BUDGETS) read.set(n.name, null);
    }
    await Promise.all([...read.keys()].map(async (name) => {
      read.set(name, await readKeyLimit(status, name));
    }));
    return {byKey, read};
  }

  async function loadKeys(status) {
    const keys = await api('/v1/admin/keys?limit=' + KEYS_PAGE);
    keys.spend = status.gateway_enabled ? await loadKeySpend(status, keys.keys) : null;
    return keys;
  }

  // An amount with its unit: money in dollars, else the unit after it.
  const amountText = (v, unit) => fmtAmount(v, unit) + (isMoney(unit) || !unit ? '' : ' ' + unit);

  function periodWord(limit) {
    if (prepaid(limit)) return 'in all (prepaid)';
    return {day: 'today', week: 'this week', month: 'this month'}[limit.period] || 'this period';
  }

  // A key's spend this period, one line per budget its calls spend from:
  // its caller's spend (used + debt) there, as the budget's usage by caller
  // says. [text, title].
  function keySpend(k, spend) {
    if (spend === null) return ['–', 'gateway mode is off'];
    if (spend.error !== undefined) return ['not read (' + spend.error + ')', ''];
    const lines = [], titles = [];
    let unread = 0;
    for (const {name, defaultKind, amount} of spend.byKey.get(k.id) || []) {
      const r = spend.read.get(name);
      if (r === undefined) {
        unread++;
      } else if (r.error !== undefined) {
        lines.push(name + ': not read (' + r.error + ')');
      } else if (r.missing) {
        if (defaultKind === 'budget') {
          lines.push(amountText(0, amount) + ' of ' + name + ' (its first call makes it)');
        }
      } else if (r.limit.kind === 'budget') {
        const unit = r.limit.unit;
        if (r.callers === undefined) {
          lines.push(name + ': callers not kept by this backend');
          continue;
        }
        const mine = r.callers.find((c) => c.caller === k.caller);
        if (mine === undefined && r.callers.some((c) => c.caller === OTHER_CALLERS)) {
          lines.push(name + ': its caller is not told apart (the backend\'s first callers only)');
          continue;
        }
        const spent = mine === undefined ? 0n : big(mine.spent);
        lines.push(amountText(spent, unit) + ' ' + periodWord(r.limit) + ' of ' + name);
        titles.push(name + (prepaid(r.limit) ? ' (prepaid)' : ', this period ' + localPeriod(r.limit)) +
                    ': ' + fmtInt(spent) + (unit ? ' ' + unit : '') +
                    (mine !== undefined && big(mine.debt) > 0n ? ', ' + fmtInt(mine.debt) + ' of it debt' : ''));
      }
    }
    if (unread > 0) lines.push('not read: past the first ' + KEY_BUDGETS + ' budgets');
    if (lines.length === 0) return ['no budget', 'no template of gateway.json gives this key a budget'];
    return [lines.join('\n'), titles.join('\n')];
  }

  function keyStatusText(k, now) {
    if (k.status === 'revoked' && k.revoked_at_unix_ms !== null) {
      return 'revoked ' + fmtDuration(now - k.revoked_at_unix_ms) + ' ago';
    }
    if (k.expires_at_unix_ms !== null && k.status !== 'revoked') {
      return k.status + (k.expires_at_unix_ms > now ? ', expires ' : ', expired ') +
             fmtTime(k.expires_at_unix_ms);
    }
    return k.status;
  }

  // A key's cells but its actions: [className, text, title] each, as text.
  function keyInfo(k, spend, now) {
    const metadata = Object.entries(k.metadata || {}).map(([n, v]) => n + ': ' + v);
    return [
      ['caller', k.caller, ''],
      ['team', k.team, ''],
      ['status', keyStatusText(k, now), k.source === 'file' ? 'a key of gateway.json' : ''],
      ['models', k.models === null ? 'every model' : k.models.join(', '), ''],
      ['spent', ...keySpend(k, spend)],
      ['last', k.last_used_unix_ms === null ? 'never'
        : fmtDuration(now - k.last_used_unix_ms) + ' ago',
       k.last_used_unix_ms === null ? '' : fmtTime(k.last_used_unix_ms)],
      ['metadata', metadata.join('\n'), ''],
      ['id', k.id, 'SHA-256 of the secret begins ' + k.sha256_prefix],
    ];
  }

  // The buttons a key has: none once revoked, none for gateway.json's.
  function keyActions(k) {
    if (k.source === 'file') return [['', 'in gateway.json']];
    if (k.status === 'revoked') return [];
    if (state.confirmRevoke === k.id) return [['revoke', 'Confirm revoke'], ['keep', 'Keep']];
    return [[k.blocked ? 'unblock' : 'block', k.blocked ? 'Unblock' : 'Block'],
            ['rotate', 'Rotate'], ['revoke', 'Revoke']];
  }

  const KEY_LABELS = ['caller', 'team', 'status', 'models', 'spent this period', 'last use',
                      'metadata', 'id'];

  // Draws one key's row, writing a cell only when it changed and the
  // buttons only when the actions did (a refresh every few seconds, whose
  // "last use" moves, must not replace a button being clicked).
  function keyRow(k, spend, now) {
    let row = state.keyRows.get(k.id);
    if (row === undefined) {
      const cells = KEY_LABELS.map((label) => el('td', {data: {label}}));
      const buttons = el('td', {className: 'k-actions'});
      row = {tr: el('tr', {data: {id: k.id}}, ...cells, buttons), cells, buttons,
             info: [], actions: ''};
      state.keyRows.set(k.id, row);
    }
    keyInfo(k, spend, now).forEach(([className, text, title], i) => {
      const shown = JSON.stringify([className, text, title]);
      if (row.info[i] === shown) return;
      const td = row.cells[i];
      td.className = 'k-' + className;
      td.textContent = text;
      if (title !== '') td.title = title;
      else td.removeAttribute('title');
      row.info[i] = shown;
    });
    row.tr.dataset.status = k.status;
    const actions = keyActions(k);
    const actionsText = JSON.stringify(actions);
    if (actionsText === row.actions) return row.tr;
    row.buttons.replaceChildren(...actions.map(([action, label]) => (action === ''
      ? el('span', {className: 'muted', text: label})
      : el('button', {className: action === 'revoke' ? 'danger' : '', text: label,
                      data: {action, id: k.id}}))));
    row.actions = actionsText;
    return row.tr;
  }

  function clearKeys() {
    state.keyRows.clear();
    state.keysShown = null;
    state.confirmRevoke = null;
    clear(document.querySelector('#keys tbody'));
    $('keys').hidden = true;
    $('keys-count').textContent = '';
    hideSecret();
  }

  // Draws the keys from the last answers ({status, keys}; keys.spend: what
  // loadKeySpend read).
  function renderKeys(shown) {
    const {status, keys} = shown;
    if (!status.admin || keys === null) {
      clearKeys();
      $('key-new').disabled = true;
      $('keys-note').textContent = 'The gateway\'s keys (GET /v1/admin/keys) need the admin token.';
      return;
    }
    state.keysShown = shown;
    $('key-new').disabled = false;
    const now = status.now_unix_ms;
    const rows = keys.keys.map((k) => keyRow(k, keys.spend, now));
    const ids = new Set(keys.keys.map((k) => k.id));
    for (const id of [...state.keyRows.keys()]) if (!ids.has(id)) state.keyRows.delete(id);
    const tbody = document.querySelector('#keys tbody');
    if (rows.length !== tbody.children.length || rows.some((tr, i) => tbody.children[i] !== tr)) {
      tbody.replaceChildren(...rows);
    }
    $('keys').hidden = rows.length === 0;
    $('keys-count').textContent = rows.length === 0 ? ''
      : keys.next_cursor !== null ? '(the first ' + fmtInt(rows.length) + ')'
        : '(' + fmtInt(rows.length) + ')';
    $('keys-note').textContent = (rows.length === 0 ? 'No key yet: New key makes one. ' : '') +
      (status.gateway_enabled ? 'Spent: what the key\'s caller spent (used + debt) this period ' +
       'in each budget its calls spend from (gateway.json\'s templates naming only {caller} and ' +
       '{team}), as the budget\'s usage by caller says: every key of that caller together. ' +
       'The first ' + KEY_BUDGETS + ' budgets are read.'
        : 'Gateway mode is off: nothing is spent through these keys.');
  }

  function keyMessage(text) {
    $('key-message').textContent = text;
    $('key-message').hidden = text === '';
  }

  // The server's refusal as it said it, or what the page would not send.
  const keyError = (e) => keyMessage(e instanceof ApiError
    ? 'llmlimitd answered ' + e.status + ': ' + e.code
    : 'Not sent: ' + String(e && e.message ? e.message : e));

  // A new secret: in this box (the page's memory) until Done, a reload or
  // the token's Forget; never kept anywhere else.
  function showSecret(what, secret) {
    $('key-secret-what').textContent = what;
    $('key-secret-value').value = secret;
    $('key-secret-copy').textContent = 'Copy';
    $('key-secret').hidden = false;
  }

  function hideSecret() {
    $('key-secret-value').value = '';
    $('key-secret-what').textContent = '';
    $('key-secret').hidden = true;
  }

  async function copySecret() {
    const field = $('key-secret-value');
    try {
      await navigator.clipboard.writeText(field.value);
      $('key-secret-copy').textContent = 'Copied';
    } catch (e) {
      field.focus();
      field.select(); // the browser would not write the clipboard: selected to copy by hand
      $('key-secret-copy').textContent = 'Selected: copy it';
    }
  }

  function createBody() {
    const body = {caller: $('key-caller').value.trim(), team: $('key-team').value.trim()};
    const models = $('key-models').value.split(',').map((m) => m.trim()).filter((m) => m !== '');
    if (models.length > 0) body.models = models;
    if ($('key-expires').value !== '') {
      const ms = new Date($('key-expires').value).getTime();
      if (!Number.isFinite(ms)) throw new Error('expires: not a date');
      body.expires_at_unix_ms = ms;
    }
    return body;
  }

  async function createKey() {
    try {
      const answer = await api('/v1/admin/keys', 'POST', createBody());
      $('key-form').reset();
      $('key-form').hidden = true;
      keyMessage('');
      showSecret('The secret of the new key ' + answer.id + ' (caller ' + answer.caller + ').',
                 answer.secret);
    } catch (e) {
      keyError(e);
    }
    refreshSoon();
  }

  function graceSeconds() {
    const grace = Number($('key-grace').value);
    return Number.isInteger(grace) && grace >= 0 && grace <= GRACE_MAX_S ? grace : null;
  }

  async function keyAction(action, id) {
    const path = '/v1/admin/keys/' + encodeURIComponent(id);
    try {
      if (action === 'block' || action === 'unblock') {
        await api(path, 'PATCH', {blocked: action === 'block'});
      } else if (action === 'keep') {
        state.confirmRevoke = null;
      } else if (action === 'revoke' && state.confirmRevoke !== id) {
        state.confirmRevoke = id; // asks once more before a change that cannot be undone
      } else if (action === 'revoke') {
        state.confirmRevoke = null;
        await api(path, 'DELETE');
      } else if (action === 'rotate') {
        const grace = graceSeconds();
        if (grace === null) throw new Error('the rotation grace is 0..' + GRACE_MAX_S + ' s');
        const answer = await api(path + '/rotate', 'POST', {grace_seconds: grace});
        showSecret('The new secret of ' + answer.id + ' (caller ' + answer.caller + '); the ' +
                   'old one works ' + grace + ' s more.', answer.secret);
      }
      keyMessage('');
    } catch (e) {
      keyError(e);
    }
    if (state.keysShown !== null) renderKeys(state.keysShown); // the buttons at once
    refreshSoon();
  }

  function wireKeys() {
    $('key-new').addEventListener('click', () => {
      $('key-form').hidden = !$('key-form').hidden;
      if (!$('key-form').hidden) $('key-caller').focus();
    });
    $('key-cancel').addEventListener('click', () => {
      $('key-form').reset();
      $('key-form').hidden = true;
    });
    $('key-form').addEventListener('submit', (event) => {
      event.preventDefault();
      createKey();
    });
    $('key-secret-copy').addEventListener('click', copySecret);
    $('key-secret-done').addEventListener('click', hideSecret);
    document.querySelector('#keys tbody').addEventListener('click', (event) => {
      const button = event.target.closest('button[data-action]');
      if (button) keyAction(button.dataset.action, button.dataset.id);
    });
  }

  // ---- one limit in detail -------------------------------------------------------

  // Opens a limit's detail. Chosen on the page, it goes into the address
  // (#limit=<key>, to share); named by the address, its row is scrolled to
  // and marked once the limits are drawn.
  function select(key, fromAddress) {
    state.selected = key;
    state.linked = fromAddress ? key : null;
    state.scrollToLinked = Boolean(fromAddress);
    for (const [k, row] of state.rows) {
      row.tr.classList.toggle('selected', k === key);
      row.tr.classList.toggle('linked', k === state.linked);
    }
    $('detail-panel').hidden = false;
    $('detail-key').replaceChildren(keyNode(key));
    $('detail-link').setAttribute('href', limitFragment(key));
    if (!fromAddress) window.history.replaceState(null, '', limitFragment(key));
    refreshSoon();
    if (!fromAddress) $('detail-panel').scrollIntoView({block: 'nearest'});
  }

  function selectFromAddress() {
    const key = linkedKey();
    if (key !== null) select(key, true);
  }

  // After drawing: the row the address named comes into view, once.
  function scrollToLinked() {
    if (!state.scrollToLinked) return;
    state.scrollToLinked = false;
    const row = state.rows.get(state.linked);
    if (row !== undefined) row.tr.scrollIntoView({block: 'center'});
  }

  function definitionOf(limit) {
    const dl = $('detail-definition');
    const items = [['kind', limit.kind], ['status', limit.status +
                   (limit.status === 'decreasing' ? ' to ' + fmtInt(limit.pending_decrease_to) : '')],
                   ['capacity', fmtInt(limit.capacity) + (limit.unit ? ' ' + limit.unit : '')]];
    if (limit.kind === 'rolling') items.push(['window', limit.window_seconds + ' s']);
    if (limit.kind !== 'rolling') items.push(['hold timeout', limit.timeout_seconds + ' s']);
    if (limit.kind === 'budget') {
      items.push(['period', limit.period === 'none' ? 'none (prepaid: never resets)'
        : limit.period + (limit.period_anchor_day ? ' from day ' + limit.period_anchor_day : '') +
          ' (' + (limit.time_zone || 'UTC') + ')']);
      if (limit.period_start_local) items.push(['this period', localPeriod(limit)]);
    }
    items.push(['overage', limit.overage]);
    if (limit.description) items.push(['description', limit.description]);
    dl.replaceChildren(...items.map(([name, value]) =>
      el('div', null, el('dt', {text: name}), el('dd', {text: value}))));
  }

  async function loadDetail(status, page) {
    const key = state.selected;
    if (key === null) return null;
    const detail = {key, holds: undefined, callers: undefined, limit: undefined};
    const tasks = [];
    if (!page.limits.some((l) => l.key === key)) {
      // Not among the limits shown (a link, a filter, another page): the
      // first limit from the key on is it, if it exists.
      const path = '/v1/console/limits?limit=1&prefix=' + encodeURIComponent(key);
      tasks.push(api(path).then((a) => {
        detail.limit = a.limits.length > 0 && a.limits[0].key === key ? a.limits[0] : null;
      }));
    }
    if (status.holds_by_caller && status.admin) {
      tasks.push(api('/v1/console/holds/' + keyPath(key)).then((a) => { detail.holds = a; }));
    }
    if (status.usage_by_caller) {
      tasks.push(api('/v1/usage/' + keyPath(key) + '?group_by=caller')
        .then((a) => { detail.callers = a.callers; }));
    }
    try {
      await Promise.all(tasks);
    } catch (e) {
      if (e.status === 404 && /^unknown_limit_key/.test(e.code)) return {key, gone: true};
      throw e;
    }
    return detail.limit === null ? {key, gone: true} : detail;
  }

  function renderDetail(status, detail, page) {
    if (detail === null || detail.key !== state.selected) return; // closed or another chosen since
    const limit = page.limits.find((l) => l.key === detail.key) || detail.limit;
    if ($('detail-key').textContent !== detail.key) {
      $('detail-key').replaceChildren(keyNode(detail.key));
    }
    $('detail-shown').textContent = detail.gone || page.limits.some((l) => l.key === detail.key)
      ? '' : 'Not among the limits listed above (filter, kind or page).';
    if (detail.gone) {
      $('detail-definition').replaceChildren(el('p', {className: 'muted', text: 'No limit has this key (any more).'}));
      return;
    }
    if (limit) definitionOf(limit);
    const holdsBody = document.querySelector('#detail-holds tbody');
    if (!status.holds_by_caller) {
      $('detail-holds-note').textContent = 'The ' + status.backend +
        ' backend does not know who holds what (see docs/console.md).';
      clear(holdsBody);
    } else if (!status.admin) {
      $('detail-holds-note').textContent = 'Who holds what needs the admin token.';
      clear(holdsBody);
    } else {
      const h = detail.holds;
      const unit = limit ? limit.unit : '';
      $('detail-holds-note').textContent = fmtInt(h.holds) + ' live holds, ' +
        fmtAmount(h.amount, unit) + ' held' + (h.complete ? '' : ' (the first holds only)') +
        (h.others.holds > 0 ? '; others: ' + fmtInt(h.others.holds) + ' holds, ' +
          fmtAmount(h.others.amount, unit) : '');
      holdsBody.replaceChildren(...h.callers.map((c) => el('tr', {data: {caller: c.caller}},
        callerCell(c.caller),
        el('td', {className: 'num', text: fmtInt(c.holds)}),
        amountTd(c.amount, unit),
        el('td', {text: 'in ' + fmtDuration(c.oldest_expires_at_unix_ms - h.now_unix_ms)}))));
    }
    const callersBody = document.querySelector('#detail-callers tbody');
    if (detail.callers === undefined) {
      $('detail-callers-note').textContent = 'Not kept by the ' + status.backend + ' backend.';
      clear(callersBody);
    } else {
      $('detail-callers-note').textContent = detail.callers.length === 0 ? 'Nobody holds or spent anything.' : '';
      const unit = limit ? limit.unit : '';
      callersBody.replaceChildren(...detail.callers.slice(0, 20).map((c) => el('tr', {data: {caller: c.caller}},
        callerCell(c.caller),
        spentCell(c, unit),
        amountTd(c.used, unit),
        amountTd(c.debt, unit),
        amountTd(c.reserved, unit),
        el('td', {className: 'num', text: fmtInt(c.calls)}))));
    }
  }

  // ---- the refresh -------------------------------------------------------------

  function limitsPath() {
    const params = new URLSearchParams();
    params.set('limit', String(PAGE_LIMITS));
    if (state.prefix !== '') params.set('prefix', state.prefix);
    if (state.kind !== '') params.set('kind', state.kind);
    if (state.after !== '') params.set('after', state.after);
    return '/v1/console/limits?' + params.toString();
  }

  function renderHeader(status) {
    $('server-info').textContent = status.backend + ' backend · v' + status.version +
      ' · up ' + fmtDuration(status.now_unix_ms - status.started_at_unix_ms) +
      (status.holds_seen_here_only ? ' · holds: those made through this llmlimitd only' : '') +
      (status.control === undefined ? '' : status.control.connected
        ? ' · definitions: etcd, revision ' + status.control.revision
        : ' · definitions store unreachable: serving the last view') +
      (status.admin ? ' · admin' : '');
    $('updated').textContent = 'updated ' + fmtTime(status.now_unix_ms);
  }

  async function refreshOnce() {
    const [status, page] = await Promise.all([api('/v1/console/status'), api(limitsPath())]);
    const [cards, denials, detail, gateway, alerts, keys] = await Promise.all([
      loadBudgets(status, page),
      status.admin ? api('/v1/console/denials?limit=50') : Promise.resolve(null),
      loadDetail(status, page),
      status.gateway_enabled ? api('/v1/console/gateway') : Promise.resolve(null),
      api('/v1/alerts?limit=' + ALERTS_SHOWN).then((a) => a.alerts),
      status.admin ? loadKeys(status) : Promise.resolve(null),
    ]);
    state.status = status;
    state.limits = page.limits;
    state.nextAfter = page.next_after;
    renderHeader(status);
    renderThroughput(status);
    renderLimits(page);
    renderBudgets(cards, page);
    renderAttention(status, page, alerts);
    renderDenials(status, denials, status.now_unix_ms);
    renderDetail(status, detail, page);
    renderGateway(status, gateway);
    renderKeys({status, keys, gateway});
    scrollToLinked(); // last: the panels above it are drawn
  }

  async function refresh() {
    if (state.running) {
      state.again = true;
      return;
    }
    clearTimeout(state.timer);
    state.running = true;
    const started = performance.now();
    try {
      await refreshOnce();
      hideError();
      setConnection('ok', 'live');
      // How long reading and drawing took: shown, and read by bench/console.
      const took = Math.round(performance.now() - started);
      $('updated').textContent += ' · ' + took + ' ms';
      state.refreshes++;
      document.body.dataset.refreshes = String(state.refreshes);
      document.body.dataset.refreshMs = String(took);
    } catch (error) {
      handleError(error);
    } finally {
      state.running = false;
      if (state.again) {
        state.again = false;
        refresh();
      } else if (state.refreshMs > 0) {
        state.timer = setTimeout(refresh, state.refreshMs);
      }
    }
  }

  function refreshSoon() {
    clearTimeout(state.timer);
    refresh();
  }

  // ---- controls ------------------------------------------------------------------

  function useToken() {
    const value = $('token-input').value.trim();
    $('token-input').value = '';
    state.token = value === '' ? null : value;
    $('token-panel').hidden = true;
    refreshSoon();
  }

  function wire() {
    const tbody = $('limits-body');
    const rowOf = (event) => event.target.closest('.lrow[data-key]');
    tbody.addEventListener('click', (event) => {
      const tr = rowOf(event);
      if (tr) select(tr.dataset.key);
    });
    tbody.addEventListener('keydown', (event) => {
      const tr = rowOf(event);
      if (tr && event.key === 'Enter') select(tr.dataset.key);
    });
    $('refresh').addEventListener('change', (event) => {
      state.refreshMs = Number(event.target.value);
      refreshSoon();
    });
    $('token-toggle').addEventListener('click', () => {
      $('token-panel').hidden = !$('token-panel').hidden;
      if (!$('token-panel').hidden) $('token-input').focus();
    });
    // A form only for the password field's sake: it is never submitted.
    $('token-panel').addEventListener('submit', (event) => {
      event.preventDefault();
      useToken();
    });
    $('token-forget').addEventListener('click', () => {
      state.token = null;
      $('token-input').value = '';
      clearData();
      refreshSoon();
    });
    let typing = null;
    $('filter').addEventListener('input', (event) => {
      clearTimeout(typing);
      typing = setTimeout(() => {
        state.prefix = event.target.value.trim();
        state.after = '';
        refreshSoon();
      }, 250);
    });
    $('kind').addEventListener('change', (event) => {
      state.kind = event.target.value;
      state.after = '';
      refreshSoon();
    });
    $('page-next').addEventListener('click', () => {
      if (state.nextAfter !== null) state.after = state.nextAfter;
      refreshSoon();
    });
    $('page-first').addEventListener('click', () => {
      state.after = '';
      refreshSoon();
    });
    $('detail-close').addEventListener('click', () => {
      state.selected = null;
      state.linked = null;
      $('detail-panel').hidden = true;
      for (const row of state.rows.values()) row.tr.classList.remove('selected', 'linked');
      window.history.replaceState(null, '', window.location.pathname + window.location.search);
    });
    window.addEventListener('hashchange', selectFromAddress);
    wireKeys();
  }

  wire();
  if (linkedKey() !== null) selectFromAddress(); // opens the limit and refreshes
  else refresh();
})();
