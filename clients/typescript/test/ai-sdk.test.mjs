import assert from "node:assert/strict";
import { test } from "node:test";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";
import { memstrataChat } from "../dist/ai-sdk.js";
import { clientA } from "./helpers.mjs";
import { scriptedModel } from "./scripted-model.mjs";

const promptText = (call) => JSON.stringify(call.prompt);

test("generateText and streamText see the stored conversation and their turns are saved", async () => {
  const client = clientA();
  const conv = await client.conversations.create({ title: "ai-sdk" });
  const chat = memstrataChat({ client, conversationId: conv.id, budget: 4000 });
  const model = scriptedModel([
    { text: "Nice to meet you, Ada." },
    { tool: "lookup", id: "call_l1", input: { topic: "Ada" } },
    { text: "Ada Lovelace wrote the first program." },
    { text: "Your name is Ada." },
  ]);

  const first = await generateText({ model, ...(await chat.prepare("Hi, my name is Ada.")) });
  await chat.save(first.responseMessages);

  const lookup = tool({
    description: "Look a topic up",
    inputSchema: z.object({ topic: z.string() }),
    execute: async ({ topic }) => ({ found: `${topic} Lovelace` }),
  });
  const second = await generateText({
    model,
    tools: { lookup },
    stopWhen: stepCountIs(3),
    ...(await chat.prepare("Who was Ada?")),
    onFinish: chat.onFinish,
  });
  assert.equal(second.text, "Ada Lovelace wrote the first program.");

  const stream = streamText({ model, ...(await chat.prepare("What is my name?")), onFinish: chat.onFinish });
  assert.equal(await stream.text, "Your name is Ada.");
  await stream.consumeStream?.();
  // the streamed call's prompt held the first turn, read back from memstrata
  const prompt = promptText(model.doStreamCalls.at(-1));
  assert.ok(prompt.includes("my name is Ada") && prompt.includes("Nice to meet you, Ada."), prompt);
  assert.ok(prompt.includes("call_l1"), "the tool call and its result are replayed");

  const deadline = Date.now() + 5000;
  let history;
  do {
    history = await client.history(conv.id);
  } while (history.messages.length < 8 && Date.now() < deadline);
  assert.deepEqual(
    history.messages.map((m) => [m.role, m.content, m.tool_calls?.[0]?.function?.name ?? null]),
    [
      ["user", "Hi, my name is Ada.", null],
      ["assistant", "Nice to meet you, Ada.", null],
      ["user", "Who was Ada?", null],
      ["assistant", "", "lookup"],
      ["tool", JSON.stringify({ found: "Ada Lovelace" }), null],
      ["assistant", "Ada Lovelace wrote the first program.", null],
      ["user", "What is my name?", null],
      ["assistant", "Your name is Ada.", null],
    ],
  );
});

test("prepare keeps the stable order and passes the context's cache hint through", async () => {
  const client = clientA();
  const conv = await client.conversations.create({ title: "ai-sdk-cache" });
  await client.messages.append(conv.id, { role: "system", content: "You are terse." });
  const chat = memstrataChat({ client, conversationId: conv.id });
  const first = await chat.prepare("Hi, my name is Ada.");
  assert.equal(first.instructions, "You are terse.");
  assert.equal(chat.cache.prefix_tokens, 0);
  await chat.save([{ role: "assistant", content: "Hello Ada." }]);
  const second = await chat.prepare("What is my name?");
  assert.ok(chat.cache.prefix_tokens > 0, JSON.stringify(chat.cache));
  const marked = second.messages.filter((m) => m.providerOptions);
  assert.deepEqual(marked.map((m) => [m.role, m.content]), [["assistant", "Hello Ada."]]);
  assert.deepEqual(marked[0].providerOptions, { anthropic: { cacheControl: { type: "ephemeral" } } });
  assert.equal(second.messages.at(-1).content, "What is my name?");
});
