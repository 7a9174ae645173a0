// The console's refreshing (`refresh.js`) and its words (`format.js`) under `node --test`:
// a refresh never overlaps itself, a stale answer never overwrites a newer one, nothing is
// read while the page is hidden and a read follows at once when it is shown. Timers are
// Node's mock timers, moved by hand: nothing here waits on the clock.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Latest, REFRESH_MS, Refresher } from '../../src/console/refresh.js';
import { count, lagText, patterns } from '../../src/console/format.js';

/** A stand-in for `document`: its visibility and the event that says it changed. */
class Page extends EventTarget {
  constructor() {
    super();
    this.hidden = false;
  }

  show(visible) {
    this.hidden = !visible;
    this.dispatchEvent(new Event('visibilitychange'));
  }
}

/** A fetch whose answers the test gives by hand, one per call, remembering each call's signal. */
function answeredByHand() {
  const calls = [];
  const fetch = (signal) =>
    new Promise((resolve, reject) => {
      calls.push({ signal, resolve });
      signal.addEventListener('abort', () => reject(new Error('aborted')));
    });
  return { calls, fetch };
}

/** Lets the promise callbacks run (an answer reaches render, the next timer is set). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

function refresher(t) {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const page = new Page();
  const { calls, fetch } = answeredByHand();
  const shown = [];
  const failed = [];
  const refresh = new Refresher({ fetch, render: (answer) => shown.push(answer), fail: (e) => failed.push(e) }, { page });
  return { page, calls, shown, failed, refresh, tick: (ms) => t.mock.timers.tick(ms) };
}

test('the next read is scheduled only after the answer, never on a beat', async (t) => {
  const { calls, shown, refresh, tick } = refresher(t);
  refresh.start();
  assert.equal(calls.length, 1, 'read at once');
  tick(REFRESH_MS * 10);
  await settle();
  assert.equal(calls.length, 1, 'a slow answer is not overlapped');
  calls[0].resolve('first');
  await settle();
  assert.deepEqual(shown, ['first']);
  tick(REFRESH_MS - 1);
  assert.equal(calls.length, 1);
  tick(1);
  assert.equal(calls.length, 2, 'read again REFRESH_MS after the answer');
  refresh.stop();
});

test('an answer overtaken by a newer read is never shown', async (t) => {
  const { calls, shown, refresh } = refresher(t);
  refresh.start();
  refresh.start(); // e.g. another tenant chosen while the first read is on its way
  assert.equal(calls.length, 2);
  assert.equal(calls[0].signal.aborted, true, 'the older read is aborted');
  calls[1].resolve('newer');
  calls[0].resolve('stale');
  await settle();
  assert.deepEqual(shown, ['newer']);
  refresh.stop();
});

test('stopped, an answer on its way is not shown and nothing more is read', async (t) => {
  const { calls, shown, failed, refresh, tick } = refresher(t);
  refresh.start();
  refresh.stop();
  calls[0].resolve('late');
  await settle();
  tick(REFRESH_MS * 3);
  await settle();
  assert.deepEqual(shown, []);
  assert.deepEqual(failed, [], 'an abort is no failure to show');
  assert.equal(calls.length, 1);
});

test('hidden, nothing is read; shown again, a read follows at once', async (t) => {
  const { page, calls, shown, refresh, tick } = refresher(t);
  refresh.start();
  calls[0].resolve(1);
  await settle();
  page.show(false);
  tick(REFRESH_MS * 10);
  await settle();
  assert.equal(calls.length, 1, 'no read while hidden');
  page.show(true);
  assert.equal(calls.length, 2, 'read as soon as shown');
  page.show(false);
  page.show(true);
  assert.equal(calls.length, 2, 'shown again while a read is on its way: no second read');
  calls[1].resolve(2);
  await settle();
  assert.deepEqual(shown, [1, 2]);
  refresh.stop();
  page.show(false);
  page.show(true);
  assert.equal(calls.length, 2, 'stopped: being shown reads nothing');
});

test('a failure of the latest read is shown', async () => {
  const latest = new Latest();
  const failures = [];
  const steps = (answer) => ({
    fetch: () => (answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer)),
    render: () => {},
    fail: (failure) => failures.push(failure.message),
  });
  assert.equal(await latest.run(steps(new Error('refused'))), true);
  assert.deepEqual(failures, ['refused']);
});

test('a lag is "at least" only when the server says it stopped counting', () => {
  assert.equal(lagText({ lag: 1000000, lagCapped: true }), 'at least 1,000,000');
  assert.equal(lagText({ lag: 10000 }), '10,000');
  assert.equal(lagText({ lag: 1234567, lagCapped: false }), '1,234,567');
  assert.equal(lagText({ lag: 0 }), '0');
});

test('counts and patterns read as the page shows them', () => {
  assert.equal(count(1, 'dead letter', 'dead letters'), '1 dead letter');
  assert.equal(count(1000, 'event', 'events'), '1,000 events');
  assert.deepEqual(patterns(' node.*, ,reservation.active '), ['node.*', 'reservation.active']);
});
