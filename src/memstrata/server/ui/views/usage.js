// Usage: the model calls and tokens spent for the user (or, with an admin key, the whole
// tenant per user), and the tenant's daily budgets with what today used of each.

import { api, session } from "../api.js";
import { badge, empty, h, link } from "../dom.js";

const DAYS = [1, 7, 30, 90];

function totalsTable(report, label) {
  const row = (t, total) =>
    h(
      "tr",
      { "data-testid": total ? "usage-total" : "usage-row", "data-key": t.key },
      h("td", { class: total ? "" : "mono" }, total ? "total" : t.key || "(none)"),
      h("td", { class: "num" }, String(t.calls)),
      h("td", { class: "num" }, String(t.errors)),
      h("td", { class: "num" }, String(t.input_tokens)),
      h("td", { class: "num" }, String(t.output_tokens)),
      h("td", { class: "num" }, t.duration_s.toFixed(2)),
    );
  return h(
    "table",
    { class: "table", "data-testid": "usage" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["" + label, "calls", "errors", "input tokens", "output tokens", "seconds"].map((c) => h("th", {}, c)),
      ),
    ),
    h("tbody", {}, report.items.map((t) => row(t, false)), row(report.total, true)),
  );
}

function budgetsTable(items) {
  if (!items.length) return empty("No budgets: no purpose is capped.");
  return h(
    "table",
    { class: "table", "data-testid": "budgets" },
    h("thead", {}, h("tr", {}, ["purpose", "tokens a day", "used today (UTC)", ""].map((c) => h("th", {}, c)))),
    h(
      "tbody",
      {},
      items.map((b) =>
        h(
          "tr",
          { "data-testid": "budget", "data-purpose": b.purpose },
          h("td", { class: "mono" }, b.purpose),
          h("td", { class: "num" }, String(b.daily_tokens)),
          h("td", { class: "num" }, String(b.used_today)),
          h("td", {}, b.exhausted ? badge("used up: its jobs wait", "warn") : badge("ok", "ok")),
        ),
      ),
    ),
  );
}

export async function usageView(route) {
  const days = DAYS.includes(Number(route.query.days)) ? Number(route.query.days) : 30;
  const tenantWide = session.kind === "admin" && route.query.scope === "tenant";
  const from = new Date(Date.now() - days * 86_400_000).toISOString();
  const group_by = tenantWide ? "user" : "purpose";
  const report = await api.get("/v1/usage", { from, group_by }, { asUser: !tenantWide });
  const budgets =
    session.kind === "admin" ? (await api.get("/v1/budgets", {}, { asUser: false })).items : null;
  const periods = DAYS.map((d) =>
    h(
      "a",
      {
        href: link("/usage", { days: d, scope: tenantWide ? "tenant" : null }),
        "aria-current": d === days ? "page" : null,
        class: "button ghost",
      },
      `${d} d`,
    ),
  );
  const scopes =
    session.kind === "admin"
      ? [
          h("a", { href: link("/usage", { days }), class: "button ghost", "aria-current": tenantWide ? null : "page" }, "this user"),
          h(
            "a",
            { href: link("/usage", { days, scope: "tenant" }), class: "button ghost", "aria-current": tenantWide ? "page" : null, "data-testid": "tenant-usage" },
            "whole tenant",
          ),
        ]
      : [];
  return h(
    "section",
    {},
    h("h1", {}, "Usage"),
    h("p", { class: "muted" }, tenantWide ? "Model calls of the whole tenant, per user." : "Model calls made for this user's memory, per purpose."),
    h("p", { class: "filters" }, periods, scopes),
    report.items.length ? totalsTable(report, group_by) : empty("No model calls in this period."),
    budgets === null
      ? null
      : [h("h2", {}, "Budgets"), h("p", { class: "muted" }, "Set with memstrata budgets set or PUT /v1/budgets."), budgetsTable(budgets)],
  );
}
