"""`searchtome build` against several endpoints over real HTTP: the dataset does not depend on
which replicas answered, a replica dying mid-build costs no question twice, and bad endpoint
lists fail with one line."""

from __future__ import annotations

import contextlib
from collections import Counter

from searchtome.cli import main
from tests.fixtures.fake_openai import FakeOpenAIServer, Fault
from tests.generate.test_build import _tree, pdf_dir  # noqa: F401  (pdf_dir is a fixture)


def _build(pdf_dir, urls, out, cache, *extra: str) -> list[str]:  # noqa: F811
    args = ["--no-progress", "build", "--pdf-dir", str(pdf_dir)]
    args += ["--catalog", str(pdf_dir.parent / "books.toml"), "--unit-min-chars", "100"]
    for url in urls:
        args += ["--endpoint", url]
    return [*args, "--cache", str(cache), "--out", str(out), *extra]


def _answered(servers) -> Counter:
    return Counter(r.messages_hash for s in servers for r in s.chat_records() if r.status == 200)


def test_one_endpoint_or_three_with_one_dying_give_the_same_bytes(pdf_dir, tmp_path, capsys):  # noqa: F811
    with contextlib.ExitStack() as stack:
        one = stack.enter_context(FakeOpenAIServer(latency=0.01))
        three = [stack.enter_context(FakeOpenAIServer(latency=0.01)) for _ in range(3)]
        assert main(_build(pdf_dir, [one.base_url], tmp_path / "a", tmp_path / "a.sqlite")) == 0
        asked = _answered([one])
        capsys.readouterr()

        three[1].go_down(Fault.http(503), after=3)  # answers three requests, then dies
        urls = [s.base_url for s in three]
        args = _build(pdf_dir, urls, tmp_path / "b", tmp_path / "b.sqlite", "--concurrency", "6")
        assert main(args) == 0
        printed = capsys.readouterr().out

    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    # Every request answered exactly once, the same requests as with one endpoint.
    assert _answered(three) == asked and set(asked.values()) == {1}
    assert sum(r.status == 503 for r in three[1].chat_records()) >= 1
    assert all(len(s.chat_records()) >= 3 for s in three)
    host = f"127.0.0.1:{three[1].port}"
    assert f"{host}: 3 answered" in printed and "failed" in printed


def test_endpoint_lists_that_cannot_work_fail_with_one_line(pdf_dir, tmp_path, capsys):  # noqa: F811
    cache = tmp_path / "c.sqlite"
    out = tmp_path / "d"
    cases = [
        (["local", "http://a:8000/v1"], "--endpoint local cannot be combined"),
        (["http://a:8000/v1,cache"], "--endpoint cache cannot be combined"),
        (["http://a:8000/v1", "http://a:8000/v1"], "is given twice"),
        (["http://a:8000/v1", "gpu02:8000"], "'gpu02:8000' is not a URL"),
    ]
    for urls, message in cases:
        assert main(_build(pdf_dir, urls, out, cache)) == 1
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_openai_base_url_may_list_several(pdf_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{a.base_url},{b.base_url}")
        args = _build(pdf_dir, [], tmp_path / "d", tmp_path / "c.sqlite", "--concurrency", "4")
        assert main(args) == 0
        assert a.chat_records() and b.chat_records()
    assert "answered" in capsys.readouterr().out


def test_base_url_adds_an_endpoint(pdf_dir, tmp_path):  # noqa: F811
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        args = _build(pdf_dir, [a.base_url], tmp_path / "d", tmp_path / "c.sqlite")
        args[args.index("--cache") : args.index("--cache")] = ["--base-url", b.base_url]
        assert main([*args, "--concurrency", "4"]) == 0
        assert a.chat_records() and b.chat_records()


def test_the_endpoint_alone_chooses_between_local_and_remote_defaults(monkeypatch) -> None:
    """``Endpoint.defaults`` is the one choice; the stages read it instead of choosing again."""
    import inspect
    from pathlib import Path

    import searchtome.generate as generate
    from searchtome.generate.endpoint import Endpoint, EndpointKind, local_timeout
    from searchtome.generate.options import LOCAL_DEFAULTS, REMOTE_DEFAULTS

    monkeypatch.setenv("SEARCHTOME_LOCAL_BATCH", "16")
    local, cache = Endpoint(EndpointKind.LOCAL), Endpoint(EndpointKind.CACHE)
    remote = Endpoint(EndpointKind.OPENAI, ("http://127.0.0.1:1/v1",))
    assert local.defaults is LOCAL_DEFAULTS
    assert remote.defaults is REMOTE_DEFAULTS and cache.defaults is REMOTE_DEFAULTS
    assert local.timeout(16, 0.0) == local_timeout(16, 0.0) == 240
    assert remote.timeout(16, 0.0) == REMOTE_DEFAULTS["timeout"]
    sources = [p.read_text() for p in Path(inspect.getfile(generate)).parent.glob("*.py")]
    assert sum(s.count("LOCAL_DEFAULTS if") for s in sources) == 1
