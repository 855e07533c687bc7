// An admin key's users: pick the one to act as, export a user's memory, delete a user.

import { allPages, api, session } from "../api.js";
import { confirmButton, empty, h, when } from "../dom.js";
import { exportButton } from "./profile.js";

export async function usersView(_route, ctx) {
  const { items, more } = await allPages("/v1/users", {}, { asUser: false });
  const pick = (user) => () => {
    session.actAs(user);
    ctx.go("/conversations");
  };
  const remove = (user) => async () => {
    const rid = await api.remove(`/v1/users/${encodeURIComponent(user)}`, { asUser: false });
    if (session.user === user) session.actAs(null);
    ctx.go("/receipts", { rid });
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
        session.user === u.id ? h("span", { class: "muted small" }, " (acting as)") : null,
      ),
      h("td", { class: "muted time" }, when(u.created_at)),
      h(
        "td",
        { class: "actions" },
        exportButton(u.id, "export-user"),
        confirmButton("Delete user", "delete-user", remove(u.id)),
      ),
    ),
  );
  return h(
    "section",
    {},
    h("h1", {}, "Users"),
    h(
      "p",
      { class: "muted" },
      "Pick the user whose memory to inspect. Deleting a user erases everything the user " +
        "owns (conversations, facts, keys) and shows the deletion's receipt.",
    ),
    items.length
      ? h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "table", "data-testid": "users" },
            h("thead", {}, h("tr", {}, h("th", {}, "user"), h("th", {}, "since"), h("th", {}, ""))),
            h("tbody", {}, rows),
          ),
        )
      : empty("This tenant has no users yet."),
    more ? h("p", { class: "muted" }, "Only the first users are shown.") : null,
  );
}
