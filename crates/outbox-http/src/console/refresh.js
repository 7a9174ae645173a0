// Reading the API for a view without overlapping and without a stale answer: `Latest`
// keeps one request per purpose (a newer one aborts the older, whose answer is then never
// shown, e.g. after a tenant switch); `Refresher` reads again a few seconds after each
// answer (never on a fixed beat, so a slow answer cannot pile up behind another) and not
// at all while the page is hidden, reading at once when it is shown again. No DOM but
// the page's visibility, so that Node's test runner can drive it with a stand-in.

/** How long after an answer a refreshed view reads again. */
export const REFRESH_MS = 5000;

/** The latest of a series of requests: starting one aborts the one before. */
export class Latest {
  constructor() {
    this.controller = null;
  }

  /** Aborts the request in flight, if any. */
  cancel() {
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  /**
   * Runs `fetch(signal)`, then `render(answer)` or `fail(failure)`, unless a newer run or
   * `cancel()` came first: then nothing is shown. Resolves to whether it was still the latest.
   */
  async run({ fetch, render, fail }) {
    this.cancel();
    const controller = new AbortController();
    this.controller = controller;
    const { signal } = controller;
    let answer;
    try {
      answer = await fetch(signal);
    } catch (failure) {
      if (signal.aborted) return false;
      fail(failure);
      return true;
    }
    if (signal.aborted) return false;
    render(answer);
    return true;
  }
}

/** A view's data read now, then again `everyMs` after each answer, while the page is shown. */
export class Refresher {
  /**
   * @param {{fetch: (signal: AbortSignal) => Promise<any>, render: (answer: any) => void,
   *   fail: (failure: Error) => void}} steps
   * @param {{everyMs?: number, page?: EventTarget & {hidden: boolean}}} options
   */
  constructor(steps, { everyMs = REFRESH_MS, page = globalThis.document } = {}) {
    this.steps = steps;
    this.everyMs = everyMs;
    this.page = page;
    this.latest = new Latest();
    this.running = false;
    this.inFlight = false;
    this.timer = null;
    this.onVisibility = () => this.visibilityChanged();
  }

  /** Reads now (a read in flight is aborted) and keeps refreshing until `stop()`. */
  start() {
    this.stop();
    this.running = true;
    this.page.addEventListener('visibilitychange', this.onVisibility);
    this.tick();
  }

  /** Stops refreshing; an answer still on its way is not shown. */
  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = null;
    this.latest.cancel();
    this.inFlight = false;
    this.page.removeEventListener('visibilitychange', this.onVisibility);
  }

  async tick() {
    this.timer = null;
    if (!this.running || this.page.hidden) return; // shown again: visibilityChanged reads
    this.inFlight = true;
    const current = await this.latest.run(this.steps);
    if (!current || !this.running) return; // stopped or started again meanwhile
    this.inFlight = false;
    this.timer = setTimeout(() => this.tick(), this.everyMs);
  }

  visibilityChanged() {
    if (!this.running || this.page.hidden || this.inFlight) return;
    clearTimeout(this.timer);
    this.tick();
  }
}
