"""DSI: query-only prompts, semantic identifiers, input truncation, an end-to-end run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.llm_helpers import one_thread, tiny_lm_fixture, tiny_run  # noqa: F401

pytest.importorskip("torch")

from searchtome.baselines.generative.books import book_context
from searchtome.baselines.generative.config import GenRetConfig
from searchtome.baselines.generative.engine import load_lm

from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


# DSI's prompt before the query: the paper layout without its ToC block, and v1's (unchanged).
DSI_PREFIXES = {
    "paper": (
        "### Book: Alpha Biology\nPick the section of this book that can answer the user query. "
        "Write only that section, and no explanation.\n"
    ),
    "v1": (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nWhich section of the book answers the question? "
        "Reply with the section's full path of titles from the top level down, joined by ' > '."
        "\n\n"
    ),
}


@pytest.mark.parametrize("layout", ["paper", "v1"])
def test_dsi_prompt_holds_no_toc_and_is_truncated_to_its_budget(
    tiny_lm_dir, tiny_dataset, layout
) -> None:
    one_thread()
    lm = load_lm(str(tiny_lm_dir), dtype="float32", device="cpu")
    ds = load(tiny_dataset)
    cfg = GenRetConfig(max_input_tokens=512, prompt_layout=layout)
    dsi = book_context(lm, ds, "alpha-bio", cfg, with_toc=False, seed=0)
    stair = book_context(lm, ds, "alpha-bio", cfg, with_toc=True, seed=0)
    prefix_text = lm.tokenizer.decode(dsi.prefix_ids)
    assert prefix_text == DSI_PREFIXES[layout] and dsi.prefix_ids == lm.encode(prefix_text)
    assert "Glycolysis" not in prefix_text
    assert "Glycolysis" in lm.tokenizer.decode(stair.prefix_ids)
    assert dsi.identifiers == stair.identifiers  # the same targets as STAIR's
    if layout == "paper":
        assert dsi.identifiers["alpha-bio/1.2.1"] == "leaf 1.2.1 Glycolysis"
        q = ds.queries("test", "alpha-bio")[0]
        suffix = dsi.suffix_ids(lm, q.text, dsi.query_label, cfg.max_input_tokens)
        assert lm.tokenizer.decode(suffix) == f"### Query: {q.text}\n### Section:\n"
    assert len(dsi.prefix_ids) < len(stair.prefix_ids)
    long_query = " ".join(["membrane"] * 3000)
    suffix = dsi.suffix_ids(lm, long_query, dsi.query_label, cfg.max_input_tokens)
    assert len(dsi.prefix_ids) + len(suffix) <= 512
    assert suffix[-len(dsi.tail_ids) :] == dsi.tail_ids  # the template's end survives the cut
    with pytest.raises(SearchTomeError, match="raise max_input_tokens"):
        stair.suffix_ids(lm, "q", "Question", len(stair.prefix_ids) + 2)


def test_dsi_semantic_identifiers_run_end_to_end(tiny_lm_dir, tiny_dataset) -> None:
    from searchtome.baselines.runner import execute

    one_thread()
    overrides = tiny_run(tiny_lm_dir, identifiers="semantic", semantic_k=3, semantic_c=3)
    run, meta, info = execute("dsi-constrained", tiny_dataset, "test", None, overrides, seed=1)
    ds = load(tiny_dataset)
    for q in ds.queries("test"):
        ids = run.rankings[q.query_id]
        assert len(ids) == min(10, len(ds.leaves(q.book_id)))  # ten beams
        assert set(ids) <= {x.leaf_id for x in ds.leaves(q.book_id)}
    assert (meta.config or {})["identifiers"] == "semantic"
    from searchtome.settings import home

    # meta.json records cache paths portably ("$SEARCHTOME_HOME/..."), never this machine's.
    adapter = info.report.adapter or ""
    assert adapter.startswith("$SEARCHTOME_HOME/")
    assert Path(adapter.replace("$SEARCHTOME_HOME", str(home()))).is_dir()
    # The identifiers really are cluster codes: a book's trie holds "d-d" strings.
    lm = load_lm(str(tiny_lm_dir), dtype="float32", device="cpu")
    book = book_context(
        lm,
        ds,
        "alpha-bio",
        GenRetConfig(identifiers="semantic", semantic_k=3, semantic_c=3),
        with_toc=False,
        seed=1,
    )
    codes = list(book.identifiers.values())
    assert len(set(codes)) == len(codes) == len(ds.leaves("alpha-bio"))
    assert all(all(part.isdigit() for part in c.split("-")) and "-" in c for c in codes)


@pytest.mark.parametrize("system", ["dsi", "stair"])
def test_prediction_reads_the_prompt_as_training_did(
    tiny_lm_dir, tiny_dataset, tmp_path, system
) -> None:
    """The exact score of a training question's gold leaf equals minus its training loss."""
    from searchtome.baselines.generative.adapters import build_examples
    from searchtome.baselines.generative.retriever import run_generative
    from searchtome.baselines.generative.train import batch_loss_backward, load_adapter
    from searchtome.baselines.registry import RunContext

    one_thread()
    ds = load(tiny_dataset)
    cfg = GenRetConfig(
        model=str(tiny_lm_dir),
        dtype="float32",
        device="cpu",
        restricted="exclude",
        max_epochs=1,
        lr=0.05,
        lora_layers=0,
        dev_max_queries=4,
        decode="exact",
    )
    ctx = RunContext(cache_dir=tmp_path)
    run = run_generative(ds, "train", cfg, ctx, system=system, with_toc=system == "stair")
    lm = load_lm(str(tiny_lm_dir), dtype="float32", device="cpu")
    load_adapter(lm, Path(ctx.report.adapter or ""))
    book = book_context(lm, ds, "alpha-bio", cfg, with_toc=system == "stair", seed=42)
    example = build_examples(lm, ds, {"alpha-bio": book}, ["alpha-bio"], cfg)[0]
    query = ds.queries("train", "alpha-bio")[0]
    with lm.adapter_disabled():
        frozen = lm.prefix_cache(book.prefix_ids)
    loss, n = batch_loss_backward(lm, [example], book.prefix_ids, frozen, pack=1)
    gold_rank = run.rankings[query.query_id].index(query.leaf_id)
    assert run.scores[query.query_id][gold_rank] == pytest.approx(-loss * n, abs=1e-3)
    trained = [p for name, p in lm.model.named_parameters() if "lora_B" in name]
    assert trained and any(float(p.detach().abs().sum()) > 0 for p in trained)


