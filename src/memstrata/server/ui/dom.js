// Building the page without ever parsing data as HTML: every piece of text from the API
// goes in as a text node or an attribute value, so a message that says "<script>" shows
// exactly that.

/**
 * Make an element. attrs: "class", "on<event>" handlers, anything else as an attribute
 * (null, undefined and false are left out; true is an empty attribute). Children are
 * nodes or text, nested arrays allowed; null and false are skipped.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  add(el, children);
  return el;
}

/** Append children (see h) to el. */
export function add(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Replace everything inside el. */
export function fill(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

/** A route in this page (hash routing), with its query, as an href. */
export function link(path, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== null && v !== undefined && v !== "") params.set(k, v);
  }
  const qs = params.toString();
  return "#" + path + (qs ? "?" + qs : "");
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A UUID shortened to its end (UUIDv7s made together share their start, the time, not
 * their end); any other id as it is.
 */
export function shortId(id) {
  if (!id) return "—";
  return UUID.test(String(id)) ? "…" + String(id).slice(-8) : String(id);
}

/** A timestamp in the reader's time zone, to the second. */
export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

/** The first line of a text, cut to n characters. */
export function snippet(text, n = 140) {
  const line = String(text ?? "").replace(/\s+/g, " ").trim();
  return line.length > n ? line.slice(0, n - 1) + "…" : line;
}

/** A small label, e.g. a status. */
export function badge(text, kind) {
  return h("span", { class: `badge${kind ? " badge-" + kind : ""}` }, text);
}

/** An error box for a failed call. */
export function errorBox(err) {
  const detail = err && err.detail ? err.detail : String(err && err.message ? err.message : err);
  const status = err && err.status ? `${err.status} ` : "";
  return h("p", { class: "error", role: "alert", "data-testid": "error" }, status + detail);
}

/** A muted line for "nothing here". */
export function empty(text) {
  return h("p", { class: "muted empty" }, text);
}

/**
 * A destructive action behind a second click: `label` first, then "Really?" with the
 * action and Cancel. `action` is async; its failure is shown next to the buttons. Test ids:
 * `testid` (the first button) and `testid`-confirm.
 */
export function confirmButton(label, testid, action) {
  const box = h("span", { class: "confirm" });
  const first = h(
    "button",
    { type: "button", class: "danger ghost", "data-testid": testid, onclick: () => ask() },
    label,
  );
  function ask() {
    const yes = h(
      "button",
      {
        type: "button",
        class: "danger",
        "data-testid": `${testid}-confirm`,
        onclick: async () => {
          yes.disabled = true;
          try {
            await action();
          } catch (err) {
            fill(box, first, errorBox(err));
          }
        },
      },
      "Yes, delete for good",
    );
    const no = h("button", { type: "button", class: "ghost", onclick: () => fill(box, first) }, "Cancel");
    fill(box, h("span", { class: "small" }, "Deleted data cannot be brought back. "), yes, no);
  }
  return fill(box, first);
}

/** Offer `text` to the reader as a file named `name` (nothing leaves the page). */
export function download(name, text, type = "application/json") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}
