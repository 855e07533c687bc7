export { createClient, MemstrataClient } from "./client.js";
export type * from "./client.js";
export * from "./errors.js";
export { Paginated, type Page } from "./pages.js";
export { uuid7 } from "./ids.js";
export type { FetchLike } from "./http.js";
export type { components, paths } from "./openapi.js";
