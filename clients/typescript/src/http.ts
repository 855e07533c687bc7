/**
 * One request over `fetch`: the key, the acting user's headers, JSON in and out, problem+json
 * to typed errors, and retries where a second try cannot apply a change twice.
 */

import { BackendUnavailable, errorFromResponse } from "./errors.js";

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  fetch?: FetchLike;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

export type Query = Record<string, string | number | boolean | null | undefined>;

export interface RequestOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
  /** Safe to send again after a dropped connection (reads, puts, appends with their id). */
  idempotent?: boolean;
}

/** Tries in all, the first included; the pauses between them are 0.1 s, then 0.4 s. */
export const ATTEMPTS = 3;
const delay = (attempt: number) => 100 * 4 ** attempt;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

export class Transport {
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly fetchFn: FetchLike;
  private readonly headers: Record<string, string>;

  constructor(options: TransportOptions) {
    if (!options.baseUrl) throw new TypeError("createClient needs a baseUrl");
    if (!options.apiKey) throw new TypeError("createClient needs an apiKey");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    const f = options.fetch ?? globalThis.fetch;
    if (!f) throw new TypeError("no fetch: pass one to createClient({ fetch })");
    this.fetchFn = (input, init) => f(input, init);
    this.headers = options.headers ?? {};
  }

  /** The same server and key with more headers on every request. */
  with(headers: Record<string, string>): Transport {
    return new Transport({
      baseUrl: this.baseUrl,
      apiKey: this.apiKey,
      fetch: this.fetchFn,
      headers: { ...this.headers, ...headers },
    });
  }

  url(path: string, query?: Query): string {
    let url = this.baseUrl + path;
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v !== undefined && v !== null) params.append(k, String(v));
      }
      const text = params.toString();
      if (text) url += `?${text}`;
    }
    return url;
  }

  async request(method: string, path: string, options: RequestOptions = {}): Promise<Answer> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.apiKey}`,
      accept: "application/json",
      ...this.headers,
      ...options.headers,
    };
    let body: string | undefined;
    if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    const url = this.url(path, options.query);
    const idempotent = options.idempotent ?? (method === "GET" || method === "PUT" || method === "DELETE");
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.fetchFn(url, { method, headers, body });
      } catch (error) {
        // fetch cannot tell "never sent" from "dropped mid-way": only idempotent requests go again
        if (!idempotent || attempt + 1 >= ATTEMPTS || isAbort(error)) {
          if (isAbort(error)) throw error;
          throw new BackendUnavailable(
            `cannot reach the memstrata server at ${this.baseUrl}: ${String(error)}`,
          );
        }
        await sleep(delay(attempt));
        continue;
      }
      const text = await response.text();
      if (!response.ok) {
        throw errorFromResponse(
          response.status,
          text,
          response.headers.get("content-type") ?? "",
          response.headers.get("retry-after"),
        );
      }
      return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
    }
  }

  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return (await this.request(method, path, options)).body as T;
  }
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError");
}

/** A path segment, escaped. */
export const seg = (value: string): string => encodeURIComponent(value);
