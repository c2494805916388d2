"""STAIR: prefix-cached exact ranking, constrained beam search, LoRA training, adapters, runs.

Most tests use a tiny random Llama with SmolLM2's tokenizer (real prompts and tries, fast
forwards); one checks the cache equivalence on the real SmolLM2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.llm_helpers import (  # noqa: F401
    one_thread,
    smollm2_fixture,
    tiny_lm_fixture,
    tiny_run,
)

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from searchtome.baselines.generative.adapters import build_examples, training_books  # noqa: E402
from searchtome.baselines.generative.beam import beam_search  # noqa: E402
from searchtome.baselines.generative.books import book_context  # noqa: E402
from searchtome.baselines.generative.config import GenRetConfig  # noqa: E402
from searchtome.baselines.generative.engine import (  # noqa: E402
    decode_text,
    load_lm,
    rank_from_scores,
    score_trie,
    score_uncached,
)
from searchtome.baselines.generative.layouts import (  # noqa: E402
    PaperTemplate,
    get_layout,
    toc_lines,
)
from searchtome.baselines.generative.train import (  # noqa: E402
    LoraSettings,
    TrainSettings,
    attach_lora,
    load_adapter,
    lora_state,
    train,
)

from searchtome.dataset.loader import load  # noqa: E402
from searchtome.errors import SearchTomeError  # noqa: E402
from searchtome.records import TocNode  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

CFG = GenRetConfig(dtype="float32", device="cpu", restricted="exclude")
V1 = GenRetConfig(dtype="float32", device="cpu", restricted="exclude", prompt_layout="v1")

# The paper layout's STAIR prefix for the tiny dataset's first book (paper Table 2's order).
PAPER_PREFIX = (
    "### Book: Alpha Biology\n"
    "Pick the section of the table of contents below that can answer the user query. "
    "Write only that section, exactly as its line reads, and no explanation.\n"
    "### Table of Contents\n"
    "1 Cells\n1.1 Membranes\nleaf 1.1.1 Lipids\nleaf 1.1.2 Proteins\nleaf 1.1.3 Summary\n"
    "1.2 Energy\nleaf 1.2.1 Glycolysis\nleaf 1.2.2 Summary\n"
    "2 Organisms\n2.1 Plants\nleaf 2.1.1 Roots\nleaf 2.1.2 Leaves\nleaf 2.2 Animals\n"
)
# SmolLM2's chat template around the user message, as v1 renders it.
CHAT_HEAD = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n<|im_start|>user\n"
)
CHAT_TAIL = "<|im_end|>\n<|im_start|>assistant\n"
# The v1 STAIR prefix exactly as the toolkit wrote it before the paper layout existed.
V1_PREFIX = (
    CHAT_HEAD + "You locate answers in a book. Below is the book's table of contents, one entry "
    "per line, each entry indented under the entry that contains it. Reply with the leaf entry "
    "(one that has no entries under it) whose section answers the question: write its full path "
    "of titles from the top level down, joined by ' > ', exactly as in the table of contents."
    "\n\nBook: Alpha Biology\n\nTable of contents:\n- Cells\n  - Membranes\n    - Lipids\n"
    "    - Proteins\n    - Summary\n  - Energy\n    - Glycolysis\n    - Summary\n- Organisms\n"
    "  - Plants\n    - Roots\n    - Leaves\n  - Animals\n\n"
)


def _setup(
    model_dir: Path,
    data: Path,
    book: str = "alpha-bio",
    with_toc: bool = True,
    cfg: GenRetConfig = CFG,
):
    one_thread()
    lm = load_lm(str(model_dir), dtype="float32", device="cpu")
    ds = load(data)
    ctx = book_context(lm, ds, book, cfg, with_toc=with_toc, seed=0)
    return lm, ds, ctx


def _node(ordinal: str, title: str, leaf: bool) -> TocNode:
    parent = ordinal.rsplit(".", 1)[0] if "." in ordinal else None
    return TocNode(
        f"wc/{ordinal}",
        "wc",
        title,
        ordinal.count(".") + 1,
        1,
        f"wc/{parent}" if parent else None,
        leaf,
        (title,),
    )


def test_section_numbers_are_the_books_own_else_the_ordinal_path() -> None:
    nodes = [
        _node("1", "Chapter 1: Fundamental Change in Education", False),
        _node("1.1", "12.9 Step seven: design course structure and learning", True),
        _node("1.2", "Introduction", True),
        _node("2", "Part Two", False),
        _node("2.1", "12.9 Step seven: design course structure and learning", True),
        _node("2.2", "", True),
        _node("2.3", "3. Methods", True),
    ]
    assert list(toc_lines(nodes).values()) == [
        "1 Chapter 1: Fundamental Change in Education",
        "leaf 12.9 Step seven: design course structure and learning",
        "leaf 1.2 Introduction",
        "2 Part Two",
        "leaf 12.9 Step seven: design course structure and learning (2)",  # unique in the book
        "leaf 2.2",
        "leaf 3. Methods",
    ]
    leaves = get_layout("paper").leaf_identifiers(nodes)
    assert list(leaves) == ["wc/1.1", "wc/1.2", "wc/2.1", "wc/2.2", "wc/2.3"]


def test_paper_prompt_is_table_2s_layout_and_the_target_is_the_leaf_line(
    tiny_lm_dir, tiny_dataset
) -> None:
    lm, ds, book = _setup(tiny_lm_dir, tiny_dataset)  # the default layout
    assert CFG.prompt_layout == "paper"
    assert lm.tokenizer.decode(book.prefix_ids) == PAPER_PREFIX
    assert book.prefix_ids == lm.encode(PAPER_PREFIX)
    assert book.identifiers == {
        "alpha-bio/1.1.1": "leaf 1.1.1 Lipids",
        "alpha-bio/1.1.2": "leaf 1.1.2 Proteins",
        "alpha-bio/1.1.3": "leaf 1.1.3 Summary",
        "alpha-bio/1.2.1": "leaf 1.2.1 Glycolysis",
        "alpha-bio/1.2.2": "leaf 1.2.2 Summary",
        "alpha-bio/2.1.1": "leaf 2.1.1 Roots",
        "alpha-bio/2.1.2": "leaf 2.1.2 Leaves",
        "alpha-bio/2.2": "leaf 2.2 Animals",
    }
    q = ds.queries("train", "alpha-bio")[0]
    suffix = book.suffix_ids(lm, q.text, book.query_label, CFG.max_input_tokens)
    query_part = f"### Query: {q.text}\n### Section:\n"
    assert lm.tokenizer.decode(suffix) == query_part
    # Training target = the leaf line + EOS; prompt and completion tokenize as one text does.
    example = build_examples(lm, ds, {"alpha-bio": book}, ["alpha-bio"], CFG)[0]
    assert example.suffix == tuple(suffix) and example.target[-1] == lm.eos_id
    full = PAPER_PREFIX + query_part + book.identifiers[q.leaf_id]
    assert book.prefix_ids + suffix + list(example.target[:-1]) == lm.encode(full)


def test_paper_prompt_starts_with_bos_only_where_the_tokenizer_adds_one(tiny_lm_dir) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel({"<s>": 0, "[UNK]": 1, "x": 2}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    llama_like = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", unk_token="[UNK]")
    template = PaperTemplate("Pick.")
    prefix, pattern = template.split(llama_like, "T", "leaf 1 A")
    assert prefix == "<s>### Book: T\nPick.\n### Table of Contents\nleaf 1 A\n"
    assert pattern == "{label}: {text}\n### Section:\n"
    smollm2 = AutoTokenizer.from_pretrained(tiny_lm_dir)  # adds no BOS to plain text
    assert template.split(smollm2, "T", "leaf 1 A")[0].startswith("### Book: T\n")


def test_v1_layout_reproduces_the_earlier_prompts_byte_for_byte(tiny_lm_dir, tiny_dataset) -> None:
    lm, ds, book = _setup(tiny_lm_dir, tiny_dataset, cfg=V1)
    assert lm.tokenizer.decode(book.prefix_ids) == V1_PREFIX
    assert book.prefix_ids == lm.encode(V1_PREFIX)
    assert lm.tokenizer.decode(book.tail_ids) == CHAT_TAIL
    q = ds.queries("test", "alpha-bio")[0]
    suffix = book.suffix_ids(lm, q.text, book.query_label, V1.max_input_tokens)
    assert lm.tokenizer.decode(suffix) == f"Question: {q.text}{CHAT_TAIL}"
    assert book.identifiers["alpha-bio/1.2.1"] == "Cells > Energy > Glycolysis"
    assert book.identifiers["alpha-bio/2.2"] == "Organisms > Animals"


def test_paper_outputs_map_to_leaves_non_leaves_or_invalid_ids(tiny_dataset) -> None:
    index = get_layout("paper").index(load(tiny_dataset).toc("alpha-bio"))
    assert index.match("leaf 1.2.1 Glycolysis") == ("alpha-bio/1.2.1", "leaf")
    assert index.match(" LEAF 1.2.1  glycolysis") == ("alpha-bio/1.2.1", "leaf")
    assert index.match("1.2.1 Glycolysis") == ("alpha-bio/1.2.1", "leaf")  # prefix dropped
    assert index.match("1.2 Energy") == ("alpha-bio/1.2", "non-leaf")
    assert index.match("leaf 1.2 Energy") == ("alpha-bio/1.2", "non-leaf")  # prefix added
    for text in ("leaf 1.2.9 Photosynthesis", "Cells > Energy > Glycolysis"):
        item, kind = index.match(text)
        assert kind == "invalid" and item.startswith("alpha-bio/invalid-")


def _perturb_lora(lm, seed: int, scale: float = 0.5) -> None:
    """Give the (zero-initialised) LoRA B matrices random values: an arbitrary adapter state."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in lm.model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * scale)


