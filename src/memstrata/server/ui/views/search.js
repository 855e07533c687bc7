// Recall search over the user's past messages: each hit with its relevance (or, from a
// server that sends none, its raw score) and a link into its conversation at that message.

import { api } from "../api.js";
import { badge, empty, errorBox, fill, h, link, shortId, snippet, when } from "../dom.js";

const SIZES = [10, 20, 50];

/** What ranks a hit: `relevance` (0..1) when the server sends it, else `score`. */
export function rankOf(hit) {
  if (typeof hit.relevance === "number") return { name: "relevance", value: hit.relevance };
  return { name: "score", value: hit.score };
}

function hitEl(hit, titles) {
  const m = hit.message;
  const rank = rankOf(hit);
  const share = rank.name === "relevance" ? Math.max(0, Math.min(1, rank.value)) : null;
  const meter = h("span", { class: "meter", "aria-hidden": "true" }, h("span", { class: "meter-fill" }));
  if (share !== null) meter.firstChild.style.width = `${Math.round(share * 100)}%`;
  const href = link(`/c/${encodeURIComponent(hit.conversation_id)}`, { focus: m.id });
  return h(
    "li",
    {
      class: `card hit role-${m.role}`,
      "data-testid": "hit",
      "data-conversation": hit.conversation_id,
      "data-message": m.id,
      "data-rank": rank.name,
      "data-value": String(rank.value),
    },
    h(
      "div",
      { class: "turn-head" },
      h("span", { class: "role" }, m.role),
      h(
        "span",
        { class: "rank", "data-testid": "hit-rank", title: `${rank.name} ${rank.value}` },
        `${rank.name} ${rank.value.toFixed(rank.name === "relevance" ? 2 : 4)}`,
        share !== null ? meter : null,
      ),
      hit.neighbour_of ? badge(`next to ${shortId(hit.neighbour_of)}`) : null,
      h("span", { class: "meta" }, when(m.created_at)),
    ),
    h("div", { class: "turn-text" }, snippet(m.content, 400) || "(empty)"),
    h(
      "p",
      { class: "small" },
      h(
        "a",
        { href, "data-testid": "hit-link" },
        titles.has(hit.conversation_id)
          ? `in “${titles.get(hit.conversation_id) || "(untitled)"}” at ${shortId(m.id)}`
          : `in conversation ${shortId(hit.conversation_id)} at ${shortId(m.id)}`,
      ),
      hit.provenance.length > 1
        ? h("span", { class: "muted" }, ` · stands for ${hit.provenance.length} messages`)
        : null,
    ),
  );
}

export async function searchView(route, ctx) {
  const q = (route.query.q || "").trim();
  const k = SIZES.includes(Number(route.query.k)) ? Number(route.query.k) : 10;
  const input = h("input", {
    id: "search-q",
    type: "search",
    value: q,
    required: true,
    placeholder: "what was said about…",
    "data-testid": "search-input",
  });
  const size = h(
    "select",
    { id: "search-k", "data-testid": "search-k" },
    SIZES.map((n) => h("option", { value: String(n), selected: n === k }, String(n))),
  );
  const everyBranch = route.query.branches === "all";
  const branches = h("input", {
    id: "search-branches",
    type: "checkbox",
    checked: everyBranch,
    "data-testid": "search-branches",
  });
  const results = h("div", { "data-testid": "search-results" });
  const form = h(
    "form",
    {
      class: "toolbar search-form",
      role: "search",
      onsubmit: (event) => {
        event.preventDefault();
        ctx.go("/search", {
          q: input.value.trim(),
          k: size.value === "10" ? "" : size.value,
          branches: branches.checked ? "all" : "",
        });
      },
    },
    h("label", { for: "search-q" }, "Search"),
    input,
    h("label", { for: "search-k" }, "Hits"),
    size,
    // Only the active branch of each conversation by default (answers regenerated or
    // edited away stay out); this brings the other branches in too.
    h("label", { for: "search-branches", title: "also answers regenerated or edited away" }, branches, " all branches"),
    h("button", { type: "submit", "data-testid": "search-go" }, "Search"),
  );
  if (q) {
    try {
      const [found, convs] = await Promise.all([
        api.post("/v1/recall/search", { query: q, k, include_other_branches: everyBranch }),
        api.get("/v1/conversations", { limit: 500 }),
      ]);
      const titles = new Map(convs.items.map((c) => [c.id, c.title]));
      fill(
        results,
        found.hits.length
          ? [
              h(
                "p",
                { class: "muted", "data-testid": "search-count" },
                `${found.hits.length} hit${found.hits.length === 1 ? "" : "s"} for “${q}”, best first`,
              ),
              h(
                "ol",
                { class: "hits", "data-testid": "hits" },
                found.hits.map((hit) => hitEl(hit, titles)),
              ),
            ]
          : empty(`Nothing in your past messages matches “${q}”.`),
      );
    } catch (err) {
      fill(results, errorBox(err));
    }
  } else {
    fill(results, empty("Search every conversation's messages (recall: keywords and meaning)."));
  }
  return h("section", { "data-testid": "search" }, h("h1", {}, "Search"), form, results);
}
