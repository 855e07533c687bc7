/** UUIDv7 (RFC 9562) made on the client, so a retried append names the same message. */

// Browsers and Node >= 19 have Web Crypto as a global; Node 18 has it as node:crypto's webcrypto
// (the name is in a variable so browser bundlers do not try to resolve it).
const NODE_CRYPTO = "node:crypto";
const webcrypto: Crypto =
  globalThis.crypto ?? ((await import(/* @vite-ignore */ NODE_CRYPTO)) as { webcrypto: Crypto }).webcrypto;

let lastMs = 0;
let seq = 0;

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  webcrypto.getRandomValues(out);
  return out;
}

function format(b: Uint8Array): string {
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function stamp(b: Uint8Array, ms: number): void {
  for (let i = 5; i >= 0; i--) {
    b[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x70; // version 7
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80; // variant 10
}

/** A new UUIDv7; ids made in one process increase (a 12-bit counter within a millisecond). */
export function uuid7(): string {
  let ms = Date.now();
  if (ms <= lastMs) {
    seq += 1;
    if (seq > 0xfff) {
      lastMs += 1;
      seq = 0;
    }
    ms = lastMs;
  } else {
    lastMs = ms;
    seq = 0;
  }
  const b = randomBytes(16);
  stamp(b, ms);
  b[6] = 0x70 | (seq >> 8);
  b[7] = seq & 0xff;
  return format(b);
}

/**
 * A UUIDv7 derived from a foreign id and its time: the same input gives the same id, so
 * a store that maps another system's ids onto memstrata's can save again safely.
 */
export async function uuid7From(key: string, ms: number): Promise<string> {
  const digest = new Uint8Array(
    await webcrypto.subtle.digest("SHA-256", new TextEncoder().encode(key)),
  );
  const b = digest.slice(0, 16);
  stamp(b, Math.max(0, Math.floor(ms)));
  return format(b);
}

/** Hex SHA-256 of a string. */
export async function sha256(text: string): Promise<string> {
  const digest = await webcrypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (x) => x.toString(16).padStart(2, "0")).join("");
}
