// The page: the header (who is signed in, the sections) and a small hash router that
// draws one view at a time into <main>. Views live in views/; each is an async function
// (route, ctx) -> Node.

import { ApiError, session } from "./api.js";
import { add, errorBox, fill, h, link } from "./dom.js";
import { conversationView } from "./views/conversation.js";
import { conversationsView } from "./views/conversations.js";
import { factsView } from "./views/facts.js";
import { healthView } from "./views/health.js";
import { jobsView } from "./views/jobs.js";
import { nodesView } from "./views/nodes.js";
import { profileView } from "./views/profile.js";
import { receiptsView } from "./views/receipts.js";
import { searchView } from "./views/search.js";
import { signInView } from "./views/signin.js";
import { usageView } from "./views/usage.js";
import { usersView } from "./views/users.js";

const SECTIONS = [
  { path: "/conversations", label: "Conversations", match: ["/conversations", "/c"] },
  { path: "/search", label: "Search", match: ["/search"] },
  { path: "/facts", label: "Facts", match: ["/facts"] },
  { path: "/profile", label: "Profile", match: ["/profile"] },
  { path: "/health", label: "Health", match: ["/health"] },
  { path: "/jobs", label: "Jobs", match: ["/jobs"] },
  { path: "/nodes", label: "Node memory", match: ["/nodes"] },
  { path: "/usage", label: "Usage", match: ["/usage"] },
  { path: "/receipts", label: "Receipts", match: ["/receipts"] },
];

// path pattern -> view; ":name" segments become route.params.name.
const ROUTES = [
  ["/signin", signInView, { open: true }],
  ["/users", usersView, { admin: true }],
  ["/conversations", conversationsView, {}],
  ["/c/:cid", conversationView, {}],
  ["/search", searchView, {}],
  ["/facts", factsView, {}],
  ["/profile", profileView, {}],
  ["/health", healthView, {}],
  ["/jobs", jobsView, {}],
  ["/nodes", nodesView, {}],
  ["/usage", usageView, {}],
  // Any signed-in key: an admin key reads its tenant's receipts without picking a user.
  ["/receipts", receiptsView, { anyKey: true }],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const notices = document.getElementById("notices");
let drawing = 0; // the newest render; an older one that finishes late is thrown away

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, qs = ""] = raw.split("?", 2);
  return { path: path || "/", query: Object.fromEntries(new URLSearchParams(qs)) };
}

function match(path) {
  const parts = path.split("/").filter(Boolean);
  for (const [pattern, view, flags] of ROUTES) {
    const want = pattern.split("/").filter(Boolean);
    if (want.length !== parts.length) continue;
    const params = {};
    const ok = want.every((seg, i) => {
      if (seg.startsWith(":")) {
        params[seg.slice(1)] = decodeURIComponent(parts[i]);
        return true;
      }
      return seg === parts[i];
    });
    if (ok) return { pattern, view, flags, params };
  }
  return null;
}

function go(path, query) {
  const target = link(path, query);
  if (location.hash === target) render();
  else location.hash = target;
}

/** Change the query of the current route without drawing it again (e.g. the viewed leaf). */
function remember(query) {
  const { path } = parseHash();
  history.replaceState(null, "", link(path, query));
}

function drawChrome(path) {
  const kind = session.kind;
  fill(who);
  fill(nav);
  if (!session.signedIn) return;
  if (session.ready) {
    for (const s of SECTIONS) {
      const current = s.match.some((m) => path === m || path.startsWith(m + "/"));
      add(
        nav,
        h(
          "a",
          { href: link(s.path), "aria-current": current ? "page" : null, "data-testid": "nav" },
          s.label,
        ),
      );
    }
  }
  const acting =
    kind === "admin"
      ? ["admin key", session.user ? h("span", {}, " · acting as ", h("b", {}, session.user)) : null]
      : ["user key"];
  add(who, h("span", { class: "muted", "data-testid": "who" }, acting));
  if (kind === "admin") {
    add(who, h("a", { class: "button ghost", href: link("/users") }, "Users"));
  }
  add(
    who,
    h(
      "button",
      {
        class: "ghost",
        type: "button",
        "data-testid": "signout",
        onclick: () => {
          session.end();
          go("/signin");
        },
      },
      "Sign out",
    ),
  );
}

/** What works in a degraded way (keyword-only recall, jobs with no worker), from /readyz. */
async function drawNotices() {
  let warnings = [];
  try {
    const response = await fetch("/readyz");
    if (response.ok) warnings = (await response.json()).warnings || [];
  } catch {
    return; // the views report an unreachable server themselves
  }
  fill(notices, ...warnings.map((w) => h("p", { class: "notice", "data-testid": "notice" }, w)));
}

async function render() {
  const mine = ++drawing;
  drawNotices();
  let { path, query } = parseHash();
  if (!session.signedIn && path !== "/signin") path = "/signin";
  else if (path === "/" || path === "/signin") {
    path = session.signedIn ? (session.ready ? "/conversations" : "/users") : "/signin";
  }
  let found = match(path);
  const needsUser = found && !found.flags.open && !found.flags.admin && !found.flags.anyKey;
  if (needsUser && !session.ready) found = match("/users");
  if (found && found.flags.admin && session.kind !== "admin") found = match("/conversations");
  drawChrome(path);
  if (!found) {
    fill(main, h("h1", {}, "Not found"), h("p", {}, "No such page. ", h("a", { href: "#/" }, "Start over")));
    return;
  }
  fill(main, h("p", { class: "muted loading", "data-testid": "loading" }, "Loading…"));
  const ctx = { go, remember, refresh: render, isCurrent: () => mine === drawing };
  let view;
  try {
    view = await found.view({ params: found.params, query }, ctx);
  } catch (err) {
    if (mine !== drawing) return;
    if (err instanceof ApiError && err.status === 401) {
      session.end();
      drawChrome("/signin");
      view = await signInView({ params: {}, query: {}, notice: err.detail }, ctx);
    } else {
      view = h("section", {}, errorBox(err));
    }
  }
  if (mine !== drawing) return;
  fill(main, view);
  main.dataset.view = found.pattern;
}

window.addEventListener("hashchange", render);
render();
