/**
 * The memstrata REST API as a facade shaped like the Python one: `client.conversations`,
 * `client.messages`, `client.history(...)`, `client.recall.search(...)`, ... The scope is
 * the key's (a user key) or the one `asUser` names (an admin key).
 */

import type { components } from "./openapi.js";
import { Paginated, type Page } from "./pages.js";
import { type FetchLike, type Query, Transport, seg } from "./http.js";
import { uuid7 } from "./ids.js";

type S = components["schemas"];
export type Conversation = S["ConversationOut"];
export type Message = S["MessageOut"];
export type NewMessage = S["NewMessage"];
export type MessagePatch = S["MessagePatch"];
export type HistoryMessage = S["HistoryMessageOut"];
export type History = S["HistoryOut"];
export type Fact = S["FactOut"];
export type FactEvent = S["FactEventOut"];
export type Profile = S["ProfileOut"];
export type Job = S["JobOut"];
export type Me = S["MeOut"];
export type User = S["UserOut"];
export type SearchHit = S["HitOut"];
export type Explanation = S["ExplanationOut"];
/** The hits, best first (an array), with what the server said beside them: `pending`
 * (messages not yet searchable by meaning) and `explained` (one verdict per `explainIds`). */
export type SearchResults = SearchHit[] & { pending: number; explained: Explanation[] };
export type Turn = S["TurnOut"];
export type NodeHistory = S["NodeHistoryOut"];
export type ToolCall = S["ToolCall"];
export type FileRef = S["FileRef"];
export type Role = S["Role"];
export type Provenance = S["ProvenanceOut"];
export type FactUse = S["FactUseOut"];
export type UsageReport = S["UsageReportOut"];
export type UsageTotal = S["UsageTotalOut"];
export type Budget = S["BudgetOut"];
export type Receipt = S["ReceiptOut"];

/** The receipt id a deletion names in its `X-Memstrata-Receipt` header. */
function receiptId(answer: { headers: Headers }): string {
  return answer.headers.get("x-memstrata-receipt") ?? "";
}

/**
 * What a provider's prompt cache can serve of a context: `prefix_tokens` repeat the previous
 * context of the branch; `breakpoint` is the index in `messages` of the stable part's last message.
 */
export type CacheReport = S["CacheReportOut"];
/** What `context` answers: the messages to send and a report of how the budget was spent. */
export type Context = S["ContextOut"];
/** One message of a context: an OpenAI chat message. */
export type ContextMessage = Context["messages"][number];
export type ContextReport = S["ContextReportOut"];

/** A versioned document (plan, working memory) with the ETag to send back as `ifMatch`. */
export type Versioned<T> = T & { etag: string | null };

export type PlanDoc = S["PlanOut"];
export type WorkingMemory = S["WorkingMemoryOut"];
export type Iteration = S["IterationOut"];
export type Snapshot = S["SnapshotOut"];
export type Checkpoint = S["CheckpointOut"];

/** Conditional write: `ifMatch` a version's ETag (or `*`), or `ifNoneMatch: "*"` to create only. */
export interface Precondition {
  ifMatch?: string | number;
  ifNoneMatch?: "*";
}

export interface ListOptions {
  limit?: number;
}

export interface ClientOptions {
  baseUrl: string;
  apiKey: string;
  /** A fetch of your own (a proxy, a test double); the global one otherwise. */
  fetch?: FetchLike;
}

/** `parent_id` left out appends after the active leaf; `null` starts a new root. */
export type AppendInput = Omit<NewMessage, "id" | "role" | "content"> & {
  id?: string;
  role: Role;
  content: string;
};

const list = <T>(t: Transport, path: string, query: Query = {}, opts: ListOptions = {}) =>
  new Paginated<T>((cursor) =>
    t.json<Page<T>>("GET", path, { query: { ...query, limit: opts.limit, cursor } }),
  );

function conditional(pre: Precondition | undefined): Record<string, string> {
  const h: Record<string, string> = {};
  if (pre?.ifMatch !== undefined) {
    const tag = String(pre.ifMatch);
    h["if-match"] = tag === "*" || tag.startsWith('"') || tag.startsWith("W/") ? tag : `"${tag}"`;
  }
  if (pre?.ifNoneMatch) h["if-none-match"] = pre.ifNoneMatch;
  return h;
}

