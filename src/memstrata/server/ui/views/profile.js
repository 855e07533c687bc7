// The user's profile: the sections long-term memory keeps up to date; and the export of
// the user's whole memory (profile and facts) as one document.

import { api, session } from "../api.js";
import { errorBox, h, download, when } from "../dom.js";
import { extractionHelp } from "./setup.js";

// Section keys as the API names them, with a reader's title.
const TITLES = {
  workContext: "Work",
  personalContext: "Personal",
  topOfMind: "Top of mind",
  recentMonths: "Recent months",
  earlierContext: "Earlier",
  longTermBackground: "Long-term background",
};

/**
 * A button that downloads `user`'s memory document (the signed-in user's when omitted)
 * as memory-<user>.json, the file `memstrata import --format deerflow` reads.
 */
export function exportButton(user, testid = "export-memory") {
  const box = h("span", { class: "export" });
  const button = h(
    "button",
    {
      type: "button",
      class: "ghost",
      "data-testid": testid,
      onclick: async () => {
        button.disabled = true;
        try {
          const doc = await api.get("/v1/memory/export", {}, user ? { asUser: user } : undefined);
          const name = user || session.user || "me";
          download(`memory-${name}.json`, JSON.stringify(doc, null, 2) + "\n");
        } catch (err) {
          box.append(errorBox(err));
        } finally {
          button.disabled = false;
        }
      },
    },
    "Export memory",
  );
  box.append(button);
  return box;
}

export async function profileView() {
  const data = await api.get("/v1/profile");
  const sections = Object.entries(data.sections);
  const blank = sections.every(([, s]) => !s.summary);
  return h(
    "section",
    {},
    h("div", { class: "title-row" }, h("h1", {}, "Profile"), exportButton(null)),
    h(
      "p",
      { class: "muted small" },
      "Export memory downloads the profile and the active facts as one JSON document " +
        "(memstrata import FILE --format deerflow reads it back).",
    ),
    blank ? extractionHelp("profile") : null,
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
