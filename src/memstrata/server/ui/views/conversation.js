// One conversation: its whole message tree (every branch; regenerations and edits are
// siblings), the active branch highlighted, the branch being viewed in full, and the
// context assembled for that branch.

import { allPages, api } from "../api.js";
import { badge, empty, fill, h, shortId, snippet, when } from "../dom.js";
import { buildTree, leavesOf, pathTo, runFrom } from "../tree.js";
import { contextPanel } from "./context.js";
import { attachProvenance } from "./provenance.js";

const enc = encodeURIComponent;

export async function conversationView(route, ctx) {
  const cid = route.params.cid;
  const [conv, all] = await Promise.all([
    api.get(`/v1/conversations/${enc(cid)}`),
    allPages(`/v1/conversations/${enc(cid)}/messages`),
  ]);
  const tree = buildTree(all.items);
  const leaves = leavesOf(tree.byId);
  const active = new Set(pathTo(tree.byId, conv.active_leaf_id));
  let viewed = tree.byId.has(route.query.leaf) ? route.query.leaf : conv.active_leaf_id;
  const focus = tree.byId.has(route.query.focus) ? route.query.focus : null;

  const treeBox = h("div", { class: "tree", "data-testid": "tree" });
  const branchBox = h("div", { class: "branch-view" });
  const context = contextPanel(cid);

  function show(leafId) {
    viewed = leafId;
    ctx.remember({ leaf: leafId });
    draw();
  }

  function nodeEl(node, onViewed) {
    const m = node.message;
    const isLeaf = node.children.length === 0;
    const classes = ["node", `role-${m.role}`];
    if (active.has(m.id)) classes.push("active");
    if (onViewed.has(m.id)) classes.push("viewed");
    if (isLeaf) classes.push("leaf");
    if (m.id === focus) classes.push("focus");
    const el = h(
      "div",
      {
        class: classes.join(" "),
        "data-testid": "tree-node",
        "data-id": m.id,
        "data-role": m.role,
        "data-active": String(active.has(m.id)),
        "data-viewed": String(onViewed.has(m.id)),
        "data-leaf": String(isLeaf),
        role: isLeaf ? "button" : null,
        tabindex: isLeaf ? "0" : null,
        title: isLeaf ? "View this branch" : null,
      },
      h(
        "div",
        { class: "node-head" },
        h("span", { class: "role" }, m.role),
        m.id === conv.active_leaf_id ? badge("active leaf", "active") : null,
        m.status !== "complete" ? badge(m.status, "warn") : null,
        isLeaf ? badge("leaf") : null,
        h(
          "span",
          { class: "meta", title: m.id },
          `${m.token_count} tok · ${shortId(m.id)}`,
        ),
      ),
      h("div", { class: "node-text" }, snippet(m.content) || "(empty)"),
    );
    if (isLeaf) {
      el.addEventListener("click", () => show(m.id));
      el.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          show(m.id);
        }
      });
    }
    return el;
  }

  function runEl(start, onViewed) {
    const { nodes, forks } = runFrom(start);
    return [nodes.map((n) => nodeEl(n, onViewed)), forks.length ? forkEl(forks, onViewed) : null];
  }

  function forkEl(children, onViewed) {
    return h(
      "div",
      { class: "fork", "data-testid": "fork" },
      children.map((child, i) =>
        h(
          "div",
          {
            class:
              "branch" +
              (active.has(child.message.id) ? " on-active" : "") +
              (onViewed.has(child.message.id) ? " on-viewed" : ""),
          },
          h("div", { class: "branch-label muted" }, `branch ${i + 1} of ${children.length}`),
          runEl(child, onViewed),
        ),
      ),
    );
  }

  function drawBranch(path) {
    const leaf = path.length ? tree.byId.get(path[path.length - 1]).message : null;
    if (!leaf) {
      fill(branchBox, empty("No messages yet."));
      return;
    }
    fill(
      branchBox,
      h(
        "p",
        { class: "muted", "data-testid": "viewed-leaf", "data-id": leaf.id },
        `ends at ${shortId(leaf.id)} · ${path.length} messages · ${leaf.branch_tokens} tokens`,
        leaf.id === conv.active_leaf_id ? h("span", {}, " · ", badge("active branch", "active")) : null,
      ),
      h(
        "ol",
        { class: "transcript", "data-testid": "branch" },
        path.map((id) => {
          const m = tree.byId.get(id).message;
          const entry = h(
            "li",
            { class: `turn role-${m.role}`, "data-testid": "branch-message", "data-id": m.id },
            h(
              "div",
              { class: "turn-head" },
              h("span", { class: "role" }, m.role),
              h("span", { class: "meta", title: m.id }, `${when(m.created_at)} · ${m.token_count} tok`),
            ),
            h("div", { class: "turn-text" }, m.content || "(empty)"),
            m.tool_calls.length
              ? h(
                  "div",
                  { class: "meta" },
                  "tool calls: ",
                  m.tool_calls.map((t) => (t.function && t.function.name) || "?").join(", "),
                )
              : null,
            m.tool_call_id ? h("div", { class: "meta" }, `answers tool call ${m.tool_call_id}`) : null,
            m.files.length ? h("div", { class: "meta" }, `${m.files.length} file(s)`) : null,
          );
          attachProvenance(cid, m, entry);
          return entry;
        }),
      ),
    );
  }

  function draw() {
    const path = pathTo(tree.byId, viewed);
    const onViewed = new Set(path);
    if (!tree.roots.length) fill(treeBox, empty("No messages yet."));
    else if (tree.roots.length === 1) fill(treeBox, runEl(tree.roots[0], onViewed));
    else fill(treeBox, forkEl(tree.roots, onViewed));
    drawBranch(path);
    context.setLeaf(path.length ? path[path.length - 1] : null);
  }

  draw();
  if (focus) {
    queueMicrotask(() => {
      const el = treeBox.querySelector(`[data-id="${CSS.escape(focus)}"]`);
      if (el) el.scrollIntoView({ block: "center" });
    });
  }

  const legend = h(
    "div",
    { class: "legend muted" },
    h("span", { class: "swatch swatch-active" }),
    "active branch",
    h("span", { class: "swatch swatch-viewed" }),
    "viewed branch",
    h("span", {}, "· click a leaf to view its branch"),
  );
  return h(
    "section",
    { "data-testid": "conversation", "data-id": conv.id },
    h("h1", {}, conv.title || "(untitled)"),
    h(
      "p",
      { class: "muted", "data-testid": "conversation-summary" },
      `${all.items.length} messages · ${leaves.length} branches · updated ${when(conv.updated_at)} · `,
      h("span", { class: "mono", title: conv.id }, conv.id),
    ),
    all.more ? h("p", { class: "error" }, "Only the first messages are drawn.") : null,
    h(
      "div",
      { class: "columns" },
      h("section", { class: "panel" }, h("h2", {}, "Message tree"), legend, treeBox),
      h("section", { class: "panel" }, h("h2", {}, "Viewed branch"), branchBox),
    ),
    context.el,
  );
}
