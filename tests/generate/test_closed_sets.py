"""Closed sets as enums, checked once where they enter: endpoint kinds and ToC node kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searchtome.errors import SearchTomeError
from searchtome.generate.endpoint import Endpoint, EndpointKind, resolve_endpoint
from searchtome.generate.options import BuildOptions
from searchtome.metrics.structure import INVALID, NON_LEAF, NodeKind, classify
from searchtome.records import TocNode


def test_a_bad_endpoint_kind_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(SearchTomeError) as err:
        Endpoint("vllm")
    assert str(err.value) == "unknown endpoint kind 'vllm'; known: cache, local, openai-compatible"
    with pytest.raises(SearchTomeError, match=r"\(did you mean 'local'\?\)"):
        Endpoint("locl")


def test_endpoint_kinds_are_members_whose_text_is_what_the_manifest_records() -> None:
    assert Endpoint("local").kind is EndpointKind.LOCAL  # a plain string is checked and converted
    assert (
        resolve_endpoint(BuildOptions(out=Path("x"), endpoint="cache")).kind is EndpointKind.CACHE
    )
    remote = resolve_endpoint(
        BuildOptions(out=Path("x"), endpoint=["http://a:1/v1", "http://b:2/v1"])
    )
    assert remote.kind is EndpointKind.OPENAI and remote.base_urls == (
        "http://a:1/v1",
        "http://b:2/v1",
    )
    assert (
        json.dumps({"endpoint_kind": EndpointKind.OPENAI.value})
        == '{"endpoint_kind": "openai-compatible"}'
    )
    assert [str(k) for k in EndpointKind] == ["openai-compatible", "local", "cache"]


def _node(node_id: str, book: str, leaf: bool) -> TocNode:
    return TocNode(node_id, book, node_id, 1, 1, None, leaf, (node_id,))


def test_classify_gives_node_kinds_that_the_flags_read() -> None:
    nodes = {"b/1": _node("b/1", "b", False), "b/1.1": _node("b/1.1", "b", True)}
    kinds = [classify(doc, "b", nodes) for doc in ("b/1.1", "b/1", "b/9", "c/1")]
    assert kinds == [NodeKind.LEAF, NodeKind.NON_LEAF, NodeKind.INVALID, NodeKind.INVALID]
    assert all(type(k) is NodeKind for k in kinds)
    assert [str(k) for k in kinds[:3]] == ["leaf", "non_leaf", "invalid"]  # the validator's words
    assert NON_LEAF.flag(kinds, 2) and not NON_LEAF.flag(kinds, 1)
    assert INVALID.flag(kinds, 3) and not INVALID.flag(kinds, 2)
