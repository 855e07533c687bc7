/**
 * memstrata as the memory of `@n8n/agents`: {@link MemstrataMemory} is a `BuiltMemory`
 * (threads are conversations, messages map both ways, tool calls included) and
 * {@link MemstrataCheckpointStore} a `CheckpointStore` whose `claimForResume` has exactly
 * one winner. Both act for the user of the client they are given (a user key, or an admin
 * key's `client.asUser(resourceId)`).
 */

import type {
  AgentDbMessage,
  BuiltMemory,
  CheckpointStore,
  ContentToolCall,
  MemoryDescriptor,
  SerializableAgentState,
  Thread,
} from "@n8n/agents";
import type { MemstrataClient, Message, ToolCall } from "./client.js";
import { Conflict, Expired, NotFound } from "./errors.js";
import { sha256, uuid7From } from "./ids.js";
import { canonical, fromJson, orMissing, toJson } from "./json.js";
import { KeyedConversations } from "./keyed.js";
import { MemstrataEpisodicMemory } from "./n8n-episodic.js";

export { MemstrataEpisodicMemory };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface Stored {
  /** The n8n message as it was saved (bytes as tagged base64). */
  message: Record<string, unknown>;
  id: string;
  createdAt: string;
}

interface N8nMetadata {
  n8n?: Stored;
  /** A tool result written as its own `tool` message, so REST readers see OpenAI's shape. */
  n8n_tool_result?: { of: string };
}

export interface MemstrataMemoryOptions {
  /** Name in `describe()`; default "memstrata". */
  name?: string;
  /** Offer n8n's episodic memory on memstrata's long-term facts (see MemstrataEpisodicMemory). */
  episodic?: boolean;
}

type Role = "system" | "user" | "assistant" | "tool";

/** memstrata's id for an n8n message id: the id itself when it is a UUID, else one derived from it. */
export async function messageIdFor(id: string): Promise<string> {
  return UUID.test(id) ? id.toLowerCase() : uuid7From(`n8n:${id}`, 0);
}

const toolResultId = (messageId: string, toolCallId: string) => uuid7From(`${messageId}:${toolCallId}`, 0);

function toolCallsOf(m: AgentDbMessage): ContentToolCall[] {
  if (!("content" in m) || !Array.isArray(m.content)) return [];
  return m.content.filter((p): p is ContentToolCall => p.type === "tool-call");
}

function textOf(m: AgentDbMessage): string {
  if (!("role" in m)) return JSON.stringify(toJson(m.data));
  return m.content
    .map((p) => (p.type === "text" ? p.text : ""))
    .join("");
}

function resultText(call: ContentToolCall): string | null {
  if (call.state === "resolved") return typeof call.output === "string" ? call.output : JSON.stringify(call.output);
  if (call.state === "rejected") return `error: ${call.error}`;
  return null;
}

/** An n8n message as a memstrata append (its id made by the caller). */
function toMemstrata(m: AgentDbMessage, id: string) {
  const calls = toolCallsOf(m);
  const role: Role = "role" in m ? m.role : "assistant";
  const toolCalls: ToolCall[] = calls.map((c) => ({
    id: c.toolCallId,
    type: "function",
    function: { name: c.toolName, arguments: JSON.stringify(c.input ?? {}) },
  }));
  const pending = calls.some((c) => c.state === "pending");
  const stored: Stored = {
    message: toJson({ ...m, id: undefined, createdAt: undefined }) as Record<string, unknown>,
    id: m.id,
    createdAt: m.createdAt.toISOString(),
  };
  let content = textOf(m);
  let toolCallId: string | undefined;
  if (role === "tool") {
    // an n8n tool message carries its results as tool-call parts
    toolCallId = calls[0]?.toolCallId;
    content = calls.map((c) => resultText(c) ?? "").join("\n");
  }
  return {
    id,
    role,
    content: pending ? "" : content,
    tool_calls: role === "assistant" && toolCalls.length ? toolCalls : undefined,
    tool_call_id: toolCallId,
    status: pending && role === "assistant" ? ("pending" as const) : ("complete" as const),
    metadata: { n8n: stored } satisfies N8nMetadata,
    occurred_at: m.createdAt.toISOString(),
  };
}

