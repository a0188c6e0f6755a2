// Flash-sale live dashboard. Plain ES2020, no framework, no build step.
// Polls GET /admin/overview once a second with the admin token as a bearer
// header; the token lives in memory and in sessionStorage (this tab only).
'use strict';

const OVERVIEW_URL = '/admin/overview';
const POLL_MS = 1000;
const TIMEOUT_MS = 5000;
const STALE_AFTER_MS = 3000;
const MAX_PRODUCTS = 50;
const WINDOW_MS = 5 * 60 * 1000;
const TOKEN_KEY = 'seckill.adminToken';
const SVGNS = 'http://www.w3.org/2000/svg';
const DEP_ORDER = ['redis', 'mysql', 'kafka', 'zookeeper'];

const CHARTS = [
  { key: 'reservations', fmt: perSec, integer: true },
  { key: 'sold_out', fmt: perSec, integer: true },
  { key: 'confirmations', fmt: perSec, integer: true },
  { key: 'compensations', fmt: perSec, integer: true },
  { key: 'batches', fmt: perSec, integer: true },
  { key: 'confirm_p99_ms', fmt: millis, integer: true, empty: 'no confirmations in this window' },
];

const $ = (sel) => document.querySelector(sel);

let token = null;
let generation = 0;      // bumped on sign-in/out; late answers of an old generation are dropped
let timer = null;
let inFlight = false;
let lastOkAt = 0;        // Date.now() of the last good answer
let lastDataMs = 0;      // the server's now_ms of the data on screen
let lastFailed = false;

// ---------- small helpers ----------

function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v != null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function s(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.append(e);
  return e;
}

function compact(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return +(v / 1e6).toFixed(1) + 'M';
  if (a >= 1e3) return +(v / 1e3).toFixed(1) + 'k';
  return String(+v.toFixed(a < 10 && v % 1 ? 1 : 0));
}
function perSec(v) { return compact(v) + '/s'; }
function millis(v) { return v >= 1000 ? +(v / 1000).toFixed(1) + ' s' : Math.round(v) + ' ms'; }
function ago(ms) {
  if (ms == null) return '—';
  return ms < 1000 ? ms + ' ms ago' : (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + ' s ago';
}
function age(ms) { return ms == null ? '—' : millis(ms); }
function clock(ms, seconds = true) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return p(d.getHours()) + ':' + p(d.getMinutes()) + (seconds ? ':' + p(d.getSeconds()) : '');
}
function dash(v) { return v == null ? '—' : String(v); }
// Prices come in minor units (cents, fen); the currency says how many decimals.
function money(minor, currency) {
  try {
    const f = new Intl.NumberFormat(undefined, { style: 'currency', currency });
    return f.format(minor / 10 ** f.resolvedOptions().maximumFractionDigits);
  } catch (_) {
    return `${minor} ${currency || ''} (minor units)`;
  }
}

// ---------- the chart ----------

// Draws a line chart of ys against xs (epoch ms) into svg. null ys are gaps.
// opts: { x0, x1 (time window, ms), fmt (y label formatter), integer (whole-number ticks),
//         empty (text shown when there is no point) }.
// Sets data-points to the number of non-null points drawn.
function lineChart(svg, xs, ys, opts = {}) {
  const W = 400, H = 160, L = 52, R = 10, T = 10, B = 22;
  const x1 = opts.x1 ?? (xs.length ? xs[xs.length - 1] : Date.now());
  const x0 = opts.x0 ?? x1 - WINDOW_MS;
  const fmt = opts.fmt || compact;
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.replaceChildren();

  const pts = [];
  xs.forEach((x, i) => {
    const y = ys[i];
    if (x >= x0 && x <= x1) pts.push(y == null || !Number.isFinite(y) ? null : [x, y]);
  });
  const max = Math.max(0, ...pts.filter(Boolean).map((p) => p[1]));
  // A "nice" step (1, 2, 5 × 10^k) giving at most five grid lines.
  const raw = Math.max(max, 1) / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 5, 10].map((m) => m * mag).find((st) => st >= raw);
  if (opts.integer) step = Math.max(1, Math.round(step));
  const top = Math.max(step, Math.ceil(max / step) * step);
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - (y / top) * (H - T - B);

  for (let v = 0; v <= top + step / 2; v += step) {
    const y = sy(v).toFixed(1);
    s('line', { x1: L, x2: W - R, y1: y, y2: y, class: v === 0 ? 'axis' : 'gridline' }, svg);
    s('text', { x: L - 6, y, class: 'ylabel', 'text-anchor': 'end', 'dominant-baseline': 'middle' }, svg)
      .textContent = fmt(v);
  }
  for (let t = Math.ceil(x0 / 60000) * 60000; t <= x1; t += 60000) {
    if (sx(t) - L < 14) continue; // too close to the y axis for a label
    const x = sx(t).toFixed(1);
    s('line', { x1: x, x2: x, y1: T, y2: H - B, class: 'gridline' }, svg);
    s('text', { x, y: H - 6, class: 'xlabel', 'text-anchor': 'middle' }, svg).textContent = clock(t, false);
  }
  s('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis' }, svg);

  let d = '';
  let n = 0;
  pts.forEach((p, i) => {
    if (!p) return;
    n++;
    const [x, y] = [sx(p[0]).toFixed(1), sy(p[1]).toFixed(1)];
    d += (pts[i - 1] ? 'L' : 'M') + x + ' ' + y;
    if (!pts[i - 1] && !pts[i + 1]) s('circle', { cx: x, cy: y, r: 2, class: 'dot' }, svg);
  });
  if (d) s('path', { d, class: 'line' }, svg);
  else s('text', { x: (L + W - R) / 2, y: (T + H - B) / 2, class: 'nodata', 'text-anchor': 'middle' }, svg).textContent = opts.empty || 'no data';
  svg.setAttribute('data-points', String(n));
}

