import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Expired } from "../dist/index.js";
import { MemstrataCheckpointStore, MemstrataMemory } from "../dist/n8n.js";
import { buildAgent } from "./n8n-agent.mjs";
import { admin, clientA, clientB, rows, unique, url } from "./helpers.mjs";

const run = promisify(execFile);

async function hasRoute(method, path) {
  const doc = await (await fetch(`${url()}/openapi.json`)).json();
  return Boolean(doc.paths[path]?.[method]);
}

test("an n8n agent runs two turns, suspends, resumes in a new process; the thread is a conversation", async () => {
  const a = clientA();
  const threadId = unique("thread");
  const persistence = { threadId, resourceId: "alice" };
  const { agent, memory } = buildAgent(a, [
    { text: "Hello, how can I help?" },
    { tool: "approve", id: "call_pay", input: { amount: 5 } },
  ]);
  await agent.generate("hi", { persistence });
  const second = await agent.generate("please pay 5", { persistence });
  assert.equal(second.pendingSuspend?.length, 1, JSON.stringify(second));
  const { runId, toolCallId } = second.pendingSuspend[0];
  const store = new MemstrataCheckpointStore(a);
  assert.equal((await store.load(runId))?.status, "suspended");

  const child = await run(process.execPath, ["--import", fileURLToPath(new URL("./offline.mjs", import.meta.url)), fileURLToPath(new URL("./n8n-agent.mjs", import.meta.url))], {
    env: { ...process.env, RUN_ID: runId, TOOL_CALL_ID: toolCallId },
  });
  const resumed = JSON.parse(child.stdout);
  assert.equal(resumed.error, null);
  assert.ok(JSON.stringify(resumed.messages).includes("Paid 5, approved."));
  assert.equal(await store.load(runId), undefined, "a finished run's checkpoint is gone");

  // the thread through n8n's own interface ...
  const thread = await memory.getThread(threadId);
  assert.equal(thread.resourceId, "alice");
  const msgs = await memory.getMessages(threadId);
  assert.deepEqual(msgs.map((m) => m.role), ["user", "assistant", "user", "assistant", "assistant"]);
  const call = msgs[3].content[0];
  assert.equal(call.type, "tool-call");
  assert.equal(call.state, "resolved");
  assert.deepEqual(call.output, { approved: true, amount: 5 });
  assert.ok(msgs.every((m) => m.createdAt instanceof Date));
  assert.deepEqual((await memory.getMessages(threadId, { limit: 2 })).map((m) => m.id), msgs.slice(3).map((m) => m.id));
  assert.deepEqual((await memory.getMessages(threadId, { before: msgs[2].createdAt })).map((m) => m.id), msgs.slice(0, 2).map((m) => m.id));

  // ... and as a memstrata conversation over REST, in OpenAI's shape
  const cid = await memory.conversationOf(threadId);
  const history = await a.history(cid);
  assert.deepEqual(
    rows(history),
    [
      ["user", "hi", null, null],
      ["assistant", "Hello, how can I help?", null, null],
      ["user", "please pay 5", null, null],
      ["assistant", "", "approve", null],
      ["tool", JSON.stringify({ approved: true, amount: 5 }), null, "call_pay"],
      ["assistant", "Paid 5, approved.", null, null],
    ],
  );
  const seen = await admin().asUser("alice").conversations.get(cid);
  assert.equal(seen.metadata.n8n_thread_id, threadId);
  // another user's n8n memory does not find alice's thread
  assert.equal(await new MemstrataMemory(clientB()).getThread(threadId), null);
  assert.equal(memory.describe().constructorName, "MemstrataMemory");

  await memory.deleteThread(threadId);
  assert.equal(await memory.getThread(threadId), null);
});

test("claimForResume: of many concurrent claims exactly one wins", async () => {
  const key = unique("run");
  const state = { status: "suspended", messageList: { messages: [] }, pendingToolCalls: {} };
  await new MemstrataCheckpointStore(clientA()).save(key, state);
  // separate store objects (as separate processes would have), all claiming at once
  const claims = await Promise.all(
    Array.from({ length: 8 }, () => new MemstrataCheckpointStore(clientA()).claimForResume(key, structuredClone(state))),
  );
  assert.equal(claims.filter(Boolean).length, 1, JSON.stringify(claims));
  const store = new MemstrataCheckpointStore(clientA());
  assert.equal((await store.load(key)).status, "running");
  assert.equal(await store.claimForResume(key, state), false, "a claimed state cannot be claimed again");
  // a new suspension can be claimed again, once
  const again = { ...state, iterationCount: 2 };
  await store.save(key, again);
  assert.equal(await store.claimForResume(key, state), false, "a stale state does not win");
  assert.equal(await store.claimForResume(key, again), true);
  await store.delete(key);
  assert.equal(await store.load(key), undefined);
  await assert.rejects(clientA().checkpoints.load("n8n", key), Expired);
});

