// An admin key's users: pick the one to act as.

import { allPages, session } from "../api.js";
import { empty, h, when } from "../dom.js";

export async function usersView(_route, ctx) {
  const { items, more } = await allPages("/v1/users", {}, { asUser: false });
  const pick = (user) => () => {
    session.actAs(user);
    ctx.go("/conversations");
  };
  const rows = items.map((u) =>
    h(
      "tr",
      { "data-testid": "user", "data-user": u.id },
      h(
        "td",
        {},
        h(
          "button",
          { type: "button", class: "linklike", onclick: pick(u.id), "data-testid": "pick-user" },
          u.id,
        ),
      ),
      h("td", { class: "muted time" }, when(u.created_at)),
      h("td", {}, session.user === u.id ? "acting as" : ""),
    ),
  );
  return h(
    "section",
    {},
    h("h1", {}, "Users"),
    h("p", { class: "muted" }, "Pick the user whose memory to inspect."),
    items.length
      ? h(
          "table",
          { class: "table", "data-testid": "users" },
          h("thead", {}, h("tr", {}, h("th", {}, "user"), h("th", {}, "since"), h("th", {}, ""))),
          h("tbody", {}, rows),
        )
      : empty("This tenant has no users yet."),
    more ? h("p", { class: "muted" }, "Only the first users are shown.") : null,
  );
}
