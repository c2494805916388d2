"""Identifiers, ToC serialization, output matching, semantic ids and the token trie (no torch)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from searchtome.baselines.generative.common import (
    IdentifierIndex,
    PromptTemplate,
    TokenTrie,
    is_invalid_id,
    leaf_identifiers,
    semantic_id_strings,
    semantic_ids,
    serialize_toc,
)

from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError
from searchtome.records import TocNode

EOS = 2


def _node(nid: str, path: tuple[str, ...], leaf: bool) -> TocNode:
    parent = None if len(path) == 1 else nid.rsplit(".", 1)[0]
    return TocNode(nid, "b", path[-1], len(path), 1, parent, leaf, path)


def test_serialization_is_one_indented_line_per_node(tiny_dataset) -> None:
    ds = load(tiny_dataset)
    nodes = ds.toc("alpha-bio")
    text = serialize_toc(nodes)
    lines = text.splitlines()
    assert len(lines) == len(nodes)
    assert lines[0] == "- Cells"
    assert lines[1] == "  - Membranes"
    assert lines[2] == "    - Lipids"
    for line, node in zip(lines, nodes, strict=True):
        indent = len(line) - len(line.lstrip(" "))
        assert indent == 2 * (len(node.path) - 1)
        assert line.strip() == f"- {node.title}"


def test_identifiers_are_unique_title_paths(tiny_dataset) -> None:
    ds = load(tiny_dataset)
    nodes = ds.toc("alpha-bio")
    idents = leaf_identifiers(nodes)
    assert set(idents) == {x.leaf_id for x in ds.leaves("alpha-bio")}
    # "Summary" occurs twice in alpha-bio; its paths differ.
    summaries = [v for v in idents.values() if v.endswith("> Summary")]
    assert summaries == ["Cells > Membranes > Summary", "Cells > Energy > Summary"]
    assert len(set(idents.values())) == len(idents)


def test_identical_paths_get_ordinals_and_titles_are_cleaned() -> None:
    nodes = [
        _node("b/1", ("Part",), False),
        _node("b/1.1", ("Part", "Notes"), True),
        _node("b/1.2", ("Part", "Notes"), True),
        _node("b/1.3", ("Part", "Two\n  lines"), True),
    ]
    idents = leaf_identifiers(nodes)
    assert idents == {
        "b/1.1": "Part > Notes",
        "b/1.2": "Part > Notes (2)",
        "b/1.3": "Part > Two lines",
    }
    assert serialize_toc(nodes).splitlines()[-1] == "  - Two lines"


def test_matching_strict_and_lenient(tiny_dataset) -> None:
    ds = load(tiny_dataset)
    index = IdentifierIndex.for_book(ds.toc("alpha-bio"))
    assert index.match("Cells > Membranes > Lipids") == ("alpha-bio/1.1.1", "leaf")
    assert index.match("  cells >membranes> LIPIDS ") == ("alpha-bio/1.1.1", "leaf")
    assert index.match("Cells › Energy › Glycolysis") == ("alpha-bio/1.2.1", "leaf")
    # A non-leaf node's path is a non-leaf output, not a miss.
    assert index.match("Cells > Membranes") == ("alpha-bio/1.1", "non-leaf")
    assert index.match("Organisms") == ("alpha-bio/2", "non-leaf")
    # Title only: strict refuses, lenient accepts when exactly one leaf has that title.
    bad, kind = index.match("Glycolysis")
    assert kind == "invalid" and is_invalid_id(bad)
    assert index.match("Glycolysis", lenient=True) == ("alpha-bio/1.2.1", "leaf")
    assert index.match("1. 'Glycolysis'.", lenient=True) == ("alpha-bio/1.2.1", "leaf")
    assert index.match("- Energy > Summary", lenient=True) == ("alpha-bio/1.2.2", "leaf")
    # "Summary" alone is ambiguous: invalid, never a guess.
    assert index.match("Summary", lenient=True)[1] == "invalid"
    # Distinct unmatched strings get distinct ids that exist nowhere; equal ones share one.
    a = index.match("Photosynthesis")[0]
    b = index.match("Mitosis")[0]
    assert a != b and a == index.match("photosynthesis")[0]
    assert a.startswith("alpha-bio/") and a not in {n.node_id for n in ds.toc("alpha-bio")}


def test_prompt_prefix_is_query_independent() -> None:
    class Tok:
        chat_template = "x"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return f"<s>[INST] {messages[0]['content']} [/INST]"

    tpl = PromptTemplate("Find the leaf.")
    prefix, pattern = tpl.split(Tok(), "Book", "- A\n  - B")
    assert prefix.startswith("<s>[INST] Find the leaf.\n\nBook: Book\n\nTable of contents:\n- A")
    assert PromptTemplate.suffix(pattern, "What {is} B?") == "Question: What {is} B? [/INST]"
    dsi = PromptTemplate("Which section?", with_toc=False)
    prefix, _ = dsi.split(Tok(), "Book", "- A\n  - B")
    assert "- A" not in prefix and "Book" not in prefix


def test_semantic_ids_are_unique_deterministic_and_bounded() -> None:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(5, 8))
    vectors = np.concatenate([c + 0.05 * rng.normal(size=(30, 8)) for c in centers])
    ids = semantic_ids(vectors, k=5, c=10, seed=3)
    assert len(ids) == len(vectors) and len(set(ids)) == len(ids)
    assert ids == semantic_ids(vectors, k=5, c=10, seed=3)
    # Final clusters hold at most c members: the last position is < c.
    assert max(t[-1] for t in ids) < 10
    # Points of one generated cluster share their first code mostly.
    firsts = [t[0] for t in ids[:30]]
    assert max(firsts.count(x) for x in set(firsts)) >= 25
    assert semantic_id_strings([(3, 0, 7)]) == ["3-0-7"]
    with pytest.raises(SearchTomeError):
        semantic_ids(vectors, k=1)


def test_trie_allows_only_identifier_continuations() -> None:
    trie = TokenTrie({"a": [5, 6, EOS], "b": [5, 7, EOS], "c": [5, 6, 8, EOS]}, EOS)
    assert sorted(trie.allowed([])) == [5]
    assert sorted(trie.allowed([5])) == [6, 7]
    assert sorted(trie.allowed([5, 6])) == sorted([8, EOS])
    # Off the trie, or complete: EOS only (never an empty list, which HF beam search refuses).
    assert trie.allowed([9]) == [EOS]
    assert trie.allowed([5, 7, EOS]) == [EOS]
    assert trie.lookup([5, 6, EOS]) == "a" and trie.lookup([5, 6]) is None
    assert trie.max_length == 4
    _tokens, parents, depths = trie.flatten()
    assert all(p < i for i, p in enumerate(parents))
    assert depths == [0 if p < 0 else depths[p] + 1 for p in parents]
    with pytest.raises(SearchTomeError, match="EOS"):
        TokenTrie({"x": [1, 3]}, EOS)
    with pytest.raises(SearchTomeError, match="tokenize identically"):
        TokenTrie({"x": [1, EOS], "y": [1, EOS]}, EOS)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=3, max_value=9), min_size=1, max_size=6),
        min_size=1,
        max_size=12,
        unique_by=tuple,
    ),
    st.randoms(use_true_random=False),
)
def test_trie_walks_always_end_in_an_identifier(seqs, rnd) -> None:
    trie = TokenTrie({f"k{i}": [*s, EOS] for i, s in enumerate(seqs)}, EOS)
    # Any walk that follows allowed() ends at an identifier after at most max_length steps.
    for _ in range(10):
        prefix: list[int] = []
        while not prefix or prefix[-1] != EOS:
            prefix.append(rnd.choice(trie.allowed(prefix)))
            assert len(prefix) <= trie.max_length
        assert trie.lookup(prefix) is not None
    # Flattening keeps every identifier reachable through parents.
    tokens, parents, _ = trie.flatten()
    for node, key in trie.terminal.items():
        path = []
        j = node - 1
        while j >= 0:
            path.append(tokens[j])
            j = parents[j]
        assert tuple(reversed(path)) == trie.sequences[key]