test("deleteMessages removes a message (and its tool results) over REST", async (t) => {
  if (!(await hasRoute("delete", "/v1/conversations/{cid}/messages/{mid}"))) {
    t.skip("this server has no DELETE /v1/conversations/{cid}/messages/{mid} yet");
    return;
  }
  const memory = new MemstrataMemory(clientA());
  const threadId = unique("thread");
  await memory.saveThread({ id: threadId, resourceId: "alice" });
  const now = Date.now();
  const m1 = { id: crypto.randomUUID(), createdAt: new Date(now), role: "user", content: [{ type: "text", text: "one" }] };
  const m2 = { id: "n8n-custom-id-2", createdAt: new Date(now + 1), role: "assistant", content: [{ type: "text", text: "two" }] };
  await memory.saveMessages({ threadId, resourceId: "alice", messages: [m1, m2] });
  assert.deepEqual((await memory.getMessages(threadId)).map((m) => m.id), [m1.id, m2.id]);
  await memory.deleteMessages([m2.id]);
  assert.deepEqual((await memory.getMessages(threadId)).map((m) => m.id), [m1.id]);
});

test("deleteMessages works from a fresh instance: the id alone finds the message", async () => {
  const threadId = unique("thread");
  const saver = new MemstrataMemory(clientA());
  await saver.saveThread({ id: threadId, resourceId: "alice" });
  const now = Date.now();
  const m1 = { id: crypto.randomUUID(), createdAt: new Date(now), role: "user", content: [{ type: "text", text: "one" }] };
  const m2 = { id: "n8n-elsewhere-2", createdAt: new Date(now + 1), role: "assistant", content: [{ type: "text", text: "two" }] };
  await saver.saveMessages({ threadId, resourceId: "alice", messages: [m1, m2] });
  // Another process: it never saved nor read these messages.
  await new MemstrataMemory(clientA()).deleteMessages([m2.id]);
  assert.deepEqual((await saver.getMessages(threadId)).map((m) => m.id), [m1.id]);
  // Another user's instance cannot reach them, and an unknown id is skipped.
  await new MemstrataMemory(clientB()).deleteMessages([m1.id, "no-such-message"]);
  assert.deepEqual((await saver.getMessages(threadId)).map((m) => m.id), [m1.id]);
});

test("deleteMessages removes only the named message of a linear thread", async () => {
  const memory = new MemstrataMemory(clientA());
  const threadId = unique("thread");
  await memory.saveThread({ id: threadId, resourceId: "alice" });
  const now = Date.now();
  const say = (id, role, text, i) => ({ id, createdAt: new Date(now + i), role, content: [{ type: "text", text }] });
  const msgs = [say(crypto.randomUUID(), "user", "one", 0), say("n8n-mid-2", "assistant", "two", 1), say(crypto.randomUUID(), "user", "three", 2), say("n8n-mid-4", "assistant", "four", 3)];
  await memory.saveMessages({ threadId, resourceId: "alice", messages: msgs });
  await memory.deleteMessages([msgs[1].id]);
  assert.deepEqual((await memory.getMessages(threadId)).map((m) => m.id), [msgs[0].id, msgs[2].id, msgs[3].id]);
});

test("episodic memory on facts: save, search, sources, reflection", async () => {
  const { hasEpisodicMemoryStore } = await import("@n8n/agents");
  const memory = new MemstrataMemory(clientB(), { episodic: true });
  assert.equal(hasEpisodicMemoryStore(memory), true);
  const ep = memory.episodic;
  const scope = { resourceId: "bob", threadId: unique("thread") };
  const tag = unique("tea");
  const e1 = await ep.saveEntryWithSources({ resourceId: "bob", content: `Bob drinks ${tag} every morning` }, []);
  const e2 = await ep.saveEntryWithSources({ resourceId: "bob", content: `Bob lives in Lyon ${tag}` }, []);
  assert.equal((await ep.saveEntryWithSources({ resourceId: "bob", content: e1.content }, [])).id, e1.id, "a repeat finds the fact");
  assert.equal(e1.status, "active");

  const found = await ep.searchEntries(scope, `what does Bob drink ${tag} morning`, { topK: 2 });
  assert.equal(found[0].id, e1.id);
  assert.ok(found[0].finalScore > (found[1]?.finalScore ?? 0));
  assert.deepEqual(await ep.getEntrySources([e1.id]), []); // made over REST: no source messages

  const merged = await ep.applyReflection(scope, {
    drop: [e2.id],
    merge: [{ supersedes: [e1.id], entry: { resourceId: "bob", content: `Bob drinks ${tag} twice a day` } }],
  });
  assert.deepEqual(merged.droppedIds, [e2.id]);
  assert.deepEqual(merged.supersededIds, [e1.id]);
  const active = (await clientB().facts.list().all()).map((f) => f.content).filter((c) => c.includes(tag));
  assert.deepEqual(active, [`Bob drinks ${tag} twice a day`]);
  // alice's episodic search never sees bob's facts (her own may match a word of the query)
  const hers = await new MemstrataMemory(clientA(), { episodic: true }).episodic.searchEntries(scope, tag);
  assert.deepEqual(hers.filter((e) => e.content.includes(tag)), []);
  assert.deepEqual(hers.filter((e) => [e1.id, e2.id].includes(e.id)), []);
});