def test_dsi_decodes_freely_and_dsi_constrained_only_names_leaves(
    tiny_lm_dir, tiny_dataset
) -> None:
    """``dsi`` is the paper's DSI (free decoding: non-leaf and invalid answers are kept);
    ``dsi-constrained`` is the same adapter under trie-constrained beam search."""
    from searchtome.baselines.generative.common import is_invalid_id
    from searchtome.baselines.runner import execute

    one_thread()
    overrides = tiny_run(tiny_lm_dir, identifiers="atomic", max_output_tokens=4)
    free, meta, info = execute("dsi", tiny_dataset, "test", None, overrides, seed=1)
    tied, meta_c, info_c = execute("dsi-constrained", tiny_dataset, "test", None, overrides, 1)
    assert (meta.config or {})["decode"] == "free" and (meta_c.config or {})["decode"] == "beam"
    assert info_c.report.adapter_reused is True  # the decoder does not change training
    assert info.dtype == info_c.dtype == "float32"  # the dtype the model really ran in
    ds = load(tiny_dataset)
    leaves = {x.leaf_id for x in ds.leaves()}
    # A one-epoch model of random weights writes numbers that name no leaf: kept, and counted.
    first = [free.rankings[q.query_id][0] for q in ds.queries("test") if free.rankings[q.query_id]]
    assert any(is_invalid_id(i) for i in first)
    assert info.report.invalid_at_1 == sum(is_invalid_id(i) for i in first)
    for q in ds.queries("test"):
        assert set(tied.rankings[q.query_id]) <= leaves
        assert len(tied.rankings[q.query_id]) == min(10, len(ds.leaves(q.book_id)))
    # Atomic identifiers: one number per leaf, in document order.
    lm = load_lm(str(tiny_lm_dir), dtype="float32", device="cpu")
    atomic = GenRetConfig(identifiers="atomic")
    book = book_context(lm, ds, "alpha-bio", atomic, with_toc=False, seed=1)
    n = len(ds.leaves("alpha-bio"))
    assert list(book.identifiers.values()) == [str(i) for i in range(1, n + 1)]
    assert book.index.match(str(n + 1))[1] == "invalid"
