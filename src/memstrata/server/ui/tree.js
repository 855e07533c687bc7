// The message tree of a conversation, rebuilt from its flat list (oldest first, so a
// parent always comes before its children). Pure functions: no DOM, no fetching.

/**
 * {byId: Map id -> node, roots: [node]}; a node is {message, children: [node], index}
 * (index: its place in the list, oldest first).
 */
export function buildTree(messages) {
  const byId = new Map();
  const roots = [];
  messages.forEach((message, index) => byId.set(message.id, { message, children: [], index }));
  for (const message of messages) {
    const node = byId.get(message.id);
    const parent = message.parent_id ? byId.get(message.parent_id) : undefined;
    // A parent missing from the list (never expected) makes its child a root, so
    // nothing is hidden.
    if (parent) parent.children.push(node);
    else roots.push(node);
  }
  return { byId, roots };
}

/** The ids from the root down to `id` (inclusive); [] when id is unknown. */
export function pathTo(byId, id) {
  const out = [];
  const seen = new Set();
  let node = id ? byId.get(id) : undefined;
  while (node && !seen.has(node.message.id)) {
    seen.add(node.message.id);
    out.push(node.message.id);
    node = node.message.parent_id ? byId.get(node.message.parent_id) : undefined;
  }
  return out.reverse();
}

/** The messages with no children (the branch ends), oldest first. */
export function leavesOf(byId) {
  return [...byId.values()].filter((n) => n.children.length === 0).map((n) => n.message);
}

/**
 * Split the tree into runs to draw: a run is a chain of nodes that each have one child,
 * ending where the tree forks (or ends). Returns {nodes, forks}: `forks` are the child
 * runs, one per branch, so only a fork adds a level of indentation.
 */
export function runFrom(node) {
  const nodes = [node];
  let current = node;
  while (current.children.length === 1) {
    current = current.children[0];
    nodes.push(current);
  }
  return { nodes, forks: current.children };
}

/** How many messages there are from `node` down (every sub-branch included). */
export function sizeOf(node) {
  let n = 0;
  const stack = [node];
  while (stack.length) {
    const current = stack.pop();
    n += 1;
    stack.push(...current.children);
  }
  return n;
}

/** The newest leaf at or under `id` (the branch a message is most likely read on). */
export function leafUnder(byId, id) {
  let best = null;
  const stack = id && byId.has(id) ? [byId.get(id)] : [];
  while (stack.length) {
    const node = stack.pop();
    if (!node.children.length && (!best || node.index > best.index)) best = node;
    stack.push(...node.children);
  }
  return best ? best.message.id : null;
}
