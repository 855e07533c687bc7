// Memory health: what looks wrong in the user's long-term memory (near duplicates,
// contradictions, stale and unused facts), and a consolidation to plan, apply and undo.

import { api } from "../api.js";
import { badge, empty, errorBox, fill, h, shortId } from "../dom.js";

const CHECKS = [
  ["duplicates", "Near duplicates"],
  ["contradictions", "Contradiction candidates"],
  ["stale", "Stale facts"],
  ["unused", "Unused facts"],
];

function factLine(f) {
  return h("li", {}, h("span", { class: "mono muted", title: f.id }, shortId(f.id)), " ", f.content);
}

function checkPanel(key, title, check) {
  const count = check.known ? String(check.count) : "unknown";
  return h(
    "div",
    { class: "panel", "data-testid": "health-check", "data-check": key, "data-count": count },
    h("h2", {}, title, " ", badge(count, check.count ? "warn" : "ok")),
    check.known ? null : h("p", { class: "muted small" }, "No recorded contexts: usage is not known."),
    check.examples.length === 0 && check.known ? empty("Nothing found.") : null,
    check.examples.map((e) =>
      h("div", { class: "small", "data-testid": "health-example" }, h("p", { class: "muted" }, e.note), h("ul", {}, e.facts.map(factLine))),
    ),
  );
}

function planTable(plan) {
  if (plan.changes.length === 0) return empty("Nothing to consolidate.");
  return h(
    "table",
    { class: "table compact", "data-testid": "consolidation" },
    h("thead", {}, h("tr", {}, h("th", {}, "change"), h("th", {}, "superseded"), h("th", {}, "by"), h("th", {}, "reason"))),
    h(
      "tbody",
      {},
      plan.changes.map((c) =>
        h(
          "tr",
          { "data-testid": "consolidation-change" },
          h("td", {}, badge(c.kind)),
          h("td", {}, h("ul", {}, c.superseded.map(factLine))),
          h("td", {}, c.new_fact && !c.target_id ? h("i", {}, "new: ") : h("span", { class: "mono muted" }, shortId(c.target_id), " "), c.content),
          h("td", { class: "muted" }, c.reason),
        ),
      ),
    ),
  );
}

export async function healthView(route, ctx) {
  const report = await api.get("/v1/memory/health");
  const s = report.sizes;
  const out = h("div", { "data-testid": "consolidation-result" });
  const button = (label, testid, onclick) => h("button", { type: "button", "data-testid": testid, onclick }, label);
  const run = (fn) => async () => {
    try {
      await fn();
    } catch (err) {
      fill(out, errorBox(err));
    }
  };
  const revert = (plan) =>
    button("Undo", "consolidation-revert", run(async () => {
      const done = await api.post(`/v1/memory/consolidations/${encodeURIComponent(plan.id)}/revert`);
      fill(out, h("p", { "data-testid": "reverted" }, `Restored ${done.restored.length} fact(s); retired ${done.retired.length}.`));
    }));
  const apply = button("Apply", "consolidation-apply", run(async () => {
    const plan = await api.post("/v1/memory/consolidate", { dry_run: false, background: false });
    fill(out, h("p", { "data-testid": "applied" }, `Applied (${plan.mode}).`), planTable(plan), revert(plan));
  }));
  const preview = button("Plan consolidation", "consolidation-plan", run(async () => {
    const plan = await api.post("/v1/memory/consolidate", { dry_run: true });
    fill(out, h("p", { class: "muted" }, `Dry run (${plan.mode}): nothing changed.`), planTable(plan), plan.notes.map((n) => h("p", { class: "muted small" }, n)), plan.changes.length ? apply : null);
  }));
  return h(
    "section",
    { "data-testid": "health" },
    h("h1", {}, "Memory health"),
    h(
      "p",
      { class: "muted", "data-testid": "health-sizes" },
      `${s.active} active, ${s.superseded} superseded, ${s.removed} removed, ${s.evicted} evicted facts; ` +
        `${s.profile_sections} profile sections; ${s.fact_tokens + s.profile_tokens} tokens.`,
    ),
    CHECKS.map(([key, title]) => checkPanel(key, title, report[key])),
    h("div", { class: "panel" }, h("h2", {}, "Consolidation"), h("p", { class: "muted small" }, "Merges and supersessions only: every change can be undone and stays in the facts' history."), preview, out),
  );
}
