// The context assembled for one branch under a token budget: how the budget was shared
// between the tiers (a stacked bar and a table), the messages a model would get, and
// what was left out and why.

import { api } from "../api.js";
import { badge, empty, errorBox, fill, h, shortId } from "../dom.js";

// Known tiers get fixed colours (see app.css); others cycle through a spare set.
const KNOWN = ["system", "recent", "summary", "facts", "profile", "working", "plan", "recall"];

function tierClass(name, i) {
  return KNOWN.includes(name) ? `tier-${name}` : `tier-other-${i % 4}`;
}

function bar(report) {
  const tiers = Object.entries(report.tiers);
  const scale = Math.max(report.budget, report.total, 1);
  const segments = [];
  tiers.forEach(([name, t], i) => {
    if (t.granted <= 0) return;
    const seg = h(
      "div",
      {
        class: `seg ${tierClass(name, i)}`,
        "data-testid": "tier-segment",
        "data-tier": name,
        "data-granted": t.granted,
        title: `${name}: ${t.granted} tokens`,
      },
      h("span", { class: "seg-label" }, `${name} ${t.granted}`),
    );
    // CSSOM, not a style attribute: the page's policy allows no inline styles.
    seg.style.flexBasis = `${(100 * t.granted) / scale}%`;
    segments.push(seg);
  });
  const free = report.budget - report.total;
  if (free > 0) {
    const seg = h(
      "div",
      { class: "seg free", title: `unused: ${free} tokens` },
      h("span", { class: "seg-label" }, `free ${free}`),
    );
    seg.style.flexBasis = `${(100 * free) / scale}%`;
    segments.push(seg);
  }
  const label = tiers.map(([n, t]) => `${n} ${t.granted}`).join(", ");
  return h("div", { class: "bar", "data-testid": "tier-bar", role: "img", "aria-label": label }, segments);
}

function tierTable(report) {
  return h(
    "table",
    { class: "table compact", "data-testid": "tiers" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "tier"),
        h("th", { class: "num" }, "asked"),
        h("th", { class: "num" }, "granted"),
        h("th", { class: "num" }, "items"),
      ),
    ),
    h(
      "tbody",
      {},
      Object.entries(report.tiers).map(([name, t], i) =>
        h(
          "tr",
          { "data-testid": "tier-row", "data-tier": name, "data-granted": t.granted },
          h("td", {}, h("span", { class: `swatch ${tierClass(name, i)}` }), name),
          h("td", { class: "num" }, t.asked),
          h("td", { class: "num", "data-testid": "tier-granted" }, t.granted),
          h("td", { class: "num" }, t.items),
        ),
      ),
    ),
  );
}

function droppedWhat(d) {
  if (d.range) {
    const from = d.range.from_depth ?? 0;
    const n = d.messages ? ` (${d.messages} messages)` : "";
    return `messages at depth ${from}–${d.range.to_depth}${n}`;
  }
  return d.id ? shortId(d.id) : "—";
}

function droppedTable(dropped) {
  if (!dropped.length) return empty("Nothing was dropped.");
  return h(
    "table",
    { class: "table compact", "data-testid": "dropped" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "tier"),
        h("th", {}, "item"),
        h("th", { class: "num" }, "tokens"),
        h("th", {}, "reason"),
      ),
    ),
    h(
      "tbody",
      {},
      dropped.map((d) =>
        h(
          "tr",
          { "data-testid": "dropped-item", "data-tier": d.tier },
          h("td", {}, d.tier),
          h("td", { class: "mono", title: d.id || "" }, droppedWhat(d)),
          h("td", { class: "num" }, d.tokens ?? "—"),
          h("td", {}, d.reason),
        ),
      ),
    ),
  );
}

function messagesList(messages) {
  return h(
    "ol",
    { class: "transcript", "data-testid": "context-messages" },
    messages.map((m) =>
      h(
        "li",
        { class: `turn role-${m.role}`, "data-testid": "context-message" },
        h("div", { class: "turn-head" }, h("span", { class: "role" }, m.role)),
        h("div", { class: `turn-text${m.role === "system" ? " mono" : ""}` }, m.content ?? ""),
      ),
    ),
  );
}

function reportView(data) {
  const r = data.report;
  return [
    h(
      "p",
      { class: "total" },
      h(
        "span",
        { "data-testid": "context-total", "data-total": r.total, "data-budget": r.budget },
        `${r.total} of ${r.budget} tokens`,
      ),
      r.over_budget ? badge("over budget", "warn") : null,
      r.newest_turn_over_budget ? badge("newest turn alone is over the budget", "warn") : null,
      r.compaction_due ? badge("compaction due") : null,
    ),
    bar(r),
    tierTable(r),
    h("h3", {}, `Messages (${data.messages.length})`),
    messagesList(data.messages),
    h("h3", {}, `Dropped (${r.dropped.length})`),
    droppedTable(r.dropped),
    h(
      "p",
      { class: "muted small" },
      `encoding ${r.encoding ?? "—"} · summary ${shortId(r.summary_id)} · hash `,
      h("span", { class: "mono", title: r.hash }, (r.hash || "").slice(0, 16)),
    ),
  ];
}

/** The panel, and setLeaf(id) to point it at another branch (clears the last result). */
export function contextPanel(cid) {
  let leaf = null;
  const budget = h("input", {
    id: "budget",
    type: "number",
    min: "0",
    step: "1",
    value: "8000",
    required: true,
    "data-testid": "budget",
  });
  const query = h("input", {
    id: "ctx-query",
    type: "text",
    placeholder: "default: the newest user message",
  });
  const leafNote = h("span", { class: "mono muted" });
  const result = h("div", { "data-testid": "context-result" });
  const button = h("button", { type: "submit", "data-testid": "assemble" }, "Assemble");
  const form = h(
    "form",
    {
      class: "inline-form",
      onsubmit: async (event) => {
        event.preventDefault();
        button.disabled = true;
        fill(result, h("p", { class: "muted" }, "Assembling…"));
        try {
          const body = { budget: Number(budget.value) };
          if (leaf) body.leaf_id = leaf;
          if (query.value.trim()) body.query = query.value.trim();
          const data = await api.post(`/v1/conversations/${encodeURIComponent(cid)}/context`, body);
          fill(result, reportView(data));
          result.dataset.leaf = leaf || "";
        } catch (err) {
          fill(result, errorBox(err));
        } finally {
          button.disabled = false;
        }
      },
    },
    h("label", { for: "budget" }, "Budget (tokens)"),
    budget,
    h("label", { for: "ctx-query" }, "Recall query"),
    query,
    button,
  );
  const el = h(
    "section",
    { class: "panel", "data-testid": "context" },
    h("h2", {}, "Context"),
    h("p", { class: "muted" }, "What a model would get for the viewed branch, ending at ", leafNote, "."),
    form,
    result,
  );
  return {
    el,
    setLeaf(id) {
      leaf = id;
      fill(leafNote, shortId(id));
      leafNote.title = id || "";
      fill(result, empty("Pick a budget and assemble."));
      delete result.dataset.leaf;
    },
  };
}
