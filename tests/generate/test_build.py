"""`searchtome build` end to end: PDFs made at test time, a real OpenAI-compatible server over
HTTP, kill -9 and resume, byte-identical rebuilds, replay from an exported cache."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import searchtome
from searchtome.cli import main
from searchtome.dataset.layout import verify_manifest
from searchtome.errors import SearchTomeError
from searchtome.generate.options import BuildOptions
from searchtome.generate.pipeline import build
from searchtome.generate.questions import questions_for
from searchtome.generate.splits import DEFAULT_RATIOS
from searchtome.io import read_json, sha256_file
from searchtome.llm.cache import ResponseCache
from searchtome.llm.local import _healthy
from searchtome.sample.render import render_book
from tests.fixtures.fake_openai import FakeOpenAIServer, Fault

REPO = Path(__file__).resolve().parents[2]
WORDS = [
    "amber",
    "basalt",
    "cedar",
    "dolmen",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "iris",
    "juniper",
    "kelp",
    "lichen",
    "marsh",
    "nectar",
    "obsidian",
    "prairie",
    "quartz",
    "reed",
    "saffron",
    "tundra",
    "umber",
    "violet",
    "willow",
    "xylem",
    "yarrow",
    "zephyr",
    "acorn",
    "bramble",
    "cobalt",
    "delta",
    "estuary",
    "fern",
    "glacier",
    "heath",
    "inlet",
    "jasper",
    "knoll",
    "loam",
    "meadow",
    "nettle",
    "oasis",
    "pumice",
    "quarry",
    "ridge",
    "sorrel",
    "thistle",
    "upland",
    "vale",
    "wetland",
    "yew",
    "zinc",
    "alder",
    "birch",
    "canyon",
    "dune",
]


def make_pdf(
    path: Path, chapters: int = 2, sections: int = 2, paragraphs: int = 3, seed: int = 0
) -> Path:
    """A small book with a real outline (via :func:`searchtome.sample.render.render_book`):
    chapters with an introduction, each holding ``sections`` leaves of ``paragraphs``."""
    from searchtome.sample.render import BookSpec, Section, render_book

    rng = random.Random(seed)

    def paragraph() -> str:
        w = rng.sample(WORDS, 12)
        # Filler words are short, so the fake server's questions (built from words of four
        # letters or more) differ between units.
        return (
            f"The {w[0]} and {w[1]} of a {w[2]} are all in the {w[3]}. Yet {w[4]} and {w[5]} "
            f"may see {w[6]} or {w[7]}, but not {w[8]}, {w[9]}, {w[10]} nor the {w[11]}."
        )

    spec = BookSpec(
        title=f"Book {path.stem}",
        sections=tuple(
            Section(
                f"Chapter on {WORDS[(c * 7) % len(WORDS)].title()}",
                text=(paragraph(),),
                children=tuple(
                    Section(
                        f"{WORDS[(c * 11 + s * 3) % len(WORDS)].title()} Studies",
                        text=tuple(paragraph() for _ in range(paragraphs)),
                    )
                    for s in range(1, sections + 1)
                ),
            )
            for c in range(1, chapters + 1)
        ),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    render_book(spec, path)
    return path


@pytest.fixture
def pdf_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "pdfs"
    make_pdf(folder / "Field Notes.pdf", seed=1)
    make_pdf(folder / "river-atlas.pdf", chapters=1, sections=3, seed=2)
    (tmp_path / "books.toml").write_text(
        '[[books]]\nbook_id = "river-atlas"\ndomain = "Geography"\ntitle = "A River Atlas"\n'
        'license = "CC BY-NC 4.0"\nrestrictions = ["no-llm-training"]\n'
    )
    return folder


@pytest.fixture
def server():
    with FakeOpenAIServer() as srv:
        yield srv


def _args(pdf_dir: Path, server: FakeOpenAIServer, out: Path, *extra: str) -> list[str]:
    return [
        "--no-progress",
        "build",
        "--pdf-dir",
        str(pdf_dir),
        "--catalog",
        str(pdf_dir.parent / "books.toml"),
        "--endpoint",
        server.base_url,
        "--unit-min-chars",
        "100",
        "--out",
        str(out),
        *extra,
    ]


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_pdf_dir_build_end_to_end(pdf_dir, server, tmp_path, capsys):
    out = tmp_path / "data"
    assert main(_args(pdf_dir, server, out, "--api-key", "sk-very-secret")) == 0
    printed = capsys.readouterr().out
    assert "books 2" in printed and "FAILED" not in printed

    ds = searchtome.load(out)
    assert ds.book_ids() == ["field-notes", "river-atlas"]
    assert ds.domain("river-atlas") == "Geography" and ds.domain("field-notes") == "unknown"
    assert ds.books["river-atlas"].book.restrictions == ("no-llm-training",)
    assert ds.books["river-atlas"].book.title == "A River Atlas"
    units = {u.unit_id: u for u in ds.units()}
    queries = [q for s in ("train", "dev", "test") for q in ds.queries(s)]
    report = read_json(out / "build-report.json")
    removed = report["removed_questions"]
    # A remote endpoint is asked for questions by unit length ("auto") by default.
    asked = sum(questions_for(u.text, "auto") for u in units.values())
    assert len(queries) + len(removed) == asked != 6 * len(units)
    assert {r["reason"] for r in removed} <= {"duplicate"} and not report["failed_units"]
    # No paper figures for these books, so no comparison and no depth.
    assert "paper_comparison" not in report and "Table 1" not in printed
    for q in queries:
        assert q.leaf_id == units[q.unit_id].leaf_id  # gold = the leaf the unit came from
        assert "/" not in q.query_id
    train_leaves = {q.leaf_id for q in ds.queries("train")}
    assert train_leaves == {leaf.leaf_id for leaf in ds.leaves()}
    by_unit: dict[str, set[str]] = {}
    for q in queries:
        by_unit.setdefault(q.unit_id, set()).add(q.split)
    assert all(len(s) == 1 for s in by_unit.values())

    manifest = read_json(out / "manifest.json")
    gen = manifest["generation"]
    assert gen["model"] == "mistralai/Mixtral-8x7B-Instruct-v0.1"
    # Which endpoint answered is not recorded: the dataset is the same whichever replica did.
    assert gen["endpoint_kind"] == "openai-compatible" and "endpoint_host" not in gen
    assert gen["prompt_version"] == "questions-v1" and gen["seed"] == 42
    assert gen["sampling"]["temperature"] == 0.0 and gen["sampling"]["seed"] == 42
    assert manifest["split"]["rule"] == "by-unit" and manifest["split"]["seed"] == 42
    assert manifest["split"]["ratios"] == DEFAULT_RATIOS and gen["questions_per_unit"] == "auto"
    assert manifest["extraction"] == {"infer_toc": False}
    assert manifest["restrictions"] == {"river-atlas": ["no-llm-training"]}
    assert set(manifest["versions"]) >= {"searchtome", "pymupdf"}
    assert manifest["collection"]["files"]["river-atlas.pdf"] == sha256_file(
        pdf_dir / "river-atlas.pdf"
    )
    assert not verify_manifest(out)
    splits = read_json(out / "splits.json")
    for split, files in splits["sha256"].items():
        for rel, digest in files.items():
            assert sha256_file(out / rel) == digest, (split, rel)
    assert splits["books"]["river-atlas"]["leaves_missing_from_train"] == 0
    assert (out / "README.md").is_file()
    for path in out.rglob("*"):
        if path.is_file():
            assert b"sk-very-secret" not in path.read_bytes(), path
            assert str(tmp_path).encode() not in path.read_bytes(), path  # no local paths


def test_rebuild_is_byte_identical_and_replays_without_an_llm(pdf_dir, server, tmp_path, capsys):
    cache = tmp_path / "cache.sqlite"
    settings = ["--questions-per-unit", "4", "--max-tokens", "300", "--seed", "7"]
    settings += ["--split-ratios", "50,20,30", "--cache", str(cache)]
    assert main(_args(pdf_dir, server, tmp_path / "a", *settings)) == 0
    n_requests = len(server.chat_records())
    assert main(_args(pdf_dir, server, tmp_path / "b", *settings)) == 0
    assert len(server.chat_records()) == n_requests  # warm cache: nothing asked
    assert "generate skipped (all replies cached)" in capsys.readouterr().out
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")

    # Someone else: import the exported cache and rebuild with no endpoint at all, taking
    # every setting from the published manifest.
    export = tmp_path / "replies.jsonl.gz"
    assert main(["cache", "export", str(export), "--cache", str(cache)]) == 0
    other = tmp_path / "other.sqlite"
    assert main(["cache", "import", str(export), "--cache", str(other)]) == 0
    server.stop()
    replay = [
        "--no-progress",
        "build",
        "--pdf-dir",
        str(pdf_dir),
        "--catalog",
        str(pdf_dir.parent / "books.toml"),
        "--endpoint",
        "cache",
        "--cache",
        str(other),
        "--settings-from",
        str(tmp_path / "a"),
        "--check-against",
        str(tmp_path / "a" / "manifest.json"),
        "--out",
        str(tmp_path / "c"),
    ]
    assert main(replay) == 0
    assert "identical to" in capsys.readouterr().out
    assert _tree(tmp_path / "a") == _tree(tmp_path / "c")
    assert main(["cache", "info", "--cache", str(other)]) == 0
    assert f"via 127.0.0.1:{server.port}" in capsys.readouterr().out
    # A different setting is caught by --check-against (and needs replies the cache lacks).
    changed = [*replay, "--split-seed", "8"]
    changed[changed.index(str(tmp_path / "c"))] = str(tmp_path / "d")
    assert main(changed) == 4
    assert "differ from" in capsys.readouterr().err


def test_a_second_run_skips_every_stage(pdf_dir, server, tmp_path):
    opts = BuildOptions(
        out=tmp_path / "data",
        pdf_dir=pdf_dir,
        endpoint=server.base_url,
        cache=tmp_path / "c.sqlite",
        unit_min_chars=100,
    )
    first = build(opts)
    assert first.stages["extract"] == "2 extracted" and first.stages["write"] == "done"
    stamp = (tmp_path / "data" / "manifest.json").stat().st_mtime_ns
    second = build(opts)
    assert second.up_to_date and second.requests == 0
    assert second.stages == {
        "fetch": "2 local PDF(s)",
        "extract": "skipped (cached)",
        "generate": "skipped (all replies cached)",
        "write": "skipped (up to date)",
    }
    assert (tmp_path / "data" / "manifest.json").stat().st_mtime_ns == stamp
    # Any setting that changes the result rebuilds.
    third = build(BuildOptions(**{**opts.__dict__, "split_seed": 7}))
    assert not third.up_to_date and third.requests == 0


def test_unusable_replies_fail_their_unit_and_the_build_goes_on(pdf_dir, server, tmp_path, capsys):
    victim = _first_unit(pdf_dir, server, tmp_path)
    marker = victim.text.split(".")[0]
    server.inject(Fault.reply("I would rather not."), times=2, match=marker)
    out = tmp_path / "data"
    assert main(_args(pdf_dir, server, out, "--cache", str(tmp_path / "c.sqlite"))) == 0
    printed = capsys.readouterr().out
    assert "FAILED units 1" in printed and victim.unit_id in printed
    report = read_json(out / "build-report.json")
    assert report["failed_units"] == [
        {"unit_id": victim.unit_id, "reason": "not JSON; after repair: not JSON"}
    ]
    assert read_json(out / "manifest.json")["generation"]["counts"]["units_failed"] == 1
    ds = searchtome.load(out)
    assert all(q.unit_id != victim.unit_id for s in ("train", "dev", "test") for q in ds.queries(s))


def _first_unit(pdf_dir: Path, server: FakeOpenAIServer, tmp_path: Path):
    probe = tmp_path / "probe"
    assert main(_args(pdf_dir, server, probe, "--cache", str(tmp_path / "probe.sqlite"))) == 0
    server.clear()
    return searchtome.load(probe).units()[0]


def test_unanswered_units_exit_3_and_a_rerun_fills_them_in(pdf_dir, server, tmp_path, capsys):
    cache = tmp_path / "c.sqlite"
    victim = _first_unit(pdf_dir, server, tmp_path)
    server.inject(Fault.http(500), times=1000, match=victim.text.split(".")[0])
    args = _args(pdf_dir, server, tmp_path / "data", "--cache", str(cache), "--max-attempts", "2")
    assert main(args) == 3
    assert "rerun the same command" in capsys.readouterr().err
    assert len(server.chat_records()) > 2
    server.clear()
    assert main(args) == 0
    again = server.chat_records()
    assert len(again) == 1  # only the unanswered unit is asked again
    assert "FAILED" not in capsys.readouterr().out
    assert victim.unit_id in {
        q.unit_id for q in searchtome.load(tmp_path / "data").queries("train")
    } | {q.unit_id for s in ("dev", "test") for q in searchtome.load(tmp_path / "data").queries(s)}


def test_clear_errors(pdf_dir, server, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    args = _args(pdf_dir, server, tmp_path / "d")
    i = args.index("--endpoint")
    assert main(args[:i] + args[i + 2 :]) == 1
    assert "no endpoint" in capsys.readouterr().err
    server.inject(Fault.http(401))
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "Traceback" not in err and "--api-key" in err
    args[i + 1] = "cache"
    assert main([*args, "--cache", str(tmp_path / "empty.sqlite")]) == 1
    assert "have no reply in" in capsys.readouterr().err
    assert main(_args(tmp_path / "nowhere", server, tmp_path / "d")) == 1
    assert "--pdf-dir must be an existing folder" in capsys.readouterr().err
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("keep me")
    assert main(_args(pdf_dir, server, tmp_path / "junk")) == 1
    assert "not a SearchTome dataset" in capsys.readouterr().err
    assert (tmp_path / "junk" / "notes.txt").read_text() == "keep me"


def test_a_failed_write_leaves_the_old_dataset(pdf_dir, server, tmp_path, monkeypatch):
    out = tmp_path / "data"
    opts = BuildOptions(out=out, pdf_dir=pdf_dir, endpoint=server.base_url, unit_min_chars=100)
    build(opts)
    before = _tree(out)

    def broken(folder):
        raise SearchTomeError("card writer exploded")

    monkeypatch.setattr("searchtome.generate.output._write_card", broken)
    with pytest.raises(SearchTomeError, match="exploded"):
        build(BuildOptions(**{**opts.__dict__, "split_seed": 3}))
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["books.toml", "data", "pdfs"]


def test_catalog_build_keeps_restrictions(tmp_path, server):
    src = tmp_path / "src"
    make_pdf(src / "law-notes.pdf", chapters=1, sections=2, seed=5)
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        'name = "tiny"\nversion = "1"\n\n[[books]]\nbook_id = "law-notes"\ndomain = "Law"\n'
        'title = "Law Notes"\nlicense = "CC BY-NC-SA 4.0"\nrestrictions = ["no-llm-training", "share-alike"]\n'
    )
    summary = build(
        BuildOptions(
            out=tmp_path / "data",
            catalog=catalog,
            source_dir=src,
            endpoint=server.base_url,
            unit_min_chars=100,
        )
    )
    assert summary.books == 1 and not summary.failures
    ds = searchtome.load(tmp_path / "data")
    assert ds.books["law-notes"].book.restrictions == ("no-llm-training", "share-alike")
    manifest = read_json(tmp_path / "data" / "manifest.json")
    assert manifest["name"] == "tiny" and manifest["collection"]["catalog"] == "tiny"
    assert manifest["restrictions"] == {"law-notes": ["no-llm-training", "share-alike"]}


def test_catalog_build_cuts_at_the_recorded_depth_and_compares_with_the_paper(tmp_path, server):
    from searchtome.ingest.depth import leaf_counts
    from searchtome.ingest.toc import read_toc
    from searchtome.sample.render import sample_spec

    src = tmp_path / "src"
    src.mkdir()
    deep = render_book(sample_spec(chapters=2, seed=4), src / "deep-book.pdf")
    make_pdf(src / "plain-book.pdf", chapters=1, sections=2, seed=6)
    counts = leaf_counts(read_toc(deep.path).nodes)
    assert counts == (2, 5, 10)  # the paper's 5 leaves are the outline cut at depth 2
    paper = f"{{ pages = {deep.n_pages + 1}, leaves = 5, test = 30, train = 20, dev = 10 }}"
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        'name = "paperlike"\nversion = "1"\n\n'
        f'[[books]]\nbook_id = "deep-book"\ndomain = "Law"\ntitle = "Deep"\npaper = {paper}\n\n'
        '[[books]]\nbook_id = "plain-book"\ndomain = "Law"\ntitle = "Plain"\n'
    )
    opts = BuildOptions(
        out=tmp_path / "data",
        catalog=catalog,
        source_dir=src,
        endpoint=server.base_url,
        unit_min_chars=100,
        cache=tmp_path / "c.sqlite",
    )
    summary = build(opts)  # the depth comes from the lock file fetch wrote (the catalog has none)
    ds = searchtome.load(opts.out)
    assert len(ds.leaves("deep-book")) == 5 and len(ds.leaves("plain-book")) == 2
    deep_leaf = next(leaf for leaf in ds.leaves("deep-book") if leaf.leaf_id.endswith("/1.1"))
    for sub in (s for s in deep.sections if s.key.startswith("1.1.")):
        assert " ".join(sub.paragraphs[0].split()) in " ".join(deep_leaf.text.split())
    manifest = read_json(opts.out / "manifest.json")
    assert manifest["extraction"] == {"infer_toc": False, "leaf_depth": {"deep-book": 2}}

    report = read_json(opts.out / "build-report.json")["paper_comparison"]
    assert list(report) == ["deep-book"]  # the plain book has no paper figures
    entry = report["deep-book"]
    assert entry["leaf_depth"] == 2 and "leaf_problem" not in entry
    assert entry["pages"] == {
        "found": deep.n_pages,
        "paper": deep.n_pages + 1,
        "ratio": round(deep.n_pages / (deep.n_pages + 1), 3),
    }
    assert entry["leaves"] == {"found": 5, "paper": 5, "ratio": 1.0}
    found = {s: len(ds.queries(s, "deep-book")) for s in ("test", "train", "dev")}
    for split, n in {"test": 30, "train": 20, "dev": 10}.items():
        assert entry[split] == {
            "found": found[split],
            "paper": n,
            "ratio": round(found[split] / n, 3),
        }
    assert entry["questions"]["found"] == sum(found.values()) > 0
    text = summary.render()
    assert "against the paper's Table 1" in text
    assert f"deep-book: pages {deep.n_pages}/{deep.n_pages + 1}" in text
    assert "leaves 5/5 (1.00) at depth 2" in text and "plain-book" not in text.split("Table 1")[1]

    # A second run reuses the cut extraction; a catalog depth wins over the lock's.
    assert build(opts).stages["extract"] == "skipped (cached)"
    catalog.write_text(catalog.read_text().replace("paper = ", "leaf_depth = 3\npaper = ", 1))
    third = build(opts)
    assert third.stages["extract"] == "1 extracted" and third.leaves == 10 + 2
    entry = read_json(opts.out / "build-report.json")["paper_comparison"]["deep-book"]
    assert (
        entry["leaf_depth"] == 3
        and "10 leaves extracted, unlike the paper's 5" in entry["leaf_problem"]
    )
    assert "! deep-book: 10 leaves extracted" in third.render()


_BUILD_SCRIPT = "import sys; from searchtome.cli import main; sys.exit(main(sys.argv[1:]))"


def test_kill_9_mid_build_then_resume_asks_no_finished_unit_again(tmp_path):
    pdfs = tmp_path / "pdfs"
    make_pdf(pdfs / "big.pdf", chapters=3, sections=3, paragraphs=3, seed=9)
    (tmp_path / "books.toml").write_text("")
    cache = tmp_path / "c.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with FakeOpenAIServer(latency=0.15) as server:
        args = [
            *_args(pdfs, server, tmp_path / "data", "--cache", str(cache), "--concurrency", "2")
        ]
        args = [a for a in args if a not in ("--catalog", str(tmp_path / "books.toml"))]
        proc = subprocess.Popen([sys.executable, "-c", _BUILD_SCRIPT, *args], env=env, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while len(server.chat_records()) < 8 and time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the build ended (rc {proc.returncode}) before it could be killed")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        first_run = len(server.chat_records())
        with ResponseCache(cache) as c:
            finished = c.request_hashes()
        assert len(finished) >= 4
        assert not (tmp_path / "data").exists()  # nothing half-written

        server.clear()
        done = subprocess.run([sys.executable, "-c", _BUILD_SCRIPT, *args], env=env, cwd=tmp_path)
        assert done.returncode == 0
        resumed = {r.messages_hash for r in server.chat_records()}
        assert resumed and not resumed & finished  # no finished unit was asked again
        n_units = len(searchtome.load(tmp_path / "data").units())
        assert len(resumed | finished) == n_units
        assert first_run + len(server.chat_records()) >= n_units

        # The resumed dataset is the one an uninterrupted build makes.
        fresh = [*args]
        fresh[fresh.index(str(cache))] = str(tmp_path / "fresh.sqlite")
        fresh[fresh.index(str(tmp_path / "data"))] = str(tmp_path / "fresh")
        assert main(fresh) == 0
    assert _tree(tmp_path / "data") == _tree(tmp_path / "fresh")


@pytest.mark.slow
def test_local_endpoint_with_smollm2(tmp_path):
    """The real `--endpoint local`: transformers serve + SmolLM2-135M on a one-leaf book."""
    pytest.importorskip("fastapi")
    pytest.importorskip("torch")
    pdfs = tmp_path / "pdfs"
    make_pdf(pdfs / "tiny.pdf", chapters=1, sections=1, paragraphs=2, seed=4)
    out = tmp_path / "data"
    args = [
        "--no-progress",
        "build",
        "--pdf-dir",
        str(pdfs),
        "--endpoint",
        "local",
        "--questions-per-unit",
        "3",
        "--max-tokens",
        "80",
        "--unit-min-chars",
        "400",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    manifest = read_json(out / "manifest.json")
    gen = manifest["generation"]
    assert gen["endpoint_kind"] == "local" and "endpoint_host" not in gen
    assert "SmolLM2-135M" in gen["model"] and "135M" in gen["note"]
    assert gen["prompt_version"] == "questions-v1-fewshot" and gen["strictness"] == "lenient"
    assert "Demo-quality questions" in (out / "README.md").read_text()
    ds = searchtome.load(out)
    assert len(ds.units()) == 1
    # A second build needs no server: every reply is cached.
    again = build(
        BuildOptions(
            out=tmp_path / "again",
            pdf_dir=pdfs,
            endpoint="local",
            questions_per_unit=3,
            max_tokens=80,
            unit_min_chars=400,
        )
    )
    assert again.stages["generate"] == "skipped (all replies cached)"
    assert _tree(out) == _tree(tmp_path / "again")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _child_servers(parent: int) -> list[int]:
    """Pids of local model servers started by ``parent`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and (
            b"searchtome.commands.serve" in cmdline
            or (b"transformers" in cmdline and b"serve" in cmdline)
        ):
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_the_local_server(tmp_path, signum):
    pytest.importorskip("torch")
    from searchtome.llm.models import smollm2_path

    smollm2_path()  # convert outside the timed part
    pdfs = tmp_path / "pdfs"
    # Enough units that the build cannot finish before the signal arrives, even on a fast box.
    make_pdf(pdfs / "tiny.pdf", chapters=3, sections=4, paragraphs=3, seed=4)
    args = ["--no-progress", "build", "--pdf-dir", str(pdfs), "--endpoint", "local"]
    args += ["--out", str(tmp_path / "data")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _BUILD_SCRIPT, *args],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        # A test run started in the background (nohup, `&`, some CI runners) ignores SIGINT, and
        # children inherit that; give the build the disposition a terminal user's process has.
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 300
    servers: list[int] = []
    while not servers and time.monotonic() < deadline and proc.poll() is None:
        servers = _child_servers(proc.pid)
        time.sleep(0.2)
    assert servers, "the build never started a local server"
    # Interrupt while questions are being generated: wait until the server answers.
    cmdline = Path(f"/proc/{servers[0]}/cmdline").read_bytes().split(b"\0")
    port = int(cmdline[cmdline.index(b"--port") + 1])
    while not _healthy(f"http://127.0.0.1:{port}"):
        if time.monotonic() > deadline or proc.poll() is not None:
            break
        time.sleep(0.2)
    time.sleep(1)
    assert proc.poll() is None, "the build ended before it could be interrupted"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in err, (proc.returncode, err[-2000:])
    gone = time.monotonic() + 30
    while any(_alive(p) for p in servers) and time.monotonic() < gone:
        time.sleep(0.2)
    assert not any(_alive(p) for p in servers), "the local server outlived the build"
    assert not (tmp_path / "data").exists()
