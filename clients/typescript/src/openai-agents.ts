/**
 * memstrata as an OpenAI Agents JS `Session`: a session is a conversation (found by its
 * session id), each input item a message. Messages keep OpenAI's chat shape for other
 * readers (user/assistant text, function calls as `tool_calls`, their results as `tool`
 * messages) and the item itself in `metadata.openai_agents_item`, so `getItems` gives back
 * exactly what was added.
 */

import type { AgentInputItem, Session } from "@openai/agents-core";
import type { AppendInput, Message, MemstrataClient } from "./client.js";
import { NotFound } from "./errors.js";
import { uuid7 } from "./ids.js";
import { orMissing } from "./json.js";
import { KeyedConversations } from "./keyed.js";

export interface MemstrataSessionOptions {
  client: MemstrataClient;
  /** Your session id; default a new UUIDv7. The same id finds the same history from any process. */
  sessionId?: string;
  /** Title of the conversation made for a new session. */
  title?: string;
}

type Item = Record<string, unknown>;

function text(value: unknown): string {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value.map((p) => (p && typeof p === "object" && "text" in p ? String(p.text) : "")).join("");
  if (value && typeof value === "object" && "text" in value) return String((value as Item).text);
  return value === undefined ? "" : JSON.stringify(value);
}

/** An item as the message OpenAI chat readers understand (the item rides along in metadata). */
export function itemToMessage(item: AgentInputItem): AppendInput {
  const it = item as unknown as Item;
  const metadata = { openai_agents_item: it };
  const role = it["role"];
  if (it["type"] === "function_call") {
    return {
      role: "assistant",
      content: "",
      tool_calls: [
        { id: String(it["callId"]), type: "function", function: { name: String(it["name"]), arguments: String(it["arguments"] ?? "{}") } },
      ],
      metadata,
    };
  }
  if (it["type"] === "function_call_result") {
    return { role: "tool", content: text(it["output"]) || "(empty)", tool_call_id: String(it["callId"]), metadata };
  }
  if (role === "user" || role === "system" || role === "assistant") {
    return { role, content: text(it["content"]) || "(empty)", metadata };
  }
  // reasoning, hosted tool calls, ...: kept for replay, shown to chat readers as a note
  return { role: "assistant", content: `[${String(it["type"] ?? "item")}]`, metadata };
}

/** A stored message back as an item (one written by another client becomes a chat message). */
export function messageToItem(m: Message): AgentInputItem {
  const saved = (m.metadata as Item | null | undefined)?.["openai_agents_item"];
  if (saved) return saved as AgentInputItem;
  if (m.role === "tool") {
    return { type: "function_call_result", callId: m.tool_call_id ?? "", name: "", status: "completed", output: { type: "text", text: m.content } } as unknown as AgentInputItem;
  }
  if (m.role === "assistant") {
    return { role: "assistant", status: "completed", content: [{ type: "output_text", text: m.content }] } as unknown as AgentInputItem;
  }
  return { role: m.role, content: m.content } as AgentInputItem;
}

export class MemstrataSession implements Session {
  readonly client: MemstrataClient;
  private readonly sessionId: string;
  private readonly title: string | undefined;
  private readonly sessions: KeyedConversations;

  constructor(options: MemstrataSessionOptions) {
    this.client = options.client;
    this.sessionId = options.sessionId ?? uuid7();
    this.title = options.title;
    this.sessions = new KeyedConversations(options.client, "openai-agents.session");
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The conversation behind this session (made on first use). */
  conversationId(): Promise<string> {
    return this.sessions.ensure(this.sessionId, {
      ...(this.title ? { title: this.title } : {}),
      metadata: { openai_agents_session_id: this.sessionId },
    });
  }

  private async messages(): Promise<Message[]> {
    const cid = await this.sessions.find(this.sessionId);
    return cid ? this.client.messages.list(cid, { limit: 500 }).all() : [];
  }

  /** The most recent `limit` items (all without it), oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const all = await this.messages();
    const kept = limit === undefined ? all : all.slice(Math.max(0, all.length - limit));
    return kept.map(messageToItem);
  }

  async addItems(items: AgentInputItem[]): Promise<void> {
    if (!items.length) return;
    const cid = await this.conversationId();
    for (const item of items) await this.client.messages.append(cid, itemToMessage(item));
  }

  /** Remove the newest item and return it (needs the server's message DELETE). */
  async popItem(): Promise<AgentInputItem | undefined> {
    const cid = await this.sessions.find(this.sessionId);
    if (!cid) return undefined;
    const all = await this.messages();
    const last = all[all.length - 1];
    if (!last) return undefined;
    await orMissing(this.client.messages.delete(cid, last.id), undefined, NotFound);
    return messageToItem(last);
  }

  /** Delete the session's conversation; the same session id starts afresh on the next add. */
  clearSession(): Promise<void> {
    return this.sessions.remove(this.sessionId);
  }
}
