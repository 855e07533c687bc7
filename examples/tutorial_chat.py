"""A small chat loop on memstrata: the code of docs/tutorial.md, snippet by snippet.

Run it against any OpenAI-compatible endpoint; the model writes the assistant's replies
and extracts long-term facts:

    MEMSTRATA_LLM_BASE_URL=http://localhost:11434/v1 MEMSTRATA_LLM_MODEL=llama3.1 \
        python examples/tutorial_chat.py

Every run starts from an empty memory in a new temporary directory, removed at the end.
tests/test_tutorial.py runs this file and checks that each ```python block of the
tutorial appears here verbatim, so the two cannot drift apart.
"""

from __future__ import annotations

import sys
import tempfile

from memstrata import Memory, Message, PreconditionFailed, Scope
from memstrata.config import Settings
from memstrata.llm import llm_from_settings

workdir = tempfile.TemporaryDirectory(prefix="memstrata-tutorial-")
settings = Settings(home=workdir.name, longterm_capture=True)
llm = llm_from_settings(settings)
if llm is None:
    sys.exit("set MEMSTRATA_LLM_MODEL (and MEMSTRATA_LLM_BASE_URL) to an OpenAI-compatible model")

mem = Memory.open(settings=settings)
alice = Scope(tenant="demo", user="alice")

conv = mem.conversations.create(alice, title="Weekend in Bergen")
mem.messages.append(alice, conv.id, role="system", content="You are a concise travel assistant.")


def turn(conversation_id: str, text: str) -> Message:
    """One chat turn: store the question, answer it from the history, store the answer."""
    mem.messages.append(alice, conversation_id, role="user", content=text)
    history = mem.history(alice, conversation_id, max_tokens=2000)
    answer = llm.complete(history.to_openai())
    return mem.messages.append(alice, conversation_id, role="assistant", content=answer)


hello = turn(conv.id, "Hi! I'm spending next weekend in Bergen. I like seafood.")
print("assistant:", hello.content)
weather = turn(conv.id, "What is the weather like there in May?")
print("assistant:", weather.content)

full = mem.history(alice, conv.id, max_tokens=2000)
print(f"history: {len(full.messages)} messages, {full.tokens} tokens")
tight = mem.history(alice, conv.id, max_tokens=60)
print(f"history under 60 tokens: {len(tight.messages)} messages, truncated={tight.truncated}")
print("kept:", [m.role.value for m in tight.messages])

first = turn(conv.id, "Which hike would you suggest for Saturday?")
print("assistant:", first.content)
question_id = first.parent_id
retry = llm.complete(mem.history(alice, conv.id, leaf_id=question_id).to_openai())
second = mem.messages.append(alice, conv.id, role="assistant", content=retry, parent_id=question_id)
print("regenerated:", second.content)
print("leaves:", len(mem.messages.leaves(alice, conv.id).items))

mem.conversations.set_active_leaf(alice, conv.id, first.id)
print("active branch ends with:", mem.history(alice, conv.id).messages[-1].content)

ctx = mem.context(alice, conv.id, budget=3000)
print(f"context: {ctx.report.total} of {ctx.report.budget} tokens, {len(ctx.messages)} messages")
for name, tier in ctx.report.tiers.items():
    if tier.granted:
        print(f"  tier {name}: {tier.granted} tokens, {tier.items} items")


def chat(conversation_id: str, text: str) -> str:
    """The finished loop: store the question, assemble the context, answer, store the answer."""
    mem.messages.append(alice, conversation_id, role="user", content=text)
    context = mem.context(alice, conversation_id, budget=3000)
    answer = llm.complete(context.messages)
    mem.messages.append(alice, conversation_id, role="assistant", content=answer)
    return answer


print("assistant:", chat(conv.id, "Lovely. Where can I stay? I prefer quiet hotels."))

result = mem.longterm.flush(alice, conv.id)
print("extraction:", result.outcome)
for fact in mem.facts.list(alice).items:
    print(f"fact: [{fact.category} {fact.confidence:.2f}] {fact.content}")

dinner = mem.conversations.create(alice, title="Dinner")
mem.messages.append(alice, dinner.id, role="user", content="Book a table for tonight, please.")
ctx = mem.context(alice, dinner.id, budget=3000)
for message in ctx.messages:
    print(f"--- {message['role']}\n{message['content']}")

for hit in mem.recall.search(alice, "hike on Saturday", k=3):
    print(f"recall: {hit.message.role.value}: {hit.message.content}")

notes = mem.working.put(alice, "# Trip\n- city: Bergen", expected_version=0)
try:
    mem.working.put(alice, "# Trip\n- city: Oslo", expected_version=0)
except PreconditionFailed as exc:
    print("refused:", exc)
notes = mem.working.put(alice, notes.content + "\n- hotel: quiet", expected_version=notes.version)
print("working memory version:", notes.version)

ctx = mem.context(alice, dinner.id, budget=3000)
print("\n".join(m["content"] for m in ctx.messages if m["role"] == "system"))
print("assistant:", chat(dinner.id, "Somewhere close to the hotel, please."))

mem.close()
workdir.cleanup()
