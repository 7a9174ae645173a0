// The Outbox console (SPEC §8.3), its entry: signing in, the views the token may see, and
// which one is shown. Each view is a module of its own (live, history, sinks, webhooks,
// dead-letters) on api.js (the API with the token) and dom.js (text-only elements). Plain
// DOM, no framework, no build step. The token lives in this tab's session storage and
// travels only in the Authorization header.

import { api, can, session, whenRefused } from './api.js';
import { deadLetters } from './dead-letters.js';
import { $, announce } from './dom.js';
import { failureText, when } from './format.js';
import { historyView } from './history.js';
import { live, setBadge } from './live.js';
import { sinksView } from './sinks.js';
import { webhooksView } from './webhooks.js';

const TOKEN_KEY = 'outbox.console.token';

/** Each view: its module and the scope the token needs to see it (`admin` holds every scope). */
const VIEWS = {
  live: { view: { show() {}, hide() {} }, scope: 'events:read' },
  history: { view: historyView, scope: 'events:read' },
  sinks: { view: sinksView, scope: 'admin' },
  webhooks: { view: webhooksView, scope: 'webhooks:write' },
  'dead-letters': { view: deadLetters, scope: 'webhooks:write' },
};

const allowed = (name) => can(VIEWS[name].scope);

/** Moves a `#token=` from the address into session storage and out of the address bar. */
function takeTokenFromAddress() {
  const match = /^#token=(.+)$/.exec(location.hash);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(null, '', `${location.pathname}${location.search}`);
}

/** Asks the server who `token` is (`GET /whoami`): what the page shows follows its answer. */
async function signIn(token) {
  session.token = token;
  $('sign-in-message').textContent = '';
  try {
    session.grant = await api('GET', '/whoami');
  } catch (failure) {
    // A 401 has already sent the page back to the form, saying why.
    if (failure.status !== 401) signOut(`Could not check the token: ${failureText(failure)}`);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  showSignedIn(session.grant);
}

function showSignedIn(grant) {
  $('sign-in-view').hidden = true;
  $('views').hidden = false;
  $('sign-out').hidden = false;
  $('tenant-form').hidden = !grant.admin;
  for (const link of document.querySelectorAll('.views a')) link.parentElement.hidden = !allowed(link.dataset.view);
  const expires = grant.expiresAt ? `; expires ${when(grant.expiresAt)}` : '';
  $('identity').textContent = `Signed in: tenant ${grant.tenantId}${grant.admin ? ', administrator' : ''}${expires}`;
  announce('Signed in.');
  if (allowed('live')) live.start();
  route();
}

/** Forgets the token and shows the sign-in form with `message`. */
function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  Object.assign(session, { token: '', grant: null, viewing: '' });
  live.stop();
  live.reset();
  historyView.forget();
  for (const [name, { view }] of Object.entries(VIEWS)) {
    view.hide();
    $(`${name}-view`).hidden = true;
  }
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

/** Shows the view the address names (the first the token may see by default). */
function route() {
  if (!session.grant) return;
  const names = Object.keys(VIEWS).filter(allowed);
  const wanted = location.hash.slice(1);
  const shown = names.includes(wanted) ? wanted : names[0];
  for (const [name, { view }] of Object.entries(VIEWS)) {
    const visible = name === shown;
    $(`${name}-view`).hidden = !visible;
    const link = document.querySelector(`.views a[data-view="${name}"]`);
    if (visible) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
    if (!visible) view.hide();
  }
  if (shown) VIEWS[shown].view.show();
  else announce('This token may see none of the views (it needs events:read, webhooks:write or admin).');
}

function switchTenant() {
  session.viewing = $('tenant-input').value.trim();
  announce(`Showing tenant ${session.viewing || session.grant.tenantId}.`);
  live.restart();
  historyView.forget();
  route();
}

function wire() {
  whenRefused((failure) => signOut(`The server refused this token: ${failure.message}. Sign in again.`));
  $('sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const token = $('token-input').value.trim();
    $('token-input').value = '';
    if (token) signIn(token);
  });
  $('sign-out').addEventListener('click', () => signOut('Signed out: the token is forgotten.'));
  $('tenant-form').addEventListener('submit', (event) => {
    event.preventDefault();
    switchTenant();
  });
  live.wire();
  historyView.wire();
  webhooksView.wire();
  deadLetters.wire();
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
