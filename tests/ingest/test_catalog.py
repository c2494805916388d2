"""The catalog: the packaged v1 file, validation with pointed messages, and the content hash."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from searchtome.cli import main
from searchtome.errors import SearchTomeError
from searchtome.ingest.catalog import (
    RESTRICTIONS,
    catalog_from_dict,
    catalog_hash,
    catalog_to_toml,
    default_catalog_path,
    load_catalog,
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


def test_packaged_v1_has_18_books_three_per_domain() -> None:
    catalog = load_catalog()
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
    catalog = load_catalog()
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
    assert path.name == "catalog-v1.toml" and path.is_file()
    assert load_catalog(path) == load_catalog(None)


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
    catalog = load_catalog()
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


def test_cli_list_shows_pin_state_and_restrictions(capsys) -> None:
    assert main(["fetch", "--list"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.strip().splitlines()]
    assert len(rows) == 18
    by_id = {r[0]: r for r in rows}
    assert by_id["whole-child"][2] == "catalog"
    assert by_id["biology-2e"][2] == "unpinned"
    assert "no-llm-training" in by_id["pharmacology-nurses"][4]
