// The console's stream reader (`watch-events.js`) under `node --test`, fed the corpus of the
// Rust client's SSE fuzz target (`fuzz/corpus/sse`): for every entry, the frames it must
// give; that it gives the frames of a reader written here from the HTML standard's
// "interpreting an event stream"; and that they stay the same whatever the chunking (cut
// at every byte, one byte at a time) and whichever line ends (LF, CRLF, CR) the lines have.
// `cargo xtask ci` runs it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';

import { EventStreamReader, parseEventStream, watchEvents } from '../../src/console/watch-events.js';

const CORPUS = new URL('../../../../fuzz/corpus/sse/', import.meta.url);

const event = (data, { event: name = 'message', id = null } = {}) => ({ kind: 'event', event: name, id, data });
const retry = (ms) => ({ kind: 'retry', retry: ms });
const comment = (text) => ({ kind: 'comment', comment: text });

/** What each corpus entry must give, read whole. */
const EXPECTED = {
  'sse-blank-lines-only.txt': [],
  'sse-bom.txt': [event('x')],
  'sse-crlf.txt': [event('a\nb')],
  // One byte order mark is dropped; the second makes the field name unknown.
  'sse-double-bom.txt': [],
  'sse-empty-comment.txt': [comment('')],
  'sse-empty-event-name.txt': [event('x')],
  'sse-empty.txt': [],
  'sse-error-event.txt': [event('{"code":"ACCESS_DENIED","message":"revoked"}', { event: 'error' })],
  // Field names are exact: neither `DATA`, `Data` nor ` data` is `data`.
  'sse-field-case-and-space.txt': [],
  'sse-field-without-colon.txt': [event('')],
  'sse-id-per-block.txt': [event('x', { id: '1.1' }), event('y')],
  'sse-id-with-nul.txt': [event('x')],
  // Each invalid sequence is one U+FFFD (`\xe2\x82` is the start of a character cut short).
  'sse-invalid-utf8.txt': [event('\uFFFD\uFFFD\uFFFD\n\uFFFD')],
  'sse-keep-alive.txt': [comment('keep-alive 88213.51120')],
  'sse-lone-cr.txt': [event('a\nb')],
  'sse-long-line.txt': [event('x'.repeat(6000))],
  'sse-mixed-endings.txt': [event('a\nb\nc')],
  'sse-multiline-data.txt': [event('a\n\nb')],
  'sse-no-data.txt': [],
  'sse-nul-in-data.txt': [event('\0')],
  'sse-outbox-event.txt': [
    event('{"id":"evt_01","type":"reservation.active","sequence":"88213.51120","data":{"state":"active"}}', {
      event: 'reservation.active',
      id: '88213.51120',
    }),
  ],
  // `soon`, `1x`, an empty value and 2^64 are no delay; 2^64 - 1 is.
  'sse-retry-invalid-and-max.txt': [retry(Number('18446744073709551615'))],
  'sse-retry.txt': [retry(2000)],
  'sse-stream-of-three.txt': [
    retry(1000),
    event('1', { event: 'a.b', id: '1.1' }),
    event('2', { event: 'a.c', id: '1.2' }),
    comment('keep-alive 1.2'),
  ],
  'sse-two-spaces.txt': [event(' two spaces')],
  'sse-unfinished-block.txt': [],
  'sse-unfinished-line.txt': [],
  'sse-unicode.txt': [event('café € 😀')],
  'sse-unknown-field.txt': [event('x')],
};

const corpus = readdirSync(CORPUS)
  .sort()
  .map((name) => ({ name, bytes: new Uint8Array(readFileSync(new URL(name, CORPUS))) }));

/** The standard's algorithm over the whole stream at once (the Rust fuzz target's reference). */
function reference(bytes) {
  let text = new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);
  if (text.startsWith('\uFEFF')) text = text.slice(1);
  const frames = [];
  let block = { event: '', data: '', id: null };
  for (let end = text.search(/[\r\n]/); end !== -1; end = text.search(/[\r\n]/)) {
    const line = text.slice(0, end);
    text = text.slice(text.startsWith('\r\n', end) ? end + 2 : end + 1);
    if (line === '') {
      if (block.data !== '') frames.push(event(block.data.slice(0, -1), { event: block.event || 'message', id: block.id }));
      block = { event: '', data: '', id: null };
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === '') frames.push(comment(value));
    else if (field === 'event') block.event = value;
    else if (field === 'data') block.data += `${value}\n`;
    else if (field === 'id' && !value.includes('\0')) block.id = value;
    else if (field === 'retry' && /^[0-9]+$/.test(value) && BigInt(value) < 2n ** 64n) frames.push(retry(Number(value)));
  }
  return frames;
}

/** `bytes` cut at every place in `places`. */
function cut(bytes, places) {
  const chunks = [];
  let start = 0;
  for (const place of places) {
    chunks.push(bytes.subarray(start, place));
    start = place;
  }
  chunks.push(bytes.subarray(start));
  return chunks;
}

