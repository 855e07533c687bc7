// One conversation: its message tree drawn once (each message a single time, the viewed
// branch open, every other branch folded away behind its fork), with the compaction
// summary and the context assembled for the viewed branch beside it. Actions: view
// another branch, make it the active one, delete the conversation.

import { allPages, api } from "../api.js";
import { badge, confirmButton, empty, errorBox, fill, h, shortId, snippet, when } from "../dom.js";
import { buildTree, leafUnder, leavesOf, pathTo, runFrom, sizeOf } from "../tree.js";
import { contextPanel } from "./context.js";
import { attachProvenance } from "./provenance.js";

const enc = encodeURIComponent;

/** The compaction summary serving the viewed branch, or a line saying there is none. */
function summaryPanel(cid) {
  const body = h("div", { "data-testid": "compaction-summary-box" });
  const el = h("section", { class: "panel" }, h("h2", {}, "Compaction summary"), body);
  let asked = 0;
  return {
    el,
    /** Read the summary of `leaf`'s branch; answers it (or null) once drawn. */
    async setLeaf(leaf, byId) {
      const mine = ++asked;
      if (!leaf) {
        fill(body, empty("No messages yet."));
        return null;
      }
      fill(body, h("p", { class: "muted" }, "Reading…"));
      let found;
      try {
        found = (await api.get(`/v1/conversations/${enc(cid)}/summary`, { leaf_id: leaf })).summary;
      } catch (err) {
        if (mine === asked) fill(body, errorBox(err));
        return null;
      }
      if (mine !== asked) return null;
      if (!found) {
        fill(
          body,
          h(
            "p",
            { class: "muted", "data-testid": "no-summary" },
            "Not compacted yet: the whole branch goes to the model as messages (compaction " +
              "summarises the oldest part once the branch outgrows its share of the budget).",
          ),
        );
        return null;
      }
      const upTo = byId.get(found.up_to_message_id);
      fill(
        body,
        h(
          "div",
          {
            class: "summary",
            "data-testid": "compaction-summary",
            "data-id": found.id,
            "data-up-to": found.up_to_message_id,
          },
          h(
            "p",
            { class: "meta" },
            `covers the first ${found.up_to_depth + 1} messages, up to ` +
              `${upTo ? upTo.message.role : "message"} ${shortId(found.up_to_message_id)} · ` +
              `version ${found.version} · ${found.method} · ${when(found.created_at)}`,
          ),
          h("div", { class: "turn-text", "data-testid": "summary-text" }, found.content),
        ),
      );
      return found;
    },
  };
}

