// Sign in with an API key. The key is checked against the server before it is kept,
// and its kind (admin or user) decides what comes next.

import { keyKind, session } from "../api.js";
import { errorBox, fill, h } from "../dom.js";

export async function signInView(route, ctx) {
  const status = h("div", { class: "status", "aria-live": "polite" });
  if (route.notice) fill(status, errorBox({ detail: route.notice }));
  const input = h("input", {
    id: "key",
    name: "key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    placeholder: "msk_…",
    "data-testid": "key-input",
  });
  const button = h("button", { type: "submit", "data-testid": "signin" }, "Sign in");
  const form = h(
    "form",
    {
      class: "card signin",
      onsubmit: async (event) => {
        event.preventDefault();
        const key = input.value.trim();
        if (!key) return;
        button.disabled = true;
        fill(status, h("p", { class: "muted" }, "Checking the key…"));
        try {
          session.start(key, await keyKind(key));
          ctx.go("/");
        } catch (err) {
          fill(status, errorBox(err));
        } finally {
          button.disabled = false;
        }
      },
    },
    h("h1", {}, "Sign in"),
    h(
      "p",
      { class: "muted" },
      "Use an API key from `memstrata keys create`. A user key shows that user's memory; " +
        "an admin key lets you pick any user of its tenant. The key is kept in this tab only.",
    ),
    h("label", { for: "key" }, "API key"),
    input,
    button,
    status,
  );
  queueMicrotask(() => input.focus());
  return h("section", { class: "narrow" }, form);
}