@pytest.mark.parametrize("cfg", [CFG, V1], ids=["paper", "v1"])
def test_exact_ranking_equals_uncached_computation(tiny_lm_dir, tiny_dataset, cfg) -> None:
    lm, ds, book = _setup(tiny_lm_dir, tiny_dataset, cfg=cfg)
    prefix = lm.prefix_cache(book.prefix_ids)
    for q in ds.queries("test", "alpha-bio")[:3]:
        suffix = book.suffix_ids(lm, q.text, book.query_label, cfg.max_input_tokens)
        cached = score_trie(lm, prefix, suffix, book.trie, chunk=5)  # several chunks
        reference = score_uncached(lm, book.prefix_ids + suffix, book.trie.sequences)
        assert cached.keys() == reference.keys() == set(book.identifiers)
        for key in cached:
            assert cached[key] == pytest.approx(reference[key], abs=1e-4)
        assert [k for k, _ in rank_from_scores(cached)] == [
            k for k, _ in rank_from_scores(reference)
        ]


@pytest.mark.slow
def test_exact_ranking_equals_uncached_on_smollm2(smollm2_dir, tiny_dataset) -> None:
    lm, ds, book = _setup(smollm2_dir, tiny_dataset)
    prefix = lm.prefix_cache(book.prefix_ids)
    q = ds.queries("test", "alpha-bio")[0]
    suffix = book.suffix_ids(lm, q.text, book.query_label, CFG.max_input_tokens)
    cached = score_trie(lm, prefix, suffix, book.trie)
    reference = score_uncached(lm, book.prefix_ids + suffix, book.trie.sequences)
    assert max(abs(cached[k] - reference[k]) for k in cached) < 1e-3
    assert rank_from_scores(cached)[0][0] == rank_from_scores(reference)[0][0]