/** A memstrata message back as the n8n message it was saved from (or a plain text one). */
export function fromMemstrata(m: Message): AgentDbMessage | null {
  const meta = (m.metadata ?? {}) as N8nMetadata;
  if (meta.n8n_tool_result) return null;
  const createdAt = new Date(meta.n8n?.createdAt ?? m.occurred_at ?? m.created_at ?? 0);
  if (meta.n8n) {
    return { ...(fromJson(meta.n8n.message) as object), id: meta.n8n.id, createdAt } as AgentDbMessage;
  }
  // a message written by someone else (REST, Python): text and tool calls
  const parts: unknown[] = m.content ? [{ type: "text", text: m.content }] : [];
  for (const c of m.tool_calls ?? []) {
    let input: unknown = {};
    try {
      input = JSON.parse(c.function.arguments ?? "{}");
    } catch {
      input = c.function.arguments;
    }
    parts.push({ type: "tool-call", toolCallId: c.id, toolName: c.function.name, input, state: "pending" });
  }
  return { id: m.id, createdAt, role: m.role as Role, content: parts } as AgentDbMessage;
}

export class MemstrataMemory implements BuiltMemory {
  private readonly threads: KeyedConversations;
  readonly episodic?: MemstrataEpisodicMemory;
  /** memstrata message id → conversation id, for `deleteMessages` (which names no thread). */
  private readonly owners = new Map<string, string>();

  constructor(
    readonly client: MemstrataClient,
    private readonly options: MemstrataMemoryOptions = {},
  ) {
    this.threads = new KeyedConversations(client, "n8n.thread");
    if (options.episodic) this.episodic = new MemstrataEpisodicMemory(client);
  }

  describe(): MemoryDescriptor {
    return {
      name: this.options.name ?? "memstrata",
      constructorName: "MemstrataMemory",
      connectionParams: { baseUrl: this.client.baseUrl },
    };
  }

  /** The conversation that holds a thread, or null. */
  conversationOf(threadId: string): Promise<string | null> {
    return this.threads.find(threadId);
  }

  async getThread(threadId: string): Promise<Thread | null> {
    const cid = await this.conversationOf(threadId);
    if (!cid) return null;
    const c = await orMissing(this.client.conversations.get(cid), null, NotFound);
    if (!c) return null;
    const meta = (c.metadata ?? {}) as { n8n_resource_id?: string; n8n_metadata?: Record<string, unknown> };
    return {
      id: threadId,
      resourceId: meta.n8n_resource_id ?? "",
      ...(c.title ? { title: c.title } : {}),
      createdAt: new Date(c.created_at),
      updatedAt: new Date(c.updated_at),
      ...(meta.n8n_metadata ? { metadata: meta.n8n_metadata } : {}),
    };
  }

  async saveThread(thread: Omit<Thread, "createdAt" | "updatedAt">): Promise<Thread> {
    const metadata = {
      n8n_thread_id: thread.id,
      n8n_resource_id: thread.resourceId,
      ...(thread.metadata ? { n8n_metadata: toJson(thread.metadata) } : {}),
    };
    const cid = await this.conversationOf(thread.id);
    if (cid) {
      await this.client.conversations.update(cid, { title: thread.title ?? null, metadata });
    } else {
      await this.threads.ensure(thread.id, { ...(thread.title ? { title: thread.title } : {}), metadata });
    }
    const saved = await this.getThread(thread.id);
    if (!saved) throw new NotFound(`thread ${thread.id} vanished while it was saved`);
    return saved;
  }

  deleteThread(threadId: string): Promise<void> {
    return this.threads.remove(threadId);
  }

  /** Oldest first; `before` keeps messages made earlier than it, `limit` the newest of those. */
  async getMessages(
    threadId: string,
    opts: { limit?: number; before?: Date; resourceId?: string } = {},
  ): Promise<AgentDbMessage[]> {
    const cid = await this.conversationOf(threadId);
    if (!cid) return [];
    const out: AgentDbMessage[] = [];
    for await (const m of this.client.messages.list(cid, { limit: 500 })) {
      this.owners.set(m.id, cid);
      const back = fromMemstrata(m);
      if (!back) continue;
      if (opts.before && !(back.createdAt < opts.before)) continue;
      out.push(back);
    }
    return opts.limit !== undefined ? out.slice(Math.max(0, out.length - opts.limit)) : out;
  }

  async saveMessages(args: { threadId: string; resourceId: string; messages: AgentDbMessage[] }): Promise<void> {
    let cid = await this.conversationOf(args.threadId);
    if (!cid) {
      await this.saveThread({ id: args.threadId, resourceId: args.resourceId });
      cid = await this.conversationOf(args.threadId);
    }
    if (!cid) throw new NotFound(`no conversation for thread ${args.threadId}`);
    for (const m of args.messages) await this.saveOne(cid, m);
  }

