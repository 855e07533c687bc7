/**
 * The Vercel AI SDK with memstrata memory: `prepare` stores the user's message and returns the
 * conversation's context (`client.context`, within a token budget) as `messages` for
 * `generateText`/`streamText` (its leading system parts, such as the facts or a summary, as
 * `instructions`: the SDK takes system text there; blocks that change every turn, such as
 * recalled messages, stay in place among the messages as user text, after the part a
 * provider can cache);
 * `save` (or `onFinish`) stores the model's turn. The message that ends the context's stable
 * part carries Anthropic's cache hint (`providerOptions.anthropic.cacheControl`).
 *
 * ```ts
 * const chat = memstrataChat({ client, conversationId });
 * const { messages } = await chat.prepare("What did I say my name was?");
 * const result = await generateText({ model, messages });
 * await chat.save(result.responseMessages);   // or streamText({ ..., onFinish: chat.onFinish })
 * ```
 */

import type { AssistantModelMessage, ModelMessage, ToolModelMessage } from "ai";
import type { AppendInput, CacheReport, ContextMessage, MemstrataClient, ToolCall } from "./client.js";

export interface MemstrataChatOptions {
  client: MemstrataClient;
  conversationId: string;
  /** Token budget of the context; default 8000 (the server's). */
  budget?: number;
  /** Model name for token counting. */
  model?: string;
}

type Part = { type: string; [k: string]: unknown };

function partsOf(content: unknown): Part[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? (content as Part[]) : [];
}

function outputText(output: unknown): string {
  const o = output as { type?: string; value?: unknown } | undefined;
  if (!o || typeof o !== "object") return String(output ?? "");
  if (o.type === "text" || o.type === "error-text") return String(o.value ?? "");
  return JSON.stringify(o.value ?? null);
}

/** AI SDK messages as memstrata appends: text, tool calls, and one `tool` message per result. */
export function toAppends(messages: ModelMessage[]): AppendInput[] {
  const out: AppendInput[] = [];
  for (const m of messages) {
    const parts = partsOf(m.content);
    const text = parts.filter((p) => p.type === "text").map((p) => String(p.text)).join("");
    if (m.role === "tool") {
      for (const p of parts) {
        if (p.type !== "tool-result") continue;
        out.push({
          role: "tool",
          content: outputText(p.output) || "(empty)",
          tool_call_id: String(p.toolCallId),
          metadata: { ai_sdk_part: p },
        });
      }
      continue;
    }
    const calls: ToolCall[] = parts
      .filter((p) => p.type === "tool-call")
      .map((p) => ({
        id: String(p.toolCallId),
        type: "function",
        function: { name: String(p.toolName), arguments: JSON.stringify(p.input ?? {}) },
      }));
    if (!text && !calls.length) continue; // reasoning-only steps carry nothing to replay
    out.push({ role: m.role, content: text, ...(calls.length ? { tool_calls: calls } : {}) });
  }
  return out;
}

/** A context message's text: memstrata sends parts only for a user message with files. */
function flatText(content: ContextMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!content) return "";
  return content.filter((p) => p.type === "text").map((p) => String(p.text)).join("\n");
}

/** memstrata's context (OpenAI chat shape) as AI SDK `ModelMessage`s. */
export function toModelMessages(messages: ContextMessage[]): ModelMessage[] {
  const names = new Map<string, string>();
  const out: ModelMessage[] = [];
  for (const m of messages) {
    if (m.role === "tool") {
      const id = m.tool_call_id ?? "";
      const msg: ToolModelMessage = {
        role: "tool",
        content: [{ type: "tool-result", toolCallId: id, toolName: names.get(id) ?? "", output: { type: "text", value: flatText(m.content) } }],
      };
      out.push(msg);
    } else if (m.role === "assistant" && m.tool_calls?.length) {
      const content: Exclude<AssistantModelMessage["content"], string> = m.content ? [{ type: "text", text: flatText(m.content) }] : [];
      for (const c of m.tool_calls) {
        names.set(c.id, c.function.name);
        let input: unknown = {};
        try {
          input = JSON.parse(c.function.arguments ?? "{}");
        } catch {
          input = c.function.arguments;
        }
        content.push({ type: "tool-call", toolCallId: c.id, toolName: c.function.name, input });
      }
      out.push({ role: "assistant", content });
    } else {
      out.push({ role: m.role, content: m.content } as ModelMessage);
    }
  }
  return out;
}

export interface Prepared {
  /** The context's leading system messages, joined (absent when it has none). */
  instructions?: string;
  messages: ModelMessage[];
}

/** Anthropic's prompt-cache marker, as the AI SDK's Anthropic provider takes it per message. */
export const CACHE_HINT = { anthropic: { cacheControl: { type: "ephemeral" } } } as const;

export interface MemstrataChat {
  /**
   * Store the user's message, then answer the context to send (it ends with that message):
   * spread it into `generateText`/`streamText`. Add your own instructions in front of
   * `instructions` when you have some.
   */
  prepare(input: string | ModelMessage): Promise<Prepared>;
  /** Store the model's turn: every step's messages (`result.responseMessages`). */
  save(responseMessages: ModelMessage[]): Promise<void>;
  /** For `generateText`/`streamText`'s `onFinish`: saves `event.responseMessages` (all steps). */
  onFinish: (event: { responseMessages: ModelMessage[] }) => Promise<void>;
  /** What a provider's prompt cache can serve of the last prepared context (its report's
   * `cache`), when the server says. */
  readonly cache: CacheReport | undefined;
}

export function memstrataChat(options: MemstrataChatOptions): MemstrataChat {
  const { client, conversationId } = options;
  const save = async (responseMessages: ModelMessage[]) => {
    for (const m of toAppends(responseMessages)) await client.messages.append(conversationId, m);
  };
  let last: CacheReport | undefined;
  return {
    get cache() {
      return last;
    },
    async prepare(input) {
      const message: ModelMessage = typeof input === "string" ? { role: "user", content: input } : input;
      await save([message]);
      const query = partsOf(message.content).filter((p) => p.type === "text").map((p) => String(p.text)).join(" ");
      const ctx = await client.context(conversationId, {
        ...(options.budget !== undefined ? { budget: options.budget } : {}),
        ...(options.model !== undefined ? { model: options.model } : {}),
        ...(query ? { query } : {}),
      });
      const cache = ctx.report.cache;
      // The instructions: the leading system messages of the stable part (a per-turn block
      // right after them, as on a conversation's first turn, is not one of them).
      const lead = ctx.messages.findIndex((m) => m.role !== "system");
      let split = lead < 0 ? ctx.messages.length : lead;
      if (cache?.breakpoint != null && cache.breakpoint + 1 < split) split = cache.breakpoint + 1;
      const system = ctx.messages.slice(0, split).map((m) => m.content);
      // A block after the conversation began (recall, working memory) goes as user text:
      // some providers (Anthropic) take system text only ahead of the conversation.
      const rest = ctx.messages.slice(split).map((m) => (m.role === "system" ? { ...m, role: "user" as const } : m));
      const messages = toModelMessages(rest);
      last = cache;
      // toModelMessages keeps one message per context message, so the index carries over.
      const at = cache?.breakpoint == null ? -1 : cache.breakpoint - split;
      if (at >= 0 && at < messages.length) messages[at] = { ...messages[at], providerOptions: CACHE_HINT } as ModelMessage;
      return system.length ? { instructions: system.join("\n\n"), messages } : { messages };
    },
    save,
    onFinish: (event) => save(event.responseMessages),
  };
}
