"""Leaf sections and paragraphs: exact on generated books, sane on all twelve real PDFs."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.errors import SearchTomeError
from searchtome.ingest.extract import (
    LEAVES_FILE,
    META_FILE,
    PARAGRAPHS_FILE,
    TOC_FILE,
    Extraction,
    extract_book,
    read_extraction,
    write_extraction,
)
from searchtome.sample.render import (
    BookSpec,
    RenderedBook,
    RenderedSection,
    Section,
    break_outline_entry,
    encrypt,
    render_book,
    sample_spec,
)
from tests.conftest import REALPDFS


def squash(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> RenderedBook:
    return render_book(sample_spec(chapters=4, seed=3), tmp_path_factory.mktemp("ex") / "book.pdf")


@pytest.fixture(scope="module")
def extracted(rendered: RenderedBook) -> Extraction:
    return extract_book(rendered.path)


def test_the_sample_covers_the_hard_cases(rendered: RenderedBook) -> None:
    leaves = rendered.leaves()
    assert any(s.y > 300 for s in leaves), "a section starting mid-page"
    per_page = Counter(s.page for s in rendered.sections)
    assert max(per_page.values()) >= 3, "several sections on one page"
    assert any(s.page_end > s.page + 1 for s in leaves), "a section over three pages or more"
    assert any(s.page_breaks for s in leaves), "a paragraph cut by a page break"
    assert max(s.level for s in rendered.sections) == 3


def _assert_exact(extraction: Extraction, book: RenderedBook) -> None:
    assert len(extraction.leaves) == len(book.leaves())
    for leaf, known in zip(extraction.leaves, book.leaves(), strict=True):
        assert leaf.leaf_id.endswith("/" + known.key)
        assert squash(leaf.text) == squash(known.text), leaf.leaf_id
        assert leaf.page_start == known.page and leaf.page_end == known.page_end
    for node, known in zip(extraction.toc.nodes, book.sections, strict=True):
        if not node.is_leaf:  # a non-leaf keeps its own introduction
            assert squash(node.text) == squash(known.text), node.node_id


def test_leaf_text_is_exact(extracted: Extraction, rendered: RenderedBook) -> None:
    _assert_exact(extracted, rendered)
    assert extracted.toc.warnings == ()


def test_headings_are_located_where_they_are(extracted: Extraction, rendered: RenderedBook) -> None:
    for node, known in zip(extracted.toc.nodes, rendered.sections, strict=True):
        assert node.y is not None and abs(node.y - known.y) < 3.0


def _expected_paragraphs(known: RenderedSection) -> list[str]:
    """The known paragraphs, split where a page break falls at a sentence end (documented)."""
    out: list[str] = []
    breaks = {
        i: [(b, a) for j, b, a in known.page_breaks if j == i] for i in range(len(known.paragraphs))
    }
    for i, para in enumerate(known.paragraphs):
        pieces = [para]
        for before, after in breaks[i]:
            joined = not re.search(r"[.!?:;]$", before) and after[:1].islower()
            if not joined:
                head, _, tail = pieces[-1].partition(before + " " + after)
                pieces[-1:] = [head + before, after + tail]
        out += pieces
    return out


def test_paragraphs(extracted: Extraction, rendered: RenderedBook) -> None:
    joined = 0
    for leaf, known in zip(extracted.leaves, rendered.leaves(), strict=True):
        paras = extracted.paragraphs_of(leaf.leaf_id)
        assert [p.paragraph_id for p in paras] == [
            f"{leaf.leaf_id}#p{n}" for n in range(1, len(paras) + 1)
        ]
        assert [squash(p.text) for p in paras] == [squash(t) for t in _expected_paragraphs(known)]
        assert "\n\n".join(p.text for p in paras) == leaf.text
        assert all(leaf.page_start <= p.page <= leaf.page_end for p in paras)
        joined += sum(1 for _, b, a in known.page_breaks if a[:1].islower() and b[-1:].isalpha())
    assert joined >= 1, "at least one paragraph joined across a page break"


def test_running_heads_and_page_numbers_are_stripped(
    extracted: Extraction, rendered: RenderedBook
) -> None:
    heads = set(rendered.running_heads)
    assert rendered.sections[0].path[0] in heads  # chapter titles run as odd-page heads
    for para in extracted.paragraphs:
        assert para.text not in heads
    book_title = "Sample Book"
    assert all(book_title not in leaf.text for leaf in extracted.leaves)


def test_named_destinations_and_several_sections_per_page(tmp_path: Path) -> None:
    spec = BookSpec(
        "Dense",
        tuple(
            Section(
                f"Part {c}",
                text=(f"Intro of part {c} is here.",),
                children=tuple(
                    Section(f"Short {c}.{k}", text=(f"Only the text of short {c}.{k}.",))
                    for k in range(1, 6)
                ),
            )
            for c in (1, 2)
        ),
        chapters_on_new_page=False,
        named_destinations=True,
        running_header=False,  # a head on one page only cannot be told from text (documented)
    )
    book = render_book(spec, tmp_path / "dense.pdf")
    assert max(Counter(s.page for s in book.sections).values()) >= 6
    _assert_exact(extract_book(book.path), book)


def test_unicode_text_and_multi_line_headings(tmp_path: Path) -> None:
    long_title = "A heading long enough to wrap over two lines of the text column in this book"
    spec = BookSpec(
        "Unicode",
        (
            Section("Introdução", text=("Lógica é a ciência do raciocínio: «válido» ou não.",)),
            Section(long_title, text=("Body after the long heading.",)),
            Section("Résumé", text=("Fin, café, naïve, Ærø, Straße, 25 °C, £3.",)),
        ),
        chapters_on_new_page=False,
    )
    book = render_book(spec, tmp_path / "unicode.pdf")
    _assert_exact(extract_book(book.path), book)


def test_broken_outlines_still_extract(tmp_path: Path, rendered: RenderedBook) -> None:
    beyond = extract_book(break_outline_entry(rendered.path, tmp_path / "b.pdf", 5, "beyond"))
    nowhere = extract_book(break_outline_entry(rendered.path, tmp_path / "n.pdf", 5, "nowhere"))
    for ex in (beyond, nowhere):
        # The dangling entry's heading is found between its neighbours.
        _assert_exact(ex, rendered)
        assert any("where its heading was found" in w for w in ex.toc.warnings)


def test_encrypted_book(tmp_path: Path, rendered: RenderedBook) -> None:
    locked = encrypt(rendered.path, tmp_path / "locked.pdf", user_password="pw")
    with pytest.raises(SearchTomeError, match="--password"):
        extract_book(locked)
    _assert_exact(extract_book(locked, password="pw"), rendered)


# --------------------------------------------------------------------------------------------
# On disk


def test_write_read_round_trip_and_determinism(
    tmp_path: Path, rendered: RenderedBook, extracted: Extraction
) -> None:
    write_extraction(extracted, tmp_path / "a")
    write_extraction(extract_book(rendered.path), tmp_path / "b")
    for name in (TOC_FILE, LEAVES_FILE, PARAGRAPHS_FILE, META_FILE):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    back = read_extraction(tmp_path / "a")
    assert back == extracted


def test_rewrite_keeps_other_files_and_detects_tampering(
    tmp_path: Path, extracted: Extraction
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    write_extraction(extracted, out)
    write_extraction(extracted, out)
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["notes.txt", TOC_FILE, LEAVES_FILE, PARAGRAPHS_FILE, META_FILE]
    )
    with (out / LEAVES_FILE).open("a") as fh:
        fh.write("{}\n")
    with pytest.raises(SearchTomeError, match=r"changed since meta\.json"):
        read_extraction(out)
    (out / META_FILE).unlink()
    with pytest.raises(SearchTomeError, match="not a complete extraction"):
        read_extraction(out)


def test_failed_write_leaves_the_previous_extraction(
    tmp_path: Path, extracted: Extraction, monkeypatch: pytest.MonkeyPatch
) -> None:
    import searchtome.io

    out = tmp_path / "out"
    write_extraction(extracted, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    calls = 0
    real = searchtome.io.write_jsonl

    def flaky(path, rows):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("disk full")
        return real(path, rows)

    monkeypatch.setattr(searchtome.io, "write_jsonl", flaky)
    with pytest.raises(OSError):
        write_extraction(replace(extracted, book_id="other"), out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left


def test_cli_extract(
    tmp_path: Path, rendered: RenderedBook, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ex"
    assert main(["extract", str(rendered.path), "--book-id", "demo", "--out", str(out)]) == 0
    assert f"{len(rendered.leaves())} leaves" in capsys.readouterr().out
    ex = read_extraction(out)
    assert ex.book_id == "demo" and ex.leaves[0].leaf_id.startswith("demo/")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["extract", str(rendered.path), "--out", str(blocker)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a folder" in err[0]
    assert blocker.read_text() == "not a folder"


# --------------------------------------------------------------------------------------------
# The twelve real PDFs (each extracted once per session)

REAL = sorted(REALPDFS.glob("*.pdf")) if REALPDFS.exists() else []
needs_real = pytest.mark.skipif(not REAL, reason="../shared/realpdfs is not available")
RUNNING_HEADS = {
    "advanced_bash_scripting_guide": "Advanced Bash-Scripting Guide",
    "ethereum_yellowpaper_eip150_2018-01-04": "ETHEREUM: A SECURE DECENTRALISED",
    "gawk_manual_ed4.2": "GAWK: Effective AWK Programming",
    "gdb_manual": "Debugging with gdb",
    "gnu_make_manual": "GNU make",
    "nist_sp800-207_zero_trust": "NIST SP 800-207 ZERO TRUST ARCHITECTURE",
    "nist_sp800-61r2_incident_handling": "COMPUTER SECURITY INCIDENT HANDLING GUIDE",
    "rfc1035_NO_OUTLINE": "RFC 1035 Domain Implementation and Specification",
    "valgrind_manual_3.14_NO_OUTLINE": "Using and understanding the Valgrind core",
}


@pytest.fixture(scope="session")
def real_extraction():
    cache: dict[Path, Extraction] = {}

    def get(pdf: Path) -> Extraction:
        if pdf not in cache:
            cache[pdf] = extract_book(pdf, infer_toc=True)
        return cache[pdf]

    return get


@needs_real
@pytest.mark.parametrize("pdf", REAL, ids=lambda p: p.stem)
def test_real_pdf_extraction(pdf: Path, real_extraction) -> None:
    import pymupdf

    from searchtome.ingest.toc import read_toc

    ex = real_extraction(pdf)
    tree = read_toc(pdf, infer=True)
    assert [leaf.leaf_id for leaf in ex.leaves] == [n.node_id for n in tree.leaves()]
    placed = [leaf for leaf in ex.leaves if leaf.page_start is not None]
    with_text = [leaf for leaf in placed if leaf.text]
    assert len(with_text) >= 0.97 * len(placed)
    for leaf in placed:
        assert 1 <= leaf.page_start <= leaf.page_end <= ex.toc.n_pages
    by_leaf: dict[str, list[str]] = {}
    for para in ex.paragraphs:
        by_leaf.setdefault(para.leaf_id, []).append(para.text)
        assert para.text == squash(para.text) and para.text
    for leaf in ex.leaves:
        assert leaf.text == "\n\n".join(by_leaf.get(leaf.leaf_id, []))
    # The running head printed on most pages (read off the PDFs by hand) is gone.
    head = RUNNING_HEADS.get(pdf.stem)
    if head:
        alone = re.compile(rf"^(\d+ )?{re.escape(head)}( \d+)?$")
        assert sum(bool(alone.match(p.text)) for p in ex.paragraphs) <= 2
    # Nothing is invented and little is lost, against PyMuPDF's own text of the same pages.
    first = min(n.page for n in ex.toc.nodes if n.page is not None)
    with pymupdf.open(pdf) as doc:
        source = sum(
            len("".join(doc[i].get_text().split())) for i in range(first - 1, doc.page_count)
        )
    kept = sum(len("".join(n.text.split())) for n in ex.toc.nodes) + sum(
        len("".join(leaf.text.split())) for leaf in ex.leaves
    )
    assert 0.75 * source <= kept <= source


@needs_real
def test_real_pdf_known_sections(real_extraction) -> None:
    gdb = real_extraction(REALPDFS / "gdb_manual.pdf")
    free = next(leaf for leaf in gdb.leaves if leaf.title == "Free Software")
    assert free.text.startswith("gdb is free software, protected by the gnu General Public License")
    assert "Free Software Needs Free Documentation" not in free.text  # the next section's heading
    gawk = real_extraction(REALPDFS / "gawk_manual_ed4.2.pdf")
    summaries = [leaf for leaf in gawk.leaves if leaf.title == "Summary"]
    assert len(summaries) == 19 and len({s.text for s in summaries}) == 19
    irs = real_extraction(REALPDFS / "irs_i1040_instructions_2017.pdf")
    dangling = [leaf for leaf in irs.leaves if leaf.page_start is None]
    assert len(dangling) == 1 and dangling[0].text == ""


# --------------------------------------------------------------------------------------------
# The outline cut at a leaf depth (the paper's leaves are shallower than many outlines)


def test_cut_at_a_depth_gives_deeper_text_to_the_kept_leaf(
    extracted: Extraction, rendered: RenderedBook
) -> None:
    cut = extract_book(rendered.path, leaf_depth=2)
    kept = [s for s in rendered.sections if s.level == 2 or (s.level < 2 and s.is_leaf)]
    assert [leaf.leaf_id.split("/")[1] for leaf in cut.leaves] == [s.key for s in kept]
    assert len(cut.leaves) < len(extracted.leaves)  # the sample has level-3 leaves to drop
    assert all(n.level <= 2 for n in cut.toc.nodes) and cut.toc.warnings == ()
    grown = 0
    for leaf in cut.leaves:
        key = leaf.leaf_id.split("/")[1]
        below = [s for s in rendered.sections if s.key.startswith(key + ".")]
        # Its own text, then each dropped sub-section's heading and text, in order.
        expected = [*rendered.section(key).paragraphs]
        for sub in below:
            expected += [sub.path[-1], *sub.paragraphs]
            assert leaf.page_end >= sub.page_end
        text = squash(leaf.text)
        position = 0
        for piece in expected:
            found = text.find(squash(piece), position)
            assert found >= 0, (leaf.leaf_id, piece[:40])
            position = found + len(squash(piece))
        grown += bool(below)
        assert {p.leaf_id for p in cut.paragraphs_of(leaf.leaf_id)} <= {leaf.leaf_id}
    assert grown >= 2
    # Nothing is lost: every paragraph of the full extraction is in the cut one's text.
    everything = squash(" ".join(leaf.text for leaf in cut.leaves))
    assert all(squash(p.text) in everything for p in extracted.paragraphs)
    # No depth, or one at least the outline's own, cuts nothing.
    assert extract_book(rendered.path, leaf_depth=None) == extracted
    assert extract_book(rendered.path, leaf_depth=3).leaves == extracted.leaves


@needs_real
def test_a_real_manual_cut_to_a_shallower_depth(real_extraction) -> None:
    from searchtome.ingest.depth import leaf_counts

    pdf = REALPDFS / "gnu_make_manual.pdf"
    full = real_extraction(pdf)
    cut = extract_book(pdf, infer_toc=True, leaf_depth=2)
    counts = leaf_counts(full.toc.nodes)
    assert counts == (21, 107, 133)  # manifest.json: 162 entries, 133 leaves, depth 3
    assert len(cut.leaves) == counts[1]
    full_text = {leaf.leaf_id: squash(leaf.text) for leaf in full.leaves}
    merged = 0
    for leaf in cut.leaves:
        subs = [i for i in full_text if i.startswith(leaf.leaf_id + ".")]
        text = squash(leaf.text)
        for sub in subs:  # every dropped sub-section's text is inside the kept leaf's
            assert full_text[sub] in text, (leaf.leaf_id, sub)
        merged += bool(subs)
    assert merged >= 10
