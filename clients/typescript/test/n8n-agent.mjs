// An @n8n/agents agent whose memory and checkpoints live in memstrata, with a scripted model.
// Run as a script it resumes a suspended run in this (new) process and prints the outcome.
import { Agent, Memory, Tool } from "@n8n/agents";
import { z } from "zod";
import { createClient } from "../dist/index.js";
import { MemstrataCheckpointStore, MemstrataMemory } from "../dist/n8n.js";
import { scriptedModel } from "./scripted-model.mjs";

export function buildAgent(client, steps) {
  const approve = new Tool("approve")
    .description("Ask a person to approve a payment")
    .input(z.object({ amount: z.number() }))
    .suspend(z.object({ question: z.string() }))
    .resume(z.object({ ok: z.boolean() }))
    .handler(async (input, ctx) => {
      if (!ctx.resumeData) return await ctx.suspend({ question: `pay ${input.amount}?` });
      return { approved: ctx.resumeData.ok, amount: input.amount };
    });
  const memory = new MemstrataMemory(client);
  const agent = new Agent("payments")
    .model(scriptedModel(steps))
    .instructions("Be brief.")
    .tool(approve)
    .memory(new Memory().storage(memory).build())
    .checkpoint(new MemstrataCheckpointStore(client));
  return { agent, memory };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const client = createClient({ baseUrl: process.env.MEMSTRATA_URL, apiKey: process.env.MEMSTRATA_KEY_A });
  const { agent } = buildAgent(client, [{ text: "Paid 5, approved." }]);
  const result = await agent.resume("generate", { ok: true }, {
    runId: process.env.RUN_ID,
    toolCallId: process.env.TOOL_CALL_ID,
  });
  process.stdout.write(JSON.stringify({ messages: result.messages, error: result.error ? String(result.error) : null }));
}
