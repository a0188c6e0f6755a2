// The buyer's page of one sale: the countdown, the waiting room with its live place, the buy,
// the ticket's live state, and the payment. Live states come as server-sent events read with
// fetch (EventSource cannot send the bearer token); when a stream cannot be had (an old
// browser, or a gateway at its limit of streams) the page polls instead.
'use strict';

const $ = (id) => document.getElementById(id);
const productId = location.pathname.split('/').filter(Boolean)[1];
const dev = new URLSearchParams(location.search).has('dev');
let token = null;
let product = null;
let clockOffset = 0; // the gateway's clock minus this device's
let admission = null; // { token, until }
let ticket = null;
let joining = false; // a join (and its proof of work) is under way

// ---- the buyer's token ----------------------------------------------------------------

// The shop redirects with #token=<JWT>: kept for this tab only, and out of the address bar.
function loadToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem('seckill-token', decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  token = sessionStorage.getItem('seckill-token');
}

function showSignIn() {
  $('need-token').hidden = !!token || dev;
  $('dev-token').hidden = !!token || !dev;
}

// ---- the API ----------------------------------------------------------------------------

async function api(method, path, { headers = {}, body } = {}) {
  const h = { ...headers };
  if (token) h.Authorization = 'Bearer ' + token;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers: h,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try {
    data = await res.json();
  } catch (_) {
    data = null;
  }
  return { status: res.status, data };
}

function say(text) {
  $('message').textContent = text || '';
  $('message').hidden = !text;
}

function refused(r) {
  const why = r.data && r.data.message ? r.data.message : 'the shop could not answer (' + r.status + ')';
  say(why.charAt(0).toUpperCase() + why.slice(1) + '.');
}

