// The dead-letters view: a sink's (administrators) or a subscription's pending letters,
// each with details, replay and discard; "replay all" counts them, asks with the count,
// and replays them with one request to the bulk route.

import { allPages, api, can, session } from './api.js';
import { $, actionButton, announce, cell, clear, confirmed, el, keepingFocus, showJson } from './dom.js';
import { count, failureText, when } from './format.js';
import { Latest } from './refresh.js';

/** The route prefix of the chosen source (`sink:<id>` or `webhook:<id>`). */
function base() {
  const [kind, id] = $('dl-source').value.split(/:(.*)/s);
  return `/${kind === 'sink' ? 'sinks' : 'webhooks'}/${encodeURIComponent(id)}/dead-letters`;
}

/** The chosen source as the page names it. */
const sourceLabel = () => $('dl-source').selectedOptions[0].textContent;

/** Every pending letter of the chosen source. */
const pending = (signal) => allPages(base(), { params: { limit: 1000 }, tenanted: false, signal });

/** The sinks (for an administrator) and the subscriptions, as [value, label] choices. */
async function sources(signal) {
  const choices = [];
  if (session.grant.admin) {
    const sinks = await api('GET', '/sinks', undefined, signal);
    for (const sink of sinks.items) choices.push([`sink:${sink.id}`, `sink ${sink.id}`]);
  }
  if (can('webhooks:write')) {
    for (const hook of await subscriptions(signal)) choices.push([`webhook:${hook.id}`, `webhook ${hook.id} (${hook.url})`]);
  }
  return choices;
}

/** The subscriptions, none when the server runs no webhooks (503). */
async function subscriptions(signal) {
  try {
    return await allPages('/webhooks', { signal });
  } catch (failure) {
    if (failure.status === 503) return [];
    throw failure;
  }
}

function row(letter) {
  const button = (label, action, onClick, className) => actionButton(label, { key: `${action}:${letter.id}`, of: `letter ${letter.id}`, onClick, className });
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
      button('Replay', 'replay', () => deadLetters.replay(letter)),
      button('Discard', 'discard', () => deadLetters.discard(letter), 'danger'),
    )),
  );
}

function render(letters) {
  const body = $('dl-body');
  keepingFocus(body, () => {
    clear(body);
    for (const letter of letters) body.append(row(letter));
  });
  $('dl-summary').textContent = `${count(letters.length, 'pending dead letter', 'pending dead letters')} of ${sourceLabel()}.`;
  $('dl-replay-all').disabled = letters.length === 0;
}

/** What a bulk replay answered (`{replayed: [ids], refused: [{id, error}]}`), in words. */
function replayedText({ replayed, refused }) {
  const tried = replayed.length + refused.length;
  const again = refused.map((letter) => `${letter.id} (${letter.error})`).join(', ');
  return `Replayed ${replayed.length} of ${count(tried, 'dead letter', 'dead letters')}${again ? `; refused again: ${again}` : ''}.`;
}

export const deadLetters = {
  wanted: '',
  latest: new Latest(),

  /** Shows the dead letters of `source` (`sink:<id>` or `webhook:<id>`). */
  open(source) {
    this.wanted = source;
    location.hash = '#dead-letters';
  },

  /** Shows the view: the sources to choose from, then the chosen one's letters. */
  show() {
    this.latest.run({
      fetch: sources,
      render: (choices) => this.choose(choices),
      fail: (failure) => announce(`Could not read the sinks and subscriptions: ${failureText(failure)}`),
    });
  },

  hide() {
    this.latest.cancel();
  },

  choose(choices) {
    const select = $('dl-source');
    const keep = this.wanted || select.value;
    clear(select);
    for (const [value, label] of choices) select.append(el('option', { value }, label));
    if (choices.some(([value]) => value === keep)) select.value = keep;
    this.wanted = '';
    if (choices.length > 0) {
      this.load();
      return;
    }
    clear($('dl-body'));
    $('dl-summary').textContent = 'There is no sink or subscription to show.';
  },

  load() {
    if (!$('dl-source').value) return;
    this.latest.run({
      fetch: pending,
      render,
      fail: (failure) => {
        $('dl-summary').textContent = `Could not read the dead letters: ${failureText(failure)}`;
      },
    });
  },

  async replay(letter) {
    try {
      await api('POST', `${base()}/${letter.id}/replay`);
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
      await api('DELETE', `${base()}/${letter.id}`);
      announce(`Dead letter ${letter.id} discarded.`);
    } catch (failure) {
      announce(`Dead letter ${letter.id} was not discarded: ${failureText(failure)}`);
    }
    this.load();
  },

  /** Counts the pending letters, asks with that count, then replays them all in one request. */
  async replayAll() {
    let letters;
    try {
      letters = await pending();
    } catch (failure) {
      announce(`Could not read the dead letters: ${failureText(failure)}`);
      return;
    }
    const label = sourceLabel();
    if (letters.length === 0) {
      announce(`${label} has no pending dead letter.`);
      return;
    }
    const question = `Replay all ${count(letters.length, 'dead letter', 'dead letters')} of ${label}? Each is delivered again, oldest first, after the events that followed it.`;
    if (!(await confirmed(question))) return;
    announce(`Replaying ${count(letters.length, 'dead letter', 'dead letters')} of ${label}…`);
    try {
      announce(replayedText(await api('POST', `${base()}/replay`, {})));
    } catch (failure) {
      announce(`The dead letters of ${label} were not replayed: ${failureText(failure)}`);
    }
    this.load();
  },

  wire() {
    $('dl-source').addEventListener('change', () => this.load());
    $('dl-refresh').addEventListener('click', () => this.load());
    $('dl-replay-all').addEventListener('click', () => this.replayAll());
  },
};