async function versioned<T>(
  t: Transport,
  method: string,
  path: string,
  opts: { query?: Query; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Versioned<T>> {
  const answer = await t.request(method, path, opts);
  return { ...(answer.body as T), etag: answer.headers.get("etag") };
}

const conv = (cid: string) => `/v1/conversations/${seg(cid)}`;

export class Conversations {
  constructor(private readonly t: Transport) {}
  create(input: { title?: string; metadata?: Record<string, unknown> } = {}): Promise<Conversation> {
    return this.t.json("POST", "/v1/conversations", { body: input });
  }
  get(cid: string): Promise<Conversation> {
    return this.t.json("GET", conv(cid));
  }
  /** Newest first. */
  list(opts: ListOptions = {}): Paginated<Conversation> {
    return list(this.t, "/v1/conversations", {}, opts);
  }
  update(
    cid: string,
    changes: { title?: string | null; metadata?: Record<string, unknown> | null; active_leaf_id?: string | null },
  ): Promise<Conversation> {
    return this.t.json("PATCH", conv(cid), { body: changes });
  }
  setActiveLeaf(cid: string, leafId: string): Promise<Conversation> {
    return this.update(cid, { active_leaf_id: leafId });
  }
  /** Delete a conversation; returns its deletion receipt's id (`client.receipts.get`). */
  async delete(cid: string): Promise<string> {
    return receiptId(await this.t.request("DELETE", conv(cid)));
  }
}

export class Messages {
  constructor(private readonly t: Transport) {}
  /**
   * Append a message. Without an `id` one is made here (UUIDv7) before the first try, so a
   * retry after a dropped connection names the same message: the server answers the stored
   * one (same content) or `Conflict` (other content), never a duplicate.
   */
  append(cid: string, message: AppendInput): Promise<Message> {
    const body = { ...message, id: message.id ?? uuid7() };
    return this.t.json("POST", `${conv(cid)}/messages`, { body, idempotent: true });
  }
  get(cid: string, mid: string): Promise<Message> {
    return this.t.json("GET", `${conv(cid)}/messages/${seg(mid)}`);
  }
  /** Every message of every branch, oldest first (a parent before its children). */
  list(cid: string, opts: ListOptions = {}): Paginated<Message> {
    return list(this.t, `${conv(cid)}/messages`, {}, opts);
  }
  /** Messages with no children (the ends of the branches), oldest first. */
  leaves(cid: string, opts: ListOptions = {}): Paginated<Message> {
    return list(this.t, `${conv(cid)}/leaves`, {}, opts);
  }
  /** Complete a pending assistant message (the only kind that can change). */
  complete(cid: string, mid: string, patch: Omit<MessagePatch, "status"> & { content: string }): Promise<Message> {
    return this.t.json("PATCH", `${conv(cid)}/messages/${seg(mid)}`, {
      body: { ...patch, status: "complete" },
      idempotent: true,
    });
  }
  /** A message of the caller's scope by its id alone (`GET /v1/messages/{mid}`); 404 elsewhere. */
  find(mid: string): Promise<Message> {
    return this.t.json("GET", `/v1/messages/${seg(mid)}`);
  }
  /**
   * `DELETE /v1/conversations/{cid}/messages/{mid}`: the message with its subtree, or with
   * `{ mode: "splice" }` the message alone (its children re-attached to its parent);
   * 404 in another conversation or scope.
   */
  async delete(cid: string, mid: string, opts: { mode?: "subtree" | "splice" } = {}): Promise<string> {
    const query = opts.mode && opts.mode !== "subtree" ? { mode: opts.mode } : {};
    return receiptId(await this.t.request("DELETE", `${conv(cid)}/messages/${seg(mid)}`, { query }));
  }
  /**
   * What the model saw before a reply: the context record linked to it (append the reply
   * with `context_id` from `context(cid, {record: true})`); `record` is null when none is.
   */
  provenance(cid: string, mid: string): Promise<Provenance> {
    return this.t.json("GET", `${conv(cid)}/messages/${seg(mid)}/provenance`);
  }
}

export interface HistoryOptions {
  leafId?: string;
  maxTokens?: number;
  maxMessages?: number;
  model?: string;
  /** History ending before that message's turn (servers that have it). */
  before?: string;
}

export interface ContextOptions {
  leafId?: string;
  budget?: number;
  query?: string;
  model?: string;
  /** ISO 8601: facts, profile and recalled messages as of then (servers that have it). */
  asOf?: string;
  /** Message order: `cache` (a prefix providers can cache; the default) or `classic`. */
  layout?: "cache" | "classic";
  [extra: string]: unknown;
}

export interface SearchOptions {
  k?: number;
  conversationId?: string;
  leafId?: string;
  messageRange?: number;
  /** ISO 8601: only messages created by then (servers that have it). */
  asOf?: string;
  /** Leave out hits whose calibrated relevance (0..1) is below this. */
  minRelevance?: number;
  /** Add each hit's per-signal scores (`signals`). */
  explain?: boolean;
  /** Message ids to account for: each is returned, or `explained` says why not. */
  explainIds?: string[];
  [extra: string]: unknown;
}

export class Recall {
  constructor(private readonly t: Transport) {}
  async search(query: string, opts: SearchOptions = {}): Promise<SearchResults> {
    const { k, conversationId, leafId, messageRange, asOf, minRelevance, explain, explainIds, ...extra } =
      opts;
    const body = {
      query,
      k,
      conversation_id: conversationId,
      leaf_id: leafId,
      message_range: messageRange,
      as_of: asOf,
      min_relevance: minRelevance,
      explain,
      explain_ids: explainIds,
      ...extra,
    };
    const answer = await this.t.json<{ hits: SearchHit[]; pending?: number; explained?: Explanation[] }>(
      "POST",
      "/v1/recall/search",
      { body, idempotent: true },
    );
    return Object.assign(answer.hits, { pending: answer.pending ?? 0, explained: answer.explained ?? [] });
  }
}

export type FactStatus = "active" | "superseded" | "removed" | "evicted" | "all";

export class Facts {
  constructor(private readonly t: Transport) {}
  /** Newest first: the facts true now, or with `asOf` (ISO 8601) those true then as known
   * then (`knownAt`: as known at another time). */
  list(
    opts: ListOptions & { status?: FactStatus; category?: string; asOf?: string; knownAt?: string } = {},
  ): Paginated<Fact> {
    const query = { status: opts.status, category: opts.category, as_of: opts.asOf, known_at: opts.knownAt };
    return list(this.t, "/v1/facts", query, opts);
  }
  add(input: S["FactCreate"]): Promise<Fact> {
    return this.t.json("POST", "/v1/facts", { body: input });
  }
  get(fid: string): Promise<Fact> {
    return this.t.json("GET", `/v1/facts/${seg(fid)}`);
  }
  edit(fid: string, changes: S["FactPatch"]): Promise<Fact> {
    return this.t.json("PATCH", `/v1/facts/${seg(fid)}`, { body: changes });
  }
  async delete(fid: string): Promise<string> {
    return receiptId(await this.t.request("DELETE", `/v1/facts/${seg(fid)}`));
  }
  async history(fid: string): Promise<FactEvent[]> {
    return (await this.t.json<{ items: FactEvent[] }>("GET", `/v1/facts/${seg(fid)}/history`)).items;
  }
  /** The replies whose recorded prompts held the fact, newest first. */
  usage(fid: string, opts: ListOptions = {}): Paginated<FactUse> {
    return list(this.t, `/v1/facts/${seg(fid)}/usage`, {}, opts);
  }
}

export class Working {
  constructor(private readonly t: Transport) {}
  /** The conversation's document, or the user's without one. */
  get(opts: { conversationId?: string } = {}): Promise<Versioned<WorkingMemory>> {
    return versioned(this.t, "GET", "/v1/working-memory", { query: { conversation_id: opts.conversationId } });
  }
  put(
    content: unknown,
    opts: Precondition & {
      conversationId?: string;
      format?: "markdown" | "json";
      jsonSchema?: Record<string, unknown>;
      template?: unknown;
    } = {},
  ): Promise<Versioned<WorkingMemory>> {
    return versioned(this.t, "PUT", "/v1/working-memory", {
      query: { conversation_id: opts.conversationId },
      body: { content, format: opts.format, json_schema: opts.jsonSchema, template: opts.template },
      headers: conditional(opts),
    });
  }
}

export class Plans {
  constructor(private readonly t: Transport) {}
  get(cid: string): Promise<Versioned<PlanDoc>> {
    return versioned(this.t, "GET", `${conv(cid)}/plan`);
  }
  put(cid: string, document: unknown, pre: Precondition = {}): Promise<Versioned<PlanDoc>> {
    return versioned(this.t, "PUT", `${conv(cid)}/plan`, { body: { document }, headers: conditional(pre) });
  }
}

export class Iterations {
  constructor(private readonly t: Transport) {}
  append(
    cid: string,
    entry: { task: string; outcome: string; error?: string; attempt?: number; detail?: Record<string, unknown> },
  ): Promise<Iteration> {
    return this.t.json("POST", `${conv(cid)}/iterations`, { body: entry });
  }
  /** Oldest first. */
  list(cid: string, opts: ListOptions & { task?: string } = {}): Paginated<Iteration> {
    return list(this.t, `${conv(cid)}/iterations`, { task: opts.task }, opts);
  }
}

export class Checkpoints {
  constructor(private readonly t: Transport) {}
  private path(name: string, runId: string) {
    return `/v1/checkpoints/${seg(name)}/${seg(runId)}`;
  }
  /** Save (overwrite); with `ttlS` it expires that many seconds on. */
  save(name: string, runId: string, state: unknown, opts: { ttlS?: number; conversationId?: string } = {}): Promise<Checkpoint> {
    return this.t.json("PUT", this.path(name, runId), {
      body: { state, ttl_s: opts.ttlS, conversation_id: opts.conversationId },
    });
  }
  /** The checkpoint; `Expired` once it expired or was deleted, `NotFound` if never saved. */
  load(name: string, runId: string): Promise<Checkpoint> {
    return this.t.json("GET", this.path(name, runId));
  }
  /**
   * Expire it. Exactly one of several concurrent deletes succeeds; the others get `Expired`
   * (the server flips a live checkpoint to a tombstone in one conditional write).
   */
  async delete(name: string, runId: string): Promise<void> {
    await this.t.request("DELETE", this.path(name, runId), { idempotent: false });
  }
}

export class Snapshots {
  constructor(private readonly t: Transport) {}
  get(cid: string, runId: string): Promise<Snapshot> {
    return this.t.json("GET", `${conv(cid)}/runs/${seg(runId)}/snapshot`);
  }
  put(cid: string, runId: string, data: unknown): Promise<Snapshot> {
    return this.t.json("PUT", `${conv(cid)}/runs/${seg(runId)}/snapshot`, { body: { data } });
  }
}

export class Nodes {
  constructor(private readonly t: Transport) {}
  private path(app: string, cid: string, node: string) {
    return `/v1/apps/${seg(app)}/conversations/${seg(cid)}/nodes/${seg(node)}`;
  }
  /** One durable user/assistant turn of an app's node (Dify's node memory). */
  addTurn(app: string, cid: string, node: string, turn: S["TurnIn"]): Promise<Turn> {
    return this.t.json("POST", `${this.path(app, cid, node)}/turns`, { body: turn, idempotent: true });
  }
  history(
    app: string,
    cid: string,
    node: string,
    opts: { currentMessageId?: string; parentMessageId?: string; maxTokens?: number; maxMessages?: number; model?: string } = {},
  ): Promise<NodeHistory> {
    return this.t.json("GET", `${this.path(app, cid, node)}/history`, {
      query: {
        current_message_id: opts.currentMessageId,
        parent_message_id: opts.parentMessageId,
        max_tokens: opts.maxTokens,
        max_messages: opts.maxMessages,
        model: opts.model,
      },
    });
  }
  async delete(app: string, cid: string, node: string): Promise<void> {
    await this.t.request("DELETE", this.path(app, cid, node));
  }
}

export type JobStatus = "queued" | "running" | "done" | "dead" | string;

export class Jobs {
  constructor(private readonly t: Transport) {}
  list(opts: ListOptions & { status?: JobStatus } = {}): Paginated<Job> {
    return list(this.t, "/v1/jobs", { status: opts.status }, opts);
  }
  get(jid: string): Promise<Job> {
    return this.t.json("GET", `/v1/jobs/${seg(jid)}`);
  }
  retry(jid: string): Promise<Job> {
    return this.t.json("POST", `/v1/jobs/${seg(jid)}/retry`);
  }
}

/** Admin routes (an admin key only). */
export interface UsageOptions {
  /** ISO 8601 start (inclusive); the server's default is 30 days before `to`. */
  from?: string;
  /** ISO 8601 end (exclusive); default now. */
  to?: string;
  groupBy?: "purpose" | "user";
  limit?: number;
  cursor?: string;
}

/** Model calls and tokens (a user key: its own; an admin key: the tenant), and budgets (admin). */
export class Usage {
  constructor(private readonly t: Transport) {}
  report(opts: UsageOptions = {}): Promise<UsageReport> {
    const query = { from: opts.from, to: opts.to, group_by: opts.groupBy, limit: opts.limit, cursor: opts.cursor };
    return this.t.json("GET", "/v1/usage", { query, idempotent: true });
  }
  async budgets(): Promise<Budget[]> {
    const page = await this.t.json<{ items: Budget[] }>("GET", "/v1/budgets", { idempotent: true });
    return page.items;
  }
  /** Tokens per UTC day for `purpose` (0 blocks): its jobs wait as `blocked: "budget"` once used up. */
  setBudget(purpose: string, dailyTokens: number): Promise<Budget> {
    return this.t.json("PUT", "/v1/budgets", { body: { purpose, daily_tokens: dailyTokens }, idempotent: true });
  }
  async clearBudget(purpose: string): Promise<void> {
    await this.t.request("DELETE", `/v1/budgets/${seg(purpose)}`);
  }
}

export class Users {
  constructor(private readonly t: Transport) {}
  list(opts: ListOptions = {}): Paginated<User> {
    return list(this.t, "/v1/users", {}, opts);
  }
  /** Delete a user and everything of theirs; returns the deletion receipt's id. */
  async delete(user: string): Promise<string> {
    return receiptId(await this.t.request("DELETE", `/v1/users/${seg(user)}`));
  }
}

/** Deletion receipts: what a deletion removed, and what the scan after it found. */
export class Receipts {
  constructor(private readonly t: Transport) {}
  get(rid: string): Promise<Receipt> {
    return this.t.json("GET", `/v1/receipts/${seg(rid)}`);
  }
}

export class MemstrataClient {
  readonly conversations: Conversations;
  readonly messages: Messages;
  readonly recall: Recall;
  readonly facts: Facts;
  readonly working: Working;
  readonly plans: Plans;
  readonly iterations: Iterations;
  readonly checkpoints: Checkpoints;
  readonly snapshots: Snapshots;
  readonly nodes: Nodes;
  readonly jobs: Jobs;
  readonly users: Users;
  readonly usage: Usage;
  readonly receipts: Receipts;

  constructor(readonly transport: Transport) {
    this.conversations = new Conversations(transport);
    this.messages = new Messages(transport);
    this.recall = new Recall(transport);
    this.facts = new Facts(transport);
    this.working = new Working(transport);
    this.plans = new Plans(transport);
    this.iterations = new Iterations(transport);
    this.checkpoints = new Checkpoints(transport);
    this.snapshots = new Snapshots(transport);
    this.nodes = new Nodes(transport);
    this.jobs = new Jobs(transport);
    this.users = new Users(transport);
    this.usage = new Usage(transport);
    this.receipts = new Receipts(transport);
  }

  get baseUrl(): string {
    return this.transport.baseUrl;
  }

  /**
   * The same client acting for `user` (and `agent`): an admin key's way to reach a user's
   * memory (`X-Memstrata-User` / `X-Memstrata-Agent`). A user key sending them gets `Forbidden`.
   */
  asUser(user: string, agent?: string): MemstrataClient {
    const headers: Record<string, string> = { "x-memstrata-user": user };
    if (agent !== undefined) headers["x-memstrata-agent"] = agent;
    return new MemstrataClient(this.transport.with(headers));
  }

  /** Who the key speaks for: `{tenant, user, agent, admin}`. */
  me(): Promise<Me> {
    return this.transport.json("GET", "/v1/me");
  }

  /** The recent history of a branch, whole turns within `maxTokens` (default 2000). */
  history(cid: string, opts: HistoryOptions = {}): Promise<History> {
    return this.transport.json("GET", `${conv(cid)}/history`, {
      query: {
        leaf_id: opts.leafId,
        max_tokens: opts.maxTokens,
        max_messages: opts.maxMessages,
        model: opts.model,
        before: opts.before,
      },
    });
  }

  /** The messages to send a model within `budget` tokens, with the report of what went in. */
  context(cid: string, opts: ContextOptions = {}): Promise<Context> {
    const { leafId, budget, query, model, asOf, ...extra } = opts;
    return this.transport.json("POST", `${conv(cid)}/context`, {
      body: { leaf_id: leafId, budget, query, model, as_of: asOf, ...extra },
      idempotent: !extra["record"], // a recorded context is a write
    });
  }

  /** The user's profile: six sections of what long-term memory knows. */
  profile(): Promise<Profile> {
    return this.transport.json("GET", "/v1/profile");
  }
}

export function createClient(options: ClientOptions): MemstrataClient {
  return new MemstrataClient(new Transport(options));
}
