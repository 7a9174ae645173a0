// watchEvents: follow an Outbox live stream (GET /watch) from a browser or any runtime
// with fetch and streams. Unlike EventSource it sends headers (the bearer token travels
// in Authorization, never in the URL), keeps its position, reconnects by itself with
// Last-Event-ID after the server's `retry:` delay, and backs off, doubling up to 60 s,
// after failures. No dependency, no build step: import it as it is.
//
//   import { watchEvents } from '/console/watch-events.js';
//   const watcher = watchEvents({
//     url: '/watch',
//     types: ['reservation.*'],
//     lastEventId: saved,                                   // optional: resume from here
//     headers: () => ({ authorization: `Bearer ${token}` }), // asked again per connection
//     onEvent: (event) => { handle(event); saved = watcher.lastEventId; },
//     onStatus: (status, detail) => show(status, detail),
//   });
//   watcher.close();
//
// Statuses: 'connecting' (first attempt), 'live' (the stream is open and has said where it
// starts), 'reconnecting' (detail: {retryInMs, error?}; waiting, then trying again),
// 'offline' (detail: {error}; refused, not retried: a 4xx answer or a revoked stream),
// 'closed' (after close()). An error is {status?, code?, message}.

/** The longest wait between two attempts. */
export const MAX_BACKOFF_MS = 60_000;

/** The wait before reconnecting when the server named none. */
const DEFAULT_RETRY_MS = 2_000;

/**
 * Follows `url` until `close()` is called or the server refuses the request.
 * @param {{url: string, types?: string[], lastEventId?: string,
 *   headers?: object | (() => object | Promise<object>),
 *   onEvent: (event: object, frame: {id: string, type: string}) => void,
 *   onStatus?: (status: string, detail?: object) => void,
 *   maxBackoffMs?: number, fetch?: typeof fetch}} options
 */
export function watchEvents(options) {
  const watcher = new Watcher(options);
  watcher.start();
  return watcher;
}

class Watcher {
  constructor(options) {
    if (!options || typeof options.url !== 'string') throw new TypeError('watchEvents: url is required');
    if (typeof options.onEvent !== 'function') throw new TypeError('watchEvents: onEvent is required');
    this.options = options;
    this.lastEventId = options.lastEventId || '';
    this.retryMs = DEFAULT_RETRY_MS;
    this.failures = 0;
    this.closed = false;
    this.abort = null;
    this.timer = null;
    this.status = '';
  }

  /** Stops following: the open request is aborted and no reconnection follows. */
  close() {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    if (this.abort) this.abort.abort();
    this.report('closed');
  }

  /** Starts after the caller has the watcher: no callback runs before watchEvents returns. */
  start() {
    queueMicrotask(() => {
      if (this.closed) return;
      this.report('connecting');
      this.connect();
    });
  }

  report(status, detail) {
    this.status = status;
    if (this.options.onStatus) this.options.onStatus(status, detail);
  }

  async connect() {
    if (this.closed) return;
    this.abort = new AbortController();
    let response;
    try {
      response = await this.request(this.abort.signal);
    } catch (error) {
      if (!this.closed) this.retry(true, { message: describe(error) });
      return;
    }
    if (!response.ok) {
      const error = await readError(response);
      if (retryable(response.status)) this.retry(true, error);
      else this.stop(error);
      return;
    }
    let outcome;
    try {
      outcome = await this.read(response.body);
    } catch (error) {
      outcome = { failed: true, error: { message: describe(error) } };
    }
    if (this.closed) return;
    if (outcome.refused) this.stop(outcome.error);
    else this.retry(outcome.failed, outcome.error);
  }

  async request(signal) {
    const headers = new Headers(await resolveHeaders(this.options.headers));
    headers.set('accept', 'text/event-stream');
    if (this.lastEventId) headers.set('last-event-id', this.lastEventId);
    const fetcher = this.options.fetch || globalThis.fetch.bind(globalThis);
    return fetcher(streamUrl(this.options.url, this.options.types), { headers, signal, cache: 'no-store' });
  }

  /** Reads frames until the body ends; says whether it ended in a failure or a refusal. */
  async read(body) {
    const stream = new EventStreamReader();
    const reader = body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { failed: false };
      for (const frame of stream.push(value)) {
        if (this.closed) return { failed: false };
        const outcome = this.handle(frame);
        if (outcome) {
          reader.cancel().catch(() => {});
          return outcome;
        }
      }
    }
  }

  /** One frame: an event, an error, a `retry:` or a keep-alive comment. */
  handle(frame) {
    if (frame.kind === 'retry') {
      this.retryMs = frame.retry;
      return null;
    }
    if (frame.kind === 'comment') {
      const position = /^keep-alive (\d+\.\d+)$/.exec(frame.comment);
      // The keep-alive position says the stream gave everything up to it: resume there.
      if (position) this.lastEventId = position[1];
      this.opened();
      return null;
    }
    if (frame.event === 'error') return streamError(frame.data);
    if (frame.id !== null) this.lastEventId = frame.id;
    this.opened();
    let event;
    try {
      event = JSON.parse(frame.data);
    } catch {
      return null;
    }
    this.options.onEvent(event, { id: frame.id || '', type: frame.event });
    return null;
  }

  opened() {
    if (this.status === 'live') return;
    this.failures = 0;
    this.report('live');
  }

  /** Waits, then connects again: the server's delay after a clean end, doubling after failures. */
  retry(failed, error) {
    if (this.closed) return;
    this.failures = failed ? this.failures + 1 : 0;
    const cap = this.options.maxBackoffMs || MAX_BACKOFF_MS;
    const wait = Math.min(cap, this.retryMs * 2 ** Math.max(0, this.failures - 1));
    this.report('reconnecting', error ? { retryInMs: wait, error } : { retryInMs: wait });
    this.timer = setTimeout(() => this.connect(), wait);
  }

  stop(error) {
    if (this.closed) return;
    this.closed = true;
    this.report('offline', { error });
  }
}

