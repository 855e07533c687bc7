// The user's facts with their provenance (each source conversation links to its tree,
// at the message the fact came from), their two clocks (event time: valid from/to; system
// time: recorded/superseded) and, per fact, its history: the supersession chain and every
// event on it, each change as old → new. "As of" a day lists the facts true at its end, as
// known then. An active fact can be edited; any fact can be deleted (its receipt follows).

import { api } from "../api.js";
import { add, badge, confirmButton, empty, errorBox, fill, h, link, shortId, when } from "../dom.js";
import { extractionHelp } from "./setup.js";

const STATUSES = ["all", "active", "superseded", "removed", "evicted"];
const STATUS_KIND = { active: "ok", superseded: "muted", removed: "warn", evicted: "warn" };

/**
 * The chain of facts in a history, oldest first: each fact once, in the order it was
 * created, with whether it was superseded (and by which fact).
 */
function chainOf(events) {
  const facts = new Map();
  for (const e of events) {
    if (!facts.has(e.fact_id)) facts.set(e.fact_id, { id: e.fact_id, content: e.content, by: null });
    if (e.event === "superseded") facts.get(e.fact_id).by = e.related_id;
  }
  return [...facts.values()];
}

/**
 * Each event as a change {old, new}: an event row holds a fact's content before the
 * event (an edit) or at it (creation), so what an edit made is the next edit's "before",
 * or the fact's content now. `now` maps fact id -> its content now.
 */
export function changesOf(events, now) {
  const later = new Map(); // fact id -> the content its next event starts from
  const born = new Map(events.filter((e) => e.event === "created").map((e) => [e.fact_id, e.content]));
  const out = new Array(events.length);
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    const after = later.has(e.fact_id) ? later.get(e.fact_id) : now.get(e.fact_id);
    if (e.event === "created") out[i] = { old: null, new: e.content };
    else if (e.event === "edited") out[i] = { old: e.content, new: after ?? null };
    else if (e.event === "superseded") {
      const by = e.related_id;
      out[i] = { old: e.content, new: by ? (born.get(by) ?? now.get(by) ?? null) : null };
    } else out[i] = { old: e.content, new: null }; // removed, evicted: nothing after
    if (e.event === "edited" || e.event === "created") later.set(e.fact_id, e.content);
  }
  return out;
}

function changeCell(change) {
  return h(
    "td",
    { class: "change" },
    change.old !== null ? h("del", { "data-testid": "event-old" }, change.old) : null,
    change.old !== null && change.new !== null ? h("span", { class: "arrow" }, " → ") : null,
    change.new !== null ? h("ins", { "data-testid": "event-new" }, change.new) : null,
  );
}

function historyView(fact, events, now) {
  const chain = chainOf(events);
  const changes = changesOf(events, now);
  return [
    h(
      "ol",
      { class: "chain", "data-testid": "fact-chain" },
      chain.map((f) =>
        h(
          "li",
          {
            class: f.by ? "superseded" : "",
            "data-testid": "chain-fact",
            "data-id": f.id,
            "data-superseded": String(Boolean(f.by)),
            title: f.id,
          },
          h("span", { class: "chain-text" }, f.content),
          f.id === fact.id ? badge("this fact") : null,
          f.by ? badge("superseded") : null,
        ),
      ),
    ),
    h(
      "table",
      { class: "table compact", "data-testid": "fact-events" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "when"),
          h("th", {}, "event"),
          h("th", {}, "fact"),
          h("th", {}, "old → new"),
          h("th", {}, "reason"),
        ),
      ),
      h(
        "tbody",
        {},
        events.map((e, i) =>
          h(
            "tr",
            { "data-testid": "fact-event", "data-event": e.event, "data-fact": e.fact_id },
            h("td", { class: "muted time" }, when(e.at)),
            h("td", {}, e.event),
            h("td", { class: "mono muted", title: e.fact_id }, shortId(e.fact_id)),
            changeCell(changes[i]),
            h("td", {}, e.reason || ""),
          ),
        ),
      ),
    ),
  ];
}

