// The console's one way to the API: `fetch` with the session's token in the Authorization
// header (never in a URL), answers read as JSON, refusals turned into ApiFailure.

/**
 * Who is signed in: the token, the grant `GET /whoami` described (`{tenantId, scopes,
 * admin, expiresAt?, identityId?}`) and the tenant an administrator chose to view ('' for
 * the token's own).
 */
export const session = { token: '', grant: null, viewing: '' };

/** Whether the grant holds `scope` (`admin` holds every scope). */
export function can(scope) {
  const grant = session.grant;
  return !!grant && (grant.admin === true || grant.scopes.includes(scope));
}

let onRefused = () => {};

/** Calls `handler(failure)` whenever the server refuses the session's token (401). */
export function whenRefused(handler) {
  onRefused = handler;
}

/** Says the token was refused, as an API call does on a 401. */
export function refused(failure) {
  onRefused(failure);
}

/** A failure of an API call: the HTTP status (0 when none came), the refusal's code and message. */
export class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * Calls the API with the session's token; the JSON answer, or an ApiFailure. `signal`
 * aborts the call (then the failure's code is `ABORTED`).
 */
export async function api(method, path, body, signal) {
  const headers = { authorization: `Bearer ${session.token}`, accept: 'application/json' };
  const init = { method, headers, cache: 'no-store', signal };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  let text;
  try {
    response = await fetch(path, init);
    text = await response.text();
  } catch (error) {
    if (signal && signal.aborted) throw new ApiFailure(0, 'ABORTED', 'the request was replaced by a newer one');
    throw new ApiFailure(0, 'UNAVAILABLE', `the server cannot be reached (${error.message})`);
  }
  const json = parsed(text);
  if (!response.ok) {
    const error = json && json.error ? json.error : { code: `HTTP ${response.status}`, message: text.slice(0, 200) };
    const failure = new ApiFailure(response.status, error.code, error.message);
    if (response.status === 401 && session.token) refused(failure);
    throw failure;
  }
  return json;
}

function parsed(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

/** `path` with the query `params` (empty values left out) and, when `tenanted`, the chosen tenant. */
export function withQuery(path, params = {}, tenanted = true) {
  const query = new URLSearchParams();
  if (tenanted && session.viewing) query.set('tenantId', session.viewing);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(name, value);
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** Every item of a paged list (`{items, cursor}`), following its cursor to the end. */
export async function allPages(path, { params = {}, tenanted = true, signal } = {}) {
  const items = [];
  let cursor = '';
  do {
    const page = await api('GET', withQuery(path, { ...params, cursor }, tenanted), undefined, signal);
    items.push(...page.items);
    cursor = page.cursor || '';
  } while (cursor);
  return items;
}