/** `url` with `types` as its `types` query parameter. */
function streamUrl(url, types) {
  if (!types || types.length === 0) return url;
  const base = typeof location === 'object' ? location.href : 'http://localhost/';
  const full = new URL(url, base);
  full.searchParams.set('types', types.join(','));
  return full.origin === new URL(base).origin ? full.pathname + full.search : full.href;
}

async function resolveHeaders(headers) {
  if (typeof headers === 'function') return (await headers()) || {};
  return headers || {};
}

/** 408, 429 and 5xx are worth another try; any other refusal is final. */
function retryable(status) {
  return status === 408 || status === 429 || status >= 500;
}

async function readError(response) {
  try {
    const body = await response.json();
    if (body && body.error) return { status: response.status, code: body.error.code, message: body.error.message };
  } catch {
    // Not the JSON refusal: say the status alone.
  }
  return { status: response.status, message: `the server answered ${response.status}` };
}

/** `event: error`: a revocation ends the stream for good; anything else is retried. */
function streamError(data) {
  let error = { message: data };
  try {
    const parsed = JSON.parse(data);
    error = { code: parsed.code, message: parsed.message || data };
  } catch {
    // A plain message.
  }
  return error.code === 'ACCESS_DENIED' ? { refused: true, error } : { failed: true, error };
}

function describe(error) {
  return error && error.message ? error.message : String(error);
}

/** The largest `retry:` the standard's reader accepts (a 64-bit count of milliseconds). */
const MAX_RETRY = 18446744073709551615n;

/**
 * The frames of a whole `text/event-stream` given as byte chunks (Uint8Array), as one
 * reader fed them in order hands them out: a pure function, for tests and for callers
 * that hold a stream's bytes. What follows the last line end is not a line yet.
 * @param {Iterable<Uint8Array>} chunks
 * @returns {Array<object>} frames, as {@link EventStreamReader#push} describes them
 */
export function parseEventStream(chunks) {
  const reader = new EventStreamReader();
  const frames = [];
  for (const chunk of chunks) frames.push(...reader.push(chunk));
  return frames;
}

/**
 * The `text/event-stream` format (HTML §9.2.6), fed bytes as they arrive, handing back
 * complete frames. The bytes are decoded as UTF-8 (one leading byte order mark dropped,
 * bytes that are no UTF-8 replaced by U+FFFD), lines end at CRLF, LF or CR (a CRLF split
 * between two chunks is one line end), and, as in the Rust client, an `id:` belongs to
 * its own block only.
 */
export class EventStreamReader {
  constructor() {
    this.decoder = new TextDecoder();
    this.partial = '';
    this.afterCr = false;
    this.block = { event: '', data: null, id: null };
  }

  /**
   * Frames completed by `bytes`: `{kind: 'event', event, id, data}` for a block with data
   * (`event` is `message` when the block named none; `id` is null when it set none),
   * `{kind: 'retry', retry}` for a valid `retry:` line, `{kind: 'comment', comment}` for a
   * line starting with a colon (its text without the colon and one leading space).
   * @param {Uint8Array} bytes
   */
  push(bytes) {
    let text = this.decoder.decode(bytes, { stream: true });
    const frames = [];
    if (this.afterCr && text !== '') {
      this.afterCr = false;
      if (text[0] === '\n') text = text.slice(1);
    }
    const ends = /\r\n|\r|\n/g;
    let start = 0;
    for (let match = ends.exec(text); match; match = ends.exec(text)) {
      // A CR at the end of the chunk may be the first half of a CRLF.
      if (match[0] === '\r' && match.index === text.length - 1) this.afterCr = true;
      this.line(this.partial + text.slice(start, match.index), frames);
      this.partial = '';
      start = ends.lastIndex;
    }
    this.partial += text.slice(start);
    return frames;
  }

  line(line, frames) {
    if (line === '') {
      this.dispatch(frames);
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    const block = this.block;
    if (field === '') frames.push({ kind: 'comment', comment: value });
    else if (field === 'data') block.data = block.data === null ? value : `${block.data}\n${value}`;
    else if (field === 'event') block.event = value;
    else if (field === 'id' && !value.includes('\0')) block.id = value;
    else if (field === 'retry' && /^\d+$/.test(value) && BigInt(value) <= MAX_RETRY) {
      frames.push({ kind: 'retry', retry: Number(value) });
    }
  }

  /** The end of a block: an event when it had data; either way the block starts again. */
  dispatch(frames) {
    const { event, data, id } = this.block;
    this.block = { event: '', data: null, id: null };
    if (data !== null) frames.push({ kind: 'event', event: event || 'message', id, data });
  }
}
