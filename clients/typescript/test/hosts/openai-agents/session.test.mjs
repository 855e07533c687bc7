// memstrata/openai-agents with the real @openai/agents-core (installed in this folder with the
// zod 4 it needs) and the SDK's own scripted model.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Agent, run, tool } from "@openai/agents-core";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";
import { z } from "zod";
import { MemstrataSession } from "../../../dist/openai-agents.js";
import { clientA, clientB, rows, unique, url } from "../../helpers.mjs";

const weather = tool({
  name: "weather",
  description: "The weather in a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
});

test("an Agents JS run keeps its history in a memstrata session", async () => {
  const sessionId = unique("session");
  const model = new ScriptedModel([
    [assistantMessage("Hi! Ask me about the weather.")],
    [functionCall("weather", { city: "Paris" }, { callId: "call_w1" })],
    [assistantMessage("It is sunny in Paris.")],
  ]);
  const agent = new Agent({ name: "forecaster", instructions: "Be brief.", model, tools: [weather] });
  const session = new MemstrataSession({ client: clientA(), sessionId });

  await run(agent, "hello", { session });
  const second = await run(agent, "weather in Paris?", { session });
  assert.equal(second.finalOutput, "It is sunny in Paris.");
  // the second turn's model call saw the first turn, read back from memstrata
  const input = JSON.stringify(model.calls[1].request.input);
  assert.ok(input.includes("Hi! Ask me about the weather."), input);

  // a new session object (another process) with the same id reads the same items
  const again = new MemstrataSession({ client: clientA(), sessionId });
  const items = await again.getItems();
  assert.deepEqual(items.map((i) => i.type ?? "message").slice(-3), ["function_call", "function_call_result", "message"]);
  assert.equal((await again.getItems(2)).length, 2);

  // over REST the session is a conversation in OpenAI's chat shape
  const cid = await again.conversationId();
  const history = await clientA().history(cid);
  assert.deepEqual(
    rows(history),
    [
      ["user", "hello", null, null],
      ["assistant", "Hi! Ask me about the weather.", null, null],
      ["user", "weather in Paris?", null, null],
      ["assistant", "", "weather", null],
      ["tool", "sunny in Paris", null, "call_w1"],
      ["assistant", "It is sunny in Paris.", null, null],
    ],
  );
  // another user's session with the same id is a different, empty one
  assert.deepEqual(await new MemstrataSession({ client: clientB(), sessionId }).getItems(), []);

  await again.clearSession();
  assert.deepEqual(await again.getItems(), []);
  await again.addItems([{ role: "user", content: "fresh start" }]);
  assert.deepEqual((await again.getItems()).map((i) => i.content), ["fresh start"]);
});

test("popItem removes the newest item", async (t) => {
  const doc = await (await fetch(`${url()}/openapi.json`)).json();
  if (!doc.paths["/v1/conversations/{cid}/messages/{mid}"]?.delete) {
    t.skip("this server has no DELETE /v1/conversations/{cid}/messages/{mid} yet");
    return;
  }
  const session = new MemstrataSession({ client: clientA() });
  await session.addItems([{ role: "user", content: "one" }, { role: "user", content: "two" }]);
  assert.equal((await session.popItem()).content, "two");
  assert.deepEqual((await session.getItems()).map((i) => i.content), ["one"]);
});
