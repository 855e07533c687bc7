// The user's conversations, newest first, a page at a time.

import { api } from "../api.js";
import { add, empty, errorBox, h, link, shortId, when } from "../dom.js";

function row(c) {
  return h(
    "tr",
    { "data-testid": "conversation", "data-id": c.id },
    h("td", {}, h("a", { href: link(`/c/${encodeURIComponent(c.id)}`) }, c.title || "(untitled)")),
    h("td", { class: "num" }, c.message_count),
    h("td", { class: "mono muted wide-only", title: c.id }, shortId(c.id)),
    h("td", { class: "muted time" }, when(c.updated_at)),
  );
}

export async function conversationsView() {
  const first = await api.get("/v1/conversations", { limit: 50 });
  if (!first.items.length) {
    return h("section", {}, h("h1", {}, "Conversations"), empty("No conversations yet."));
  }
  const body = h("tbody", {}, first.items.map(row));
  const footer = h("div", { class: "more" });
  let cursor = first.next_cursor;
  const more = h(
    "button",
    {
      type: "button",
      class: "ghost",
      onclick: async () => {
        more.disabled = true;
        try {
          const page = await api.get("/v1/conversations", { limit: 50, cursor });
          add(body, page.items.map(row));
          cursor = page.next_cursor;
        } catch (err) {
          add(footer, errorBox(err));
        }
        more.disabled = false;
        more.hidden = !cursor;
      },
    },
    "Load more",
  );
  more.hidden = !cursor;
  add(footer, more);
  return h(
    "section",
    {},
    h("h1", {}, "Conversations"),
    h(
      "table",
      { class: "table", "data-testid": "conversations" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "title"),
          h("th", { class: "num" }, "messages"),
          h("th", { class: "wide-only" }, "id"),
          h("th", {}, "updated"),
        ),
      ),
      body,
    ),
    footer,
  );
}
