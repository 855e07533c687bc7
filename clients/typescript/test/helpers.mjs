// The live server and keys the harness (tests/test_typescript_client.py) passes in.
import { createClient } from "../dist/index.js";

export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run through tests/test_typescript_client.py`);
  return value;
}

export const url = () => env("MEMSTRATA_URL");
export const clientA = () => createClient({ baseUrl: url(), apiKey: env("MEMSTRATA_KEY_A") });
export const clientB = () => createClient({ baseUrl: url(), apiKey: env("MEMSTRATA_KEY_B") });
export const admin = () => createClient({ baseUrl: url(), apiKey: env("MEMSTRATA_ADMIN_KEY") });
export const unique = (label) => `${label}-${Math.random().toString(36).slice(2, 10)}`;

/** A history's messages as [role, content, first tool call's name, tool_call_id] rows. */
export const rows = (history) =>
  history.messages.map((m) => [m.role, m.content, m.tool_calls?.[0]?.function?.name ?? null, m.tool_call_id ?? null]);