/** Event time (valid from/until) and system time (recorded/superseded), when known. */
function clocksLine(f) {
  if (!f.valid_from && !f.recorded_at) return null;
  const valid = `valid ${f.valid_from ? `from ${when(f.valid_from)}` : ""}` + (f.valid_to ? ` until ${when(f.valid_to)}` : "");
  const known =
    (f.recorded_at ? `recorded ${when(f.recorded_at)}` : "") + (f.superseded_at ? `, superseded ${when(f.superseded_at)}` : "");
  return h(
    "p",
    {
      class: "small muted",
      "data-testid": "fact-clocks",
      "data-valid-from": f.valid_from || "",
      "data-valid-to": f.valid_to || "",
    },
    `${valid} · ${known}`,
  );
}

/** fact id -> content now, for every fact a history names (read when not listed). */
async function contentsNow(fact, events, byId) {
  const ids = new Set(events.flatMap((e) => [e.fact_id, e.related_id].filter(Boolean)));
  const now = new Map([[fact.id, fact.content]]);
  await Promise.all(
    [...ids].map(async (id) => {
      if (now.has(id)) return;
      if (byId.has(id)) now.set(id, byId.get(id).content);
      else {
        try {
          now.set(id, (await api.get(`/v1/facts/${encodeURIComponent(id)}`)).content);
        } catch {
          // Erased since: its changes show what the events themselves hold.
        }
      }
    }),
  );
  return now;
}

/** The inline editor of an active fact: content, category and confidence. */
function editForm(f, ctx) {
  const content = h("textarea", { rows: "2", required: true, "data-testid": "edit-content" }, f.content);
  const category = h("input", { type: "text", value: f.category, "data-testid": "edit-category" });
  const confidence = h("input", {
    type: "number",
    min: "0",
    max: "1",
    step: "0.05",
    value: String(f.confidence),
    "data-testid": "edit-confidence",
  });
  const status = h("div");
  const form = h(
    "form",
    {
      class: "edit-fact",
      "data-testid": "fact-edit-form",
      onsubmit: async (event) => {
        event.preventDefault();
        // Only what changed: an unchanged field is left out of the PATCH.
        const changes = {};
        const text = content.value.trim();
        const kind = category.value.trim();
        if (text !== f.content) changes.content = text;
        if (kind && kind !== f.category) changes.category = kind;
        if (Number(confidence.value) !== f.confidence) changes.confidence = Number(confidence.value);
        try {
          await api.patch(`/v1/facts/${encodeURIComponent(f.id)}`, changes);
          ctx.refresh();
        } catch (err) {
          fill(status, errorBox(err));
        }
      },
    },
    h("label", {}, "Content", content),
    h(
      "div",
      { class: "toolbar tight" },
      h("label", {}, "Category ", category),
      h("label", {}, "Confidence ", confidence),
    ),
    h(
      "div",
      { class: "toolbar tight" },
      h("button", { type: "submit", "data-testid": "edit-save" }, "Save"),
      h("button", { type: "button", class: "ghost", onclick: () => form.remove() }, "Cancel"),
    ),
    status,
  );
  return form;
}

