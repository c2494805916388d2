"""Publishing and hf:// loading, against a local Hub stand-in (real huggingface_hub HTTP code).

Nothing here reaches the internet: HF_ENDPOINT points at a server the test starts, or the test
forbids sockets outright (the dry run).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import searchtome
from searchtome.cli import main
from searchtome.dataset.hub import download_dataset, parse_hf_source
from searchtome.dataset.layout import BookInfo, verify_manifest, write_dataset, write_manifest
from searchtome.dataset.loader import load
from searchtome.dataset.publish import make_plan, publish
from searchtome.errors import SearchTomeError
from searchtome.records import SPLITS
from tests.fixtures.hub_standin import HubStandIn

TOKEN = "hf_TESTtokenThatMustNeverBePrinted0123"


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


@pytest.fixture
def data(tiny_dataset: Path, tmp_path: Path) -> Path:
    out = tmp_path / "data"
    shutil.copytree(tiny_dataset, out)
    return out


def _serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: HubStandIn) -> HubStandIn:
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    # huggingface_hub 2.x sends LFS-mode files through Xet whenever hf_xet is installed, a
    # choice made on the client; the stand-in offers no Xet storage, so the client takes the
    # LFS path it takes without hf_xet (read at call time, hence the attribute).
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    return server


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with HubStandIn() as server:
        yield _serve(monkeypatch, tmp_path, server)


def _lfs_puts(hub: HubStandIn) -> list[dict]:
    return [r for r in hub.requests if r["method"] == "PUT"]


def test_parse_hf_source() -> None:
    assert parse_hf_source("hf://org/name@v1.0") == ("org/name", "v1.0")
    assert parse_hf_source("hf://org/name") == ("org/name", None)
    assert parse_hf_source("hf://datasets/org/name@main") == ("org/name", "main")
    for bad in ("hf://name", "hf://org/name@", "org/name", "hf://a/b/c"):
        with pytest.raises(SearchTomeError, match="hf://ORG/NAME"):
            parse_hf_source(bad)


def test_dry_run_prints_plan_without_network(
    data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network is forbidden in this test")

    before = _snapshot(data)
    with HubStandIn() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket.socket, "connect_ex", refuse)
        rc = main(["publish", str(data), "--repo", "org/tiny", "--revision", "v1", "--dry-run"])
        assert server.requests == []
    out = capsys.readouterr().out
    assert rc == 0 and attempts == []
    assert _snapshot(data) == before, "a dry run must not write"
    for rel in before:
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(rel + " "))
        if rel not in ("README.md", "manifest.json"):
            assert "(rewritten)" not in line
        assert rel in line
    assert "then tag: v1" in out and "card diff" in out
    assert '+corpus = load_dataset("org/tiny", "corpus", split="corpus")' in out
    assert "no network call" in out
    assert TOKEN not in out and "token: found (HF_TOKEN or the login cache); not shown" in out
    monkeypatch.delenv("HF_TOKEN")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(data.parent / "no-login" / "token"))
    assert main(["publish", str(data), "--repo", "org/tiny", "--dry-run"]) == 0
    assert "token: none set; the real publish would stop here" in capsys.readouterr().out


def test_plan_sizes_match_what_a_publish_writes(data: Path) -> None:
    plan = make_plan(data, "org/tiny")
    files = {f.path: f for f in plan.files}
    assert set(files) == set(_snapshot(data)) | {"README.md"}
    assert files["corpus.parquet"].size == (data / "corpus.parquet").stat().st_size
    assert files["README.md"].size == len(plan.card.encode())
    assert files["manifest.json"].size == len(plan.manifest.encode())


def test_publish_one_commit_then_tag_and_load_back(
    data: Path,
    hub: HubStandIn,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG")
    rc = main(["publish", str(data), "--repo", "org/tiny", "--revision", "v1.0"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    repo = hub.repos["org/tiny"]
    assert len(repo.commits) == 1, "all files in one commit"
    (oid,) = repo.commits
    assert repo.tags == {"v1.0": oid} and repo.branches == {"main": oid}
    # The folder was updated to exactly what was published.
    assert hub.files("org/tiny", "v1.0") == _snapshot(data)
    # Binary files went out of band, as the Hub receives them: one LFS object each, uploaded
    # with the batch API's basic transfer and verified; the text files travelled inline.
    parquet = {p for p in _snapshot(data) if p.endswith(".parquet")}
    assert parquet and repo.lfs_paths[oid] == parquet
    assert len(_lfs_puts(hub)) == len(parquet)
    assert sum(r["path"] == "/lfs/verify" for r in hub.requests) == len(parquet)
    assert verify_manifest(data) == []
    assert 'load_dataset("org/tiny", "corpus"' in (data / "README.md").read_text()
    # The token went to the server, and nowhere else.
    auth = {r["authorization"] for r in hub.requests if r["method"] == "POST"}
    assert auth == {f"Bearer {TOKEN}"}
    assert TOKEN not in out + err + caplog.text
    assert "tagged: v1.0" in out

    # Load it back through hf:// (snapshot_download against the stand-in).
    ds = searchtome.load("hf://org/tiny@v1.0")
    local = load(data)
    assert ds.book_ids() == local.book_ids()
    for split in SPLITS:
        assert ds.queries(split) == local.queries(split)
    assert ds.leaves() == local.leaves()
    # The downloaded snapshot loads with datasets exactly like the local folder.
    from datasets import load_dataset

    snapshot = download_dataset("hf://org/tiny@v1.0")
    corpus = load_dataset(str(snapshot), "corpus", split="corpus", cache_dir=str(tmp_path / "d"))
    assert corpus["leaf_id"] == [x.leaf_id for x in local.leaves()]

    # The same tag twice: refused before anything is committed.
    with pytest.raises(SearchTomeError, match="already exists"):
        publish(data, "org/tiny", revision="v1.0")
    assert len(repo.commits) == 1


def test_publish_merges_the_card_on_the_hub(data: Path, hub: HubStandIn) -> None:
    publish(data, "org/tiny")
    repo = hub.repos["org/tiny"]
    (first,) = repo.commits
    # Someone edits the card on the Hub: a paragraph and a config of their own.
    card = repo.commits[first]["README.md"].decode()
    card = card.replace(
        "configs:\n",
        "configs:\n- config_name: extra\n  data_files:\n  - split: train\n    path: extra.csv\n",
        1,
    )
    card += "\n## Hub notes\n\nWritten on the Hub by a maintainer.\n"
    edited = dict(repo.commits[first])
    edited["README.md"] = card.encode()
    repo.commits["e" * 40] = edited
    repo.branches["main"] = "e" * 40

    publish(data, "org/tiny", revision="v2")
    published = hub.files("org/tiny", "v2")["README.md"].decode()
    assert "Written on the Hub by a maintainer." in published
    assert "config_name: extra" in published and "config_name: corpus" in published
    assert published.count("<!-- searchtome:begin") == 1
    assert (data / "README.md").read_text() == published


def test_publish_pull_request(data: Path, hub: HubStandIn) -> None:
    publish(data, "org/tiny")
    result = publish(data, "org/tiny", create_pr=True, commit_message="refresh")
    assert result.pr_url and "/discussions/1" in result.pr_url
    assert hub.repos["org/tiny"].prs["refs/pr/1"] == result.commit_oid
    with pytest.raises(SearchTomeError, match="--create-pr"):
        publish(data, "org/tiny", create_pr=True, revision="v3", dry_run=True)


def test_no_token_fails_before_network(
    data: Path, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import huggingface_hub.constants as constants

    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "none" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "none" / "tokens"))
    with pytest.raises(SearchTomeError, match="HF_TOKEN"):
        publish(data, "org/tiny")
    assert hub.requests == []


def _restricted_copy(src: Path, out: Path, **changes: object) -> Path:
    from dataclasses import replace

    ds = load(src)
    infos = []
    for bid in ds.book_ids():
        info = ds.books[bid]
        book = replace(info.book, **changes) if bid == "beta-law" else info.book
        infos.append(BookInfo(book, info.n_pages, info.toc_source))
    write_dataset(
        out,
        books=infos,
        toc=[n for b in ds.book_ids() for n in ds.toc(b)],
        leaves=ds.leaves(),
        queries=[q for s in SPLITS for q in ds.queries(s)],
        paragraphs=ds.paragraphs(),
        units=ds.units(),
    )
    write_manifest(out, {"name": "restricted"})
    return out


@pytest.mark.parametrize(
    "changes",
    [
        {"restrictions": ("no-redistribution",)},
        {"restrictions": ("no-derivatives",)},
        {"license": "All rights reserved"},
    ],
)
def test_restricted_books_stop_the_publish(
    tiny_dataset: Path, tmp_path: Path, changes: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _restricted_copy(tiny_dataset, tmp_path / "r", **changes)
    rc = main(["publish", str(out), "--repo", "org/r", "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 1 and "beta-law" in err and "--allow-restricted" in err
    assert "Traceback" not in err
    rc = main(["publish", str(out), "--repo", "org/r", "--dry-run", "--allow-restricted"])
    assert rc == 0
    assert "restricted books" in capsys.readouterr().out


def test_edited_folder_is_refused(data: Path) -> None:
    (data / "corpus.parquet").write_bytes(b"edited by hand")
    with pytest.raises(SearchTomeError, match=r"differ from manifest\.json"):
        make_plan(data, "org/tiny")


def test_offline_download_uses_only_the_cache(
    data: Path, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(data, "org/tiny", revision="v1")
    first = searchtome.load("hf://org/tiny@v1")
    monkeypatch.setenv("SEARCHTOME_OFFLINE", "1")
    hub.requests.clear()
    again = searchtome.load("hf://org/tiny@v1")
    assert again.leaves() == first.leaves()
    assert hub.requests == []
    with pytest.raises(SearchTomeError, match="not in the local Hugging Face cache"):
        searchtome.load("hf://org/never-published@v1")


def test_stale_layout_files_are_removed_others_kept(data: Path, hub: HubStandIn) -> None:
    publish(data, "org/tiny")
    repo = hub.repos["org/tiny"]
    (first,) = repo.commits
    files = dict(repo.commits[first])
    files["qrels/old.parquet"] = b"left over from an earlier build"
    files["notes.txt"] = b"the maintainer's file"
    repo.commits["f" * 40] = files
    repo.branches["main"] = "f" * 40
    publish(data, "org/tiny", revision="v2")
    published = hub.files("org/tiny", "v2")
    assert "qrels/old.parquet" not in published
    assert published["notes.txt"] == b"the maintainer's file"
    assert {k: v for k, v in published.items() if k != "notes.txt"} == _snapshot(data)


def test_blind_publish_uploads_the_public_half_and_keeps_the_gold_local(
    data: Path, hub: HubStandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from searchtome.dataset.blind import is_private, make_blind

    before = _snapshot(data)
    held = tmp_path / "held-back"
    # A dry run writes nothing: no held-back folder, no commit, DATA unchanged.
    assert main(["publish", str(data), "--repo", "org/b", "--blind", "test", "--dry-run"]) == 0
    assert "dry run: not written" in capsys.readouterr().out
    assert not (tmp_path / "data-private").exists() and "org/b" not in hub.repos
    rc = main(
        ["publish", str(data), "--repo", "org/b", "--blind", "test", "--held-back", str(held)]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert f"held-back gold is in {held}" in out and is_private(held)
    uploaded = hub.files("org/b")
    assert "qrels/test.parquet" not in uploaded and "units.parquet" not in uploaded
    # Exactly the public half that make_blind writes (the publish merges the card, and the
    # manifest records the card's new hash).
    # (written into the held-back folder, whose secret key it reuses: the same ids)
    expected = make_blind(data, tmp_path / "pub", held, "test").public
    merged = ("README.md", "manifest.json")
    assert {k: v for k, v in uploaded.items() if k not in merged} == {
        k: v for k, v in _snapshot(expected).items() if k not in merged
    }
    assert b"qrels/test.parquet" not in uploaded["manifest.json"]
    assert _snapshot(data) == before  # DATA itself untouched
    assert not list(tmp_path.glob(".data.blind.*"))  # scratch removed
    assert main(["publish", str(data), "--repo", "org/b", "--held-back", str(held)]) == 1
    assert "--held-back goes with --blind" in capsys.readouterr().err


def test_the_hub_refuses_binary_files_inline(hub: HubStandIn) -> None:
    """The stand-in holds the client to the Hub's rule, so no test passes by sending inline."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("org/raw", repo_type="dataset")
    op = CommitOperationAdd(path_in_repo="x.bin", path_or_fileobj=b"\0\1binary")
    op._upload_mode = "regular"  # what a client that skipped preupload would send
    body = b"\n".join(
        json.dumps(line).encode()
        for line in (
            {"key": "header", "value": {"summary": "raw", "description": ""}},
            {
                "key": "file",
                "value": {"path": "x.bin", "content": "AAFiaW5hcnk=", "encoding": "base64"},
            },
        )
    )
    status, payload, _, _ = hub.route(
        "POST", urlsplit(f"{hub.url}/api/datasets/org/raw/commit/main"), body, {}
    )
    assert status == 400 and "LFS" in payload["error"]