// ---------- rendering ----------

// Interleaves spaces so the cell's text reads naturally ("out of stock 1 db error 2").
function spaced(nodes) {
  return nodes.length ? nodes.flatMap((n, i) => (i ? [' ', n] : [n])) : ['—'];
}

function badge(text, kind) {
  return h('span', { class: 'badge badge-' + kind }, text);
}

function productRow(p) {
  const cell = (field, value, cls) => h('td', { 'data-field': field, class: cls }, dash(value));
  const room = p.waiting_room;
  const mismatch = p.stock_redis != null && p.stock_redis !== p.stock_db && p.pending === 0;
  const stockCls = 'num' + (mismatch ? ' mismatch' : '');
  const reasons = Object.entries(p.failed_by_reason || {})
    .filter(([, n]) => n > 0)
    .map(([r, n]) => h('span', { class: 'chip' }, r.replace(/_/g, ' ') + ' ', h('b', {}, String(n))));

  const left = h('td', { class: 'left' });
  if (p.initial_stock > 0) {
    left.append(h('meter', {
      min: '0', max: String(p.initial_stock), value: String(p.stock_db ?? 0),
      low: String(p.initial_stock * 0.1), high: String(p.initial_stock * 0.3), optimum: String(p.initial_stock),
      title: `${p.stock_db} of ${p.initial_stock} left in MySQL`,
    }), h('span', { class: 'pct' }, Math.round((100 * (p.stock_db ?? 0)) / p.initial_stock) + '%'));
  }

  // A product split into stock buckets: each bucket's Redis stock under the meter, and its
  // counts in the tooltip (the admin API's `buckets`).
  const buckets = p.buckets || [];
  if (buckets.length > 1) {
    left.append(h('div', {
      class: 'buckets', 'data-field': 'buckets',
      title: buckets.map((b) => `bucket ${b.bucket}: stock ${dash(b.stock)}, pending ${b.pending}, `
        + `confirmed ${b.confirmed}, lent ${b.lent}, borrowed ${b.borrowed}, borrowing ${b.borrowing}`).join('\n'),
    }, `${buckets.length} buckets: ` + buckets.map((b) => dash(b.stock)).join(' · ')));
  }

  const details = [
    'price ' + money(p.price, p.currency),
    p.starts_at ? 'starts ' + p.starts_at : null,
    p.ends_at ? 'ends ' + p.ends_at : null,
    p.payment_window_secs ? `payment window ${p.payment_window_secs} s` : null,
    p.orders_db ? `MySQL orders: ${p.orders_db.confirmed} confirmed, ${p.orders_db.paid} paid, ${p.orders_db.cancelled} cancelled` : null,
  ].filter(Boolean).join('\n');

  const waiting = cell('waiting', room ? room.waiting : null, 'num');
  if (room) waiting.title = `admitted ${room.admitted}, ${room.admit_per_sec}/s, factor ${room.max_admitted_factor}, opens ${room.opens_at ?? 'at the start'}`;

  const stockRedis = cell('stock_redis', p.stock_redis, stockCls);
  if (mismatch) stockRedis.title = 'Redis and MySQL disagree with nothing pending';

  return h('tr', { 'data-product': String(p.id) },
    h('td', { class: 'num' }, String(p.id)),
    h('td', { class: 'name', title: details }, p.name),
    h('td', { 'data-field': 'state' }, badge(p.state, p.state)),
    stockRedis,
    cell('stock_db', p.stock_db, stockCls),
    left,
    cell('pending', p.pending, 'num' + (p.pending > 0 ? ' active' : '')),
    cell('confirmed', p.confirmed, 'num'),
    cell('paid', p.paid, 'num'),
    cell('cancelled', p.cancelled, 'num'),
    waiting,
    cell('failed', p.failed, 'num' + (p.failed > 0 ? ' bad' : '')),
    h('td', { 'data-field': 'failed_by_reason', class: 'reasons' }, ...spaced(reasons)),
  );
}

