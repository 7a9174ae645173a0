// Words and numbers as the console shows them. Pure functions (no DOM), so that Node's
// test runner can import them too.

/** One formatter for every time shown (making one per call is slow at 1,000 events a second). */
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });

/** An RFC 3339 time as the reader's locale writes it; text that is no time, as it is. */
export function when(text) {
  if (!text) return '';
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? String(text) : TIME_FORMAT.format(date);
}

/** `n` and the noun that goes with it: `1 event`, `1,000 events`. */
export function count(n, one, many) {
  return `${n.toLocaleString('en')} ${n === 1 ? one : many}`;
}

/** The comma-separated patterns of a filter field. */
export function patterns(text) {
  return text.split(',').map((part) => part.trim()).filter(Boolean);
}

/**
 * A sink's or a subscription's lag: the number, or "at least" it when the server stopped
 * counting at its cap (`lagCapped`).
 */
export function lagText(item) {
  const lag = Number(item.lag).toLocaleString('en');
  return item.lagCapped === true ? `at least ${lag}` : lag;
}

/** An API refusal in words: its code and message. */
export function failureText(failure) {
  return failure.code ? `${failure.code}: ${failure.message}` : failure.message;
}
