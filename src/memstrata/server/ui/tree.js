// The message tree of a conversation, rebuilt from its flat list (oldest first, so a
// parent always comes before its children). Pure functions: no DOM, no fetching.

/** {byId: Map id -> node, roots: [node]}; a node is {message, children: [node]}. */
export function buildTree(messages) {
  const byId = new Map();
  const roots = [];
  for (const message of messages) byId.set(message.id, { message, children: [] });
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
