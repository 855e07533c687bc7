// The session (the signed-in key, kept for this tab only) and calls to the /v1 API.
//
// The key lives in sessionStorage: it survives a reload but not closing the tab, and
// other tabs never see it. An admin key acts as the user picked from the users list,
// sent in X-Memstrata-User; a user key always acts as its own user.

const KEY = "memstrata.key";
const KIND = "memstrata.kind"; // "admin" or "user"
const USER = "memstrata.user"; // the user an admin key acts as

export const session = {
  get key() {
    return sessionStorage.getItem(KEY);
  },
  get kind() {
    return sessionStorage.getItem(KIND);
  },
  get user() {
    return sessionStorage.getItem(USER);
  },
  get signedIn() {
    return Boolean(this.key && this.kind);
  },
  /** Whether calls on user routes can be made: a user key, or an admin key with a user. */
  get ready() {
    return this.signedIn && (this.kind === "user" || Boolean(this.user));
  },
  start(key, kind) {
    sessionStorage.setItem(KEY, key);
    sessionStorage.setItem(KIND, kind);
    sessionStorage.removeItem(USER);
  },
  /** Act as `user` from now on; null: as nobody (an admin key then picks again). */
  actAs(user) {
    if (user) sessionStorage.setItem(USER, user);
    else sessionStorage.removeItem(USER);
  },
  end() {
    for (const k of [KEY, KIND, USER]) sessionStorage.removeItem(k);
  },
};

/** A failed call: the problem+json answer's status, code and detail. */
export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/**
 * One call. asUser: true acts as the session's user (an admin key names it), false names
 * nobody, a string names that user. Answers the JSON body, or with `withHeaders`
 * {data, headers}.
 */
async function call(path, { method = "GET", query, body, key, asUser = true, withHeaders = false } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== null && v !== undefined && v !== "") url.searchParams.set(k, String(v));
  }
  const headers = { Authorization: `Bearer ${key ?? session.key}`, Accept: "application/json" };
  const named = typeof asUser === "string" ? asUser : asUser ? session.user : null;
  if (named && session.kind === "admin") headers["X-Memstrata-User"] = named;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch {
    throw new ApiError(0, "unreachable", "the server could not be reached");
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    throw new ApiError(
      response.status,
      (data && data.code) || "error",
      (data && data.detail) || `${response.status} ${response.statusText}`,
    );
  }
  return withHeaders ? { data, headers: response.headers } : data;
}

export const api = {
  get: (path, query, options) => call(path, { ...options, query }),
  post: (path, body, options) => call(path, { ...options, method: "POST", body }),
  patch: (path, body, options) => call(path, { ...options, method: "PATCH", body }),
  /** A deletion; answers the id of its receipt (the X-Memstrata-Receipt header). */
  async remove(path, options) {
    const { headers } = await call(path, { ...options, method: "DELETE", withHeaders: true });
    return headers.get("X-Memstrata-Receipt");
  },
};

/**
 * Every item of a cursor-paginated list, up to `cap` (the rest is reported, not fetched).
 * Returns {items, more}: more is true when the cap was reached before the last page.
 */
export async function allPages(path, query = {}, { cap = 5000, asUser = true } = {}) {
  const items = [];
  let cursor = null;
  do {
    const page = await call(path, { query: { ...query, limit: 500, cursor }, asUser });
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < cap);
  return { items, more: Boolean(cursor) };
}

/** What kind of key this is: an admin key may list users, a user key is refused (403). */
export async function keyKind(key) {
  try {
    await call("/v1/users", { query: { limit: 1 }, key, asUser: false });
    return "admin";
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) return "user";
    throw err;
  }
}