def test_beam_search_with_enough_beams_is_the_exact_ranking(tiny_lm_dir, tiny_dataset) -> None:
    lm, ds, book = _setup(tiny_lm_dir, tiny_dataset)
    prefix = lm.prefix_cache(book.prefix_ids)
    queries = ds.queries("test", "alpha-bio")[:4]
    suffixes = [
        book.suffix_ids(lm, q.text, book.query_label, CFG.max_input_tokens) for q in queries
    ]
    # One tree for all queries (the CPU layout) and one row per query (the GPU layout) agree.
    together = beam_search(lm, prefix, suffixes, trie=book.trie, num_beams=len(book.trie))
    apart = beam_search(lm, prefix, suffixes, trie=book.trie, num_beams=len(book.trie), group=1)
    for suffix, a, b in zip(suffixes, together, apart, strict=True):
        exact = rank_from_scores(score_trie(lm, prefix, suffix, book.trie))
        assert [book.trie.lookup(t) for t, _ in a] == [k for k, _ in exact]
        assert [book.trie.lookup(t) for t, _ in b] == [k for k, _ in exact]
        for (_, sa), (_, sb), (_, se) in zip(a, b, exact, strict=True):
            assert sa == pytest.approx(se, abs=1e-4) and sb == pytest.approx(se, abs=1e-4)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    beams=st.integers(1, 6),
    words=st.lists(
        st.sampled_from(["cell", "lipid", "root", "law", "duty", "energy", "what", "how"]),
        max_size=6,
    ),
)
def test_constrained_decoding_returns_only_leaves_for_any_adapter(
    tiny_lm_dir, tiny_dataset, seed, beams, words
) -> None:
    lm, _ds, book = _setup(tiny_lm_dir, tiny_dataset, book="beta-law")
    attach_lora(lm, LoraSettings(r=4, alpha=8, layers=0), seed)
    _perturb_lora(lm, seed, scale=float(seed % 7))
    prefix = lm.prefix_cache(book.prefix_ids)
    texts = [" ".join(words) or "?", "Which part is about duty?"]
    suffixes = [book.suffix_ids(lm, t, book.query_label, CFG.max_input_tokens) for t in texts]
    results = beam_search(lm, prefix, suffixes, trie=book.trie, num_beams=beams)
    for suffix, hyps in zip(suffixes, results, strict=True):
        assert len(hyps) == min(beams, len(book.trie))
        keys = [book.trie.lookup(t) for t, _ in hyps]
        assert all(k in book.identifiers for k in keys) and len(set(keys)) == len(keys)
        # What comes out is a leaf line of the ToC, word for word.
        texts = [decode_text(lm, t) for t, _ in hyps]
        assert texts == [book.identifiers[k] for k in keys]
        toc_text = lm.tokenizer.decode(book.prefix_ids)
        assert all(t.startswith("leaf ") and f"\n{t}\n" in toc_text for t in texts)
        scores = [s for _, s in hyps]
        assert scores == sorted(scores, reverse=True)
        # Beam scores are true log-probabilities: they equal the exact scores of those leaves.
        exact = score_trie(lm, prefix, suffix, book.trie)
        for key, score in zip(keys, scores, strict=True):
            assert score == pytest.approx(exact[key], abs=1e-3)


