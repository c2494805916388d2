"""Text analysis shared by the lexical and tree baselines: tokenizer, sentences, chunks.

Tokenizer (:class:`Analyzer`), applied to documents and queries alike:

1. Unicode NFKC normalisation, then ``str.casefold`` (when ``lowercase``).
2. Words are maximal runs of Unicode letters and digits (``[^\\W_]+``): punctuation, symbols and
   underscores separate words, so ``child's`` → ``child``, ``s`` and ``2-year-old`` → ``2``,
   ``year``, ``old``.
3. Words shorter than ``min_length`` characters are dropped (default 2, as in scikit-learn and
   bm25s, which removes the ``s`` of possessives).
4. Optional English stopword removal (:data:`ENGLISH_STOPWORDS`, our own list of function words).
5. Optional Snowball English stemming (PyStemmer; ``pip install PyStemmer``).

Sentences (:func:`split_sentences`): blank lines end paragraphs; inside a paragraph, line breaks
are spaces, and a sentence ends after ``.``, ``!``, ``?`` or ``…`` (plus closing quotes or
brackets) that is followed by white space and an upper-case letter, a digit or an opening quote
or bracket — unless the word before the full stop is a known abbreviation (``e.g.``, ``Dr.``)
or a single letter (an initial).

Chunks (:func:`pack_sentences`): consecutive sentences packed greedily up to a token cap; a
sentence longer than the cap is cut into pieces at word boundaries first.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from searchtome.errors import SearchTomeError

_WORD_RE = re.compile(r"[^\W_]+")

# Function words only; content words that happen to be frequent (child, development) stay.
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "also",
        "may",
        "might",
        "must",
        "shall",
        "upon",
        "within",
        "without",
        "whether",
        "yet",
        "via",
        "per",
        "etc",
    ]
)

STOPWORD_LISTS: dict[str, frozenset[str]] = {"none": frozenset(), "english": ENGLISH_STOPWORDS}
STEMMERS: tuple[str, ...] = ("none", "english")


@dataclass(frozen=True)
class Analyzer:
    """The documented tokenizer; one instance per configuration, reusable and picklable."""

    lowercase: bool = True
    stopwords: str = "none"
    stemmer: str = "none"
    min_length: int = 2

    def __post_init__(self) -> None:
        if self.stopwords not in STOPWORD_LISTS:
            from searchtome.errors import unknown_name

            raise unknown_name("stopword list", self.stopwords, STOPWORD_LISTS)
        if self.stemmer not in STEMMERS:
            from searchtome.errors import unknown_name

            raise unknown_name("stemmer", self.stemmer, STEMMERS)
        if self.min_length < 1:
            raise SearchTomeError(f"min_length must be at least 1, not {self.min_length}")

    @cached_property
    def _stem(self) -> Callable[[list[str]], list[str]] | None:
        if self.stemmer == "none":
            return None
        try:
            import Stemmer  # PyStemmer: the Snowball stemmers compiled
        except ImportError:
            raise SearchTomeError(
                "stemmer='english' needs PyStemmer; run: pip install PyStemmer"
            ) from None
        return Stemmer.Stemmer(self.stemmer).stemWords

    def tokenize(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text)
        if self.lowercase:
            text = text.casefold()
        stop = STOPWORD_LISTS[self.stopwords]
        words = [
            w for w in _WORD_RE.findall(text) if len(w) >= self.min_length and w.lower() not in stop
        ]
        stem = self._stem
        return stem(words) if stem is not None else words

    def __call__(self, text: str) -> list[str]:
        return self.tokenize(text)

    def tokenize_many(self, texts: Sequence[str]) -> list[list[str]]:
        return [self.tokenize(t) for t in texts]


# -- sentences -----------------------------------------------------------------------------------

_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "cf",
        "vs",
        "al",
        "fig",
        "figs",
        "eq",
        "eqs",
        "no",
        "nos",
        "vol",
        "vols",
        "ed",
        "eds",
        "pp",
        "p",
        "ch",
        "sec",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "st",
        "jr",
        "sr",
        "inc",
        "ltd",
        "co",
        "corp",
        "dept",
        "approx",
        "est",
        "min",
        "max",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
        "u.k",
    ]
)
_PARA_RE = re.compile(r"\n\s*\n")
_SPACE_RE = re.compile(r"\s+")
# Candidate boundary: end punctuation, optional closers, white space, then a plausible start.
_BOUNDARY_RE = re.compile(r"([.!?…]+[\"'”’)\]]*)\s+(?=[\"'“‘(\[]?[A-Z0-9])")


def _ends_with_abbreviation(text: str) -> bool:
    word = text.rsplit(None, 1)[-1] if text.strip() else ""
    word = word.rstrip(".").lstrip("([\"'“‘").lower()
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` in order, white space collapsed; empty text gives ``[]``."""
    sentences: list[str] = []
    for para in _PARA_RE.split(text):
        para = _SPACE_RE.sub(" ", para).strip()
        if not para:
            continue
        start = 0
        for match in _BOUNDARY_RE.finditer(para):
            end = match.end(1)
            candidate = para[start:end]
            if match.group(1).startswith(".") and _ends_with_abbreviation(candidate):
                continue
            if candidate.strip():
                sentences.append(candidate.strip())
            start = match.end()
        tail = para[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


# -- token-capped chunks -------------------------------------------------------------------------

TokenCounter = Callable[[Sequence[str]], list[int]]


def word_counter(texts: Sequence[str]) -> list[int]:
    """A model-free token count (white-space words), for callers without a tokenizer."""
    return [len(t.split()) for t in texts]


def split_long(text: str, max_tokens: int, count: TokenCounter) -> list[str]:
    """Cut ``text`` at word boundaries into pieces of at most ``max_tokens`` tokens.

    A single word longer than the cap becomes a piece of its own (the encoder truncates it).
    """
    words = text.split()
    pieces: list[str] = []
    start = 0
    while start < len(words):
        # Binary search for the longest prefix that fits: O(log n) counter calls per piece.
        lo, hi = start + 1, len(words)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count([" ".join(words[start:mid])])[0] <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        pieces.append(" ".join(words[start:lo]))
        start = lo
    return pieces


def pack_sentences(
    sentences: Sequence[str], max_tokens: int, count: TokenCounter = word_counter
) -> list[list[str]]:
    """Group consecutive sentences into chunks of at most ``max_tokens`` tokens (greedy).

    Token counts are additive approximations (sentences counted separately), which can only
    undercount by the few tokens a tokenizer merges across a boundary; the encoder truncates at
    its own limit in any case.
    """
    if max_tokens < 1:
        raise SearchTomeError(f"the token cap must be positive, not {max_tokens}")
    units: list[tuple[str, int]] = []
    counts = count(list(sentences)) if sentences else []
    for sentence, n in zip(sentences, counts, strict=True):
        if n <= max_tokens:
            units.append((sentence, n))
        else:
            for piece in split_long(sentence, max_tokens, count):
                units.append((piece, count([piece])[0]))
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for sentence, n in units:
        if current and size + n > max_tokens:
            chunks.append(current)
            current, size = [], 0
        current.append(sentence)
        size += n
    if current:
        chunks.append(current)
    return chunks
