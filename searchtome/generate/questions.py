"""Questions from generation units: prompt templates, reply parsing, repair, filters.

Prompt templates are package data (``searchtome/prompts/<version>.txt``): ``[system]``,
``[user]`` and ``[assistant]`` sections make the chat (few-shot examples are just earlier
user/assistant pairs), ``[repair]`` is the follow-up sent once when a reply cannot be used.
Placeholders use ``$name`` so JSON braces in a template need no escaping.

Replies are read by :mod:`searchtome.generate.replies` (strictness levels, size and count
caps). A reply that cannot be used (empty, cut off, not JSON, wrong shape, no questions, too
large) gets one repair attempt; if that fails too the unit is recorded as failed with its reason
and the build goes on. A reply is screened before it is cached, and a cached reply that cannot
be used is asked again by a live build (``refresh``): a poisoned cache never blocks a rerun.
"""

from __future__ import annotations

import asyncio
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from searchtome.errors import SearchTomeError, unknown_name
from searchtome.generate.language import cjk_chars, language_problem

# Replies are read in replies.py; these names are re-exported for code that imports them here.
from searchtome.generate.replies import STRICTNESS as STRICTNESS
from searchtome.generate.replies import ParsedReply, parse_reply, question_cap, screen_reply
from searchtome.generate.replies import clean_question as clean_question
from searchtome.io import sha256_text
from searchtome.llm.cache import CacheKey, ResponseCache
from searchtome.llm.client import ChatClient, SamplingParams
from searchtome.records import Unit

log = logging.getLogger(__name__)

DEFAULT_PROMPT = "questions-v1"
FEWSHOT_PROMPT = "questions-v1-fewshot"
DEFAULT_N_QUESTIONS = 6
_SECTION = re.compile(r"^\[(system|user|assistant|repair)\]\s*$")


# -- prompt templates ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PromptTemplate:
    """A versioned chat template; ``fingerprint`` changes whenever its text does."""

    version: str
    messages: tuple[tuple[str, str], ...]
    repair: str
    sha256: str

    @property
    def fingerprint(self) -> str:
        """What cache keys record: the version plus a short hash of the template text."""
        return f"{self.version}@{self.sha256[:12]}"

    def render(self, passage: str, n: int) -> tuple[dict[str, str], ...]:
        values = {"passage": passage.strip(), "n": str(n)}
        return tuple(
            {"role": role, "content": Template(text).safe_substitute(values)}
            for role, text in self.messages
        )

    def render_repair(
        self, messages: Sequence[Mapping[str, str]], reply: str | None, reason: str, n: int
    ) -> tuple[dict[str, str], ...]:
        """The original chat, the unusable reply, and the repair request."""
        follow_up = Template(self.repair).safe_substitute({"reason": reason, "n": str(n)})
        return (
            *(dict(m) for m in messages),
            {"role": "assistant", "content": reply or ""},
            {"role": "user", "content": follow_up},
        )


def parse_template(text: str, version: str, source: str = "<string>") -> PromptTemplate:
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = _SECTION.match(line)
        if match:
            sections.append((match.group(1), []))
        elif sections:
            sections[-1][1].append(line)
        elif line.strip() and not line.startswith("#"):
            raise SearchTomeError(f"{source}: text before the first [section] header: {line!r}")
    messages = [(role, "\n".join(lines).strip()) for role, lines in sections if role != "repair"]
    repairs = ["\n".join(lines).strip() for role, lines in sections if role == "repair"]
    if not messages or messages[-1][0] != "user":
        raise SearchTomeError(f"{source}: a prompt template must end with a [user] section")
    if "$passage" not in messages[-1][1] and "${passage}" not in messages[-1][1]:
        raise SearchTomeError(f"{source}: the last [user] section must contain $passage")
    if len(repairs) != 1:
        raise SearchTomeError(f"{source}: a prompt template needs exactly one [repair] section")
    return PromptTemplate(version, tuple(messages), repairs[0], sha256_text(text))


def available_prompts() -> list[str]:
    folder = resources.files("searchtome") / "prompts"
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".txt"))


def load_prompt(name: str = DEFAULT_PROMPT) -> PromptTemplate:
    """A packaged template by version (``questions-v1``) or a template file by path."""
    path = Path(name)
    if path.suffix == ".txt" and path.is_file():
        return parse_template(path.read_text(encoding="utf-8"), path.stem, str(path))
    resource = resources.files("searchtome") / "prompts" / f"{name}.txt"
    if not resource.is_file():
        raise unknown_name("prompt", name, available_prompts())
    return parse_template(resource.read_text(encoding="utf-8"), name, f"prompts/{name}.txt")