/** `bytes` with every line end (CRLF, CR or LF) written as `ending`; the unfinished tail kept. */
function reterminated(bytes, ending) {
  const text = Buffer.from(bytes).toString('latin1');
  const lines = text.split(/\r\n|\r|\n/);
  const tail = lines.pop();
  // Two lines ended by CR then LF would read as one CRLF: write CR there instead.
  let out = '';
  for (const line of lines) {
    const end = ending === '\n' && out.endsWith('\r') && line === '' ? '\r' : ending;
    out += line + end;
  }
  return new Uint8Array(Buffer.from(out + tail, 'latin1'));
}

test('every corpus entry has the frames it must give', () => {
  assert.deepEqual(corpus.map(({ name }) => name), Object.keys(EXPECTED).sort(), 'one expectation per corpus entry');
  for (const { name, bytes } of corpus) {
    assert.deepEqual(parseEventStream([bytes]), EXPECTED[name], name);
  }
});

test('the reader gives what the standard says', () => {
  for (const { name, bytes } of corpus) {
    assert.deepEqual(parseEventStream([bytes]), reference(bytes), name);
  }
});

test('the frames are the same whatever the chunking', () => {
  for (const { name, bytes } of corpus) {
    const whole = parseEventStream([bytes]);
    const everyByte = Array.from({ length: bytes.length + 1 }, (_, i) => i);
    assert.deepEqual(parseEventStream(cut(bytes, everyByte)), whole, `${name}, one byte at a time`);
    for (let place = 0; place <= bytes.length; place += 1) {
      assert.deepEqual(parseEventStream(cut(bytes, [place])), whole, `${name} cut at byte ${place}`);
    }
  }
});

test('the frames are the same with LF, CRLF or CR line ends', () => {
  for (const { name, bytes } of corpus) {
    const whole = parseEventStream([bytes]);
    for (const ending of ['\n', '\r\n', '\r']) {
      const other = reterminated(bytes, ending);
      assert.deepEqual(parseEventStream([other]), whole, `${name} with ${JSON.stringify(ending)}`);
      const oneByOne = Array.from({ length: other.length + 1 }, (_, i) => i);
      assert.deepEqual(parseEventStream(cut(other, oneByOne)), whole, `${name} with ${JSON.stringify(ending)}, bytewise`);
    }
  }
});

test('a CRLF split between two chunks is one line end, a CR at the end of a chunk is one too', () => {
  const reader = new EventStreamReader();
  const bytes = (text) => new TextEncoder().encode(text);
  assert.deepEqual(reader.push(bytes('data: a\r')), []);
  assert.deepEqual(reader.push(bytes('\n')), [], 'the LF completes the CRLF, no empty line');
  assert.deepEqual(reader.push(bytes('\r')), [event('a')], 'the CR ends the empty line at once');
  assert.deepEqual(reader.push(bytes('')), []);
  assert.deepEqual(reader.push(bytes('\ndata: b\n\n')), [event('b')], 'an LF after an empty chunk still completes the CRLF');
});

/** A fetch that answers once with `chunks` as a text/event-stream body, then never again. */
function answering(chunks) {
  let calls = 0;
  return async (url, init) => {
    calls += 1;
    if (calls > 1) return new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(new Error('aborted'))));
    const body = new ReadableStream({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    });
    return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
  };
}

test('watchEvents hands out the events, follows ids and keep-alives, and takes the retry', async () => {
  const { bytes } = corpus.find(({ name }) => name === 'sse-stream-of-three.txt');
  const events = [];
  const statuses = [];
  await new Promise((resolve) => {
    const watcher = watchEvents({
      url: 'http://outbox.test/watch',
      fetch: answering(cut(bytes, Array.from({ length: bytes.length + 1 }, (_, i) => i))),
      onEvent: (value, frame) => events.push([value, frame, watcher.lastEventId]),
      onStatus: (status, detail) => {
        statuses.push([status, detail]);
        if (status === 'reconnecting') {
          assert.equal(watcher.lastEventId, '1.2', 'the keep-alive position');
          watcher.close();
          resolve();
        }
      },
    });
  });
  assert.deepEqual(events, [
    [1, { id: '1.1', type: 'a.b' }, '1.1'],
    [2, { id: '1.2', type: 'a.c' }, '1.2'],
  ]);
  assert.deepEqual(statuses, [['connecting', undefined], ['live', undefined], ['reconnecting', { retryInMs: 1000 }], ['closed', undefined]]);
});

test('watchEvents goes offline, not retrying, when the stream is revoked', async () => {
  const { bytes } = corpus.find(({ name }) => name === 'sse-error-event.txt');
  const detail = await new Promise((resolve) => {
    watchEvents({
      url: 'http://outbox.test/watch',
      fetch: answering([bytes]),
      onEvent: () => assert.fail('no event'),
      onStatus: (status, detail) => {
        if (status === 'offline') resolve(detail);
      },
    });
  });
  assert.deepEqual(detail, { error: { code: 'ACCESS_DENIED', message: 'revoked' } });
});
