// The webhooks view: the tenant's subscriptions, refreshed a few seconds after each answer;
// create (the secret shown once), enable/disable, ping, rotate secret, attempts, delete.

import { allPages, api, withQuery } from './api.js';
import { deadLetters } from './dead-letters.js';
import { $, actionButton, announce, cell, clear, confirmed, el, keepingFocus } from './dom.js';
import { count, failureText, lagText, patterns, when } from './format.js';
import { Refresher } from './refresh.js';

const REASONS = { manual: 'disabled by hand', failing: 'disabled: failing', gone: 'disabled: the endpoint answered 410 Gone' };

function stateOf(hook) {
  if (hook.enabled) return { text: 'enabled', className: 'state-good' };
  let text = REASONS[hook.disabledReason] || 'disabled';
  if (hook.failingSince) text += ` since ${when(hook.failingSince)}`;
  return { text, className: 'state-bad' };
}

function lastAttemptText(attempt) {
  if (!attempt) return 'none yet';
  const status = attempt.status ? `HTTP ${attempt.status}` : 'no answer';
  return `${status} in ${attempt.durationMs} ms, ${when(attempt.time)}`;
}

/** The route of subscription `hook`, with `tail`. */
const route = (hook, tail = '') => `/webhooks/${encodeURIComponent(hook.id)}${tail}`;

function row(hook) {
  const state = stateOf(hook);
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
    cell(lagText(hook)),
    cell(lastAttemptText(hook.lastAttempt)),
    cell(actions(hook)),
  );
}

function actions(hook) {
  const button = (label, action, onClick, className) => actionButton(label, { key: `${action}:${hook.id}`, of: hook.id, onClick, className });
  return el(
    'div',
    { class: 'actions' },
    button(hook.enabled ? 'Disable' : 'Enable', 'toggle', () => toggle(hook)),
    button('Ping', 'ping', () => ping(hook)),
    button('Rotate secret', 'rotate', () => rotate(hook)),
    button('Attempts', 'attempts', () => attempts(hook)),
    button('Dead letters', 'letters', () => deadLetters.open(`webhook:${hook.id}`)),
    button('Delete', 'delete', () => remove(hook), 'danger'),
  );
}

function render(items) {
  const body = $('webhooks-body');
  keepingFocus(body, () => {
    clear(body);
    for (const hook of items) body.append(row(hook));
  });
  const none = items.length === 0 ? ' No subscription yet.' : '';
  $('webhooks-refreshed').textContent = `${count(items.length, 'subscription', 'subscriptions')}, refreshed at ${new Date().toLocaleTimeString()}.${none}`;
}

const refresher = new Refresher({
  fetch: (signal) => allPages('/webhooks', { signal }),
  render,
  fail: (failure) => {
    $('webhooks-refreshed').textContent = `Could not read the subscriptions: ${failureText(failure)}`;
  },
});

/** Calls the API for `what`, says the outcome, and reads the list again. */
async function change(what, call, done) {
  try {
    done(await call());
  } catch (failure) {
    announce(`${what}: ${failureText(failure)}`);
  }
  refresher.start();
}

async function create(form) {
  const body = { url: $('webhook-url').value.trim(), types: patterns($('webhook-types').value) };
  const description = $('webhook-description').value.trim();
  if (description) body.description = description;
  if (body.types.length === 0) delete body.types;
  await change('The subscription was not created', () => api('POST', withQuery('/webhooks'), body), (created) => {
    form.reset();
    showSecret(created, 'created');
  });
}

/** Shows a secret once, until the user says it is kept. */
function showSecret(hook, what) {
  $('secret-for').textContent = `The subscription ${hook.id} was ${what}. Its signing secret:`;
  $('secret-value').textContent = hook.secret;
  $('secret-panel').hidden = false;
  announce(`Subscription ${hook.id} ${what}. Its secret is shown once, below.`);
  $('secret-copy').focus();
}

function hideSecret() {
  $('secret-value').textContent = '';
  $('secret-for').textContent = '';
  $('secret-panel').hidden = true;
  $('webhook-url').focus();
}

async function copySecret() {
  try {
    await navigator.clipboard.writeText($('secret-value').textContent);
    announce('The secret was copied to the clipboard.');
  } catch {
    const range = document.createRange();
    range.selectNodeContents($('secret-value'));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    announce('Copying was refused by the browser: the secret is selected, copy it with the keyboard.');
  }
}

function toggle(hook) {
  const call = () => api('PATCH', route(hook), { enabled: !hook.enabled });
  return change(`Subscription ${hook.id} was not changed`, call, () => {
    announce(`Subscription ${hook.id} ${hook.enabled ? 'disabled' : 'enabled'}.`);
  });
}

function ping(hook) {
  announce(`Pinging ${hook.id}…`);
  return change(`Ping of ${hook.id} failed`, () => api('POST', route(hook, '/ping')), (outcome) => {
    const status = outcome.status ? `HTTP ${outcome.status}` : 'no answer';
    const error = outcome.error ? `: ${outcome.error}` : '';
    const verdict = outcome.delivered ? 'delivered' : 'not delivered';
    announce(`Ping of ${hook.id}: ${verdict}, ${status} in ${outcome.durationMs} ms${error}.`);
  });
}

async function rotate(hook) {
  const yes = await confirmed(`Rotate the secret of ${hook.id}? The old one keeps signing beside the new one for 24 hours.`);
  if (!yes) return;
  const call = () => api('POST', route(hook, '/rotate-secret'));
  await change(`The secret of ${hook.id} was not rotated`, call, (rotated) => showSecret(rotated, 'given a new secret'));
}

async function remove(hook) {
  const yes = await confirmed(`Delete ${hook.id} (${hook.url})? Its position, attempts and dead letters go with it.`);
  if (!yes) return;
  await change(`Subscription ${hook.id} was not deleted`, () => api('DELETE', route(hook)), () => {
    announce(`Subscription ${hook.id} deleted.`);
  });
}

async function attempts(hook) {
  let answer;
  try {
    answer = await api('GET', route(hook, '/attempts'));
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
  const shown = count(answer.items.length, 'attempt', 'attempts');
  $('attempts-title').textContent = `Attempts of ${hook.id} (${shown}, newest first)`;
  $('attempts-panel').hidden = false;
  announce(`${shown} of ${hook.id} shown.`);
}

export const webhooksView = {
  show: () => refresher.start(),
  hide: () => refresher.stop(),

  wire() {
    $('webhook-form').addEventListener('submit', (event) => {
      event.preventDefault();
      create(event.target);
    });
    $('secret-copy').addEventListener('click', copySecret);
    $('secret-done').addEventListener('click', hideSecret);
  },
};