export async function conversationView(route, ctx) {
  const cid = route.params.cid;
  const [conv, all] = await Promise.all([
    api.get(`/v1/conversations/${enc(cid)}`),
    allPages(`/v1/conversations/${enc(cid)}/messages`),
  ]);
  const tree = buildTree(all.items);
  const leaves = leavesOf(tree.byId);
  const active = new Set(pathTo(tree.byId, conv.active_leaf_id));
  const focus = tree.byId.has(route.query.focus) ? route.query.focus : null;
  // A focused message off the active branch is shown on the newest branch through it.
  let viewed = tree.byId.has(route.query.leaf)
    ? route.query.leaf
    : focus && !active.has(focus)
      ? leafUnder(tree.byId, focus)
      : conv.active_leaf_id;
  let expandAll = false;

  const treeBox = h("div", { class: "tree", "data-testid": "tree" });
  const scroller = h("div", { class: "tree-scroll", "data-testid": "tree-scroll" }, treeBox);
  const viewedLine = h("div", { class: "viewed-line" });
  const summary = summaryPanel(cid);
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
        "data-depth": m.depth,
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
          `${when(m.created_at)} · ${m.token_count} tok · ${shortId(m.id)}`,
        ),
      ),
      h("div", { class: "node-text turn-text" }, m.content || "(empty)"),
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
    if (onViewed.has(m.id)) attachProvenance(cid, m, el);
    if (isLeaf) {
      el.addEventListener("click", (event) => {
        if (!event.target.closest("details.provenance")) show(m.id);
      });
      el.addEventListener("keydown", (event) => {
        if (event.target === el && (event.key === "Enter" || event.key === " ")) {
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

  /** A fork: one fold per branch, open on the viewed branch (all open with "expand all"). */
  function forkEl(children, onViewed) {
    return h(
      "div",
      { class: "fork", "data-testid": "fork" },
      children.map((child, i) => {
        const m = child.message;
        const onActive = active.has(m.id);
        const here = onViewed.has(m.id);
        const count = sizeOf(child);
        return h(
          "details",
          {
            class: "branch" + (onActive ? " on-active" : "") + (here ? " on-viewed" : ""),
            "data-testid": "branch-fold",
            "data-first": m.id,
            open: here || expandAll,
          },
          h(
            "summary",
            { class: "branch-label" },
            `branch ${i + 1} of ${children.length} · ${count} message${count === 1 ? "" : "s"}`,
            onActive ? badge("active", "active") : null,
            here ? badge("viewed") : null,
            h("span", { class: "muted branch-snippet" }, ` ${m.role}: ${snippet(m.content, 60)}`),
          ),
          runEl(child, onViewed),
        );
      }),
    );
  }

  function drawViewedLine(path) {
    const leaf = path.length ? tree.byId.get(path[path.length - 1]).message : null;
    if (!leaf) {
      fill(viewedLine);
      return;
    }
    const isActive = leaf.id === conv.active_leaf_id;
    const makeActive = h(
      "button",
      {
        type: "button",
        class: "ghost",
        "data-testid": "make-active",
        onclick: async () => {
          makeActive.disabled = true;
          try {
            await api.patch(`/v1/conversations/${enc(cid)}`, { active_leaf_id: leaf.id });
            ctx.refresh();
          } catch (err) {
            makeActive.disabled = false;
            viewedLine.append(errorBox(err));
          }
        },
      },
      "Make this branch active",
    );
    fill(
      viewedLine,
      h(
        "p",
        { class: "muted", "data-testid": "viewed-leaf", "data-id": leaf.id },
        `viewing the branch ending at ${shortId(leaf.id)} · ${path.length} messages · ` +
          `${leaf.branch_tokens} tokens`,
        isActive ? h("span", {}, " · ", badge("active branch", "active")) : null,
      ),
      isActive ? null : makeActive,
    );
  }

  let covering = null; // the summary of the viewed branch, once read

  /** Mark the viewed branch's messages that the summary stands in for. */
  function markCovered(path) {
    if (!covering) return;
    for (const id of path.slice(0, covering.up_to_depth + 1)) {
      const el = treeBox.querySelector(`[data-id="${CSS.escape(id)}"]`);
      if (el) {
        el.classList.add("covered");
        el.dataset.covered = "true";
      }
    }
  }

  /** The tree alone (folding changes nothing else). */
  function drawTree() {
    const path = pathTo(tree.byId, viewed);
    const onViewed = new Set(path);
    if (!tree.roots.length) fill(treeBox, empty("No messages yet."));
    else if (tree.roots.length === 1) fill(treeBox, runEl(tree.roots[0], onViewed));
    else fill(treeBox, forkEl(tree.roots, onViewed));
    markCovered(path);
  }

  /** Everything that follows the viewed branch: the tree, its line, summary and context. */
  async function draw() {
    const path = pathTo(tree.byId, viewed);
    const leaf = path.length ? path[path.length - 1] : null;
    covering = null;
    drawTree();
    drawViewedLine(path);
    context.setLeaf(leaf);
    const found = await summary.setLeaf(leaf, tree.byId);
    if (found && leaf === viewed) {
      covering = found;
      markCovered(path);
    }
  }

  draw();
  if (focus) {
    queueMicrotask(() => {
      const el = treeBox.querySelector(`[data-id="${CSS.escape(focus)}"]`);
      if (el) el.scrollIntoView({ block: "center" });
    });
  }

  const compact = h(
    "button",
    {
      type: "button",
      class: "ghost",
      "aria-pressed": "false",
      "data-testid": "tree-compact",
      onclick: () => {
        const on = treeBox.classList.toggle("compact");
        compact.setAttribute("aria-pressed", String(on));
        compact.textContent = on ? "Full text" : "One line each";
      },
    },
    "One line each",
  );
  const expand = h(
    "button",
    {
      type: "button",
      class: "ghost",
      "data-testid": "tree-expand",
      onclick: () => {
        expandAll = !expandAll;
        expand.textContent = expandAll ? "Fold other branches" : "Open every branch";
        drawTree();
      },
    },
    "Open every branch",
  );
  const remove = confirmButton("Delete conversation", "delete-conversation", async () => {
    const rid = await api.remove(`/v1/conversations/${enc(cid)}`);
    ctx.go("/receipts", { rid });
  });

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
    h("div", { class: "title-row" }, h("h1", {}, conv.title || "(untitled)"), remove),
    h(
      "p",
      { class: "muted", "data-testid": "conversation-summary" },
      `${all.items.length} messages · ${leaves.length} branches · updated ${when(conv.updated_at)} · `,
      h("span", { class: "mono", title: conv.id }, conv.id),
    ),
    all.more ? h("p", { class: "error" }, "Only the first messages are drawn.") : null,
    h(
      "div",
      { class: "conv-layout" },
      h(
        "section",
        { class: "panel conv-main", "data-testid": "messages-panel" },
        h(
          "div",
          { class: "panel-head" },
          h("h2", {}, "Messages"),
          h("div", { class: "toolbar tight" }, compact, expand),
        ),
        legend,
        viewedLine,
        scroller,
      ),
      h("aside", { class: "conv-side", "data-testid": "conversation-side" }, summary.el, context.el),
    ),
  );
}
