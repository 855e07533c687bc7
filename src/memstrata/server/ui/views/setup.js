// What to configure when long-term memory is empty because no model learns it.

import { h } from "../dom.js";

/** Facts and the profile come from a model's extraction: how to give the server one. */
export function extractionHelp(what) {
  const code = (text) => h("code", {}, text);
  return h(
    "div",
    { class: "card setup", "data-testid": "needs-model" },
    h(
      "p",
      {},
      h("b", {}, `No ${what} yet.`),
      " Facts and the profile are learnt from conversations by a model (extraction): " +
        "a server with no model configured keeps them empty.",
    ),
    h(
      "p",
      {},
      "To give the server one, set ",
      code("MEMSTRATA_LLM_BASE_URL"),
      " (an OpenAI-compatible endpoint, or ",
      code("fake://"),
      " with any model name for the built-in offline demo model), ",
      code("MEMSTRATA_LLM_MODEL"),
      " and, when the endpoint needs one, ",
      code("MEMSTRATA_LLM_API_KEY"),
      ", then restart it. Extractions queued meanwhile then run (see ",
      h("a", { href: "#/jobs" }, "Jobs"),
      "); docs/configuration.md lists every setting.",
    ),
    h("p", { class: "muted small" }, "Facts can also be added by hand: ", code("POST /v1/facts"), "."),
  );
}
