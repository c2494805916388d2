"""Prompt templates, reply parsing, repair, filters, and generation through cache + server."""

from __future__ import annotations

import json

import pytest

from searchtome.errors import SearchTomeError
from searchtome.generate.questions import (
    DEFAULT_PROMPT,
    FEWSHOT_PROMPT,
    Candidate,
    FilterConfig,
    GenerationConfig,
    QuestionGenerator,
    available_prompts,
    filter_questions,
    load_prompt,
    parse_reply,
    parse_template,
    questions_for,
)
from searchtome.llm.cache import ResponseCache
from searchtome.llm.client import ChatClient, ClientConfig, SamplingParams
from searchtome.records import Unit
from tests.fixtures.fake_openai import FakeOpenAIServer, Fault, messages_hash

PASSAGE = "Glaciers carve U-shaped valleys as they move. Moraines are ridges of rock they leave."


# -- templates ----------------------------------------------------------------------------------
def test_packaged_prompts_render():
    assert {DEFAULT_PROMPT, FEWSHOT_PROMPT} <= set(available_prompts())
    prompt = load_prompt()
    messages = prompt.render(PASSAGE, 4)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert (
        PASSAGE in messages[-1]["content"]
        and "Write 4 different questions" in messages[-1]["content"]
    )
    assert '{"questions": [' in messages[-1]["content"]  # JSON braces survive substitution
    assert prompt.fingerprint.startswith("questions-v1@")
    few = load_prompt(FEWSHOT_PROMPT).render(PASSAGE, 5)
    assert [m["role"] for m in few] == ["system", "user", "assistant", "user"]
    json.loads(few[2]["content"])  # the worked example is itself valid JSON
    assert PASSAGE in few[-1]["content"] and "Write 5 questions" in few[-1]["content"]


def test_repair_message_carries_the_bad_reply_and_reason():
    prompt = load_prompt()
    messages = prompt.render(PASSAGE, 3)
    repair = prompt.render_repair(messages, "Sure! Here you go", "not JSON", 3)
    assert repair[: len(messages)] == messages
    assert repair[-2] == {"role": "assistant", "content": "Sure! Here you go"}
    assert "not JSON" in repair[-1]["content"] and "3" in repair[-1]["content"]


def test_unknown_and_custom_templates(tmp_path):
    with pytest.raises(SearchTomeError, match="did you mean 'questions-v1'"):
        load_prompt("questions-v2")
    path = tmp_path / "mine-v3.txt"
    path.write_text("# mine\n[user]\nAsk $n things about: $passage\n[repair]\nAgain: $reason\n")
    prompt = load_prompt(str(path))
    assert prompt.version == "mine-v3"
    assert prompt.render("text", 2)[0]["content"] == "Ask 2 things about: text"
    other = parse_template(path.read_text() + "\n", "mine-v3")
    assert other.fingerprint != prompt.fingerprint  # any edit changes the cache key
    with pytest.raises(SearchTomeError, match=r"\$passage"):
        parse_template("[user]\nno placeholder\n[repair]\nx\n", "bad")
    with pytest.raises(SearchTomeError, match="repair"):
        parse_template("[user]\n$passage\n", "bad")


def test_questions_per_unit():
    assert questions_for("x" * 50, 6) == 6
    assert [questions_for("x" * k, "auto") for k in (50, 200, 400, 900, 5000)] == [2, 4, 6, 8, 10]
    with pytest.raises(SearchTomeError):
        questions_for("x", 0)


# -- parsing ------------------------------------------------------------------------------------
QS = ["What do glaciers carve?", "What are moraines?"]


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"questions": QS}),
        "```json\n" + json.dumps({"questions": QS}, indent=2) + "\n```",
        "```\n" + json.dumps({"questions": QS}) + "\n```",
    ],
)
def test_strict_accepts_objects_and_fences(content):
    assert parse_reply(content, "stop", "strict").questions == tuple(QS)


@pytest.mark.parametrize(
    "content",
    [
        json.dumps(QS),
        "Here are the questions:\n" + json.dumps({"questions": QS}) + "\nHope this helps!",
        json.dumps({"questions": [{"question": q} for q in QS]}),
        json.dumps({"Questions": QS}),
    ],
)
def test_json_level_accepts_common_variants(content):
    assert parse_reply(content, "stop", "strict").ok is False or content.startswith('{"questions"')
    assert parse_reply(content, "stop", "json").questions == tuple(QS)


@pytest.mark.parametrize(
    "content",
    [
        "1. What do glaciers carve?\n2. What are moraines?",
        "Here are two questions:\n- What do glaciers carve?\n- What are moraines?",
        "1) What do glaciers carve? 2) What are moraines?",
        "What do glaciers carve?\nWhat are moraines?",
        "Q1: What do glaciers carve?\nQ2: What are moraines?",
    ],
)
def test_lenient_reads_lists(content):
    assert not parse_reply(content, "stop", "json").ok
    assert parse_reply(content, "stop", "lenient").questions == tuple(QS)


