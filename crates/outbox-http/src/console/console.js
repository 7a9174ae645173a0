// The Outbox console (SPEC §8.3): sign in with a token, watch the live stream, page the
// history, watch sinks and webhook subscriptions, repair dead letters. Plain DOM, no
// framework, no build step. Every string from the server goes in as text (textContent or
// a text node), never as markup. The token lives in this tab's session storage and travels
// only in the Authorization header.

import { watchEvents } from '/console/watch-events.js';

const TOKEN_KEY = 'outbox.console.token';
const LIVE_LIMIT = 1000;
const REFRESH_MS = 5000;
/** How often the live list takes what arrived: one layout per batch, not per event. */
const FLUSH_MS = 100;
const VIEWS = ['live', 'history', 'sinks', 'webhooks', 'dead-letters'];

const $ = (id) => document.getElementById(id);

const session = { token: '', admin: false, tenant: '', claims: null, viewing: '' };

// ---------------------------------------------------------------- small helpers

/** An element with `attributes` (properties when the name is one) and text or element children. */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') node.className = value;
    else if (name.startsWith('data-') || name.startsWith('aria-') || name === 'type') node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) {
  node.replaceChildren();
}

/** Says `message` once in the polite status region. */
function announce(message) {
  $('status').textContent = message;
}

/** One formatter for every time shown (making one per call is slow at 1,000 events a second). */
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });

function when(text) {
  if (!text) return '';
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? String(text) : TIME_FORMAT.format(date);
}

function count(n, one, many) {
  return `${n.toLocaleString('en')} ${n === 1 ? one : many}`;
}

function patterns(text) {
  return text.split(',').map((part) => part.trim()).filter(Boolean);
}

/** A failure of an API call, with the refusal's code and message. */
class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Calls the API with the session's token; the JSON answer, or an ApiFailure. */
async function api(method, path, body) {
  const headers = { authorization: `Bearer ${session.token}`, accept: 'application/json' };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiFailure(0, 'UNAVAILABLE', `the server cannot be reached (${error.message})`);
  }
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!response.ok) {
    const error = json && json.error ? json.error : { code: `HTTP ${response.status}`, message: text.slice(0, 200) };
    const failure = new ApiFailure(response.status, error.code, error.message);
    if (response.status === 401 && session.token) signedOutBy(failure);
    throw failure;
  }
  return json;
}

/** `path` with the query `params` (empty values left out) and the chosen tenant. */
function withQuery(path, params = {}, tenanted = true) {
  const query = new URLSearchParams();
  if (tenanted && session.viewing) query.set('tenantId', session.viewing);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(name, value);
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

function failureText(failure) {
  return failure.code ? `${failure.code}: ${failure.message}` : failure.message;
}

// ---------------------------------------------------------------- signing in

/** Moves a `#token=` from the address into session storage and out of the address bar. */
function takeTokenFromAddress() {
  const match = /^#token=(.+)$/.exec(location.hash);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(null, '', `${location.pathname}${location.search}`);
}

/** What a JWT says about itself, for display only: the server decides everything. */
function claimsOf(token) {
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    const json = atob(parts[1].replace(/-/g, '+').replace(/_/g, '/'));
    const claims = JSON.parse(json);
    return claims && typeof claims === 'object' ? claims : null;
  } catch {
    return null;
  }
}

