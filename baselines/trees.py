"""The trees NavTree walks: a balanced segment tree over a book's chunks, or the book's own ToC.

A :class:`Tree` is a rooted tree in flat arrays (parents, children in document order, which
leaf score each tree leaf reads), so the walk in :mod:`searchtome.baselines.navtree` is a few
array look-ups per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tree:
    """A rooted tree in arrays. Node 0 is the root; children are in document order.

    ``leaf_ref[v]`` is the tree leaf's index into the leaf-score array (chunk or ToC leaf), -1
    for internal nodes; ``internal_ref[v]`` the internal node's row in the internal index (-1 for
    leaves and for the root, which is never scored).
    """

    parent: list[int]
    children: list[list[int]]
    leaf_ref: list[int]
    internal_ref: list[int] = field(default_factory=list)
    tin: list[int] = field(default_factory=list)
    tout: list[int] = field(default_factory=list)
    titles: list[tuple[str, ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.parent)

    def finish(self) -> Tree:
        """Euler-tour intervals (subtree tests in O(1)) and internal-node rows."""
        n = len(self.parent)
        self.tin, self.tout = [0] * n, [0] * n
        clock = 0
        stack: list[tuple[int, bool]] = [(0, False)]
        while stack:
            v, done = stack.pop()
            if done:
                self.tout[v] = clock
                continue
            self.tin[v] = clock
            clock += 1
            stack.append((v, True))
            stack.extend((c, False) for c in reversed(self.children[v]))
        self.internal_ref = [-1] * n
        row = 0
        for v in sorted(range(n), key=lambda v: self.tin[v]):
            if v != 0 and self.leaf_ref[v] < 0:
                self.internal_ref[v] = row
                row += 1
        return self

    def internal_nodes(self) -> list[int]:
        """Scored internal nodes (root excluded) in their index-row order."""
        nodes = [v for v in range(len(self)) if self.internal_ref[v] >= 0]
        return sorted(nodes, key=lambda v: self.internal_ref[v])

    def contains(self, ancestor: int, v: int) -> bool:
        return self.tin[ancestor] <= self.tin[v] < self.tout[ancestor]

    def descendant_leaves(self, v: int) -> list[int]:
        out, stack = [], [v]
        while stack:
            u = stack.pop()
            if self.leaf_ref[u] >= 0:
                out.append(self.leaf_ref[u])
            stack.extend(reversed(self.children[u]))
        return out

    def depth_of(self, v: int) -> int:
        d = 0
        while self.parent[v] >= 0:
            v = self.parent[v]
            d += 1
        return d


def segment_tree(n: int) -> Tree:
    """Balanced binary tree over ``n`` items in order; its leaves refer to items 0..n-1."""
    if n < 1:
        raise ValueError("a segment tree needs at least one item")
    parent: list[int] = []
    children: list[list[int]] = []
    leaf_ref: list[int] = []
    stack: list[tuple[int, int, int]] = [(0, n, -1)]
    while stack:
        lo, hi, par = stack.pop()
        v = len(parent)
        parent.append(par)
        children.append([])
        leaf_ref.append(lo if hi - lo == 1 else -1)
        if par >= 0:
            children[par].append(v)
        if hi - lo > 1:
            mid = (lo + hi + 1) // 2
            # Pushed right first so the left child is created (and listed) first.
            stack.append((mid, hi, v))
            stack.append((lo, mid, v))
    return Tree(parent, children, leaf_ref, titles=[() for _ in parent]).finish()


def toc_tree(nodes: Sequence[Any], leaf_ids: Sequence[str]) -> Tree:
    """The authored ToC as a :class:`Tree` whose leaves refer to ``leaf_ids`` positions."""
    position = {lid: i for i, lid in enumerate(leaf_ids)}
    by_parent: dict[str | None, list[Any]] = {}
    known = {n.node_id for n in nodes}
    for node in nodes:
        parent = node.parent_id if node.parent_id in known else None
        by_parent.setdefault(parent, []).append(node)
    parent_of: list[int] = [-1]
    children: list[list[int]] = [[]]
    leaf_ref: list[int] = [-1]
    titles: list[tuple[str, ...]] = [()]

    def add(node: Any, par: int) -> bool:
        v = len(parent_of)
        parent_of.append(par)
        children.append([])
        leaf_ref.append(position.get(node.node_id, -1))
        titles.append(tuple(node.path))
        kids = by_parent.get(node.node_id, [])
        if leaf_ref[v] >= 0:
            kids = []  # a retrieval target is a leaf of the navigation tree
        kept = [add(k, v) for k in kids]
        if leaf_ref[v] < 0 and not any(kept):
            # No retrieval leaf below: drop the node again (it is the last one added).
            del parent_of[v:], children[v:], leaf_ref[v:], titles[v:]
            return False
        children[par].append(v)
        return True

    for top in by_parent.get(None, []):
        add(top, 0)
    placed = {r for r in leaf_ref if r >= 0}
    for ref in sorted(set(range(len(leaf_ids))) - placed):
        # A corpus leaf absent from the ToC table hangs under the root, in corpus order.
        v = len(parent_of)
        parent_of.append(0)
        children.append([])
        leaf_ref.append(ref)
        titles.append(())
        children[0].append(v)
    return Tree(parent_of, children, leaf_ref, titles=titles).finish()