def _train(lm, ds, book, settings: TrainSettings, work: Path, evaluate=None):
    examples = build_examples(lm, ds, {book.book_id: book}, [book.book_id], CFG)
    return train(
        lm,
        examples,
        {book.book_id: book.prefix_ids},
        settings,
        seed=3,
        evaluate=evaluate,
        work_dir=work,
    )


@pytest.mark.slow
@pytest.mark.parametrize("adapt_toc", [False, True])
def test_training_lowers_the_loss(smollm2_dir, tiny_dataset, tmp_path, adapt_toc) -> None:
    # The real model: a random tiny one sits at ln(vocab) and barely moves in a few steps.
    lm, ds, book = _setup(smollm2_dir, tiny_dataset)
    attach_lora(lm, LoraSettings(r=8, alpha=16, layers=4), seed=3)
    settings = TrainSettings(
        lr=3e-3, batch_size=8, max_epochs=2, adapt_toc=adapt_toc, warmup_ratio=0.0
    )
    report = _train(lm, ds, book, settings, tmp_path)
    losses = [row["train_loss"] for row in report.history]
    assert len(losses) == 2 and report.steps == 4  # 16 training questions, batches of 8
    assert losses[1] < 0.85 * losses[0]
    assert (tmp_path / "state.pt").is_file()