// One stream: calls onEvent(data, id) per event; resolves with the last id when the server
// ends it; throws when no stream could be opened (then the caller polls).
async function stream(path, onEvent, lastId) {
  const headers = { Accept: 'text/event-stream', Authorization: 'Bearer ' + token };
  if (lastId) headers['Last-Event-ID'] = lastId;
  const res = await fetch(path, { headers });
  if (res.status !== 200 || !res.body || typeof TextDecoderStream === 'undefined') {
    throw new Error('no stream (' + res.status + ')');
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let last = lastId;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return last;
    buf += value;
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let id = null;
      let data = null;
      for (const line of block.split('\n')) {
        if (line.startsWith('id: ')) id = line.slice(4);
        else if (line.startsWith('data: ')) data = line.slice(6);
      }
      if (data !== null) {
        if (id) last = id;
        onEvent(JSON.parse(data));
      }
    }
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Follows `path` live until `isFinal(data)`: reconnects (with Last-Event-ID) when a stream
// breaks, and polls `pollPath` when no stream can be had.
async function follow(path, pollPath, onEvent, isFinal) {
  let lastId = null;
  let final = false;
  const seen = (data) => {
    onEvent(data);
    final = isFinal(data);
  };
  for (let attempt = 0; !final; attempt++) {
    try {
      lastId = await stream(path, seen, lastId);
      if (!final) await sleep(1000);
    } catch (_) {
      document.body.dataset.live = 'polling';
      const r = await api('GET', pollPath);
      if (r.status === 200) seen(r.data);
      if (!final) await sleep(Math.max(500, (r.data && r.data.refresh_after_ms) || 1000));
    }
  }
}

// ---- the sale ---------------------------------------------------------------------------

function money(minor, currency) {
  if (!minor) return '';
  return (minor / 100).toFixed(2) + ' ' + currency;
}

function two(n) {
  return String(n).padStart(2, '0');
}

function tick() {
  const now = Date.now() + clockOffset;
  const el = $('countdown');
  let state;
  if (product.ends_at_ms && now >= product.ends_at_ms) {
    state = 'ended';
    el.textContent = 'The sale has ended.';
  } else if (product.starts_at_ms && now < product.starts_at_ms) {
    state = 'waiting';
    const s = Math.ceil((product.starts_at_ms - now) / 1000);
    el.textContent = 'Starts in ' + two(Math.floor(s / 3600)) + ':' + two(Math.floor(s / 60) % 60) + ':' + two(s % 60);
  } else {
    state = 'on_sale';
    el.textContent = 'On sale now';
  }
  el.dataset.state = state;
  // A cancelled or failed order holds nothing: its buyer may buy again, unless the product
  // has a waiting room (the admission was used, and a buyer has one place).
  const holds = !!ticket && ['pending', 'confirmed', 'paid'].includes(ticket.status);
  const canBuy = state === 'on_sale' && !!token && !holds && (!product.waiting_room || !!admission);
  $('buy').disabled = !canBuy;
  $('buy').hidden = holds || state === 'ended' || (product.waiting_room && !!ticket);
  $('quantity-row').hidden = $('buy').hidden || !(product.max_per_buyer > 1);
  $('quantity').disabled = !canBuy;
  if (product.waiting_room) {
    const opens = product.queue_opens_at_ms || 0;
    const joined = $('queue').dataset.state !== 'none';
    $('join').hidden = joined;
    $('join').disabled = !token || now < opens || state === 'ended' || joined || joining;
  }
}

function showQueue(entry) {
  if (ticket) return; // bought: the ticket's state is what matters now
  const q = $('queue');
  q.dataset.state = entry.state;
  if (entry.state !== 'admitted') admission = null;
  let text;
  if (entry.state === 'waiting') {
    if (entry.position == null) {
      text = 'You are in the queue. Places are drawn at random when the sale starts.';
    } else {
      text = 'Your place: ' + entry.position;
      // No estimate while a unit is unlikely to come (the admitted hold them), nor a "0 s".
      if (entry.estimated_wait_ms >= 1000 && !entry.unlikely) text += ', about ' + Math.ceil(entry.estimated_wait_ms / 1000) + ' s';
      if (entry.unlikely) text += '. Units may run out before your turn.';
    }
  } else if (entry.state === 'admitted') {
    admission = { token: entry.admission_token, until: entry.admitted_until_ms };
    text = 'It is your turn: buy before ' + new Date(entry.admitted_until_ms - clockOffset).toLocaleTimeString() + '.';
  } else if (entry.state === 'sold_out') {
    text = 'Sold out.';
  } else if (entry.state === 'expired') {
    text = 'Your turn has passed.';
  } else if (entry.state === 'ended') {
    text = 'Your turn did not come before the end.';
  } else {
    text = 'Done.';
  }
  $('queue-state').textContent = text;
  tick();
}

async function join() {
  joining = true;
  $('join').disabled = true;
  try {
    await joinOnce();
  } finally {
    joining = false;
    tick();
  }
}

async function joinOnce() {
  const path = '/v1/seckill/' + productId + '/queue';
  let r = await api('POST', path);
  // A room with a proof of work: solve its challenge off the page's thread, and join with
  // the solution. A solution refused (its challenge expired meanwhile) is tried once more.
  for (let tries = 0; r.status === 428 && r.data && r.data.challenge && tries < 2; tries++) {
    $('queue-state').textContent =
      'Joining: your browser is doing a small proof of work (fair to everyone, costly to bots)…';
    let solution;
    try {
      solution = await solvePow(r.data.challenge);
    } catch (_) {
      $('queue-state').textContent = '';
      say('This browser could not do the proof of work the queue asks for (Web Workers are needed).');
      return;
    }
    r = await api('POST', path, { headers: { 'Seckill-Pow': solution } });
    if (r.status === 403 && r.data && r.data.error === 'challenge_invalid') r = await api('POST', path);
  }
  if (r.status !== 202) {
    $('queue-state').textContent = '';
    return refused(r);
  }
  say('');
  followQueue(r.data);
}

// Solves a join's challenge in a Web Worker (pow.js): its Seckill-Pow value.
function solvePow(challenge) {
  return new Promise((resolve, reject) => {
    const worker = new Worker('/sale/assets/pow.js');
    worker.onmessage = (e) => {
      worker.terminate();
      // How long the work took here, for whoever looks (the page's test logs it).
      $('queue').dataset.powMs = Math.round(e.data.ms);
      $('queue').dataset.powBits = challenge.bits;
      $('queue').dataset.powHashes = e.data.hashes;
      resolve(e.data.solution);
    };
    worker.onerror = (e) => {
      worker.terminate();
      reject(e);
    };
    worker.postMessage({ token: challenge.token, bits: challenge.bits });
  });
}

// Follows the entry `entry` live; a reload of this tab finds it again (resume).
function followQueue(entry) {
  sessionStorage.setItem('seckill-queue-' + productId, entry.queue_id);
  showQueue(entry);
  const base = '/v1/seckill/' + productId + '/queue/' + entry.queue_id;
  // Not over at `admitted`: an admission can be taken back to the head of the line until the
  // buy (and `bought` ends it).
  follow(base + '/events', base, showQueue, (e) => ['expired', 'bought', 'ended'].includes(e.state) || !!ticket);
}

function showTicket(t) {
  ticket = t;
  if (product.waiting_room) {
    // The admission was used: the queue is behind this buyer.
    $('queue').dataset.state = 'bought';
    $('queue-state').textContent = 'You bought through the queue.';
  }
  const s = $('ticket');
  s.hidden = false;
  s.dataset.state = t.status;
  const words = {
    pending: 'reserved, being confirmed…',
    confirmed: 'confirmed',
    paid: 'paid',
    cancelled: 'cancelled',
    failed: 'failed' + (t.reason ? ' (' + t.reason + ')' : ''),
  };
  $('ticket-state').textContent = (t.quantity > 1 ? t.quantity + ' units, ' : '') + (words[t.status] || t.status);
  const payable = t.status === 'confirmed' && t.pay_by_ms != null;
  $('pay-by').textContent = payable ? 'Pay by ' + new Date(t.pay_by_ms - clockOffset).toLocaleTimeString() + '.' : '';
  $('pay').hidden = !payable;
  $('cancel').hidden = !payable;
  tick();
}

function followTicket(t) {
  showTicket(t);
  const path = '/v1/orders/' + t.ticket;
  follow(path + '/events', path, showTicket, (e) =>
    ['paid', 'cancelled', 'failed'].includes(e.status) || (e.status === 'confirmed' && e.pay_by_ms == null));
}

async function buy() {
  $('buy').disabled = true;
  const headers = admission ? { 'Seckill-Admission': admission.token } : {};
  const quantity = Number($('quantity').value) || 1;
  const body = quantity > 1 ? { quantity } : {};
  const r = await api('POST', '/v1/seckill/' + productId, { headers, body });
  if (r.status === 202 || r.status === 200 || r.status === 201) {
    say('');
    followTicket(r.data);
  } else {
    refused(r);
    tick();
  }
}

async function pay() {
  const slot = 'seckill-pay-' + ticket.ticket;
  const key = sessionStorage.getItem(slot) || crypto.randomUUID();
  sessionStorage.setItem(slot, key);
  const order = ticket.ticket;
  const send = () => api('POST', '/v1/orders/' + order + '/pay', { headers: { 'Idempotency-Key': key } });
  $('pay').disabled = true;
  let r = await send();
  // A pay again with the same key answers the same payment, charging nothing more: the page
  // asks until the provider has answered. A decline moves no ticket, so no stream tells it.
  while (r.status === 202 && r.data.status === 'processing') {
    say('');
    $('pay-by').textContent = 'Payment sent; waiting for the provider…';
    await sleep(1000);
    if (!ticket || ticket.ticket !== order || ticket.status !== 'confirmed') return; // the stream told the end
    r = await send();
  }
  $('pay').disabled = false;
  if (r.status === 202 && r.data.status === 'declined') {
    // The next try is a new payment, under a new key.
    sessionStorage.removeItem(slot);
    showTicket(ticket);
    say('Your payment was declined. You can try again before the deadline.');
  } else if (r.status !== 202) {
    refused(r);
  }
}

async function cancel() {
  const r = await api('POST', '/v1/orders/' + ticket.ticket + '/cancel');
  if (r.status === 200) showTicket(r.data);
  else refused(r);
}

// A buyer who comes back finds the ticket they hold.
async function resume() {
  if (!token) return;
  const r = await api('GET', '/v1/seckill/' + productId + '/order');
  if (r.status === 200 && ['pending', 'confirmed', 'paid'].includes(r.data.status)) return followTicket(r.data);
  // A place this tab joined, before a reload.
  const queueId = product.waiting_room && sessionStorage.getItem('seckill-queue-' + productId);
  if (!queueId) return;
  const q = await api('GET', '/v1/seckill/' + productId + '/queue/' + queueId);
  if (q.status === 200) followQueue(q.data);
  else sessionStorage.removeItem('seckill-queue-' + productId);
}

async function start() {
  loadToken();
  showSignIn();
  const r = await api('GET', '/v1/seckill/' + productId);
  if (r.status !== 200) {
    $('name').textContent = 'Unknown sale';
    $('buy').hidden = true;
    return refused(r);
  }
  product = r.data;
  clockOffset = product.now_ms - Date.now();
  document.title = product.name + ' · flash sale';
  $('name').textContent = product.name;
  $('price').textContent = money(product.price, product.currency);
  if (product.max_per_buyer > 1) {
    for (let n = 1; n <= product.max_per_buyer; n++) {
      const o = document.createElement('option');
      o.value = o.textContent = String(n);
      $('quantity').append(o);
    }
    $('price').textContent += ' each, up to ' + product.max_per_buyer + ' per buyer';
  }
  $('queue').hidden = !product.waiting_room;
  $('join').addEventListener('click', join);
  $('buy').addEventListener('click', buy);
  $('pay').addEventListener('click', pay);
  $('cancel').addEventListener('click', cancel);
  $('dev-token').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem('seckill-token', $('token-input').value.trim());
    loadToken();
    showSignIn();
    resume();
    tick();
  });
  tick();
  setInterval(tick, 250);
  resume();
}

start();
