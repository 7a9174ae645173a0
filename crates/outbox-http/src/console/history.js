// The history view: GET /events page by page, newest first (`order=desc`, Next goes to
// older pages) or from a position (oldest first after it), filtered by types and subject.

import { api, withQuery } from './api.js';
import { $, announce, clear, eventRow, showJson } from './dom.js';
import { count, failureText, patterns } from './format.js';
import { Latest } from './refresh.js';

/** What each order calls its position field, its empty value and the pages that follow. */
const ORDERS = {
  desc: { label: 'Before position', empty: 'the newest', more: 'older events follow', end: 'the oldest event', list: 'Events, newest first' },
  asc: { label: 'After position', empty: 'the start', more: 'more follow', end: 'the end of the history', list: 'Events, oldest first' },
};

export const historyView = {
  loaded: false,
  /** The cursor each page shown so far was read from, the first page's first. */
  cursors: [],
  next: null,
  latest: new Latest(),

  order() {
    return $('history-order').value === 'asc' ? 'asc' : 'desc';
  },

  /** Names the position field after the chosen order. */
  describeOrder() {
    const words = ORDERS[this.order()];
    $('history-cursor-label').textContent = words.label;
    $('history-cursor').placeholder = words.empty;
    $('history-list').setAttribute('aria-label', words.list);
  },

  /** The first page of the form's query. */
  load() {
    const cursor = $('history-cursor').value.trim();
    this.cursors = [cursor];
    this.fetchPage();
  },

  /** Shows the view: its first page, unless one was read already. */
  show() {
    if (!this.loaded) this.load();
  },

  hide() {},

  /** Reads again when next shown (another tenant). */
  forget() {
    this.loaded = false;
    this.latest.cancel();
  },

  fetchPage() {
    const order = this.order();
    const params = {
      types: patterns($('history-types').value).join(','),
      subject: $('history-subject').value.trim(),
      limit: $('history-limit').value,
      cursor: this.cursors[this.cursors.length - 1],
      order: order === 'desc' ? 'desc' : '',
    };
    $('history-page').textContent = 'Loading…';
    this.latest.run({
      fetch: (signal) => api('GET', withQuery('/events', params), undefined, signal),
      render: (page) => {
        this.loaded = true;
        this.next = page.cursor || null;
        this.render(page.items, ORDERS[order]);
      },
      fail: (failure) => {
        $('history-page').textContent = `Could not read the history: ${failureText(failure)}`;
        announce(`Could not read the history: ${failureText(failure)}`);
      },
    });
  },

  render(items, words) {
    const list = $('history-list');
    clear(list);
    const rows = document.createDocumentFragment();
    for (const event of items) rows.append(eventRow(event, (selected) => showJson('history-detail-json', selected)));
    list.append(rows);
    const page = this.cursors.length;
    $('history-page').textContent = `Page ${page}: ${count(items.length, 'event', 'events')}, ${this.next ? words.more : words.end}.`;
    $('history-prev').disabled = page <= 1;
    $('history-next').disabled = !this.next;
    announce(`History page ${page} loaded.`);
  },

  nextPage() {
    if (!this.next) return;
    this.cursors.push(this.next);
    this.fetchPage();
  },

  previousPage() {
    if (this.cursors.length <= 1) return;
    this.cursors.pop();
    this.fetchPage();
  },

  wire() {
    $('history-form').addEventListener('submit', (event) => {
      event.preventDefault();
      this.load();
    });
    $('history-order').addEventListener('change', () => this.describeOrder());
    $('history-next').addEventListener('click', () => this.nextPage());
    $('history-prev').addEventListener('click', () => this.previousPage());
    this.describeOrder();
  },
};