def test_packing_does_not_change_the_loss(tiny_lm_dir, tiny_dataset) -> None:
    """Examples packed as branches of one tree or laid out one per row: the same loss."""
    from searchtome.baselines.generative.train import batch_loss_backward

    lm, ds, book = _setup(tiny_lm_dir, tiny_dataset)
    attach_lora(lm, LoraSettings(r=4, alpha=8, layers=0), seed=1)
    _perturb_lora(lm, 1, scale=0.3)
    examples = build_examples(lm, ds, {book.book_id: book}, [book.book_id], CFG)[:6]
    frozen = lm.prefix_cache(book.prefix_ids)
    losses = []
    for frozen_prefix, pack, group in ((frozen, 6, 0), (frozen, 2, 1), (None, 3, 0), (None, 6, 1)):
        lm.model.zero_grad()
        loss, _n = batch_loss_backward(
            lm, examples, book.prefix_ids, frozen_prefix, pack=pack, group=group
        )
        losses.append(loss)
    assert losses[1] == pytest.approx(losses[0], abs=1e-4)
    assert losses[3] == pytest.approx(losses[2], abs=1e-4)


def test_resumed_training_ends_where_uninterrupted_training_ends(
    tiny_lm_dir, tiny_dataset, tmp_path
) -> None:
    settings = TrainSettings(lr=1e-2, batch_size=8, max_epochs=3, patience=5, pack=8)
    full_calls: list[int] = []

    def run(work: Path, evaluate):
        lm, ds, book = _setup(tiny_lm_dir, tiny_dataset)
        attach_lora(lm, LoraSettings(r=4, alpha=8, layers=0, dropout=0.1), seed=5)
        report = _train(lm, ds, book, settings, work, evaluate)
        return lm, report

    full_lm, full = run(tmp_path / "a", lambda _lm: 0.1 * len(full_calls.append(1) or full_calls))

    class Killed(Exception):
        pass

    calls = {"n": 0, "armed": True}

    def killed_in_epoch_two(_lm):
        calls["n"] += 1
        if calls["n"] == 2 and calls["armed"]:
            calls["armed"] = False
            raise Killed  # after epoch 2's training, before its checkpoint
        return 0.1 * calls["n"]

    with pytest.raises(Killed):
        run(tmp_path / "b", killed_in_epoch_two)
    resumed_lm, resumed = run(tmp_path / "b", killed_in_epoch_two)
    assert full.best_epoch == resumed.best_epoch == 3
    assert resumed.resumed_from == 1 and resumed.epochs == 3
    a, b = lora_state(full_lm), lora_state(resumed_lm)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_adapter_save_and_reload_give_identical_outputs(
    tiny_lm_dir, tiny_dataset, tmp_path
) -> None:
    lm, ds, book = _setup(tiny_lm_dir, tiny_dataset)
    attach_lora(lm, LoraSettings(r=4, alpha=8, layers=1), seed=2)
    _train(lm, ds, book, TrainSettings(lr=1e-2, batch_size=8, max_epochs=2), tmp_path / "w")
    lm.peft.save_pretrained(str(tmp_path / "adapter"))
    suffixes = [
        book.suffix_ids(lm, q.text, book.query_label, CFG.max_input_tokens)
        for q in ds.queries("test", "alpha-bio")[:3]
    ]
    before = beam_search(lm, lm.prefix_cache(book.prefix_ids), suffixes, trie=book.trie)

    fresh, _, _ = _setup(tiny_lm_dir, tiny_dataset)
    load_adapter(fresh, tmp_path / "adapter")
    after = beam_search(fresh, fresh.prefix_cache(book.prefix_ids), suffixes, trie=book.trie)
    assert after == before
    base, _, _ = _setup(tiny_lm_dir, tiny_dataset)
    assert beam_search(base, base.prefix_cache(book.prefix_ids), suffixes, trie=book.trie) != before


