"""Zero-shot LLM: lenient reply parsing, a real HTTP endpoint, the local model."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from searchtome.baselines.generative.common import IdentifierIndex, is_invalid_id
from searchtome.baselines.generative.layouts import get_layout
from searchtome.baselines.generative.zeroshot import ZeroShotConfig, parse_reply, run_zeroshot
from searchtome.baselines.registry import RunContext

from searchtome.dataset.loader import load
from searchtome.errors import SearchTomeError
from tests.fixtures.fake_openai import FakeOpenAIServer
from tests.fixtures.llm_helpers import tiny_lm_fixture  # noqa: F401


def test_parse_reply_is_lenient_but_drops_nothing(tiny_dataset) -> None:
    ds = load(tiny_dataset)
    index = IdentifierIndex.for_book(ds.toc("alpha-bio"))
    reply = (
        "Here are the three most likely sections:\n"
        "1. Cells > Membranes > Lipids\n"
        '2. "Glycolysis"\n'
        "3. Cells > Membranes\n"
        "4. Organisms > Plants > Roots\n"
    )
    ids, kinds = parse_reply(reply, index, 3)
    assert ids == ["alpha-bio/1.1.1", "alpha-bio/1.2.1", "alpha-bio/1.1"]
    assert kinds == ["leaf", "leaf", "non-leaf"]
    # A made-up section is kept as an invalid id; a repeated answer is merged.
    ids, kinds = parse_reply("- Photosynthesis\n- Lipids\n- lipids\n- Roots", index, 3)
    assert kinds == ["invalid", "leaf", "leaf"] and is_invalid_id(ids[0])
    assert ids[1:] == ["alpha-bio/1.1.1", "alpha-bio/2.1.1"]
    # Inline numbering on one line is split.
    ids, _ = parse_reply("1. Lipids 2. Roots 3. Leaves", index, 3)
    assert ids == ["alpha-bio/1.1.1", "alpha-bio/2.1.1", "alpha-bio/2.1.2"]
    assert parse_reply("", index, 3) == ([], [])


def test_parse_reply_reads_the_paper_layouts_lines(tiny_dataset) -> None:
    index = get_layout("paper").index(load(tiny_dataset).toc("alpha-bio"))
    reply = "Here are the sections:\n1. leaf 1.1.1 Lipids\n2. 1.2.1 Glycolysis\n- 1.1 Membranes"
    ids, kinds = parse_reply(reply, index, 3)
    assert ids == ["alpha-bio/1.1.1", "alpha-bio/1.2.1", "alpha-bio/1.1"]
    assert kinds == ["leaf", "leaf", "non-leaf"]
    ids, kinds = parse_reply("leaf 9.9 Photosynthesis\nRoots", index, 3)
    assert kinds == ["invalid", "leaf"] and ids[1] == "alpha-bio/2.1.1"


# The user message of the tiny dataset's first test query, in either layout.
TOC_V1 = (
    "- Cells\n  - Membranes\n    - Lipids\n    - Proteins\n    - Summary\n  - Energy\n"
    "    - Glycolysis\n    - Summary\n- Organisms\n  - Plants\n    - Roots\n    - Leaves\n"
    "  - Animals"
)
TOC_PAPER = (
    "1 Cells\n1.1 Membranes\nleaf 1.1.1 Lipids\nleaf 1.1.2 Proteins\nleaf 1.1.3 Summary\n"
    "1.2 Energy\nleaf 1.2.1 Glycolysis\nleaf 1.2.2 Summary\n2 Organisms\n2.1 Plants\n"
    "leaf 2.1.1 Roots\nleaf 2.1.2 Leaves\nleaf 2.2 Animals"
)
MESSAGES = {
    "v1": "You locate answers in a book. Below is the book's table of contents, one entry per "
    "line, each entry indented under the entry that contains it. List the three leaf entries "
    "(entries with nothing under them) most likely to answer the question, best first, one per "
    "line, each as its full path of titles joined by ' > ', exactly as in the table of contents. "
    f"Write nothing else.\n\nBook: Alpha Biology\n\nTable of contents:\n{TOC_V1}\n\n"
    "Question: What is said about quartz and meadow?",
    "paper": "### Book: Alpha Biology\nPick the three sections of the table of contents below "
    "(lines starting with 'leaf') most likely to answer the user query, best first. Write each "
    f"exactly as its line reads, one per line, and nothing else.\n### Table of Contents\n"
    f"{TOC_PAPER}\n### Query: What is said about quartz and meadow?\n### Section:",
}
REPLIES = {
    "v1": (
        "1. Cells > Energy > Glycolysis\n2. Cells > Energy\n3. Mitochondria",
        "Contracts > Formation > Offer",
    ),
    "paper": ("1. leaf 1.2.1 Glycolysis\n2. 1.2 Energy\n3. Mitochondria", "leaf 1.1.1 Offer"),
}


@pytest.mark.parametrize("layout", ["paper", "v1"])
def test_endpoint_backend_over_http_with_cache(tiny_dataset, tmp_path, layout) -> None:
    ds = load(tiny_dataset)
    first = ds.queries("test")[0]
    asked: dict[str, str] = {}

    def reply(messages, body):
        text = messages[-1]["content"]
        asked[text.rsplit("uery: " if layout == "paper" else "Question: ", 1)[1]] = text
        return REPLIES[layout][0 if "Alpha Biology" in text else 1]

    with FakeOpenAIServer(reply=reply, model="fake-model") as server:
        cfg = ZeroShotConfig(
            backend="openai", model="fake-model", base_url=server.base_url, prompt_layout=layout
        )
        ctx = RunContext(cache_dir=tmp_path)
        run = run_zeroshot(ds, "test", cfg, ctx)
        n_requests = len(server.chat_records())
        assert n_requests == len(ds.queries("test"))
        assert first.book_id == "alpha-bio"  # v1's message is the earlier one, byte for byte
        assert [t for t in asked.values() if first.text in t] == [MESSAGES[layout]]
        for q in ds.queries("test"):
            ids = run.rankings[q.query_id]
            if q.book_id == "alpha-bio":
                assert ids[:2] == ("alpha-bio/1.2.1", "alpha-bio/1.2")
                assert is_invalid_id(ids[2])
            else:
                assert ids == ("beta-law/1.1.1",)
        assert ctx.report.rank1_leaf == len(ds.queries("test"))
        # A rerun answers from the cache: nothing new reaches the server.
        again = run_zeroshot(ds, "test", cfg, RunContext(cache_dir=tmp_path))
        assert again.rankings == run.rankings
        assert len(server.chat_records()) == n_requests


def test_endpoint_failures_are_reported_not_hidden(tiny_dataset, tmp_path) -> None:
    from tests.fixtures.fake_openai import Fault

    ds = load(tiny_dataset)
    with FakeOpenAIServer(reply=lambda m, b: "Lipids") as server:
        server.inject(Fault.http(500), times=100, match="Beta Law")
        cfg = ZeroShotConfig(
            backend="openai", model="m", base_url=server.base_url, concurrency=4, max_attempts=2
        )
        with pytest.raises(SearchTomeError, match=r"failed.*rerun to retry"):
            run_zeroshot(ds, "test", cfg, RunContext(cache_dir=tmp_path))
        tries = Counter(r.messages_hash for r in server.chat_records() if r.status == 500)
        assert tries and max(tries.values()) == 2  # max_attempts reaches the client


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_local_backend_runs_in_process(tiny_lm_dir, tiny_dataset, tmp_path) -> None:
    ds = load(tiny_dataset)
    cfg = ZeroShotConfig(model=str(tiny_lm_dir), dtype="float32", device="cpu", max_new_tokens=12)
    assert cfg.prompt_layout == "paper"
    ctx = RunContext(cache_dir=tmp_path)
    run = run_zeroshot(ds, "test", cfg, ctx)
    assert set(run.rankings) == {q.query_id for q in ds.queries("test")}
    counts = ctx.report.to_dict()
    counted = sum(counts[f"rank1_{k}"] for k in ("leaf", "non-leaf", "invalid", "empty"))
    assert counted == len(ds.queries("test"))
    assert ctx.report.replies_generated == len(ds.queries("test"))
    # Deterministic: greedy decoding gives the same replies again, with or without the cache.
    fresh = RunContext(cache_dir=tmp_path / "fresh")
    assert run_zeroshot(ds, "test", cfg, fresh).rankings == run.rankings
    # A rerun (or a run resumed after a kill) reads stored replies instead of generating them.
    again = RunContext(cache_dir=tmp_path)
    assert run_zeroshot(ds, "test", cfg, again).rankings == run.rankings
    assert again.report.replies_generated == 0
    longer = RunContext(cache_dir=tmp_path)
    run_zeroshot(ds, "test", replace(cfg, max_new_tokens=13), longer)  # settings are in the key
    assert longer.report.replies_cached == 0
    # "auto" is keyed by what it resolves to on this CPU: it shares the replies of float32 or of
    # bfloat16, never has entries of its own.
    from searchtome.baselines.generative.engine import pick_device, pick_dtype

    auto = RunContext(cache_dir=tmp_path)
    resolved = str(pick_dtype("auto", pick_device("cpu"))).removeprefix("torch.")
    run_zeroshot(ds, "test", replace(cfg, dtype="auto"), auto)
    if resolved == "float32":
        assert auto.report.replies_generated == 0
    else:
        assert auto.report.replies_cached == 0
        bf16 = RunContext(cache_dir=tmp_path)
        run_zeroshot(ds, "test", replace(cfg, dtype="bfloat16"), bf16)
        assert bf16.report.replies_generated == 0
