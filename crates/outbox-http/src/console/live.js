// The live view: the tenant's stream (GET /watch) through watchEvents, a badge in words,
// a type filter, pause that keeps receiving and counts, a list bounded to the newest 1,000.

import { watchEvents } from '/console/watch-events.js';
import { refused, session, withQuery } from './api.js';
import { $, announce, clear, eventRow, showJson } from './dom.js';
import { count, patterns } from './format.js';

const LIVE_LIMIT = 1000;
/** How often the list takes what arrived: one layout per batch, not per event. */
const FLUSH_MS = 100;

/** Says the stream's state in the badge, in words. */
export function setBadge(state, text) {
  const badge = $('badge');
  badge.dataset.state = state;
  badge.textContent = text;
}

export const live = {
  watcher: null,
  paused: false,
  pending: [],
  newCount: 0,
  queue: [],
  scheduled: false,
  received: 0,

  /** Follows the chosen tenant's stream from now, with the filter's types. */
  start() {
    this.stop();
    const types = patterns($('live-types').value);
    setBadge('connecting', 'connecting');
    const watcher = watchEvents({
      url: withQuery('/watch'),
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
    const watcher = this.watcher;
    this.watcher = null;
    if (watcher) watcher.close();
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
    this.received = 0;
    $('live-new').textContent = '';
    $('live-count').textContent = 'No events yet.';
    $('live-detail-json').textContent = 'Select an event to see all of it.';
    this.paused = false;
    $('live-pause').textContent = 'Pause';
  },

  status(status, detail = {}) {
    if (status === 'live') {
      setBadge('live', 'live');
      announce('Live: following new events.');
    } else if (status === 'connecting') {
      setBadge('connecting', 'connecting');
    } else if (status === 'reconnecting') {
      const seconds = Math.ceil((detail.retryInMs || 0) / 1000);
      setBadge('reconnecting', `reconnecting in ${seconds} s`);
      const why = detail.error ? ` (${detail.error.message})` : '';
      announce(`The stream was interrupted${why}; reconnecting in ${seconds} s.`);
    } else if (status === 'offline') {
      setBadge('offline', 'offline');
      const error = detail.error;
      if (error && error.status === 401) refused(error);
      else announce(`The live stream stopped: ${error ? error.message : 'closed'}.`);
    }
  },

  receive(event) {
    this.received += 1;
    if (!this.paused) {
      this.enqueue(event);
      return;
    }
    this.pending.push(event);
    if (this.pending.length > LIVE_LIMIT) this.pending.splice(0, this.pending.length - LIVE_LIMIT);
    this.newCount += 1;
    $('live-new').textContent = `${this.newCount.toLocaleString('en')} new`;
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
    const shown = list.childElementCount.toLocaleString('en');
    const received = count(this.received, 'event', 'events');
    $('live-count').textContent = `${received} received; showing the newest ${shown} (at most ${LIVE_LIMIT.toLocaleString('en')}).`;
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

  wire() {
    $('live-filter').addEventListener('submit', (event) => {
      event.preventDefault();
      this.restart();
    });
    $('live-pause').addEventListener('click', () => this.togglePause());
  },
};