def test_restricted_books_are_refused_unless_overridden(tiny_dataset) -> None:
    ds = load(tiny_dataset)  # beta-law carries "no-llm-training"
    with pytest.raises(SearchTomeError, match=r"beta-law.*no-llm-training.*restricted=exclude"):
        training_books(ds, GenRetConfig())
    assert training_books(ds, GenRetConfig(restricted="exclude")) == ["alpha-bio"]
    assert training_books(ds, GenRetConfig(restricted="allow")) == ["alpha-bio", "beta-law"]


def test_stair_run_is_deterministic_and_reuses_its_adapter(
    tiny_lm_dir, tiny_dataset, tmp_path, monkeypatch
) -> None:
    from searchtome.baselines.runner import execute

    one_thread()
    overrides = tiny_run(tiny_lm_dir, max_epochs=2, lr=0.01, dev_max_queries=8)
    run1, _, info1 = execute("stair", tiny_dataset, "test", None, overrides, seed=7)
    notes1 = info1.report
    assert notes1.epochs == 2 and not notes1.adapter_reused
    from searchtome.settings import home

    # meta.json records cache paths portably ("$SEARCHTOME_HOME/..."), never this machine's.
    assert notes1.adapter is not None
    adapter = Path(notes1.adapter.replace("$SEARCHTOME_HOME", str(home())))
    assert (adapter / "adapter_config.json").is_file()
    from searchtome.baselines.generative.card import CARD_VERSION, read_card

    card = read_card(adapter)  # its card: typed, versioned, the training's own report
    assert card is not None and card.read_version == CARD_VERSION and card.system == "stair"
    assert card.seed == 7 and card.frozen_prefix is False  # stair adapts the ToC by default
    assert card.training is not None and card.training.epochs == 2
    run2, _, info2 = execute("stair", tiny_dataset, "test", None, overrides, seed=7)
    assert info2.report.adapter_reused is True
    assert info2.report.training == notes1.training  # read back from the card
    assert run2.rankings == run1.rankings and run2.scores == run1.scores
    # A fresh cache (nothing reused) trains the same adapter again under the same seed.
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path / "other-home"))
    (tmp_path / "other-home").mkdir()
    run3, _, info3 = execute("stair", tiny_dataset, "test", None, overrides, seed=7)
    assert not info3.report.adapter_reused
    assert run3.rankings == run1.rankings
    for qid, scores in run1.scores.items():
        assert run3.scores[qid] == pytest.approx(scores, abs=1e-5)
    # Every query of both books gets valid leaves of its own book, ten per query (ten beams)
    # or every leaf where a book has fewer.
    ds = load(tiny_dataset)
    for qid, ids in run1.rankings.items():
        book = ds.query_by_id[qid].book_id
        assert len(ids) == min(10, len(ds.leaves(book)))
        assert all(i.startswith(book + "/") for i in ids)


def test_exact_decoding_ranks_every_leaf(tiny_lm_dir, tiny_dataset, tmp_path) -> None:
    from searchtome.baselines.generative.retriever import run_generative
    from searchtome.baselines.registry import RunContext

    one_thread()
    ds = load(tiny_dataset)
    cfg = GenRetConfig(
        model=str(tiny_lm_dir), dtype="float32", device="cpu", train=False, decode="exact"
    )
    run = run_generative(
        ds, "test", cfg, RunContext(cache_dir=tmp_path), system="stair", with_toc=True
    )
    for q in ds.queries("test"):
        ids = run.rankings[q.query_id]
        assert sorted(ids) == sorted(x.leaf_id for x in ds.leaves(q.book_id))
        assert list(run.scores[q.query_id]) == sorted(run.scores[q.query_id], reverse=True)


