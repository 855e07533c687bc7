/** JSON helpers shared by the adapters: bytes survive a round trip, keys sort for digests. */

const BYTES = "__memstrata_bytes_b64";

function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function fromBase64(text: string): Uint8Array {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** A JSON-safe copy: Dates become ISO strings, bytes a tagged base64 object. */
export function toJson(value: unknown): unknown {
  if (value instanceof Uint8Array) return { [BYTES]: toBase64(value) };
  if (value instanceof ArrayBuffer) return { [BYTES]: toBase64(new Uint8Array(value)) };
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(toJson);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = toJson(v);
    return out;
  }
  return value;
}

/** The inverse of {@link toJson} for bytes (dates stay strings: the caller knows its fields). */
export function fromJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(fromJson);
  if (value && typeof value === "object") {
    const rec = value as Record<string, unknown>;
    if (typeof rec[BYTES] === "string" && Object.keys(rec).length === 1) return fromBase64(rec[BYTES]);
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(rec)) out[k] = fromJson(v);
    return out;
  }
  return value;
}

/** JSON with object keys sorted: equal values give equal text. */
export function canonical(value: unknown): string {
  const norm = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(norm);
    if (v && typeof v === "object") {
      const rec = v as Record<string, unknown>;
      return Object.fromEntries(Object.keys(rec).sort().map((k) => [k, norm(rec[k])]));
    }
    return v;
  };
  return JSON.stringify(norm(toJson(value)));
}

/** Either error class `NotFound`/`Expired` from an awaited call becomes `fallback`. */
export async function orMissing<T, F>(call: Promise<T>, fallback: F, ...missing: (abstract new (...a: never[]) => Error)[]): Promise<T | F> {
  try {
    return await call;
  } catch (error) {
    if (missing.some((cls) => error instanceof cls)) return fallback;
    throw error;
  }
}
