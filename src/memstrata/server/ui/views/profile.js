// The user's profile: the sections long-term memory keeps up to date.

import { api } from "../api.js";
import { h, when } from "../dom.js";

// Section keys as the API names them, with a reader's title.
const TITLES = {
  workContext: "Work",
  personalContext: "Personal",
  topOfMind: "Top of mind",
  recentMonths: "Recent months",
  earlierContext: "Earlier",
  longTermBackground: "Long-term background",
};

export async function profileView() {
  const data = await api.get("/v1/profile");
  const sections = Object.entries(data.sections);
  return h(
    "section",
    {},
    h("h1", {}, "Profile"),
    h(
      "dl",
      { class: "profile", "data-testid": "profile" },
      sections.map(([name, s]) => [
        h("dt", {}, TITLES[name] || name, h("span", { class: "muted small" }, ` ${name}`)),
        h(
          "dd",
          { "data-testid": "profile-section", "data-section": name, class: s.summary ? "" : "muted" },
          s.summary || "—",
          s.updated_at ? h("span", { class: "muted small" }, ` (updated ${when(s.updated_at)})`) : null,
        ),
      ]),
    ),
  );
}