async function signIn(token) {
  session.token = token;
  session.claims = claimsOf(token);
  session.tenant = session.claims && typeof session.claims.tenant_id === 'string' ? session.claims.tenant_id : '';
  $('sign-in-message').textContent = '';
  try {
    // Only an administrator may read the sinks: the answer says who this token is.
    await api('GET', '/sinks');
    session.admin = true;
  } catch (failure) {
    if (failure.status === 401) return;
    session.admin = false;
    if (failure.status !== 403) announce(`Could not check the token's scopes: ${failureText(failure)}`);
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  showSignedIn();
}

function showSignedIn() {
  $('sign-in-view').hidden = true;
  $('views').hidden = false;
  $('sign-out').hidden = false;
  $('tenant-form').hidden = !session.admin;
  const who = session.tenant ? `tenant ${session.tenant}` : 'your tenant';
  $('identity').textContent = `Signed in: ${who}${session.admin ? ', administrator' : ''}`;
  announce('Signed in.');
  live.start();
  route();
}

/** Forgets the token and shows the sign-in form with `message`. */
function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  session.token = '';
  session.admin = false;
  session.viewing = '';
  live.stop();
  live.reset();
  stopRefreshing();
  for (const view of VIEWS) $(`${view}-view`).hidden = true;
  $('views').hidden = true;
  $('sign-out').hidden = true;
  $('tenant-form').hidden = true;
  $('tenant-input').value = '';
  $('identity').textContent = '';
  setBadge('offline', 'offline');
  $('sign-in-view').hidden = false;
  $('sign-in-message').textContent = message;
  if (message) announce(message);
  $('token-input').focus();
}

function signedOutBy(failure) {
  signOut(`The server refused this token: ${failure.message}. Sign in again.`);
}

// ---------------------------------------------------------------- views

let refresher = null;

function stopRefreshing() {
  clearInterval(refresher);
  refresher = null;
}

