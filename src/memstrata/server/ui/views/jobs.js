// The user's jobs, newest first, with a filter for dead letters and a retry for them.

import { api } from "../api.js";
import { add, badge, empty, errorBox, fill, h, link, shortId, when } from "../dom.js";

const FILTERS = [
  ["", "all"],
  ["queued", "queued"],
  ["running", "running"],
  ["done", "done"],
  ["dead", "dead letters"],
];
const STATUS_KIND = { dead: "warn", done: "ok", running: "active", queued: "" };

function jobRow(job, ctx, notice) {
  const retry =
    job.status === "dead"
      ? h(
          "button",
          {
            type: "button",
            "data-testid": "retry",
            onclick: async () => {
              retry.disabled = true;
              try {
                await api.post(`/v1/jobs/${encodeURIComponent(job.id)}/retry`);
                ctx.refresh();
              } catch (err) {
                fill(notice, errorBox(err));
                retry.disabled = false;
              }
            },
          },
          "Retry",
        )
      : null;
  return h(
    "tr",
    { "data-testid": "job", "data-id": job.id, "data-status": job.status, "data-kind": job.kind },
    h("td", {}, h("span", { class: "mono" }, job.kind), h("div", { class: "muted small mono", title: job.id }, shortId(job.id))),
    h("td", {}, badge(job.status, STATUS_KIND[job.status])),
    h("td", { class: "num" }, `${job.attempts}/${job.max_attempts}`),
    h(
      "td",
      {},
      job.conversation_id
        ? h("a", { href: link(`/c/${encodeURIComponent(job.conversation_id)}`) }, shortId(job.conversation_id))
        : h("span", { class: "muted" }, "—"),
    ),
    h(
      "td",
      { class: "problems" },
      job.last_error ? h("pre", { class: "last-error", "data-testid": "last-error" }, job.last_error) : null,
      job.blocked ? h("p", { class: "blocked", "data-testid": "blocked" }, `blocked: ${job.blocked}`) : null,
      !job.last_error && !job.blocked ? h("span", { class: "muted" }, "—") : null,
    ),
    h("td", { class: "muted time" }, when(job.updated_at)),
    h("td", {}, retry),
  );
}

export async function jobsView(route, ctx) {
  const status = FILTERS.some(([v]) => v === route.query.status) ? route.query.status : "";
  const first = await api.get("/v1/jobs", { status, limit: 100 });
  const notice = h("div", { "aria-live": "polite" });
  const body = h("tbody", {}, first.items.map((j) => jobRow(j, ctx, notice)));
  let cursor = first.next_cursor;
  const more = h(
    "button",
    {
      type: "button",
      class: "ghost",
      onclick: async () => {
        more.disabled = true;
        try {
          const page = await api.get("/v1/jobs", { status, limit: 100, cursor });
          add(body, page.items.map((j) => jobRow(j, ctx, notice)));
          cursor = page.next_cursor;
        } catch (err) {
          fill(notice, errorBox(err));
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
      id: "job-status",
      "data-testid": "job-filter",
      onchange: () => ctx.go("/jobs", { status: select.value }),
    },
    FILTERS.map(([value, label]) => h("option", { value, selected: value === status }, label)),
  );
  return h(
    "section",
    {},
    h("h1", {}, "Jobs"),
    h("div", { class: "toolbar" }, h("label", { for: "job-status" }, "Show"), select),
    notice,
    first.items.length
      ? h(
          "table",
          { class: "table", "data-testid": "jobs" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", {}, "kind"),
              h("th", {}, "status"),
              h("th", { class: "num" }, "attempts"),
              h("th", {}, "conversation"),
              h("th", {}, "last error / blocked"),
              h("th", {}, "updated"),
              h("th", {}, ""),
            ),
          ),
          body,
        )
      : empty(status ? `No ${status} jobs.` : "No jobs."),
    h("div", { class: "more" }, more),
  );
}
