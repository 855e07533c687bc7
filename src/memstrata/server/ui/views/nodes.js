// Node memory: the API cannot list nodes, so this reads one node's thread by its
// (app, conversation, node) address.

import { api } from "../api.js";
import { empty, errorBox, fill, h } from "../dom.js";

const enc = encodeURIComponent;

function field(id, label, value, extra = {}) {
  const input = h("input", { id, name: id, type: "text", value: value || "", ...extra });
  return [h("label", { for: id }, label), input];
}

function historyView(data) {
  if (!data.messages.length) return empty("This node has no stored turns.");
  return [
    h(
      "p",
      { class: "muted", "data-testid": "node-summary" },
      `${data.messages.length} messages · ${data.tokens} tokens` + (data.truncated ? " · truncated" : ""),
      data.over_budget ? " · the newest turn alone is over the budget" : "",
    ),
    h(
      "ol",
      { class: "transcript", "data-testid": "node-messages" },
      data.messages.map((m) =>
        h(
          "li",
          { class: `turn role-${m.role}`, "data-testid": "node-message" },
          h("div", { class: "turn-head" }, h("span", { class: "role" }, m.role)),
          h("div", { class: "turn-text" }, m.content),
        ),
      ),
    ),
  ];
}

export async function nodesView(route, ctx) {
  const q = route.query;
  const [appLabel, app] = field("node-app", "App id", q.app, { required: true, "data-testid": "node-app" });
  const [cidLabel, cid] = field("node-cid", "Conversation id", q.cid, {
    required: true,
    list: "node-conversations",
    "data-testid": "node-cid",
  });
  const [nodeLabel, node] = field("node-id", "Node id", q.node, { required: true, "data-testid": "node-id" });
  const [maxLabel, maxTokens] = field("node-max", "Max tokens", q.max_tokens || "2000", {
    type: "number",
    min: "0",
  });
  const result = h("div", { "data-testid": "node-result" });
  // Known conversations as suggestions for the id field (first page only).
  const options = h("datalist", { id: "node-conversations" });
  api
    .get("/v1/conversations", { limit: 50 })
    .then((page) =>
      fill(options, page.items.map((c) => h("option", { value: c.id }, c.title || "(untitled)"))),
    )
    .catch(() => {});

  async function read() {
    fill(result, h("p", { class: "muted" }, "Reading…"));
    try {
      const data = await api.get(
        `/v1/apps/${enc(app.value.trim())}/conversations/${enc(cid.value.trim())}` +
          `/nodes/${enc(node.value.trim())}/history`,
        { max_tokens: maxTokens.value },
      );
      fill(result, historyView(data));
    } catch (err) {
      fill(result, errorBox(err));
    }
  }

  const form = h(
    "form",
    {
      class: "grid-form card",
      onsubmit: (event) => {
        event.preventDefault();
        ctx.remember({ app: app.value.trim(), cid: cid.value.trim(), node: node.value.trim() });
        read();
      },
    },
    appLabel,
    app,
    cidLabel,
    cid,
    nodeLabel,
    node,
    maxLabel,
    maxTokens,
    h("div", {}),
    h("button", { type: "submit", "data-testid": "node-read" }, "Read history"),
    options,
  );
  if (q.app && q.cid && q.node) read();
  return h(
    "section",
    {},
    h("h1", {}, "Node memory"),
    h(
      "p",
      { class: "muted" },
      "A workflow node's own turn history, by app, conversation and node id.",
    ),
    form,
    result,
  );
}