  private async saveOne(cid: string, m: AgentDbMessage): Promise<void> {
    const id = await messageIdFor(m.id);
    const body = toMemstrata(m, id);
    this.owners.set(id, cid);
    try {
      await this.client.messages.append(cid, body);
    } catch (error) {
      if (!(error instanceof Conflict)) throw error;
      // saved before: n8n re-saves a suspended tool call's message once it resolves
      const stored = await this.client.messages.get(cid, id);
      if (stored.status !== "pending") throw error;
      if (body.status === "pending") return; // still waiting: nothing new to say
      await this.client.messages.complete(cid, id, {
        content: body.content,
        tool_calls: body.tool_calls ?? null,
        metadata: body.metadata,
      });
    }
    if (body.role !== "assistant") return;
    for (const call of toolCallsOf(m)) {
      const text = resultText(call);
      if (text === null) continue;
      const rid = await toolResultId(id, call.toolCallId);
      this.owners.set(rid, cid);
      await this.client.messages.append(cid, {
        id: rid,
        role: "tool",
        content: text,
        tool_call_id: call.toolCallId,
        parent_id: await this.leafAfter(cid, id),
        metadata: { n8n_tool_result: { of: m.id } } satisfies N8nMetadata,
        occurred_at: m.createdAt.toISOString(),
      });
    }
  }

  /** The last tool result already under `id` (results chain one after another), else `id`. */
  private async leafAfter(cid: string, id: string): Promise<string> {
    const c = await this.client.conversations.get(cid);
    return c.active_leaf_id ?? id;
  }

  /**
   * Deletes the named messages, from any instance: the conversation of an id this instance
   * has not seen is looked up on the server (`GET /v1/messages/{id}`, the caller's scope only);
   * an id that names no message is skipped, as n8n's stores do.
   */
  async deleteMessages(messageIds: string[]): Promise<void> {
    for (const raw of messageIds) {
      const id = await messageIdFor(raw);
      const cid = this.owners.get(id) ?? (await orMissing(this.client.messages.find(id), null, NotFound))?.conversation_id;
      if (!cid) continue;
      const stored = await orMissing(this.client.messages.get(cid, id), null, NotFound);
      const extra: string[] = [];
      const meta = (stored?.metadata ?? {}) as N8nMetadata;
      const message = meta.n8n ? fromMemstrata(stored as Message) : null;
      if (message && "role" in message && message.role === "assistant") {
        for (const c of toolCallsOf(message)) extra.push(await toolResultId(id, c.toolCallId));
      }
      for (const mid of [...extra.reverse(), id]) {
        // n8n deletes the named messages only: the rest of the thread stays, re-attached.
        await orMissing(this.client.messages.delete(cid, mid, { mode: "splice" }), undefined, NotFound);
        this.owners.delete(mid);
      }
    }
  }
}

export interface CheckpointStoreOptions {
  /** The checkpoint name the run states live under; default "n8n". */
  name?: string;
  /** Seconds a saved state lives; default: until deleted. */
  ttlS?: number;
}

/**
 * n8n's suspended runs as memstrata checkpoints (`name:runId`). A suspended state also gets
 * a resume ticket keyed by the state's digest; `claimForResume` deletes that ticket, and the
 * server turns a live checkpoint into a tombstone in one conditional write, so of any number
 * of concurrent claims exactly one sees success. The state itself is never destroyed by a
 * claim: the winner then writes it back as running.
 */
export class MemstrataCheckpointStore implements CheckpointStore {
  private readonly name: string;
  private readonly tickets: string;

  constructor(
    readonly client: MemstrataClient,
    private readonly options: CheckpointStoreOptions = {},
  ) {
    this.name = options.name ?? "n8n";
    this.tickets = `${this.name}.resume`;
  }

  private async ticket(key: string, state: SerializableAgentState): Promise<string> {
    return `${key}.${await sha256(canonical(state))}`;
  }

  async save(key: string, state: SerializableAgentState): Promise<void> {
    const ttl = this.options.ttlS !== undefined ? { ttlS: this.options.ttlS } : {};
    await this.client.checkpoints.save(this.name, key, toJson(state), ttl);
    if (state.status === "suspended") {
      await this.client.checkpoints.save(this.tickets, await this.ticket(key, state), { key }, ttl);
    }
  }

  async load(key: string): Promise<SerializableAgentState | undefined> {
    const cp = await orMissing(this.client.checkpoints.load(this.name, key), undefined, NotFound, Expired);
    return cp ? (fromJson(cp.state) as SerializableAgentState) : undefined;
  }

  async claimForResume(key: string, state: SerializableAgentState): Promise<boolean> {
    if (state.status !== "suspended") return false;
    const won = await orMissing(
      this.client.checkpoints.delete(this.tickets, await this.ticket(key, state)).then(() => true),
      false,
      NotFound,
      Expired,
    );
    if (won) await this.client.checkpoints.save(this.name, key, toJson({ ...state, status: "running" }));
    return won;
  }

  async delete(key: string): Promise<void> {
    await orMissing(this.client.checkpoints.delete(this.name, key), undefined, NotFound, Expired);
  }
}
