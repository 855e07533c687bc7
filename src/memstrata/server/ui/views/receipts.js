// Deletion receipts: what a deletion removed (rows per table, objects per blob prefix) and
// what the verification scan after it found, read by the receipt id a deletion answered with.

import { api } from "../api.js";
import { badge, errorBox, fill, h, when } from "../dom.js";

function countsTable(receipt) {
  const rows = [
    ...Object.entries(receipt.tables).map(([name, n]) => [name, n]),
    ...Object.entries(receipt.blobs).map(([prefix, n]) => [`blobs ${prefix}`, n]),
  ];
  return h(
    "table",
    { class: "table", "data-testid": "receipt-counts" },
    h("thead", {}, h("tr", {}, h("th", {}, "Removed from"), h("th", {}, "Rows / objects"))),
    h(
      "tbody",
      {},
      rows.map(([where, n]) =>
        h("tr", { "data-testid": "receipt-count", "data-where": where }, h("td", {}, where), h("td", {}, String(n))),
      ),
    ),
  );
}

function verdict(receipt) {
  if (receipt.verified === null) return badge("not verified yet", "warn");
  return receipt.verified ? badge("verified: nothing left", "ok") : badge("something is left", "warn");
}

function receiptView(r) {
  return [
    h(
      "dl",
      { class: "card", "data-testid": "receipt" },
      h("dt", {}, "Deleted"),
      h("dd", { "data-testid": "receipt-kind" }, `${r.kind} of ${r.tenant}/${r.user}`),
      h("dt", {}, "Ids"),
      h("dd", { class: "mono" }, r.subject_ids.join(", ")),
      h("dt", {}, "When"),
      h("dd", {}, when(r.created_at)),
      h("dt", {}, "By"),
      h("dd", {}, r.actor),
      h("dt", {}, "Verification"),
      h("dd", { "data-testid": "receipt-verified" }, verdict(r)),
    ),
    countsTable(r),
    r.findings.length
      ? h("ul", { "data-testid": "receipt-findings" }, r.findings.map((f) => h("li", {}, f)))
      : null,
  ];
}

export async function receiptsView(route, ctx) {
  const input = h("input", {
    id: "receipt-id",
    name: "receipt-id",
    type: "text",
    required: true,
    value: route.query.rid || "",
    "data-testid": "receipt-id",
  });
  const result = h("div", { "data-testid": "receipt-result" });

  async function read() {
    fill(result, h("p", { class: "muted" }, "Reading…"));
    try {
      // An admin key reads any receipt of its tenant (a user's own deletion included)
      // when it names no user.
      const rid = encodeURIComponent(input.value.trim());
      const data = await api.get(`/v1/receipts/${rid}`, undefined, { asUser: false });
      fill(result, receiptView(data));
    } catch (err) {
      fill(result, errorBox(err));
    }
  }

  const form = h(
    "form",
    {
      class: "grid-form card",
      onsubmit: (event) => {
        event.preventDefault();
        ctx.remember({ rid: input.value.trim() });
        read();
      },
    },
    h("label", { for: "receipt-id" }, "Receipt id"),
    input,
    h("div", {}),
    h("button", { type: "submit", "data-testid": "receipt-read" }, "Show receipt"),
  );
  if (route.query.rid) read();
  return h(
    "section",
    {},
    h("h1", {}, "Deletion receipts"),
    h(
      "p",
      { class: "muted" },
      "A deletion answers with a receipt id (the X-Memstrata-Receipt header): what went, " +
        "from where, and whether a scan of the whole store afterwards found anything left.",
    ),
    form,
    result,
  );
}
