// The sinks view (administrators): each configured sink's state, position, lag, last
// error, lease holder and dead letters, refreshed a few seconds after each answer.

import { api } from './api.js';
import { deadLetters } from './dead-letters.js';
import { $, cell, clear, el, keepingFocus } from './dom.js';
import { count, failureText, lagText, when } from './format.js';
import { Refresher } from './refresh.js';

const STATES = {
  idle: ['idle (caught up)', 'state-good'],
  delivering: ['delivering', 'state-good'],
  backingOff: ['backing off', 'state-warn'],
  notRunning: ['not running (no process holds its lease)', 'state-bad'],
};

function row(sink) {
  const [named, stateClass] = STATES[sink.state] || [sink.state, 'state-bad'];
  const state = sink.backingOffUntil ? `${named} until ${when(sink.backingOffUntil)}` : named;
  const error = sink.lastError ? `${sink.lastError} (${when(sink.lastErrorAt)})` : 'none';
  const letters = el('button', { type: 'button', 'data-key': `dl:${sink.id}` }, count(sink.deadLetters, 'dead letter', 'dead letters'));
  letters.addEventListener('click', () => deadLetters.open(`sink:${sink.id}`));
  return el(
    'tr',
    {},
    el('th', { scope: 'row' }, sink.id),
    cell(state, stateClass),
    cell(sink.position || 'not started', 'mono'),
    cell(lagText(sink)),
    cell(error),
    cell(sink.leaseHolder || 'nobody'),
    cell(letters),
  );
}

function render(answer) {
  const body = $('sinks-body');
  keepingFocus(body, () => {
    clear(body);
    for (const sink of answer.items) body.append(row(sink));
  });
  const none = answer.items.length === 0 ? ' No sink is configured ([[sinks]]).' : '';
  $('sinks-refreshed').textContent = `Refreshed at ${new Date().toLocaleTimeString()}.${none}`;
}

const refresher = new Refresher({
  fetch: (signal) => api('GET', '/sinks', undefined, signal),
  render,
  fail: (failure) => {
    $('sinks-refreshed').textContent = `Could not read the sinks: ${failureText(failure)}`;
  },
});

export const sinksView = {
  show: () => refresher.start(),
  hide: () => refresher.stop(),
};