# -- how many questions ---------------------------------------------------------------------------
# The independent reproduction of The Whole Child scaled the count with unit length; "auto"
# uses the same steps (2/4/6/8/10 questions up to 100/250/500/1000/more characters).
_AUTO_STEPS = ((100, 2), (250, 4), (500, 6), (1000, 8))


def questions_for(text: str, n: int | str) -> int:
    if n == "auto":
        size = len(text)
        for limit, count in _AUTO_STEPS:
            if size <= limit:
                return count
        return 10
    count = int(n)
    if count < 1:
        raise SearchTomeError(f"questions per unit must be at least 1, got {count}")
    return count


# -- filters ------------------------------------------------------------------------------------
_SELF_REF = re.compile(
    r"\b(?:the|this|that|these|given) (?:passage|text|excerpt|paragraph|article|author)s?\b", re.I
)


def normalise(text: str) -> str:
    """Lowercase words only: the form duplicates and copies are compared in."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(re.findall(r"\w+", text))


@dataclass(frozen=True)
class FilterConfig:
    """Which questions to drop. Each drop is recorded with its reason."""

    min_chars: int = 15
    max_chars: int = 300
    min_words: int = 3
    require_question_mark: bool = True
    copy_min_words: int = 6  # a copy shares a run of at least this many words with the unit…
    copy_fraction: float = 0.8  # …covering at least this share of the question
    drop_title_leakage: bool = False
    drop_self_reference: bool = False
    check_language: bool = True  # drop questions in another language than their passage

    def to_dict(self) -> dict[str, Any]:
        """The manifest's record. ``check_language`` is recorded only when turned off: the
        default adds no key, so existing datasets' manifests (and their bytes) rebuild identical."""
        from dataclasses import asdict

        out = asdict(self)
        if out["check_language"]:
            del out["check_language"]
        return out


# What ends a question: "?" and its full-width, Arabic, Ethiopic and Armenian forms.
QUESTION_MARKS = ("?", "？", "؟", "፧", "՞")


def _tokens(text: str) -> list[str]:
    """Words of ``normalise(text)``, Han and kana runs cut into characters (no spaces there)."""
    out: list[str] = []
    for word in normalise(text).split():
        out += list(word) if not word.isascii() and cjk_chars(word) else [word]
    return out


def is_copy(question: str, text: str, cfg: FilterConfig) -> bool:
    q = _tokens(question)
    t = _tokens(text)
    if not q or not t:
        return False
    match = SequenceMatcher(None, q, t, autojunk=False).find_longest_match(0, len(q), 0, len(t))
    # A question shorter than copy_min_words is a copy when the passage holds all of it.
    need = min(cfg.copy_min_words, len(q))
    return match.size >= need and match.size >= cfg.copy_fraction * len(q)


def leaks_title(question: str, title: str) -> bool:
    t = normalise(title)
    return len(t) >= 4 and f" {t} " in f" {normalise(question)} "


def question_problem(
    question: str, unit_text: str, cfg: FilterConfig, leaf_title: str | None = None
) -> str | None:
    """Why ``question`` should be dropped (``None`` to keep it); duplicates are checked apart."""
    if cfg.require_question_mark and not question.rstrip().endswith(QUESTION_MARKS):
        return "not a question"
    # Han and kana are written without spaces and carry about a word per character.
    cjk = 0 if question.isascii() else cjk_chars(question)
    words = len(normalise(question).split()) + cjk
    if len(question) + 2 * cjk < cfg.min_chars or words < cfg.min_words:
        return "too short"
    if len(question) > cfg.max_chars:
        return "too long"
    if cfg.check_language and language_problem(question, unit_text):
        return "not in the passage's language"
    if is_copy(question, unit_text, cfg):
        return "copies the unit text"
    if cfg.drop_self_reference and _SELF_REF.search(question):
        return "refers to the passage"
    if cfg.drop_title_leakage and leaf_title and leaks_title(question, leaf_title):
        return "leaks the leaf title"
    return None


@dataclass(frozen=True)
class Candidate:
    """A question as the model wrote it, with its 1-based position in the reply."""

    unit_id: str
    position: int
    text: str


