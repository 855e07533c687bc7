/**
 * Conversations found by a framework's own key (an n8n thread id, an Agents session id).
 * The key → conversation id pair is a checkpoint of its own (`name`/`key`), so a lookup is
 * one GET in the caller's scope, from any process.
 */

import type { Conversation, MemstrataClient } from "./client.js";
import { Expired, NotFound } from "./errors.js";
import { orMissing } from "./json.js";

export class KeyedConversations {
  private readonly known = new Map<string, string>();

  constructor(
    private readonly client: MemstrataClient,
    private readonly name: string,
  ) {}

  async find(key: string): Promise<string | null> {
    const hit = this.known.get(key);
    if (hit) return hit;
    const cp = await orMissing(this.client.checkpoints.load(this.name, key), null, NotFound, Expired);
    const cid = (cp?.state as { conversation_id?: string } | undefined)?.conversation_id ?? null;
    if (cid) this.known.set(key, cid);
    return cid;
  }

  /** The key's conversation, made with `init` when there is none. */
  async ensure(key: string, init: { title?: string; metadata?: Record<string, unknown> } = {}): Promise<string> {
    const found = await this.find(key);
    if (found) return found;
    const created: Conversation = await this.client.conversations.create(init);
    await this.client.checkpoints.save(this.name, key, { conversation_id: created.id }, { conversationId: created.id });
    this.known.set(key, created.id);
    return created.id;
  }

  /** Delete the key's conversation (messages and all) and forget the key. */
  async remove(key: string): Promise<void> {
    const cid = await this.find(key);
    this.known.delete(key);
    if (!cid) return;
    await orMissing(this.client.conversations.delete(cid), undefined, NotFound);
    await orMissing(this.client.checkpoints.delete(this.name, key), undefined, NotFound, Expired);
  }
}
