import assert from "node:assert/strict";
import { test } from "node:test";
import {
  Conflict,
  Expired,
  Forbidden,
  InvalidInput,
  MemstrataError,
  NotFound,
  PreconditionFailed,
  Unauthorized,
  createClient,
  uuid7,
} from "../dist/index.js";
import { admin, clientA, clientB, env, unique, url } from "./helpers.mjs";

test("uuid7 ids are version 7 and increase", () => {
  const ids = Array.from({ length: 1000 }, () => uuid7());
  for (const id of ids) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.deepEqual([...ids].sort(), ids);
});

test("a canary of one key is never seen through the other", async () => {
  const a = clientA();
  const b = clientB();
  const canary = unique("canary-alice");
  const conv = await a.conversations.create({ title: canary });
  await a.messages.append(conv.id, { role: "user", content: `remember ${canary}` });
  await a.messages.append(conv.id, { role: "assistant", content: `noted ${canary}` });
  await a.facts.add({ content: `alice's secret is ${canary}` });

  // everything bob can read, serialised, must not contain alice's canary
  const seen = [];
  seen.push(await b.conversations.list().all());
  seen.push(await b.recall.search(canary, { k: 10 }));
  seen.push(await b.facts.list({ status: "all" }).all());
  seen.push(await b.profile());
  seen.push(await b.me());
  for (const read of [() => b.conversations.get(conv.id), () => b.history(conv.id), () => b.messages.list(conv.id).all()]) {
    await assert.rejects(read(), NotFound);
  }
  assert.ok(!JSON.stringify(seen).includes(canary), "bob saw alice's canary");

  // alice sees it; the admin sees it only when acting for alice
  const hist = await a.history(conv.id);
  assert.deepEqual(hist.messages.map((m) => m.role), ["user", "assistant"]);
  assert.ok((await admin().asUser("alice").conversations.get(conv.id)).title === canary);
  await assert.rejects(admin().asUser("bob").conversations.get(conv.id), NotFound);
  // a user key naming a user is refused; the admin's `me` says it is an admin
  await assert.rejects(a.asUser("bob").conversations.list().page(), Forbidden);
  assert.equal((await admin().me()).admin, true);
  assert.equal((await a.me()).user, "alice");
});

test("search carries relevance, pending and why-not verdicts", async () => {
  const a = clientA();
  const word = unique("lighthouse");
  const conv = await a.conversations.create({ title: "notes" });
  const msg = await a.messages.append(conv.id, { role: "user", content: `the ${word} keeper` });
  const hits = await a.recall.search(word, { k: 5, explain: true, explainIds: [msg.id, "no-such-id"] });
  assert.ok(Array.isArray(hits));
  assert.equal(hits.pending, 0);
  assert.equal(hits[0].message.id, msg.id);
  assert.ok(hits[0].relevance >= 0 && hits[0].relevance <= 1);
  assert.ok(hits[0].signals && "keyword_coverage" in hits[0].signals);
  const verdicts = Object.fromEntries(hits.explained.map((e) => [e.id, e.reason]));
  assert.deepEqual(verdicts, { [msg.id]: "returned", "no-such-id": "unknown" });
  const none = await a.recall.search(word, { minRelevance: 1 });
  assert.equal(none.length, 0);
  await assert.rejects(a.recall.search(word, { minRelevance: 2 }), InvalidInput);
});

test("an append retried with its id gives one message; other content is a Conflict", async () => {
  const a = clientA();
  const conv = await a.conversations.create({});
  const id = uuid7();
  const first = await a.messages.append(conv.id, { id, role: "user", content: "once" });
  const again = await a.messages.append(conv.id, { id, role: "user", content: "once" });
  assert.equal(again.id, first.id);
  assert.equal((await a.messages.list(conv.id).all()).length, 1);
  await assert.rejects(a.messages.append(conv.id, { id, role: "user", content: "twice" }), (e) => {
    assert.ok(e instanceof Conflict && e instanceof MemstrataError);
    assert.equal(e.status, 409);
    return true;
  });
});

test("a dropped answer is retried with the same id and stores one message", async () => {
  let dropped = 0;
  // the request reaches the server, then the connection "drops" before the answer
  const flaky = async (input, init) => {
    const response = await fetch(input, init);
    if (init?.method === "POST" && dropped === 0) {
      dropped += 1;
      await response.text();
      throw new TypeError("fetch failed: socket hang up");
    }
    return response;
  };
  const a = createClient({ baseUrl: url(), apiKey: env("MEMSTRATA_KEY_A"), fetch: flaky });
  const conv = await clientA().conversations.create({});
  dropped = 0;
  const msg = await a.messages.append(conv.id, { role: "user", content: "sent twice" });
  assert.equal(dropped, 1);
  const all = await a.messages.list(conv.id).all();
  assert.deepEqual(all.map((m) => m.id), [msg.id]);
});

test("problem+json maps to the error tree (401, 404, 409, 410, 412, 422)", async () => {
  const a = clientA();
  await assert.rejects(createClient({ baseUrl: url(), apiKey: "nope" }).me(), Unauthorized);
  await assert.rejects(a.conversations.get(uuid7()), (e) => e instanceof NotFound && e.status === 404 && e.code === "not_found");
  const fact = unique("fact");
  await a.facts.add({ content: fact });
  await assert.rejects(a.facts.add({ content: fact }), Conflict);
  const conv = await a.conversations.create({});
  const plan = await a.plans.put(conv.id, { steps: ["a"] }, { ifNoneMatch: "*" });
  assert.ok(plan.etag);
  const next = await a.plans.put(conv.id, { steps: ["a", "b"] }, { ifMatch: plan.etag });
  await assert.rejects(a.plans.put(conv.id, { steps: [] }, { ifMatch: plan.etag }), PreconditionFailed);
  assert.equal((await a.plans.get(conv.id)).version, next.version);
  const run = unique("run");
  await a.checkpoints.save("agent", run, { step: 1 });
  await a.checkpoints.delete("agent", run);
  await assert.rejects(a.checkpoints.load("agent", run), Expired);
  await assert.rejects(a.messages.append(conv.id, { role: "wizard", content: "x" }), (e) => e instanceof InvalidInput && e.status === 422);
});

