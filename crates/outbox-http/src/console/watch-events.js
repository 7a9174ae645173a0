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
    const parser = new FrameParser();
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { failed: false };
      for (const frame of parser.push(value)) {
        if (this.closed) return { failed: false };
        const outcome = this.handle(frame);
        if (outcome) {
          reader.cancel().catch(() => {});
          return outcome;
        }
      }
    }
  }

  /** One parsed frame: an event, an error, a `retry:` or a keep-alive comment. */
  handle(frame) {
    if (frame.retry !== undefined) this.retryMs = frame.retry;
    if (frame.comment !== undefined) {
      const position = /^keep-alive (\d+\.\d+)$/.exec(frame.comment);
      // The keep-alive position says the stream gave everything up to it: resume there.
      if (position && position[1]) this.lastEventId = position[1];
      this.opened();
      return null;
    }
    if (frame.data === undefined) return null;
    if (frame.event === 'error') return streamError(frame.data);
    if (frame.id) this.lastEventId = frame.id;
    this.opened();
    let event;
    try {
      event = JSON.parse(frame.data);
    } catch {
      return null;
    }
    this.options.onEvent(event, { id: frame.id || '', type: frame.event || 'message' });
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

/** The text/event-stream format, fed text as it arrives, handing back complete frames. */
export class FrameParser {
  constructor() {
    this.buffer = '';
    this.frame = {};
  }

  /** Frames completed by `text`; a frame is {id?, event?, data?, retry?, comment?}. */
  push(text) {
    this.buffer += text;
    const frames = [];
    let start = 0;
    for (;;) {
      const end = lineEnd(this.buffer, start);
      if (end === -1) break;
      const line = this.buffer.slice(start, end);
      start = end + (this.buffer[end] === '\r' && this.buffer[end + 1] === '\n' ? 2 : 1);
      const frame = this.line(line);
      if (frame) frames.push(frame);
    }
    this.buffer = this.buffer.slice(start);
    return frames;
  }

  line(line) {
    if (line === '') {
      const frame = this.frame;
      this.frame = {};
      return Object.keys(frame).length ? frame : null;
    }
    if (line[0] === ':') {
      return { comment: line.slice(1).trimStart() };
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') this.frame.data = this.frame.data === undefined ? value : `${this.frame.data}\n${value}`;
    else if (field === 'event') this.frame.event = value;
    else if (field === 'id' && !value.includes('\0')) this.frame.id = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.frame.retry = Number(value);
    return null;
  }
}

/** Where the line starting at `start` ends (a CR, an LF or a CRLF), or -1 when it has not yet. */
function lineEnd(text, start) {
  for (let i = start; i < text.length; i += 1) {
    const c = text[i];
    if (c === '\n') return i;
    if (c === '\r') return i + 1 < text.length ? i : -1; // a CRLF may be split
  }
  return -1;
}