def test_cut_off_replies():
    cut = '{"questions": ["What do glaciers carve?", "What are mor'
    assert parse_reply(cut, "length", "json").error == "reply cut off at the token limit"
    listed = "1. What do glaciers carve?\n2. What are moraines?\n3. Why do glac"
    got = parse_reply(listed, "length", "lenient")
    assert got.questions == tuple(QS) and "cut off" in got.note
    assert not parse_reply("1. Why do glac", "length", "lenient").ok


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "empty reply"),
        ("   ", "empty reply"),
        ("I cannot help with that.", "not JSON"),
        ('{"answers": 3}', "wrong shape"),
        ('{"questions": [1, 2]}', "wrong shape"),
        ('{"questions": []}', "no questions"),
    ],
)
def test_unusable_replies_say_why(content, reason):
    got = parse_reply(content, "stop", "json")
    assert not got.ok and got.error.startswith(reason)


# -- filters ------------------------------------------------------------------------------------
def _unit(uid: str, text: str = PASSAGE, book: str = "geo") -> Unit:
    leaf = uid.split("#")[0]
    return Unit(uid, leaf, book, (f"{leaf}#p1",), text)


def test_each_filter_records_its_reason():
    units = {
        u.unit_id: u
        for u in (_unit("geo/1.1#u1"), _unit("geo/1.2#u1"), _unit("law/1#u1", book="law"))
    }
    cands = [
        Candidate("geo/1.1#u1", 1, "What do glaciers carve?"),
        Candidate("geo/1.1#u1", 2, "Glaciers carve valleys."),
        Candidate("geo/1.1#u1", 3, "Why?"),
        Candidate("geo/1.1#u1", 4, "What " + "very " * 80 + "long?"),
        Candidate("geo/1.1#u1", 5, "Glaciers carve U-shaped valleys as they move?"),
        Candidate("geo/1.2#u1", 1, "what do GLACIERS carve ?"),  # duplicate in the same book
        Candidate("law/1#u1", 1, "What do glaciers carve?"),  # other book: kept
        Candidate("geo/1.2#u1", 2, "What does the passage say about moraines?"),
    ]
    kept, dropped = filter_questions(cands, units, FilterConfig())
    reasons = {c.position if c.unit_id == "geo/1.1#u1" else c.unit_id: r for c, r in dropped}
    assert reasons == {
        2: "not a question",
        3: "too short",
        4: "too long",
        5: "copies the unit text",
        "geo/1.2#u1": "duplicate",
    }
    assert [c.text for c in kept] == [
        "What do glaciers carve?",
        "What do glaciers carve?",
        "What does the passage say about moraines?",
    ]
    _, dropped = filter_questions(cands, units, FilterConfig(drop_self_reference=True))
    assert ("refers to the passage") in {r for _, r in dropped}


def test_title_leakage_only_when_asked():
    units = {"geo/1.1#u1": _unit("geo/1.1#u1")}
    cands = [Candidate("geo/1.1#u1", 1, "How do glacial valleys form in mountains?")]
    titles = {"geo/1.1": "Glacial Valleys"}
    assert filter_questions(cands, units, FilterConfig(), titles=titles)[0]
    kept, dropped = filter_questions(
        cands, units, FilterConfig(drop_title_leakage=True), titles=titles
    )
    assert not kept and dropped[0][1] == "leaks the leaf title"


def test_extra_questions_beyond_the_request_are_dropped():
    units = {"geo/1.1#u1": _unit("geo/1.1#u1")}
    cands = [Candidate("geo/1.1#u1", i, f"What is fact number {i} here?") for i in range(1, 5)]
    kept, dropped = filter_questions(cands, units, FilterConfig(), limit={"geo/1.1#u1": 3})
    assert len(kept) == 3 and dropped[0][1] == "more than asked for"


# -- generation through the cache and a live server ---------------------------------------------
UNITS = [
    Unit("geo/1.1#u1", "geo/1.1", "geo", ("geo/1.1#p1",), "Basalt forms when lava cools quickly."),
    Unit("geo/1.1#u2", "geo/1.1", "geo", ("geo/1.1#p2",), "Granite cools slowly underground."),
    Unit("geo/1.2#u1", "geo/1.2", "geo", ("geo/1.2#p1",), "Fjords are drowned glacial valleys."),
]


def _generator(server, cache, strictness="json", **kw):
    cfg = ClientConfig(base_url=server.base_url, model="m", backoff_base=0.01, **kw)
    client = ChatClient(cfg)
    gen = GenerationConfig(n_questions=3, strictness=strictness)
    return QuestionGenerator(
        gen, cache, client, host=cfg.host, model=cfg.label, sampling=cfg.sampling
    ), client