test("pagination walks 250 messages in order, page by page", async () => {
  const a = clientA();
  const conv = await a.conversations.create({});
  const sent = [];
  for (let i = 0; i < 250; i++) {
    const m = await a.messages.append(conv.id, { role: i % 2 ? "assistant" : "user", content: `message ${i}` });
    sent.push(m.id);
  }
  const pages = [];
  for await (const page of a.messages.list(conv.id, { limit: 60 }).pages()) pages.push(page.items.length);
  assert.deepEqual(pages, [60, 60, 60, 60, 10]);
  const got = [];
  for await (const m of a.messages.list(conv.id, { limit: 100 })) got.push(m.id);
  assert.deepEqual(got, sent);
});

test("the facade's other parts answer over REST", async () => {
  const a = clientA();
  const conv = await a.conversations.create({ title: "parts" });
  const u = await a.messages.append(conv.id, { role: "user", content: "What is the capital of France?" });
  await a.messages.append(conv.id, { role: "assistant", content: "Paris." });
  const pending = await a.messages.append(conv.id, { role: "assistant", content: "", status: "pending", parent_id: u.id });
  // the pending regeneration is the active leaf; history leaves it out until it completes
  assert.deepEqual((await a.history(conv.id)).messages.map((m) => m.id), [u.id]);
  const done = await a.messages.complete(conv.id, pending.id, { content: "Paris, again." });
  assert.equal(done.status, "complete");
  assert.deepEqual((await a.history(conv.id)).messages.map((m) => m.content), [u.content, "Paris, again."]);
  assert.equal((await a.messages.leaves(conv.id).all()).length, 2);
  const ctx = await a.context(conv.id, { budget: 500, query: "capital" });
  assert.ok(Array.isArray(ctx.messages) && ctx.report);
  const renamed = await a.conversations.update(conv.id, { title: "renamed" });
  assert.equal(renamed.title, "renamed");

  const w = await a.working.put("# notes\n- likes tea", { conversationId: conv.id });
  await assert.rejects(a.working.put("stale", { conversationId: conv.id, ifMatch: "999" }), PreconditionFailed);
  assert.equal((await a.working.get({ conversationId: conv.id })).version, w.version);

  await a.iterations.append(conv.id, { task: "t", outcome: "failed", error: "boom" });
  await a.iterations.append(conv.id, { task: "t", outcome: "ok" });
  assert.deepEqual((await a.iterations.list(conv.id, { task: "t" }).all()).map((i) => i.attempt), [1, 2]);

  await a.snapshots.put(conv.id, "run-1", { ui: true });
  assert.deepEqual((await a.snapshots.get(conv.id, "run-1")).data, { ui: true });

  const turn = await a.nodes.addTurn("app", conv.id, "node", {
    message_id: uuid7(),
    user_content: "hi",
    assistant_content: "hello",
  });
  assert.equal((await a.nodes.history("app", conv.id, "node")).messages.length, 2);
  await a.nodes.delete("app", conv.id, "node");
  assert.ok(turn.uid);

  assert.ok(Array.isArray((await a.jobs.list().page()).items));
  const users = await admin().users.list().all();
  assert.ok(users.some((x) => x.id === "alice"));
  await assert.rejects(a.users.list().page(), Forbidden);

  const rid = await a.conversations.delete(conv.id);
  await assert.rejects(a.conversations.get(conv.id), NotFound);
  const receipt = await a.receipts.get(rid);
  assert.equal(receipt.kind, "conversation");
  assert.deepEqual(receipt.subject_ids, [conv.id]);
  assert.equal(receipt.verified, true);
  await assert.rejects(clientB().receipts.get(rid), NotFound);
});

test("a recorded context linked to a reply: its provenance and the fact's usage", async () => {
  const a = clientA();
  const b = clientB();
  const conv = await a.conversations.create({ title: unique("provenance") });
  await a.messages.append(conv.id, { role: "user", content: "Which tea do I like?" });
  const fact = await a.facts.add({ content: unique("likes green tea"), category: "preference" });
  const ctx = await a.context(conv.id, { record: true });
  assert.equal(typeof ctx.context_id, "string");
  const reply = await a.messages.append(conv.id, { role: "assistant", content: "Green.", context_id: ctx.context_id });
  const found = await a.messages.provenance(conv.id, reply.id);
  assert.equal(found.record.id, ctx.context_id);
  assert.ok(found.record.items.some((i) => i.kind === "fact" && i.id === fact.id));
  const uses = await a.facts.usage(fact.id).all();
  assert.deepEqual(uses.map((u) => u.message_id), [reply.id]);
  await assert.rejects(b.messages.provenance(conv.id, reply.id), NotFound);
  await assert.rejects(b.facts.usage(fact.id).all(), NotFound);
  // The record is taken: another reply is a Conflict, and is not stored.
  await assert.rejects(
    a.messages.append(conv.id, { role: "assistant", content: "Again.", context_id: ctx.context_id }),
    Conflict,
  );
  assert.equal((await a.messages.list(conv.id).all()).length, 2);
});