/** Shows the view the address names (live by default) and starts what it refreshes. */
function route() {
  if (!session.token) return;
  const name = VIEWS.includes(location.hash.slice(1)) ? location.hash.slice(1) : 'live';
  for (const view of VIEWS) $(`${view}-view`).hidden = view !== name;
  for (const link of document.querySelectorAll('.views a')) {
    if (link.dataset.view === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  stopRefreshing();
  if (name === 'history' && !historyView.loaded) historyView.load();
  if (name === 'sinks') refreshEvery(sinksView.load);
  if (name === 'webhooks') refreshEvery(webhooksView.load);
  if (name === 'dead-letters') deadLetters.loadSources();
}

function refreshEvery(load) {
  load();
  refresher = setInterval(load, REFRESH_MS);
}

/** The DOM row of one event: a button that selects it. */
function eventRow(event, onSelect) {
  const preview = JSON.stringify(event.data === undefined ? null : event.data);
  const button = el(
    'button',
    { type: 'button', class: 'event', 'data-sequence': event.sequence },
    el('span', { class: 'when' }, when(event.time)),
    el('span', { class: 'type' }, event.type),
    el('span', { class: 'subject' }, event.subject),
    el('span', { class: 'preview mono' }, `${event.sequence} ${preview.length > 160 ? `${preview.slice(0, 160)}…` : preview}`),
  );
  button.addEventListener('click', () => {
    const list = button.closest('ol');
    for (const selected of list.querySelectorAll('[aria-current="true"]')) selected.removeAttribute('aria-current');
    button.setAttribute('aria-current', 'true');
    onSelect(event);
  });
  return el('li', {}, button);
}

function showJson(id, value) {
  $(id).textContent = JSON.stringify(value, null, 2);
}

// ---------------------------------------------------------------- live

function setBadge(state, text) {
  const badge = $('badge');
  badge.dataset.state = state;
  badge.textContent = text;
}

const live = {
  watcher: null,
  paused: false,
  pending: [],
  newCount: 0,
  queue: [],
  scheduled: false,
  shown: 0,
  received: 0,

  start() {
    this.stop();
    const types = patterns($('live-types').value);
    const url = withQuery('/watch');
    setBadge('connecting', 'connecting');
    const watcher = watchEvents({
      url,
      types: types.length ? types : undefined,
      headers: () => ({ authorization: `Bearer ${session.token}` }),
      onEvent: (event) => {
        if (this.watcher === watcher) this.receive(event);
      },
      onStatus: (status, detail) => {
        if (this.watcher === watcher) this.status(status, detail);
      },
    });
    this.watcher = watcher;
  },

  stop() {
    if (this.watcher) {
      const watcher = this.watcher;
      this.watcher = null;
      watcher.close();
    }
  },

  /** Clears the list and follows again from now (a new filter or tenant). */
  restart() {
    this.reset();
    this.start();
  },

  /** Forgets every event shown or kept. */
  reset() {
    clear($('live-list'));
    this.pending = [];
    this.queue = [];
    this.newCount = 0;
    this.shown = 0;
    this.received = 0;
    $('live-new').textContent = '';
    $('live-count').textContent = 'No events yet.';
    $('live-detail-json').textContent = 'Select an event to see all of it.';
    this.paused = false;
    $('live-pause').textContent = 'Pause';
  },

  status(status, detail) {
    if (status === 'live') {
      setBadge('live', 'live');
      announce('Live: following new events.');
    } else if (status === 'connecting') {
      setBadge('connecting', 'connecting');
    } else if (status === 'reconnecting') {
      const seconds = Math.ceil((detail && detail.retryInMs ? detail.retryInMs : 0) / 1000);
      setBadge('reconnecting', `reconnecting in ${seconds} s`);
      const why = detail && detail.error ? ` (${detail.error.message})` : '';
      announce(`The stream was interrupted${why}; reconnecting in ${seconds} s.`);
    } else if (status === 'offline') {
      setBadge('offline', 'offline');
      const error = detail && detail.error;
      if (error && error.status === 401) signedOutBy(error);
      else announce(`The live stream stopped: ${error ? error.message : 'closed'}.`);
    }
  },

  receive(event) {
    this.received += 1;
    if (this.paused) {
      this.pending.push(event);
      if (this.pending.length > LIVE_LIMIT) this.pending.splice(0, this.pending.length - LIVE_LIMIT);
      this.newCount += 1;
      $('live-new').textContent = `${this.newCount.toLocaleString('en')} new`;
      return;
    }
    this.enqueue(event);
  },

  enqueue(event) {
    this.queue.push(event);
    if (this.queue.length > LIVE_LIMIT) this.queue.splice(0, this.queue.length - LIVE_LIMIT);
    if (!this.scheduled) {
      this.scheduled = true;
      setTimeout(() => requestAnimationFrame(() => this.flush()), FLUSH_MS);
    }
  },

  /** Puts the queued events at the top of the list in one change, and trims the oldest. */
  flush() {
    this.scheduled = false;
    const events = this.queue;
    this.queue = [];
    const list = $('live-list');
    const rows = document.createDocumentFragment();
    for (let i = events.length - 1; i >= 0; i -= 1) {
      rows.append(eventRow(events[i], (event) => showJson('live-detail-json', event)));
    }
    list.prepend(rows);
    while (list.childElementCount > LIVE_LIMIT) list.lastElementChild.remove();
    this.shown = list.childElementCount;
    const received = count(this.received, 'event', 'events');
    $('live-count').textContent = `${received} received; showing the newest ${this.shown.toLocaleString('en')} (at most ${LIVE_LIMIT.toLocaleString('en')}).`;
  },

  togglePause() {
    this.paused = !this.paused;
    const button = $('live-pause');
    if (this.paused) {
      button.textContent = 'Resume';
      $('live-new').textContent = '0 new';
      announce('Paused: new events are kept and counted.');
      return;
    }
    button.textContent = 'Pause';
    const shown = this.newCount;
    for (const event of this.pending) this.enqueue(event);
    this.pending = [];
    this.newCount = 0;
    $('live-new').textContent = '';
    announce(`Resumed: ${count(shown, 'new event', 'new events')} shown.`);
  },
};

// ---------------------------------------------------------------- history

const historyView = {
  loaded: false,
  cursors: [],
  next: null,
  page: 0,

  /** The first page of the form's query. */
  load() {
    const cursor = $('history-cursor').value.trim();
    this.cursors = [cursor];
    this.page = 1;
    this.fetchPage(cursor);
  },

  async fetchPage(cursor) {
    const params = {
      types: patterns($('history-types').value).join(','),
      subject: $('history-subject').value.trim(),
      limit: $('history-limit').value,
      cursor,
    };
    $('history-page').textContent = 'Loading…';
    let page;
    try {
      page = await api('GET', withQuery('/events', params));
    } catch (failure) {
      $('history-page').textContent = `Could not read the history: ${failureText(failure)}`;
      announce(`Could not read the history: ${failureText(failure)}`);
      return;
    }
    this.loaded = true;
    this.next = page.cursor || null;
    this.render(page.items);
  },

  render(items) {
    const list = $('history-list');
    clear(list);
    const rows = document.createDocumentFragment();
    for (const event of items) rows.append(eventRow(event, (selected) => showJson('history-detail-json', selected)));
    list.append(rows);
    const more = this.next ? 'more follow' : 'the end of the history';
    $('history-page').textContent = `Page ${this.page}: ${count(items.length, 'event', 'events')}, ${more}.`;
    $('history-prev').disabled = this.page <= 1;
    $('history-next').disabled = !this.next;
    announce(`History page ${this.page} loaded.`);
  },

  nextPage() {
    if (!this.next) return;
    this.cursors.push(this.next);
    this.page += 1;
    this.fetchPage(this.next);
  },

  previousPage() {
    if (this.page <= 1) return;
    this.cursors.pop();
    this.page -= 1;
    this.fetchPage(this.cursors[this.cursors.length - 1]);
  },
};

// ---------------------------------------------------------------- sinks

/** A table cell: text, or an element. */
function cell(content, className) {
  return el('td', { class: className }, content);
}

/** Keeps keyboard focus on "the same" button across a table's re-render. */
function keepingFocus(body, render) {
  const focused = document.activeElement;
  const key = focused && body.contains(focused) ? focused.dataset.key : null;
  render();
  if (key) {
    const again = body.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

const sinksView = {
  async load() {
    let answer;
    try {
      answer = await api('GET', '/sinks');
    } catch (failure) {
      $('sinks-refreshed').textContent = failure.status === 403
        ? 'Only an administrator sees the sinks.'
        : `Could not read the sinks: ${failureText(failure)}`;
      return;
    }
    const body = $('sinks-body');
    keepingFocus(body, () => {
      clear(body);
      for (const sink of answer.items) body.append(sinksView.row(sink));
    });
    const none = answer.items.length === 0 ? ' No sink is configured ([[sinks]]).' : '';
    $('sinks-refreshed').textContent = `Refreshed at ${new Date().toLocaleTimeString()}.${none}`;
  },

  row(sink) {
    const words = { idle: 'idle (caught up)', delivering: 'delivering', backingOff: 'backing off', notRunning: 'not running (no process holds its lease)' };
    const named = words[sink.state] || sink.state;
    const state = sink.backingOffUntil ? `${named} until ${when(sink.backingOffUntil)}` : named;
    const stateClass = { idle: 'state-good', delivering: 'state-good', backingOff: 'state-warn' }[sink.state] || 'state-bad';
    const error = sink.lastError ? `${sink.lastError} (${when(sink.lastErrorAt)})` : 'none';
    const letters = el(
      'button',
      { type: 'button', 'data-key': `dl:${sink.id}` },
      `${count(sink.deadLetters, 'dead letter', 'dead letters')}`,
    );
    letters.addEventListener('click', () => deadLetters.open(`sink:${sink.id}`));
    return el(
      'tr',
      {},
      el('th', { scope: 'row' }, sink.id),
      cell(state, stateClass),
      cell(sink.position || 'not started', 'mono'),
      cell(sink.lag >= 10000 ? 'at least 10,000' : sink.lag.toLocaleString('en')),
      cell(error),
      cell(sink.leaseHolder || 'nobody'),
      cell(letters),
    );
  },
};

// ---------------------------------------------------------------- webhooks

function webhookState(hook) {
  if (hook.enabled) return { text: 'enabled', className: 'state-good' };
  const reasons = { manual: 'disabled by hand', failing: 'disabled: failing', gone: 'disabled: the endpoint answered 410 Gone' };
  let text = reasons[hook.disabledReason] || 'disabled';
  if (hook.failingSince) text += ` since ${when(hook.failingSince)}`;
  return { text, className: 'state-bad' };
}

function lastAttemptText(attempt) {
  if (!attempt) return 'none yet';
  const status = attempt.status ? `HTTP ${attempt.status}` : 'no answer';
  return `${status} in ${attempt.durationMs} ms, ${when(attempt.time)}`;
}

const webhooksView = {
  async load() {
    const items = [];
    let cursor = '';
    try {
      do {
        const page = await api('GET', withQuery('/webhooks', { cursor }));
        items.push(...page.items);
        cursor = page.cursor || '';
      } while (cursor);
    } catch (failure) {
      $('webhooks-refreshed').textContent = `Could not read the subscriptions: ${failureText(failure)}`;
      return;
    }
    const body = $('webhooks-body');
    keepingFocus(body, () => {
      clear(body);
      for (const hook of items) body.append(webhooksView.row(hook));
    });
    const none = items.length === 0 ? ' No subscription yet.' : '';
    $('webhooks-refreshed').textContent = `${count(items.length, 'subscription', 'subscriptions')}, refreshed at ${new Date().toLocaleTimeString()}.${none}`;
  },

  row(hook) {
    const state = webhookState(hook);
    const gap = hook.gap ? '; retention deleted events after its position: they are gone for it' : '';
    const describe = el(
      'th',
      { scope: 'row' },
      el('span', { class: 'mono' }, hook.id),
      el('br'),
      hook.url,
      el('br'),
      `types ${hook.types.join(', ')}${hook.description ? ` · ${hook.description}` : ''}`,
    );
    return el(
      'tr',
      { 'data-webhook': hook.id },
      describe,
      cell(`${state.text}${gap}`, state.className),
      cell(hook.position, 'mono'),
      cell(hook.lag >= 10000 ? 'at least 10,000' : hook.lag.toLocaleString('en')),
      cell(lastAttemptText(hook.lastAttempt)),
      cell(this.actions(hook)),
    );
  },

  actions(hook) {
    const button = (label, action, handler, className) => {
      const node = el('button', { type: 'button', class: className, 'data-key': `${action}:${hook.id}`, 'aria-label': `${label} ${hook.id}` }, label);
      node.addEventListener('click', handler);
      return node;
    };
    return el(
      'div',
      { class: 'actions' },
      button(hook.enabled ? 'Disable' : 'Enable', 'toggle', () => this.toggle(hook)),
      button('Ping', 'ping', () => this.ping(hook)),
      button('Rotate secret', 'rotate', () => this.rotate(hook)),
      button('Attempts', 'attempts', () => this.attempts(hook)),
      button('Dead letters', 'letters', () => deadLetters.open(`webhook:${hook.id}`)),
      button('Delete', 'delete', () => this.remove(hook), 'danger'),
    );
  },

  async create(form) {
    const body = { url: $('webhook-url').value.trim(), types: patterns($('webhook-types').value) };
    const description = $('webhook-description').value.trim();
    if (description) body.description = description;
    if (body.types.length === 0) delete body.types;
    try {
      const created = await api('POST', withQuery('/webhooks'), body);
      form.reset();
      this.showSecret(created, 'created');
      this.load();
    } catch (failure) {
      announce(`The subscription was not created: ${failureText(failure)}`);
    }
  },

  /** Shows a secret once, until the user says it is kept. */
  showSecret(hook, what) {
    $('secret-for').textContent = `The subscription ${hook.id} was ${what}. Its signing secret:`;
    $('secret-value').textContent = hook.secret;
    $('secret-panel').hidden = false;
    announce(`Subscription ${hook.id} ${what}. Its secret is shown once, below.`);
    $('secret-copy').focus();
  },

  hideSecret() {
    $('secret-value').textContent = '';
    $('secret-for').textContent = '';
    $('secret-panel').hidden = true;
    $('webhook-url').focus();
  },

  async copySecret() {
    const secret = $('secret-value').textContent;
    try {
      await navigator.clipboard.writeText(secret);
      announce('The secret was copied to the clipboard.');
    } catch {
      const range = document.createRange();
      range.selectNodeContents($('secret-value'));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      announce('Copying was refused by the browser: the secret is selected, copy it with the keyboard.');
    }
  },

  async toggle(hook) {
    try {
      await api('PATCH', withQuery(`/webhooks/${encodeURIComponent(hook.id)}`, {}, false), { enabled: !hook.enabled });
      announce(`Subscription ${hook.id} ${hook.enabled ? 'disabled' : 'enabled'}.`);
    } catch (failure) {
      announce(`Subscription ${hook.id} was not changed: ${failureText(failure)}`);
    }
    this.load();
  },

  async ping(hook) {
    announce(`Pinging ${hook.id}…`);
    try {
      const outcome = await api('POST', `/webhooks/${encodeURIComponent(hook.id)}/ping`);
      const status = outcome.status ? `HTTP ${outcome.status}` : 'no answer';
      const error = outcome.error ? `: ${outcome.error}` : '';
      const verdict = outcome.delivered ? 'delivered' : 'not delivered';
      announce(`Ping of ${hook.id}: ${verdict}, ${status} in ${outcome.durationMs} ms${error}.`);
    } catch (failure) {
      announce(`Ping of ${hook.id} failed: ${failureText(failure)}`);
    }
    this.load();
  },

  async rotate(hook) {
    const yes = await confirmed(`Rotate the secret of ${hook.id}? The old one keeps signing beside the new one for 24 hours.`);
    if (!yes) return;
    try {
      const rotated = await api('POST', `/webhooks/${encodeURIComponent(hook.id)}/rotate-secret`);
      this.showSecret(rotated, 'given a new secret');
    } catch (failure) {
      announce(`The secret of ${hook.id} was not rotated: ${failureText(failure)}`);
    }
  },

  async remove(hook) {
    const yes = await confirmed(`Delete ${hook.id} (${hook.url})? Its position, attempts and dead letters go with it.`);
    if (!yes) return;
    try {
      await api('DELETE', `/webhooks/${encodeURIComponent(hook.id)}`);
      announce(`Subscription ${hook.id} deleted.`);
    } catch (failure) {
      announce(`Subscription ${hook.id} was not deleted: ${failureText(failure)}`);
    }
    this.load();
  },

  async attempts(hook) {
    let answer;
    try {
      answer = await api('GET', `/webhooks/${encodeURIComponent(hook.id)}/attempts`);
    } catch (failure) {
      announce(`Could not read the attempts of ${hook.id}: ${failureText(failure)}`);
      return;
    }
    const body = $('attempts-body');
    clear(body);
    for (const attempt of answer.items) {
      body.append(el(
        'tr',
        {},
        cell(when(attempt.time)),
        cell(attempt.eventId, 'mono'),
        cell(attempt.status ? String(attempt.status) : 'no answer'),
        cell(`${attempt.durationMs} ms`),
        cell(attempt.error || attempt.response || ''),
      ));
    }
    $('attempts-title').textContent = `Attempts of ${hook.id} (${count(answer.items.length, 'attempt', 'attempts')}, newest first)`;
    $('attempts-panel').hidden = false;
    announce(`${count(answer.items.length, 'attempt', 'attempts')} of ${hook.id} shown.`);
  },
};

// ---------------------------------------------------------------- dead letters

/** Asks `question` in a modal dialog; resolves to whether the user confirmed. */
function confirmed(question) {
  const dialog = $('confirm');
  $('confirm-message').textContent = question;
  return new Promise((resolve) => {
    const answer = (value) => {
      $('confirm-yes').removeEventListener('click', yes);
      $('confirm-no').removeEventListener('click', no);
      dialog.removeEventListener('cancel', no);
      dialog.close();
      resolve(value);
    };
    const yes = () => answer(true);
    const no = () => answer(false);
    $('confirm-yes').addEventListener('click', yes);
    $('confirm-no').addEventListener('click', no);
    dialog.addEventListener('cancel', no);
    dialog.showModal();
    $('confirm-no').focus();
  });
}

const deadLetters = {
  wanted: '',

  /** Shows the dead letters of `source` (`sink:<id>` or `webhook:<id>`). */
  open(source) {
    this.wanted = source;
    location.hash = '#dead-letters';
  },

  /** The sinks (for an administrator) and the subscriptions, as the choices of the list. */
  async loadSources() {
    const select = $('dl-source');
    const choices = [];
    if (session.admin) {
      try {
        const sinks = await api('GET', '/sinks');
        for (const sink of sinks.items) choices.push([`sink:${sink.id}`, `sink ${sink.id}`]);
      } catch (failure) {
        announce(`Could not read the sinks: ${failureText(failure)}`);
      }
    }
    try {
      let cursor = '';
      do {
        const page = await api('GET', withQuery('/webhooks', { cursor }));
        for (const hook of page.items) choices.push([`webhook:${hook.id}`, `webhook ${hook.id} (${hook.url})`]);
        cursor = page.cursor || '';
      } while (cursor);
    } catch (failure) {
      if (failure.status !== 503) announce(`Could not read the subscriptions: ${failureText(failure)}`);
    }
    const keep = this.wanted || select.value;
    clear(select);
    for (const [value, label] of choices) select.append(el('option', { value }, label));
    if (choices.some(([value]) => value === keep)) select.value = keep;
    this.wanted = '';
    if (choices.length === 0) {
      clear($('dl-body'));
      $('dl-summary').textContent = 'There is no sink or subscription to show.';
      return;
    }
    this.load();
  },

  /** The route prefix of the chosen source. */
  base() {
    const [kind, id] = $('dl-source').value.split(/:(.*)/s);
    return kind === 'sink' ? `/sinks/${encodeURIComponent(id)}/dead-letters` : `/webhooks/${encodeURIComponent(id)}/dead-letters`;
  },

  /** Every pending letter of the chosen source, page after page. */
  async all() {
    const letters = [];
    let cursor = '';
    do {
      const page = await api('GET', withQuery(this.base(), { cursor, limit: 1000 }, false));
      letters.push(...page.items);
      cursor = page.cursor || '';
    } while (cursor);
    return letters;
  },

  async load() {
    if (!$('dl-source').value) return;
    let letters;
    try {
      letters = await this.all();
    } catch (failure) {
      $('dl-summary').textContent = `Could not read the dead letters: ${failureText(failure)}`;
      return;
    }
    const body = $('dl-body');
    keepingFocus(body, () => {
      clear(body);
      for (const letter of letters) body.append(this.row(letter));
    });
    const label = $('dl-source').selectedOptions[0].textContent;
    $('dl-summary').textContent = `${count(letters.length, 'pending dead letter', 'pending dead letters')} of ${label}.`;
    $('dl-replay-all').disabled = letters.length === 0;
  },

  row(letter) {
    const button = (label, action, handler, className) => {
      const node = el('button', { type: 'button', class: className, 'data-key': `${action}:${letter.id}`, 'aria-label': `${label} letter ${letter.id}` }, label);
      node.addEventListener('click', handler);
      return node;
    };
    return el(
      'tr',
      { 'data-letter': String(letter.id) },
      el('th', { scope: 'row', class: 'mono' }, String(letter.id)),
      cell(`${letter.event.type} ${letter.event.subject} at ${letter.position}`),
      cell(letter.error),
      cell(String(letter.attempts)),
      cell(when(letter.lastFailedAt)),
      cell(el(
        'div',
        { class: 'actions' },
        button('Details', 'details', () => showJson('dl-detail-json', letter)),
        button('Replay', 'replay', () => this.replay(letter)),
        button('Discard', 'discard', () => this.discard(letter), 'danger'),
      )),
    );
  },

  async replay(letter) {
    try {
      await api('POST', `${this.base()}/${letter.id}/replay`);
      announce(`Dead letter ${letter.id} was delivered again.`);
    } catch (failure) {
      announce(`Dead letter ${letter.id} was refused again: ${failureText(failure)}`);
    }
    this.load();
  },

  async discard(letter) {
    const yes = await confirmed(`Discard dead letter ${letter.id} (${letter.event.type} ${letter.event.subject})? It will not be delivered.`);
    if (!yes) return;
    try {
      await api('DELETE', `${this.base()}/${letter.id}`);
      announce(`Dead letter ${letter.id} discarded.`);
    } catch (failure) {
      announce(`Dead letter ${letter.id} was not discarded: ${failureText(failure)}`);
    }
    this.load();
  },

  /** Counts the pending letters, asks with that count, then replays exactly those. */
  async replayAll() {
    let letters;
    try {
      letters = await this.all();
    } catch (failure) {
      announce(`Could not read the dead letters: ${failureText(failure)}`);
      return;
    }
    const label = $('dl-source').selectedOptions[0].textContent;
    if (letters.length === 0) {
      announce(`${label} has no pending dead letter.`);
      return;
    }
    const question = `Replay all ${count(letters.length, 'dead letter', 'dead letters')} of ${label}? Each is delivered again, oldest first, after the events that followed it.`;
    if (!(await confirmed(question))) return;
    let replayed = 0;
    const refused = [];
    for (const letter of letters) {
      try {
        await api('POST', `${this.base()}/${letter.id}/replay`);
        replayed += 1;
      } catch (failure) {
        refused.push(`${letter.id} (${failure.message})`);
      }
    }
    const tail = refused.length ? `; refused again: ${refused.join(', ')}` : '';
    announce(`Replayed ${replayed} of ${letters.length}${tail}.`);
    this.load();
  },
};

// ---------------------------------------------------------------- wiring

function wire() {
  $('sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const token = $('token-input').value.trim();
    $('token-input').value = '';
    if (token) signIn(token);
  });
  $('sign-out').addEventListener('click', () => signOut('Signed out: the token is forgotten.'));
  $('tenant-form').addEventListener('submit', (event) => {
    event.preventDefault();
    session.viewing = $('tenant-input').value.trim();
    announce(`Showing tenant ${session.viewing || session.tenant || 'of the token'}.`);
    live.restart();
    historyView.loaded = false;
    route();
  });
  $('live-filter').addEventListener('submit', (event) => {
    event.preventDefault();
    live.restart();
  });
  $('live-pause').addEventListener('click', () => live.togglePause());
  $('history-form').addEventListener('submit', (event) => {
    event.preventDefault();
    historyView.load();
  });
  $('history-next').addEventListener('click', () => historyView.nextPage());
  $('history-prev').addEventListener('click', () => historyView.previousPage());
  $('webhook-form').addEventListener('submit', (event) => {
    event.preventDefault();
    webhooksView.create(event.target);
  });
  $('secret-copy').addEventListener('click', () => webhooksView.copySecret());
  $('secret-done').addEventListener('click', () => webhooksView.hideSecret());
  $('dl-source').addEventListener('change', () => deadLetters.load());
  $('dl-refresh').addEventListener('click', () => deadLetters.load());
  $('dl-replay-all').addEventListener('click', () => deadLetters.replayAll());
  window.addEventListener('hashchange', route);
}

function main() {
  wire();
  takeTokenFromAddress();
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token);
  else signOut('');
}

main();