def test_free_decoding_keeps_invalid_outputs(tiny_lm_dir, tiny_dataset, tmp_path) -> None:
    """Unconstrained decoding of an untrained model writes nonsense; it is kept and labelled."""
    from searchtome.baselines.generative.common import is_invalid_id
    from searchtome.baselines.generative.retriever import run_generative
    from searchtome.baselines.registry import RunContext

    one_thread()
    ds = load(tiny_dataset)
    cfg = GenRetConfig(
        model=str(tiny_lm_dir),
        dtype="float32",
        device="cpu",
        train=False,
        decode="free",
        max_output_tokens=6,
        num_beams=2,
    )
    ctx = RunContext(cache_dir=tmp_path)
    run = run_generative(ds, "test", cfg, ctx, system="stair", with_toc=True)
    assert all(run.rankings[q.query_id] for q in ds.queries("test"))
    first = [run.rankings[q.query_id][0] for q in ds.queries("test")]
    assert any(is_invalid_id(i) for i in first)
    assert ctx.report.invalid_at_1 == sum(is_invalid_id(i) for i in first)


def test_paper_configs_parse() -> None:
    from searchtome.baselines.generative.stair import DSIConfig, StairConfig, config_path

    from searchtome.config import make_config

    stair = make_config(StairConfig, config_path("stair-mistral7b"))
    assert stair.model == "mistralai/Mistral-7B-Instruct-v0.2"
    assert (stair.lora_r, stair.lora_alpha, stair.max_epochs, stair.patience) == (16, 32, 200, 20)
    assert stair.max_input_tokens == 14000 and stair.max_output_tokens == 64
    assert stair.adapt_toc and stair.lora_layers == 0 and stair.dtype == "bfloat16"
    assert stair.prompt_layout == "paper"
    dsi = make_config(DSIConfig, config_path("dsi-mistral7b"))
    assert dsi.max_input_tokens == 512 and dsi.max_epochs == 200
    assert dsi.decode == "free" and dsi.free_form  # the paper's DSI decodes freely
    with pytest.raises(SearchTomeError, match="did you mean"):
        config_path("stair-mistral")


def test_defaults_are_the_paper_setting_and_stair_fast_the_earlier_cpu_one() -> None:
    from searchtome.baselines.generative.stair import DSIConfig, StairConfig

    from searchtome.commands.run import config_source
    from searchtome.config import make_config

    paper = StairConfig()
    assert (paper.adapt_toc, paper.max_epochs, paper.patience) == (True, 20, 5)
    assert (DSIConfig().max_epochs, DSIConfig().patience) == (20, 5)
    fast = make_config(StairConfig, config_source("stair-fast"))  # a shipped config by name
    assert (fast.adapt_toc, fast.max_epochs, fast.patience) == (False, 6, 2)
    assert make_config(DSIConfig, config_source("dsi-fast")).max_epochs == 12
    assert config_source("runs/mine.toml") == "runs/mine.toml"  # a path stays a path
    with pytest.raises(SearchTomeError, match="did you mean 'stair-fast'"):
        config_source("stair-fats")


def test_wrapping_with_lora_raises_no_deprecation_noise(tiny_lm_dir, tiny_dataset) -> None:
    import warnings

    lm, _ds, _book = _setup(tiny_lm_dir, tiny_dataset)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # over this module's FutureWarning filter
        attach_lora(lm, LoraSettings(r=4, alpha=8, layers=0), seed=1)
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]


def test_the_adapter_key_covers_the_dev_beam_count_only_where_dev_selection_reads_it(
    tiny_lm_dir, tiny_dataset
) -> None:
    from dataclasses import replace

    from searchtome.baselines.generative.adapters import TrainingSet, adapter_key

    lm, ds, ctx = _setup(tiny_lm_dir, tiny_dataset)
    examples = build_examples(lm, ds, {"alpha-bio": ctx}, ["alpha-bio"], CFG)
    dev = ds.queries("dev")[:2]

    def key(cfg: GenRetConfig) -> str:
        data = TrainingSet({"alpha-bio": ctx}, ["alpha-bio"], examples, dev)
        return adapter_key(lm, data, cfg, system="stair", with_toc=True, seed=0)

    greedy = {key(replace(CFG, num_beams=n)) for n in (3, 10)}
    beam = {key(replace(CFG, dev_decode="beam", num_beams=n)) for n in (3, 10)}
    assert len(greedy) == 1  # greedy dev selection ignores num_beams: old adapters stay valid
    assert len(beam) == 2 and not beam & greedy
