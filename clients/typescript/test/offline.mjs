// Loaded before every test file: nothing leaves the machine. A request to any host but
// loopback fails at once (the agent runtimes try to fetch model catalogs; they cope).
const real = globalThis.fetch;
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);
globalThis.fetch = async (input, init) => {
  const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
  if (!LOOPBACK.has(url.hostname)) throw new TypeError(`offline test: refused ${url.origin}`);
  return real(input, init);
};
// The Agents SDK would export traces to its vendor: off.
process.env.OPENAI_AGENTS_DISABLE_TRACING = "1";
