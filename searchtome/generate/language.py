"""A cheap check that a question is written in its passage's language.

Two signals, both computed from the unit's own text (so it works for books whose catalog entry
names no language, such as a ``--pdf-dir`` build):

* **script** — the writing system most of the letters belong to (Latin, Cyrillic, Greek, Arabic,
  Hebrew, CJK, Devanagari, ...), from :func:`unicodedata.name`. A question whose letters are
  mostly in another script than the passage's is in another language.
* **stop words** — for Latin-script text, the language (en, pt, es, fr, de, it, nl) whose
  function words occur most. A question with at least two function words of another language
  and none of the passage's is in that other language (English questions about a Portuguese
  book: Mixtral answers English prompts in English).

The rules only fire on clear evidence: a short question, a passage with too few function words,
or words shared by two languages never drop anything.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache

# Function words, space-separated (split once below).
_STOPWORD_TEXT = {
    "en": "the is are was were what which who whom whose how why when where does do did of and "
    "to for with this that these those an be been has have can should would from by",
    "pt": "os as um uma do da dos das em no na nos nas é são que qual quais como por para não "
    "com ao aos pelo pela se mais ou quando onde porque",
    "es": "el la los las es son que cuál cuáles cómo por para del en un una qué con se al lo "
    "cuando donde porque más está",
    "fr": "le la les est sont que quel quelle quels comment pour des du un une dans avec qui "
    "pourquoi au aux ce cette ou où sur pas",
    "de": "der die das ist sind und wie welche welcher warum nicht mit für von den dem ein eine "
    "im zu auf wird werden oder",
    "it": "il lo gli le è sono che quale quali come per del della dei delle un una con perché "
    "nel nella non",
    "nl": "de het een is zijn wat welke hoe waarom niet met voor van en op te wordt",
}
_STOPWORDS = {lang: frozenset(text.split()) for lang, text in _STOPWORD_TEXT.items()}
_WORD = re.compile(r"[^\W\d_]+")
_MIN_LETTERS = 4  # fewer letters say nothing about a script
_MIN_TEXT_HITS = 3  # function words a passage needs before its language is trusted


def _script(ch: str) -> str:
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return "OTHER"
    for prefix, script in (
        ("CJK", "CJK"),
        ("HIRAGANA", "CJK"),
        ("KATAKANA", "CJK"),
        ("HANGUL", "HANGUL"),
    ):
        if name.startswith(prefix):
            return script
    return name.split(" ", 1)[0]


def cjk_chars(text: str) -> int:
    """Han, Hiragana and Katakana characters: words are not separated by spaces there."""
    return sum(1 for ch in text if ch.isalpha() and _script(ch) == "CJK")


def scripts(text: str) -> Counter[str]:
    """Letters per script (``LATIN``, ``CYRILLIC``, ``CJK``...)."""
    if text.isascii():  # the common case, without a name lookup per letter
        return Counter({"LATIN": sum(ch.isalpha() for ch in text)})
    return Counter(_script(ch) for ch in text if ch.isalpha())


def stopword_hits(text: str) -> Counter[str]:
    """Function words per language."""
    hits: Counter[str] = Counter()
    for word in _WORD.findall(text.lower()):
        for lang, words in _STOPWORDS.items():
            if word in words:
                hits[lang] += 1
    return hits


@lru_cache(maxsize=4096)
def text_language(text: str) -> tuple[str | None, str | None]:
    """``(script, stop-word language)`` of a passage; either ``None`` when unclear."""
    found = scripts(text)
    script = found.most_common(1)[0][0] if found else None
    hits = stopword_hits(text[:4000]) if script == "LATIN" else Counter()
    ranked = hits.most_common(2)
    language = None
    clear = len(ranked) == 1 or (len(ranked) > 1 and ranked[0][1] >= 1.5 * ranked[1][1])
    if ranked and ranked[0][1] >= _MIN_TEXT_HITS and clear:
        language = ranked[0][0]
    return script, language


def language_problem(question: str, passage: str) -> str | None:
    """Why ``question`` is not in ``passage``'s language (``None`` when it is, or unclear)."""
    script, language = text_language(passage)
    letters = scripts(question)
    total = sum(letters.values())
    if script and total >= _MIN_LETTERS and letters[script] < 0.5 * total:
        other = letters.most_common(1)[0][0].lower()
        return f"{other} script, the passage is {script.lower()}"
    if language:
        hits = stopword_hits(question)
        if hits[language] == 0:
            others = [(n, lang) for lang, n in hits.items() if n >= 2]
            if others:
                return f"looks {max(others)[1]}, the passage {language}"
    return None