function factCard(f, byId, ctx) {
  const history = h("div", { class: "history" });
  const details = h(
    "details",
    {
      "data-testid": "fact-history",
      ontoggle: async () => {
        if (!details.open || details.dataset.loaded) return;
        details.dataset.loaded = "loading";
        fill(history, h("p", { class: "muted" }, "Loading…"));
        try {
          const data = await api.get(`/v1/facts/${encodeURIComponent(f.id)}/history`);
          fill(history, historyView(f, data.items, await contentsNow(f, data.items, byId)));
          details.dataset.loaded = "yes";
        } catch (err) {
          fill(history, errorBox(err));
          delete details.dataset.loaded;
        }
      },
    },
    h("summary", {}, "History"),
    history,
  );
  const successor = f.superseded_by ? byId.get(f.superseded_by) : null;
  return h(
    "article",
    { class: `card fact status-${f.status}`, "data-testid": "fact", "data-id": f.id, "data-status": f.status },
    h(
      "div",
      { class: "fact-head" },
      h("span", { class: "fact-text", "data-testid": "fact-content" }, f.content),
      badge(f.status, STATUS_KIND[f.status]),
    ),
    h(
      "div",
      { class: "fact-actions" },
      f.status === "active"
        ? h(
            "button",
            {
              type: "button",
              class: "ghost",
              "data-testid": "fact-edit",
              onclick: (event) => {
                const actions = event.target.closest(".fact-actions");
                if (!actions.parentElement.querySelector("form.edit-fact")) actions.after(editForm(f, ctx));
              },
            },
            "Edit",
          )
        : null,
      confirmButton("Delete", "fact-delete", async () => {
        const rid = await api.remove(`/v1/facts/${encodeURIComponent(f.id)}`);
        ctx.go("/receipts", { rid });
      }),
    ),
    h(
      "p",
      { class: "muted small" },
      `${f.category} · confidence ${Number(f.confidence).toFixed(2)} · ${f.origin}` +
        (f.agent ? ` · agent ${f.agent}` : "") +
        ` · ${when(f.created_at)} · `,
      h("span", { class: "mono", title: f.id }, shortId(f.id)),
    ),
    f.superseded_by
      ? h(
          "p",
          { class: "small", "data-testid": "superseded-by" },
          "Superseded by ",
          successor ? h("q", {}, successor.content) : h("span", { class: "mono" }, shortId(f.superseded_by)),
          f.reason ? ` — ${f.reason}` : "",
        )
      : f.reason
        ? h("p", { class: "small" }, f.reason)
        : null,
    clocksLine(f),
    f.source_error ? h("p", { class: "small error" }, `source error: ${f.source_error}`) : null,
    f.sources.length
      ? h(
          "p",
          { class: "small sources" },
          "From ",
          f.sources.map((s, i) => [
            i ? ", " : "",
            h(
              "a",
              {
                href: link(`/c/${encodeURIComponent(s.conversation_id)}`, { focus: s.message_id }),
                "data-testid": "fact-source",
                "data-conversation": s.conversation_id,
                title: `conversation ${s.conversation_id}, message ${s.message_id}`,
              },
              `conversation ${shortId(s.conversation_id)}`,
            ),
          ]),
        )
      : h("p", { class: "small muted" }, "No source conversation."),
    details,
  );
}

export async function factsView(route, ctx) {
  const asOf = /^\d{4}-\d{2}-\d{2}$/.test(route.query.as_of || "") ? route.query.as_of : "";
  // As of a day: the facts true at its end, as known then (active facts only).
  const status = asOf ? "active" : STATUSES.includes(route.query.status) ? route.query.status : "all";
  const query = asOf ? { status, as_of: `${asOf}T23:59:59Z` } : { status };
  const first = await api.get("/v1/facts", { ...query, limit: 100 });
  const items = [...first.items];
  const list = h("div", { class: "cards", "data-testid": "facts" });
  const byId = new Map(items.map((f) => [f.id, f]));
  // Nothing at all (not filtered away): say what makes facts appear.
  const none = !items.length && !asOf && status === "all";
  const drawList = () =>
    fill(
      list,
      items.length
        ? items.map((f) => factCard(f, byId, ctx))
        : none
          ? extractionHelp("facts")
          : empty("No facts with this status."),
    );
  drawList();
  let cursor = first.next_cursor;
  const more = h(
    "button",
    {
      type: "button",
      class: "ghost",
      onclick: async () => {
        more.disabled = true;
        try {
          const page = await api.get("/v1/facts", { ...query, limit: 100, cursor });
          for (const f of page.items) byId.set(f.id, f);
          items.push(...page.items);
          cursor = page.next_cursor;
          drawList();
        } catch (err) {
          add(list, errorBox(err));
        }
        more.disabled = false;
        more.hidden = !cursor;
      },
    },
    "Load more",
  );
  more.hidden = !cursor;
  const select = h(
    "select",
    {
      id: "fact-status",
      "data-testid": "fact-filter",
      disabled: Boolean(asOf),
      onchange: () => ctx.go("/facts", { status: select.value }),
    },
    STATUSES.map((s) => h("option", { value: s, selected: s === status }, s)),
  );
  const day = h("input", {
    type: "date",
    id: "fact-as-of",
    value: asOf,
    "data-testid": "fact-as-of",
    onchange: () => ctx.go("/facts", day.value ? { as_of: day.value } : { status: "all" }),
  });
  return h(
    "section",
    {},
    h("h1", {}, "Facts"),
    h(
      "div",
      { class: "toolbar" },
      h("label", { for: "fact-status" }, "Status"),
      select,
      h("label", { for: "fact-as-of" }, "As of"),
      day,
    ),
    list,
    h("div", { class: "more" }, more),
  );
}