function depNames(list) {
  const seen = new Set();
  for (const x of list) for (const k of Object.keys(x.dependencies || {})) seen.add(k);
  return [...seen].sort((a, b) => {
    const ia = DEP_ORDER.indexOf(a), ib = DEP_ORDER.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
}

// One cell with a chip per dependency: green when up, red (with a cross) when down.
function depCell(x, names) {
  const deps = x.dependencies || {};
  const chips = names.filter((n) => n in deps).map((n) => h('span', {
    class: 'badge badge-' + (deps[n] ? 'up' : 'down'), 'data-dep': n, 'data-up': String(deps[n]),
    title: n + (deps[n] ? ' is up' : ' is DOWN'),
  }, (deps[n] ? '' : '✕ ') + n));
  return h('td', { 'data-field': 'dependencies', class: 'deps' }, ...spaced(chips));
}

function seenCell(ms) {
  return h('td', { class: 'num' + (ms > STALE_AFTER_MS ? ' bad' : '') }, ago(ms));
}

function fillTable(table, heads, rows, emptyText) {
  table.tHead.rows[0].replaceChildren(...heads.map(([t, cls]) => h('th', { class: cls }, t)));
  const body = table.tBodies[0];
  body.replaceChildren(...rows);
  if (!rows.length) body.append(h('tr', {}, h('td', { colspan: String(heads.length), class: 'empty' }, emptyText)));
}

function render(o) {
  $('#updated').textContent = clock(o.now_ms);
  $('#updated').title = new Date(o.now_ms).toISOString();

  const products = (o.products || []).slice(0, MAX_PRODUCTS);
  const total = o.products_total ?? products.length;
  $('#products-note').textContent = total > products.length
    ? `showing ${products.length} of ${total}` : `${total} product${total === 1 ? '' : 's'}`;
  const pbody = $('#products').tBodies[0];
  pbody.replaceChildren(...products.map(productRow));
  if (!products.length) pbody.append(h('tr', {}, h('td', { colspan: '13', class: 'empty' }, 'No products')));

  const series = o.series || {};
  const xs = series.t_ms || [];
  const x1 = xs.length ? xs[xs.length - 1] : o.now_ms;
  for (const c of CHARTS) {
    const ys = series[c.key] || [];
    lineChart(document.querySelector(`svg[data-chart="${c.key}"]`), xs, ys, { x1, x0: x1 - WINDOW_MS, fmt: c.fmt, integer: c.integer, empty: c.empty });
    const last = [...ys].reverse().find((v) => v != null);
    document.querySelector(`[data-last="${c.key}"]`).textContent = last == null ? '' : c.fmt(last);
  }

  const workers = o.workers || [];
  const wdeps = depNames(workers);
  fillTable($('#workers'),
    [['ID'], ['Last seen', 'num'], ['Dependencies'], ['Lag by partition'], ['Total lag', 'num'], ['Oldest pending', 'num']],
    workers.map((w) => {
      const lag = Object.entries(w.partition_lag || {}).sort((a, b) => a[0] - b[0]);
      const totalLag = lag.reduce((sum, [, n]) => sum + n, 0);
      return h('tr', { 'data-worker': w.id },
        h('td', { class: 'mono' }, w.id),
        seenCell(w.seen_ms_ago),
        depCell(w, wdeps),
        h('td', { 'data-field': 'partition_lag', class: 'reasons' },
          ...spaced(lag.map(([p, n]) => h('span', { class: 'chip' + (n > 0 ? ' chip-warn' : '') }, 'p' + p + ' ', h('b', {}, String(n)))))),
        h('td', { class: 'num' + (totalLag > 0 ? ' active' : '') }, String(totalLag)),
        h('td', { 'data-field': 'oldest_pending_age_ms', class: 'num' }, age(w.oldest_pending_age_ms)));
    }), 'No worker has reported');

  const gateways = o.gateways || [];
  const gdeps = depNames(gateways);
  fillTable($('#gateways'),
    [['ID'], ['Last seen', 'num'], ['Dependencies'], ['Sold-out markers']],
    gateways.map((g) => h('tr', { 'data-gateway': g.id },
      h('td', { class: 'mono' }, g.id),
      seenCell(g.seen_ms_ago),
      depCell(g, gdeps),
      h('td', { 'data-field': 'sold_out_markers', class: 'reasons' },
        ...spaced((g.sold_out_markers || []).map((id) => h('span', { class: 'chip' }, '#' + id)))))),
    'No gateway has reported');
}

function clearData() {
  for (const t of ['#products', '#workers', '#gateways']) $(t).tBodies[0].replaceChildren();
  for (const c of CHARTS) {
    const svg = document.querySelector(`svg[data-chart="${c.key}"]`);
    svg.replaceChildren();
    svg.setAttribute('data-points', '0');
    document.querySelector(`[data-last="${c.key}"]`).textContent = '';
  }
  $('#products-note').textContent = '';
  $('#updated').textContent = '—';
  lastOkAt = 0;
  lastDataMs = 0;
  lastFailed = false;
}

// ---------- status, errors, sign-in ----------

function showError(msg) {
  const e = $('#error');
  e.textContent = msg || '';
  e.hidden = !msg;
}

function updateStatus() {
  const st = $('#status');
  let text = 'signed out', cls = 'off';
  if (token) {
    const old = Date.now() - lastOkAt;
    if (!lastOkAt) { text = 'connecting…'; cls = 'wait'; }
    else if (lastFailed || old > STALE_AFTER_MS) { text = `stale · ${Math.round(old / 1000)} s old`; cls = 'stale'; }
    else { text = 'live'; cls = 'live'; }
  }
  st.textContent = text;
  st.className = 'status status-' + cls;
  $('#data').classList.toggle('stale', cls === 'stale');
}

function setSignedIn(on) {
  $('#sign-in').hidden = on;
  $('#data').hidden = !on;
  $('#sign-out').hidden = !on;
  updateStatus();
}

function signOut(message) {
  generation++;
  token = null;
  try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* storage disabled */ }
  clearTimeout(timer);
  timer = null;
  inFlight = false;
  clearData();
  setSignedIn(false);
  showError(message || '');
  $('#token').value = '';
  $('#token').focus();
}

function signIn(t) {
  generation++;
  token = t;
  try { sessionStorage.setItem(TOKEN_KEY, t); } catch (_) { /* memory only */ }
  clearData();
  showError('');
  setSignedIn(true);
  clearTimeout(timer);
  inFlight = false;
  poll();
}

// ---------- polling ----------

async function poll() {
  if (!token || inFlight) return;
  const gen = generation;
  const started = Date.now();
  inFlight = true;
  const ctl = new AbortController();
  const abort = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  let problem = null;
  let stage = 'fetch';
  try {
    const res = await fetch(OVERVIEW_URL, {
      headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
      cache: 'no-store',
      credentials: 'same-origin',
      signal: ctl.signal,
    });
    if (gen !== generation) return;
    if (res.status === 401 || res.status === 403) {
      signOut(res.status === 401 ? 'Wrong admin token (401). Sign in again.' : 'This token may not read the dashboard (403). Sign in again.');
      return;
    }
    if (!res.ok) {
      problem = `The gateway answered ${res.status} ${res.statusText}`.trim();
    } else {
      stage = 'parse';
      const body = await res.json();
      if (gen !== generation) return;
      stage = 'render';
      render(body);
      lastDataMs = body.now_ms;
      lastOkAt = Date.now();
      lastFailed = false;
      showError('');
    }
  } catch (err) {
    if (gen !== generation) return;
    problem = err.name === 'AbortError' ? `No answer within ${TIMEOUT_MS / 1000} s`
      : stage === 'parse' ? 'The overview was not valid JSON'
      : stage === 'render' ? 'Could not show the overview (' + err.message + ')'
      : 'Cannot reach the gateway (' + err.message + ')';
  } finally {
    clearTimeout(abort);
    if (gen === generation) {
      inFlight = false;
      if (problem) {
        lastFailed = true;
        showError(problem + (lastDataMs ? ` — showing data from ${clock(lastDataMs)}, marked stale.` : '.'));
      }
      updateStatus();
      if (token) timer = setTimeout(poll, Math.max(0, POLL_MS - (Date.now() - started)));
    }
  }
}

// ---------- start ----------

document.addEventListener('DOMContentLoaded', () => {
  $('#sign-in').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('#token').value.trim();
    $('#token').value = '';
    if (t) signIn(t);
  });
  $('#sign-out').addEventListener('click', () => signOut(''));
  setInterval(updateStatus, 500);

  let saved = null;
  try { saved = sessionStorage.getItem(TOKEN_KEY); } catch (_) { /* storage disabled */ }
  if (saved) signIn(saved);
  else setSignedIn(false);
});
