// Prompt provenance on an assistant message: when a recorded context is linked to the
// reply, a fold-out shows what the model saw before it (the record's budget and the ids
// of every injected item with their state now; a deleted fact shows as a tombstone id).

import { api } from "../api.js";
import { badge, h, shortId, when } from "../dom.js";

const enc = encodeURIComponent;
const STATE_KIND = { deleted: "warn", changed: "warn", superseded: "warn", removed: "warn" };

function itemsTable(items) {
  return h(
    "table",
    { class: "table compact", "data-testid": "provenance-items" },
    h(
      "thead",
      {},
      h("tr", {}, h("th", {}, "tier"), h("th", {}, "kind"), h("th", {}, "id"), h("th", {}, "state")),
    ),
    h(
      "tbody",
      {},
      items.map((i) =>
        h(
          "tr",
          { "data-testid": "provenance-item", "data-kind": i.kind, "data-id": i.id, "data-state": i.state },
          h("td", {}, i.tier),
          h("td", {}, i.kind),
          h("td", { class: "mono", title: i.id }, shortId(i.id)),
          h("td", {}, badge(i.state, STATE_KIND[i.state])),
        ),
      ),
    ),
  );
}

function panel(record) {
  const total = record.report && record.report.total !== undefined ? record.report.total : "?";
  return h(
    "details",
    { class: "provenance", "data-testid": "provenance", "data-context-id": record.id },
    h("summary", {}, `provenance · ${record.items.length} items`),
    h(
      "p",
      { class: "meta", title: record.id },
      `context ${shortId(record.id)} · recorded ${when(record.created_at)} · ` +
        `${total} of ${record.budget} tokens · leaf ${shortId(record.leaf_id)}`,
    ),
    itemsTable(record.items),
  );
}

/**
 * Add the provenance fold-out to `el` (a transcript entry of an assistant message) when a
 * recorded context is linked to it; nothing otherwise (and nothing on a failed call: the
 * transcript stays as it was).
 */
export async function attachProvenance(cid, message, el) {
  if (message.role !== "assistant") return;
  let found;
  try {
    found = await api.get(`/v1/conversations/${enc(cid)}/messages/${enc(message.id)}/provenance`);
  } catch {
    return;
  }
  if (found && found.record && el.isConnected) el.append(panel(found.record));
}