def test_generation_caches_every_reply(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer() as server:
        gen, _ = _generator(server, cache)
        first = gen.run(UNITS)
        assert [o.unit_id for o in first] == [u.unit_id for u in UNITS]
        assert all(o.ok and len(o.questions) == 3 and o.requests == 1 for o in first)
        assert "basalt" in first[0].questions[0].lower()
        assert len(server.chat_records()) == 3
        again, _ = _generator(server, cache)
        second = again.run(UNITS)
        assert len(server.chat_records()) == 3  # nothing asked twice
        assert [o.questions for o in second] == [o.questions for o in first]
        assert all(o.requests == 0 for o in second)
    # Replay without any endpoint, or through another replica of the model: same questions,
    # and the host that answered is known.
    replay = QuestionGenerator(
        GenerationConfig(n_questions=3),
        cache,
        None,
        host="another-replica:8000",
        model="m",
        sampling=SamplingParams(),
    )
    assert [o.questions for o in replay.run(UNITS)] == [o.questions for o in first]
    assert replay.used_hosts == {f"127.0.0.1:{server.port}"}
    other_model = QuestionGenerator(
        GenerationConfig(n_questions=3),
        cache,
        None,
        host="x",
        model="m2",
        sampling=SamplingParams(),
    )
    assert not other_model.run(UNITS)[0].ok
    other = QuestionGenerator(
        GenerationConfig(n_questions=4),
        cache,
        None,
        host="x",
        model="m",
        sampling=SamplingParams(),
    )
    outcomes = other.run(UNITS)
    assert all(o.error == "not in the cache (replay mode)" for o in outcomes)
    # The build tells a missing reply from an unusable one by this flag, not by the message.
    assert all(o.not_cached for o in outcomes) and not any(o.not_cached for o in first)


def test_malformed_reply_gets_one_repair(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer() as server:
        server.inject(Fault.reply("Sure! Questions about basalt coming up."), match="Basalt")
        gen, _ = _generator(server, cache)
        outcomes = gen.run(UNITS)
        basalt = outcomes[0]
        assert basalt.ok and basalt.repaired and basalt.requests == 2
        repair_body = next(r.body for r in server.chat_records() if len(r.body["messages"]) > 2)
        assert repair_body["messages"][-2]["content"] == "Sure! Questions about basalt coming up."
        assert "not JSON" in repair_body["messages"][-1]["content"]
        # The unusable first reply is cached too: a rerun replays both and asks nothing.
        n = len(server.chat_records())
        gen2, _ = _generator(server, cache)
        assert gen2.run(UNITS)[0].questions == basalt.questions
        assert len(server.chat_records()) == n


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (Fault.truncated(), "reply cut off at the token limit"),
        (Fault.reply('{"answer": "none"}'), "wrong shape"),
        (Fault.reply(""), "empty reply"),
    ],
)
def test_unrepairable_units_fail_with_a_reason_and_the_rest_goes_on(tmp_path, fault, reason):
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer() as server:
        server.inject(fault, times=2, match="Granite")
        gen, _ = _generator(server, cache)
        outcomes = gen.run(UNITS)
    failed = outcomes[1]
    assert not failed.ok and failed.repaired and failed.requests == 2
    assert failed.error.startswith(reason) and "after repair" in failed.error
    assert outcomes[0].ok and outcomes[2].ok


def test_transport_failures_are_not_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer() as server:
        server.inject(Fault.http(500), times=2, match="Fjords")
        gen, _ = _generator(server, cache, max_attempts=2)
        outcomes = gen.run(UNITS)
        assert outcomes[2].error == "request failed: HTTP 500"
        assert len(cache) == 2
        gen2, _ = _generator(server, cache)
        assert gen2.run(UNITS)[2].ok  # asked again on the rerun, and answered
        hashes = [r.messages_hash for r in server.chat_records()]
        assert len(hashes) == 5 and len(set(hashes)) == 3


def test_lenient_mode_for_list_replies(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer(
        reply=lambda msgs, body: "1. What is basalt?\n2. How does it form?"
    ) as server:
        strict, _ = _generator(server, cache, strictness="json")
        assert not strict.run(UNITS[:1])[0].ok
        lenient, _ = _generator(server, cache, strictness="lenient")
        got = lenient.run(UNITS[:1])[0]
        assert got.ok and got.questions == ("What is basalt?", "How does it form?")
        # Different strictness, same requests: the replies came from the cache.
        assert len({r.messages_hash for r in server.chat_records()}) == 2


def test_messages_hash_matches_the_cache(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    with FakeOpenAIServer() as server:
        gen, _ = _generator(server, cache)
        gen.run(UNITS)
        assert {r.messages_hash for r in server.chat_records()} == cache.request_hashes()
    assert messages_hash([{"role": "user", "content": "x"}]) == messages_hash(
        ({"content": "x", "role": "user"},)
    )