def filter_questions(
    candidates: Iterable[Candidate],
    units: Mapping[str, Unit],
    cfg: FilterConfig,
    *,
    titles: Mapping[str, str] | None = None,
    limit: Mapping[str, int] | None = None,
) -> tuple[list[Candidate], list[tuple[Candidate, str]]]:
    """Apply the filters in order; duplicates are judged per book, first occurrence kept.

    ``candidates`` must come in document order (the build sorts them) so the same occurrence is
    kept every time. ``limit`` caps the questions kept per unit (models sometimes write more).
    """
    kept: list[Candidate] = []
    dropped: list[tuple[Candidate, str]] = []
    seen: dict[str, set[str]] = {}
    per_unit: dict[str, int] = {}
    for cand in candidates:
        unit = units[cand.unit_id]
        title = titles.get(unit.leaf_id) if titles else None
        problem = question_problem(cand.text, unit.text, cfg, title)
        norm = normalise(cand.text)
        book_seen = seen.setdefault(unit.book_id, set())
        if problem is None and norm in book_seen:
            problem = "duplicate"
        if problem is None and limit and per_unit.get(cand.unit_id, 0) >= limit[cand.unit_id]:
            problem = "more than asked for"
        if problem is not None:
            dropped.append((cand, problem))
            continue
        book_seen.add(norm)
        per_unit[cand.unit_id] = per_unit.get(cand.unit_id, 0) + 1
        kept.append(cand)
    return kept, dropped


# -- generation ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GenerationConfig:
    prompt: PromptTemplate = field(default_factory=load_prompt)
    n_questions: int | str = DEFAULT_N_QUESTIONS
    strictness: str = "json"
    repair: bool = True


@dataclass(frozen=True)
class UnitOutcome:
    """What generation gave for one unit: questions in reply order, or why it failed."""

    unit_id: str
    n_asked: int
    questions: tuple[str, ...] = ()
    error: str | None = None
    requests: int = 0  # requests actually sent (0 when everything came from the cache)
    repaired: bool = False
    note: str | None = None
    # Replay met a request the cache lacks: the reply is missing, not unusable (a live build
    # asks for it; `--endpoint cache` cannot).
    not_cached: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class NotCachedError(SearchTomeError):
    """Replay mode met a request that is not in the cache."""


