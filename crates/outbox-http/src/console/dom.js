// Element helpers. Every string from the server goes in as text (a text node or
// textContent), never as markup: nothing here parses HTML.

import { when } from './format.js';

/** The element with id `id`. */
export const $ = (id) => document.getElementById(id);

/** An element with `attributes` (properties when the name is one) and text or element children. */
export function el(tag, attributes = {}, ...children) {
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

/** Removes every child of `node`. */
export function clear(node) {
  node.replaceChildren();
}

/** Says `message` once in the polite status region. */
export function announce(message) {
  $('status').textContent = message;
}

/** A table cell: text, or an element. */
export function cell(content, className) {
  return el('td', { class: className }, content);
}

/** A button named `label` (`aria-label` says of what), found again by `key` after a re-render. */
export function actionButton(label, { key, of, onClick, className }) {
  const node = el('button', { type: 'button', class: className, 'data-key': key, 'aria-label': `${label} ${of}` }, label);
  node.addEventListener('click', onClick);
  return node;
}

/** Keeps keyboard focus on "the same" button across a table's re-render. */
export function keepingFocus(body, render) {
  const focused = document.activeElement;
  const key = focused && body.contains(focused) ? focused.dataset.key : null;
  render();
  if (key) {
    const again = body.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

/** Shows `value` as indented JSON in the element `id`. */
export function showJson(id, value) {
  $(id).textContent = JSON.stringify(value, null, 2);
}

/** The list row of one event: a button that selects it. */
export function eventRow(event, onSelect) {
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

/** Asks `question` in a modal dialog; resolves to whether the user confirmed. */
export function confirmed(question) {
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