def test_a_file_over_the_regular_limit_goes_through_lfs(
    data: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Text files are inline only below the limit: with a 2 kB limit the card and the manifest
    (text, no LFS suffix) take the LFS path too, and the snapshot still comes back whole."""
    with HubStandIn(regular_max=2_000) as server:
        hub = _serve(monkeypatch, tmp_path, server)
        publish(data, "org/big", revision="v1")
        (oid,) = hub.repos["org/big"].commits
        sizes = {p: len(b) for p, b in _snapshot(data).items()}
        assert hub.repos["org/big"].lfs_paths[oid] == {
            p for p, n in sizes.items() if n > 2_000 or p.endswith(".parquet")
        }
        assert "README.md" in hub.repos["org/big"].lfs_paths[oid]
        snapshot = download_dataset("hf://org/big@v1")
        assert _snapshot(snapshot) == _snapshot(data)


def test_a_parquet_over_the_hubs_regular_limit_publishes_and_loads(
    tiny_dataset: Path, hub: HubStandIn, tmp_path: Path
) -> None:
    """A 12 MB paragraphs.parquet (over the Hub's 10 MB inline limit) travels as an LFS object,
    and the downloaded snapshot is byte-identical and loads with ``datasets``."""
    import base64
    import random
    from dataclasses import replace

    from datasets import load_dataset

    ds = load(tiny_dataset)
    rng = random.Random(7)
    noise = base64.b64encode(rng.randbytes(12_000_000)).decode()  # incompressible text
    paragraphs = list(ds.paragraphs())
    paragraphs[0] = replace(paragraphs[0], text=noise)
    out = tmp_path / "big"
    write_dataset(
        out,
        books=[ds.books[b] for b in ds.book_ids()],
        toc=[n for b in ds.book_ids() for n in ds.toc(b)],
        leaves=ds.leaves(),
        queries=[q for s in SPLITS for q in ds.queries(s)],
        paragraphs=paragraphs,
        units=ds.units(),
    )
    write_manifest(out, {"name": "big"})
    big = out / "paragraphs.parquet"
    assert big.stat().st_size > 10_000_000
    publish(out, "org/bigpar", revision="v1")
    (oid,) = hub.repos["org/bigpar"].commits
    assert "paragraphs.parquet" in hub.repos["org/bigpar"].lfs_paths[oid]
    snapshot = download_dataset("hf://org/bigpar@v1")
    assert _snapshot(snapshot) == _snapshot(out)
    table = load_dataset(
        "parquet", data_files=str(snapshot / "paragraphs.parquet"), cache_dir=str(tmp_path / "d")
    )["train"]
    assert table[0]["text"] == noise


def test_an_upload_dropped_halfway_is_sent_again(
    data: Path, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server cuts the first object upload halfway through: the client sends that object
    again and the commit holds every file byte for byte."""
    import huggingface_hub.utils._http as http

    monkeypatch.setattr(http.time, "sleep", lambda s: None)  # the client's backoff, not ours
    hub.drop_uploads = 1
    publish(data, "org/drop", revision="v1")
    puts = _lfs_puts(hub)
    assert puts[0].get("dropped") and not any(r.get("dropped") for r in puts[1:])
    assert sum(r["path"] == puts[0]["path"] for r in puts) == 2  # dropped once, then whole
    assert hub.files("org/drop", "v1") == _snapshot(data)


def test_a_publish_that_died_mid_upload_resumes_without_sending_stored_objects(
    data: Path, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every try of one object is cut: the publish fails in one line and commits nothing; run
    again, only the objects the server lacks travel, and the snapshot downloads byte-identical."""
    import huggingface_hub.utils._http as http

    monkeypatch.setattr(http.time, "sleep", lambda s: None)
    victim = hashlib.sha256((data / "corpus.parquet").read_bytes()).hexdigest()
    hub.unreachable = {victim}
    with pytest.raises(SearchTomeError, match="publishing to org/resume failed") as err:
        publish(data, "org/resume", revision="v1")
    assert "\n" not in str(err.value)
    assert hub.repos["org/resume"].commits == {}
    stored = set(hub.lfs)
    assert stored and victim not in stored
    hub.unreachable.clear()
    hub.requests.clear()
    publish(data, "org/resume", revision="v1")
    sent = {r["path"].rsplit("/", 1)[1] for r in _lfs_puts(hub) if not r.get("dropped")}
    assert sent and not sent & stored, "objects already stored are not sent again"
    assert _snapshot(download_dataset("hf://org/resume@v1")) == _snapshot(data)