class QuestionGenerator:
    """Runs the prompt over units through the cache and (when given) a live client.

    ``client=None`` replays the cache only: a missing reply is an error, never a request.
    ``model`` is the cache-key label (see :mod:`searchtome.llm.cache`); cached replies match
    whichever endpoint gave them. ``host`` is recorded for a reply that names no endpoint;
    ``prefer_hosts`` picks among an older cache's conflicting replies. Units in ``refresh`` are
    asked again whatever the cache holds (their cached replies could not be used).
    """

    def __init__(
        self,
        config: GenerationConfig,
        cache: ResponseCache,
        client: ChatClient | None,
        *,
        host: str,
        model: str,
        sampling: SamplingParams,
        prefer_hosts: Sequence[str] = (),
        refresh: Iterable[str] = (),
    ) -> None:
        self.config = config
        self.refresh = frozenset(refresh)
        self.prefer_hosts = tuple(prefer_hosts)
        self.cache = cache
        self.client = client
        self.host = host
        self.model = model
        self.sampling = sampling
        self.used_hosts: set[str] = set()
        self.missing: list[str] = []
        self._slots: asyncio.Semaphore | None = None

    @property
    def _replaying(self) -> bool:
        # Without a client the only error `_ask` gives is a reply missing from the cache.
        return self.client is None

    def _key(self, messages: Sequence[Mapping[str, str]]) -> CacheKey:
        return CacheKey(
            host=self.host,
            model=self.model,
            prompt_version=self.config.prompt.fingerprint,
            sampling=self.sampling.fingerprint(),
            messages=tuple(messages),
        )

    async def _ask(
        self, unit_id: str, messages: Sequence[Mapping[str, str]]
    ) -> tuple[str | None, str | None, str | None, bool]:
        """``(content, finish_reason, error, sent)`` from the cache or the endpoint (the cache is
        skipped for a unit in ``refresh``: its cached replies could not be used)."""
        key = self._key(messages)
        if unit_id not in self.refresh:
            hit = self.cache.get(key, prefer_hosts=self.prefer_hosts)
            if hit is not None:
                self.used_hosts.add(hit.host)
                return hit.content, hit.finish_reason, None, False
        if self.client is None:
            self.missing.append(unit_id)
            return None, None, "not in the cache (replay mode)", False
        # Another build on this cache asking the same: wait for its reply instead of paying twice.
        # A key is claimed only once a slot is free (as many as the client has in flight), so
        # two builds split the queue instead of one claiming every unit up front; a request
        # whose key another build holds waits outside the slots.
        claims, slots = self.cache.claims, self._slots or asyncio.Semaphore(1)
        delay = 0.05
        while True:
            async with slots:
                if claims.try_claim(key.key):
                    try:
                        # Another build may have answered it since our cache lookup (a unit
                        # in `refresh` is asked again whatever the cache holds).
                        hit = None
                        if unit_id not in self.refresh:
                            hit = self.cache.get(key, prefer_hosts=self.prefer_hosts)
                        if hit is not None:
                            self.used_hosts.add(hit.host)
                            return hit.content, hit.finish_reason, None, False
                        return await self._send(unit_id, key, messages)
                    finally:
                        claims.release(key.key)
            while claims.held(key.key):
                await asyncio.sleep(delay)
                delay = min(2 * delay, 1.0)
            hit = self.cache.get(key, prefer_hosts=self.prefer_hosts)
            if hit is not None:
                self.used_hosts.add(hit.host)
                return hit.content, hit.finish_reason, None, False

    async def _send(
        self, unit_id: str, key: CacheKey, messages: Sequence[Mapping[str, str]]
    ) -> tuple[str | None, str | None, str | None, bool]:
        assert self.client is not None
        result = await self.client.complete(messages, self.sampling, key=unit_id)
        if not result.ok:
            return None, None, f"request failed: {result.error}", True
        # Screened before it is cached: an 8 MB or non-Unicode reply is stored as a refusal.
        content, finish, served = screen_reply(
            result.content, result.finish_reason, result.served_model
        )
        # Commit before anything else: from here on this reply survives a kill.
        host = result.host or self.host
        self.cache.put(key, content, finish, served, host)
        self.used_hosts.add(host)
        return content, finish, None, True

    def _read(self, content: str | None, finish: str | None, n: int) -> ParsedReply:
        """The reply's questions or why it is unusable; a reply never stops the build."""
        try:
            return parse_reply(content, finish, self.config.strictness, question_cap(n))
        except SearchTomeError:
            raise  # a bad --strictness: the configuration, not the reply
        except Exception as exc:  # the reply is hostile input: fail its unit only
            log.debug("unreadable reply", exc_info=True)
            return ParsedReply((), f"unreadable reply ({type(exc).__name__})")

    async def generate_unit(self, unit: Unit) -> UnitOutcome:
        cfg = self.config
        n = questions_for(unit.text, cfg.n_questions)
        messages = cfg.prompt.render(unit.text, n)
        content, finish, error, sent = await self._ask(unit.unit_id, messages)
        requests = int(sent)
        if error:
            return UnitOutcome(
                unit.unit_id, n, error=error, requests=requests, not_cached=self._replaying
            )
        parsed = self._read(content, finish, n)
        if parsed.ok:
            return UnitOutcome(
                unit.unit_id, n, parsed.questions, requests=requests, note=parsed.note
            )
        if not cfg.repair:
            return UnitOutcome(unit.unit_id, n, error=parsed.error, requests=requests)
        first_error = parsed.error or "unusable reply"
        repair = cfg.prompt.render_repair(messages, content, first_error, n)
        content, finish, error, sent = await self._ask(unit.unit_id, repair)
        requests += int(sent)
        if error:
            return UnitOutcome(
                unit.unit_id,
                n,
                error=error,
                requests=requests,
                repaired=True,
                not_cached=self._replaying,
            )
        parsed = self._read(content, finish, n)
        if parsed.ok:
            return UnitOutcome(
                unit.unit_id,
                n,
                parsed.questions,
                requests=requests,
                repaired=True,
                note=parsed.note,
            )
        return UnitOutcome(
            unit.unit_id,
            n,
            error=f"{first_error}; after repair: {parsed.error}",
            requests=requests,
            repaired=True,
        )

    async def generate(
        self, units: Sequence[Unit], on_done: Callable[[UnitOutcome], None] | None = None
    ) -> list[UnitOutcome]:
        """Every unit (concurrency comes from the client); outcomes in ``units`` order."""
        from searchtome.llm.client import gather_or_cancel

        async def one(unit: Unit) -> UnitOutcome:
            outcome = await self.generate_unit(unit)
            if on_done is not None:
                on_done(outcome)
            return outcome

        if self.client is None:
            return await gather_or_cancel(one(u) for u in units)
        self._slots = asyncio.Semaphore(self.client.config.concurrency)  # bound to this loop
        async with self.client:
            return await gather_or_cancel(one(u) for u in units)

    def run(
        self, units: Sequence[Unit], on_done: Callable[[UnitOutcome], None] | None = None
    ) -> list[UnitOutcome]:
        return asyncio.run(self.generate(units, on_done))
