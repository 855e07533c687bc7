/**
 * n8n's episodic memory on memstrata's long-term facts: an entry is a fact of the client's
 * user, a reflection's merge an edit (memstrata keeps the old text in the fact's history), a
 * drop a delete. Search ranks the user's facts by the query's words (no vectors: memstrata
 * embeds messages, not facts). Sources are the fact's own: the messages it was extracted
 * from; the sources n8n passes when saving are not stored (a fact made over REST has none).
 */

import type {
  EpisodicMemoryEntry,
  EpisodicMemoryEntrySource,
  EpisodicMemoryMethods,
  EpisodicMemoryReflectionApply,
  EpisodicMemoryReflectionResult,
  EpisodicMemoryScope,
  EpisodicMemorySearchOptions,
  EpisodicMemoryStatus,
  NewEpisodicMemoryEntry,
  RetrievedEpisodicMemoryEntry,
} from "@n8n/agents";
import type { Fact, MemstrataClient } from "./client.js";
import { Conflict, NotFound } from "./errors.js";
import { sha256 } from "./ids.js";
import { orMissing } from "./json.js";

const STATUS: Record<string, EpisodicMemoryStatus> = { active: "active", superseded: "superseded" };
const FACT_STATUS: Record<EpisodicMemoryStatus, string> = { active: "active", superseded: "superseded", dropped: "removed" };

const words = (text: string) => new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);

async function entryOf(fact: Fact, resourceId: string): Promise<EpisodicMemoryEntry> {
  const updated = new Date(fact.updated_at);
  return {
    id: fact.id,
    resourceId,
    content: fact.content,
    contentHash: await sha256(fact.content),
    status: STATUS[fact.status] ?? "dropped",
    supersededBy: fact.superseded_by,
    metadata: { category: fact.category, confidence: fact.confidence, origin: fact.origin },
    createdAt: new Date(fact.created_at),
    updatedAt: updated,
    lastSeenAt: updated,
  };
}

export class MemstrataEpisodicMemory implements EpisodicMemoryMethods {
  constructor(readonly client: MemstrataClient) {}

  private async findActive(content: string): Promise<Fact | undefined> {
    for await (const f of this.client.facts.list({ status: "active", limit: 500 })) if (f.content === content) return f;
    return undefined;
  }

  async saveEntryWithSources(entry: NewEpisodicMemoryEntry): Promise<EpisodicMemoryEntry | null> {
    const category = typeof entry.metadata?.["category"] === "string" ? entry.metadata["category"] : undefined;
    let fact: Fact | undefined;
    try {
      fact = await this.client.facts.add({ content: entry.content, ...(category ? { category } : {}) });
    } catch (error) {
      if (!(error instanceof Conflict)) throw error;
      fact = await this.findActive(entry.content); // the user already has it
    }
    return fact ? entryOf(fact, entry.resourceId) : null;
  }

  async searchEntries(
    scope: EpisodicMemoryScope,
    query: string,
    opts: EpisodicMemorySearchOptions = {},
  ): Promise<RetrievedEpisodicMemoryEntry[]> {
    const wanted = words(query);
    const statuses = opts.includeStatuses ?? ["active"];
    const scored: RetrievedEpisodicMemoryEntry[] = [];
    for (const status of statuses) {
      for await (const fact of this.client.facts.list({ status: FACT_STATUS[status] as "active", limit: 500 })) {
        const have = words(fact.content);
        let hits = 0;
        for (const w of wanted) if (have.has(w)) hits += 1;
        if (!hits) continue;
        const score = hits / wanted.size;
        scored.push({ ...(await entryOf(fact, scope.resourceId)), lexicalScore: score, vectorScore: 0, rrfScore: score, finalScore: score });
      }
    }
    scored.sort((a, b) => b.finalScore - a.finalScore);
    return scored.slice(0, opts.topK ?? 5);
  }

  async getEntrySources(entryIds: string[]): Promise<EpisodicMemoryEntrySource[]> {
    const out: EpisodicMemoryEntrySource[] = [];
    for (const id of entryIds) {
      const fact = await orMissing(this.client.facts.get(id), null, NotFound);
      for (const s of fact?.sources ?? []) {
        if (!s.message_id) continue;
        const msg = await orMissing(this.client.messages.get(s.conversation_id, s.message_id), null, NotFound);
        const conv = await orMissing(this.client.conversations.get(s.conversation_id), null, NotFound);
        const thread = (conv?.metadata as { n8n_thread_id?: string } | null | undefined)?.n8n_thread_id;
        out.push({
          id: `${id}:${s.message_id}`,
          memoryEntryId: id,
          threadId: thread ?? s.conversation_id,
          evidenceText: msg?.content ?? "",
          createdAt: new Date(msg?.created_at ?? fact?.created_at ?? 0),
          candidateId: s.message_id,
        });
      }
    }
    return out;
  }

  async applyReflection(scope: EpisodicMemoryScope, reflection: EpisodicMemoryReflectionApply): Promise<EpisodicMemoryReflectionResult> {
    const droppedIds: string[] = [];
    const supersededIds: string[] = [];
    const inserted: EpisodicMemoryEntry[] = [];
    for (const id of reflection.drop) {
      if ((await orMissing(this.client.facts.delete(id).then(() => true), false, NotFound))) droppedIds.push(id);
    }
    for (const { supersedes, entry } of reflection.merge) {
      const [first, ...rest] = supersedes;
      // the first one is edited (its old text stays in its history); the others go
      const fact = first
        ? await orMissing(this.client.facts.edit(first, { content: entry.content }), null, NotFound)
        : null;
      const saved = fact ? await entryOf(fact, scope.resourceId) : await this.saveEntryWithSources(entry);
      if (fact && first) supersededIds.push(first);
      for (const id of rest) {
        if (await orMissing(this.client.facts.delete(id).then(() => true), false, NotFound)) supersededIds.push(id);
      }
      if (saved) inserted.push(saved);
    }
    return { droppedIds, supersededIds, inserted };
  }
}
