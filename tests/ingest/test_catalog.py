"""The catalog: the packaged v2 (the paper's books) and v1 files, validation with pointed
messages, the facts beside each book, and the content hash."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.errors import SearchTomeError
from searchtome.ingest.catalog import (
    RESTRICTIONS,
    STATUSES,
    PaperFigures,
    book_facts,
    catalog_from_dict,
    catalog_hash,
    catalog_to_toml,
    default_catalog_path,
    load_catalog,
    packaged_catalog_path,
    replace_book,
)
from searchtome.records import BOOK_ID_RE, DOMAINS

WHOLE_CHILD_SHA = "14c95ceb029cafaf98f9f2c67e3b73baa8177b53ca3198519c3a2ec19c547d75"


def _write(tmp_path: Path, text: str, name: str = "cat.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


ONE_BOOK = """
name = "mine"
version = "2"

[[books]]
book_id = "my-book"
domain = "Law"
title = "My Book"
pdf_urls = ["https://example.org/my.pdf"]
"""


# The paper's Table 1 (paper-details.md): book id -> pages, leaves, test, train, dev.
PAPER_TABLE_1 = {
    "open-music-theory": (1297, 429, 7430, 4493, 1671),
    "whole-child": (182, 129, 1746, 1056, 388),
    "teaching-digital-age": (779, 118, 6150, 3797, 1489),
    "principles-financial-accounting": (318, 98, 4119, 2395, 981),
    "accounting-finance-world": (572, 80, 4481, 2747, 1081),
    "financial-managerial-accounting": (1077, 107, 7815, 4692, 1901),
    "construction-contracting": (403, 103, 3653, 2249, 866),
    "criminal-procedure": (897, 106, 5610, 3401, 1349),
    "tort-law": (948, 396, 18209, 11174, 4363),
    "nursing-assistant": (659, 118, 4586, 2790, 1093),
    "nursing-fundamentals": (1327, 121, 9065, 5493, 2200),
    "nursing-management": (599, 74, 3695, 2277, 885),
    "intro-genetics": (513, 70, 2254, 1345, 527),
    "principles-mechanics": (179, 125, 2341, 1418, 543),
    "organic-chemistry": (1249, 321, 11124, 6601, 2635),
    "aural-skills": (674, 118, 2451, 1421, 559),
    "comparative-government": (421, 189, 3893, 2288, 898),
    "behavioral-economics": (381, 178, 4627, 2821, 1073),
}


def test_packaged_v2_is_the_papers_table_1() -> None:
    catalog = load_catalog()
    assert catalog.name == "searchtome" and catalog.version == "2"
    assert catalog.ids() == list(PAPER_TABLE_1)
    assert {d: len(b) for d, b in catalog.by_domain().items()} == dict.fromkeys(DOMAINS, 3)
    figures = {b.book_id: book_facts(b).paper for b in catalog.books}
    assert figures == {k: PaperFigures(*v) for k, v in PAPER_TABLE_1.items()}
    # The paper's totals: 12,475 pages, 2,880 leaves, 190,209 questions.
    assert sum(f.pages for f in figures.values()) == 12475
    assert sum(f.leaves for f in figures.values()) == 2880
    assert sum(f.questions for f in figures.values()) == 190209


def test_every_v2_claim_names_its_source_and_nothing_unchecked_is_verified() -> None:
    catalog = load_catalog()
    for book in catalog.books:
        facts = book_facts(book)
        assert facts.status in STATUSES, book.book_id
        assert facts.evidence["title"].startswith("paper Table 1"), book.book_id
        assert facts.evidence["paper"] == "paper Table 1", book.book_id
        claimed = {k for k, v in book.to_dict().items() if v not in (None, "", ())}
        claimed -= {"book_id", "domain", "notes", "license_url"}
        if facts.otl_url:
            claimed.add("otl_url")
        assert claimed <= set(facts.evidence), (book.book_id, claimed - set(facts.evidence))
        if book.pdf_urls:
            assert "never downloaded" in facts.evidence["pdf_urls"] or book.sha256, book.book_id
        if facts.status in ("edition-open", "source-unknown", "unidentified"):
            assert "--source-dir" in book.notes, book.book_id
        if book.license.startswith("CC BY-NC"):
            assert book.restricted("non-commercial"), book.book_id
    # Only The Whole Child is pinned, by the reproduction's download.
    assert [b.book_id for b in catalog.books if b.sha256] == ["whole-child"]
    assert book_facts(catalog.get("whole-child")).status == "pinned"
    statuses = {b.book_id: book_facts(b).status for b in catalog.books}
    assert statuses["financial-managerial-accounting"] == "unidentified"
    assert statuses["accounting-finance-world"] == "source-unknown"
    assert statuses["principles-financial-accounting"] == "edition-open"
    for open_edition in ("nursing-fundamentals", "nursing-management", "tort-law"):
        assert statuses[open_edition] == "edition-open"
    assert catalog.get("organic-chemistry").restricted("no-llm-training")


def test_whole_child_is_the_same_entry_in_v1_and_v2() -> None:
    v1, v2 = load_catalog("v1"), load_catalog("v2")
    assert v1.get("whole-child") == v2.get("whole-child")
    assert v2.get("whole-child").sha256 == WHOLE_CHILD_SHA


def test_packaged_v1_has_18_books_three_per_domain() -> None:
    catalog = load_catalog("v1")
    assert catalog.name == "searchtome" and catalog.version == "1"
    assert len(catalog.books) == 18
    assert {d: len(b) for d, b in catalog.by_domain().items()} == dict.fromkeys(DOMAINS, 3)
    assert len(set(catalog.ids())) == 18
    for book in catalog.books:
        assert BOOK_ID_RE.match(book.book_id)
        assert book.license, book.book_id
        assert book.pdf_urls, book.book_id
        assert book.landing_url or book.notes, book.book_id
        assert set(book.restrictions) <= set(RESTRICTIONS)
        if book.license.startswith("CC BY-NC"):
            assert book.restricted("non-commercial"), book.book_id


def test_packaged_v1_pins_whole_child_and_flags_pharmacology() -> None:
    catalog = load_catalog("v1")
    whole = catalog.get("whole-child")
    assert whole.sha256 == WHOLE_CHILD_SHA
    assert whole.domain == "Education"
    assert whole.license == "CC BY-NC-SA 4.0"
    assert "ROTEL" in whole.publisher
    assert catalog.get("pharmacology-nurses").restricted("no-llm-training")
    assert sum(b.restricted("no-llm-training") for b in catalog.books) == 1
    # The open Law slot is filled and says so.
    law = [b for b in catalog.books if b.domain == "Law"]
    assert any("open" in b.notes.lower() and "slot" in b.notes.lower() for b in law)


def test_default_catalog_path_is_package_data() -> None:
    path = default_catalog_path()
    assert path.name == "catalog-v2.toml" and path.is_file()
    assert load_catalog(path) == load_catalog(None) == load_catalog("v2")
    assert packaged_catalog_path("v1").name == "catalog-v1.toml"
    with pytest.raises(SearchTomeError, match="unknown packaged catalog 'v3'"):
        packaged_catalog_path("v3")


def test_facts_survive_a_replaced_book_and_a_round_trip(tmp_path: Path) -> None:
    catalog = load_catalog()
    book = catalog.get("tort-law")
    pinned = replace_book(book, sha256="b" * 64, size=10)
    assert book_facts(pinned) == book_facts(book)
    text = catalog_to_toml(catalog, books_per_domain=3)
    again = load_catalog(_write(tmp_path, text))
    assert again == catalog and catalog_hash(again) == catalog_hash(catalog)
    assert [book_facts(b) for b in again.books] == [book_facts(b) for b in catalog.books]


def test_facts_count_in_the_hash_only_when_present(tmp_path: Path) -> None:
    plain = load_catalog(_write(tmp_path, ONE_BOOK))
    with_depth = load_catalog(_write(tmp_path, ONE_BOOK + "leaf_depth = 2\n", "d.toml"))
    assert plain == with_depth  # the Book records are equal...
    assert catalog_hash(plain) != catalog_hash(with_depth)  # ...the facts are not
    assert book_facts(with_depth.books[0]).leaf_depth == 2


def test_user_catalog_of_any_size(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path, ONE_BOOK))
    assert catalog.ids() == ["my-book"]
    assert catalog.version == "2"
    assert catalog.get("my-book").sha256 is None


def test_hash_ignores_formatting_but_not_content(tmp_path: Path) -> None:
    base = load_catalog(_write(tmp_path, ONE_BOOK))
    reformatted = load_catalog(
        _write(
            tmp_path,
            '# comment\nversion = "2"\nname = "mine"\n[[books]]\n'
            'pdf_urls = [ "https://example.org/my.pdf" ]\ntitle="My Book"\n'
            'domain = "Law"\nbook_id = "my-book"\n',
            "b.toml",
        )
    )
    assert catalog_hash(base) == catalog_hash(reformatted)
    assert re.fullmatch(r"[0-9a-f]{64}", catalog_hash(base))
    pinned = load_catalog(_write(tmp_path, ONE_BOOK + 'sha256 = "' + "a" * 64 + '"\n', "c.toml"))
    assert catalog_hash(pinned) != catalog_hash(base)
    assert catalog_hash(load_catalog()) == catalog_hash(load_catalog())


def test_toml_round_trip_of_v1() -> None:
    catalog = load_catalog("v1")
    again = catalog_from_dict(tomllib.loads(catalog_to_toml(catalog, books_per_domain=3)))
    assert again == catalog
    assert catalog_hash(again) == catalog_hash(catalog)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda t: t + t[t.index("[[books]]") :],
            r"entry 2: book_id 'my-book' already used by entry 1",
        ),
        (lambda t: t.replace('"my-book"', '"My Book"'), r"entry 1 .*book_id.*slug"),
        (lambda t: t.replace('"my-book"', '"a/b"'), r"book_id.*slug"),
        (lambda t: t.replace('"Law"', '"Laws"'), r"unknown domain 'Laws' \(did you mean 'Law'"),
        (lambda t: t + 'sha265 = "x"\n', r"unknown field 'sha265' \(did you mean 'sha256'"),
        (lambda t: t + 'sha256 = "ABC"\n', r"'sha256' must be 64 lowercase hex"),
        (lambda t: t + "size = -3\n", r"'size' must be a positive"),
        (lambda t: t + 'restrictions = ["no-llm-trainig"]\n', r"did you mean 'no-llm-training'"),
        (lambda t: t.replace("https://example.org", "ftp://example.org"), r"pdf_urls.*not an http"),
        (lambda t: t.replace('title = "My Book"\n', ""), r"field 'title' is required"),
        (lambda t: t.replace('name = "mine"\n', ""), r"missing top-level 'name'"),
        (lambda t: t + "authors = 'Ann'\n", r"'authors' must be a list"),
        (lambda t: "colour = 1\n" + t, r"unknown top-level key 'colour'"),
        (lambda t: t[: t.index("[[books]]")], r"no books"),
        (lambda t: "books_per_domain = 3\n" + t, r"books_per_domain = 3.*Education: 0.*Law: 1"),
        (lambda t: t + "title = 'again'\n", r"not valid TOML"),
        (lambda t: t + 'status = "sure"\n', r"unknown status 'sure'"),
        (lambda t: t + "leaf_depth = 0\n", r"'leaf_depth' must be a positive"),
        (lambda t: t + "paper = { pages = 3 }\n", r"'paper' must be a table with exactly"),
        (
            lambda t: t + "paper = { pages = 3, leaves = 0, test = 1, train = 1, dev = 1 }\n",
            r"'paper' must hold positive",
        ),
        (lambda t: t + 'evidence = { titel = "x" }\n', r"evidence for an unknown field 'titel'"),
        (lambda t: t + 'otl_url = "open.umn.edu"\n', r"'otl_url' must be an http"),
    ],
)
def test_invalid_catalogs_fail_with_a_pointed_message(tmp_path: Path, edit, expected) -> None:
    path = _write(tmp_path, edit(ONE_BOOK))
    with pytest.raises(SearchTomeError) as info:
        load_catalog(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
    assert re.search(expected, message), message


def test_missing_catalog_file(tmp_path: Path) -> None:
    with pytest.raises(SearchTomeError, match="catalog file not found"):
        load_catalog(tmp_path / "nope.toml")


def test_cli_reports_a_bad_catalog_in_one_line(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, ONE_BOOK.replace('"Law"', '"Lore"'))
    code = main(["fetch", "--catalog", str(path), "--list"])
    captured = capsys.readouterr()
    assert code != 0
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("searchtome: error: ")
    assert "unknown domain 'Lore'" in lines[0]
    assert "Traceback" not in captured.err


def test_cli_list_shows_the_papers_books_with_a_header(capsys) -> None:
    assert main(["fetch", "--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    header, *rows, total = [line.split("\t") for line in lines]
    assert header[:8] == ["book_id", "domain", "status", "pages", "leaves", "test", "train", "dev"]
    assert len(rows) == 18
    by_id = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    assert by_id["whole-child"]["pin"] == "catalog"
    assert by_id["whole-child"]["pages"] == "182" and by_id["whole-child"]["leaves"] == "129"
    assert by_id["tort-law"]["pin"] == "unpinned"
    assert by_id["tort-law"]["status"] == "edition-open"
    assert "no-llm-training" in by_id["organic-chemistry"]["restrictions"]
    assert total[:8] == ["total", "-", "-", "12475", "2880", "103249", "62458", "24502"]


def test_cli_list_of_v1_by_name(capsys) -> None:
    assert main(["fetch", "--catalog", "v1", "--list"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.strip().splitlines()[1:]]
    assert len(rows) == 18  # no paper figures, so no total row
    by_id = {r[0]: r for r in rows}
    assert by_id["biology-2e"][8] == "unpinned"
    assert "no-llm-training" in by_id["pharmacology-nurses"][10]
