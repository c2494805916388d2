"""``searchtome build``: the command line of :func:`searchtome.generate.pipeline.build`.

Every build option defaults to ``argparse.SUPPRESS``, so the parsed namespace holds exactly the
flags the user typed; those are the explicit layer of the one precedence rule
(:func:`searchtome.config.make_config`): ``BuildOptions`` defaults < a dataset's recorded
settings (``--settings-from``) < explicit flags. Help texts quote the defaults from
``BuildOptions`` itself, so each default is written once.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from searchtome.config import field_default
from searchtome.generate.options import LOCAL_DEFAULTS, REMOTE_DEFAULTS, BuildOptions
from searchtome.generate.questions import DEFAULT_PROMPT, FEWSHOT_PROMPT, STRICTNESS, FilterConfig
from searchtome.generate.splits import RULES
from searchtome.llm.client import DEFAULT_MODEL

# argparse dest → BuildOptions key (dotted for a filter) where the two differ.
_RENAMED = {
    "no_repair": "repair",
    "no_leaves_in_train": "leaves_in_train",
    "no_card": "card",
    "min_question_chars": "filters.min_chars",
    "max_question_chars": "filters.max_chars",
    "drop_title_leakage": "filters.drop_title_leakage",
    "drop_self_reference": "filters.drop_self_reference",
    "no_language_check": "filters.check_language",
}
_NEGATED = {"no_repair", "no_leaves_in_train", "no_card", "no_language_check"}


def _default(name: str) -> str:
    return f"(default: {field_default(BuildOptions, name)})"


def _endpoint_default(what: str, key: str) -> str:
    """Help naming both defaults, read from the tables the build itself uses."""
    remote, local = REMOTE_DEFAULTS[key], LOCAL_DEFAULTS[key]
    if remote == local:
        return f"{what} (default: {remote}, --endpoint local too)"
    return f"{what} (default: {remote}; {local} with --endpoint local)"


def _parse_books(text: str | None) -> tuple[str, ...] | None:
    if not text:
        return None
    ids = tuple(dict.fromkeys(b.strip() for b in text.split(",") if b.strip()))
    return ids or None


def _n_questions(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not JSON: {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"top_k\": 40}'")
    return value


def explicit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The build options the user typed, as ``BuildOptions`` keys (dotted for filters)."""
    from searchtome.generate.splits import parse_ratios

    fields = set(BuildOptions.__dataclass_fields__)
    given: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if dest not in fields and dest not in _RENAMED:
            continue  # global flags, --settings-from, --check-against
        if dest in _NEGATED:
            value = not value
        if dest == "split_ratios":
            value = parse_ratios(value) if value else None
        given[_RENAMED.get(dest, dest)] = value
    if "seed" in given and "split_seed" not in given:
        # --seed also seeds the split; with --settings-from it moves the recorded split too.
        given["split_seed"] = None
    return given


def options_from_args(args: argparse.Namespace) -> BuildOptions:
    """Defaults < the recorded settings of ``--settings-from`` < the flags given."""
    from searchtome.config import make_config
    from searchtome.generate.manifest import read_recorded_settings

    given = explicit_options(args)
    if not args.settings_from:
        return make_config(BuildOptions, None, given, typed=True)
    recorded = read_recorded_settings(args.settings_from)
    recorded.check_pdf_dir(given_pdf_dir="pdf_dir" in given)
    opts = make_config(BuildOptions, recorded.values, given, source=str(recorded.path), typed=True)
    if "prompt" not in given:
        recorded.check_prompt(opts.prompt)
    return opts


def _command(args: argparse.Namespace) -> int:
    from searchtome.generate.manifest import compare_files
    from searchtome.generate.pipeline import build

    opts = options_from_args(args)
    blind = getattr(args, "blind", None)
    if blind:  # a complete build into scratch, then split into public and private folders
        from dataclasses import replace

        from searchtome.dataset.blind import blind_release

        held: list[Any] = []
        release = blind_release(
            lambda out: held.append(build(replace(opts, out=out))),
            opts.out,
            blind,
            getattr(args, "private", None),
        )
        summary = held[0]
        print(summary.render())
        print(f"blind {blind} split: {release.n_blind} queries; gold in {release.private}")
        return 0
    summary = build(opts)
    print(summary.render())
    if args.check_against:
        problems = compare_files(opts.out, args.check_against)
        if problems:
            print(
                f"searchtome: {len(problems)} file(s) differ from {args.check_against}:",
                file=sys.stderr,
            )
            for line in problems[:20]:
                print(f"  {line}", file=sys.stderr)
            return 4
        print(f"  identical to {args.check_against} (every file's SHA-256 matches)")
    if summary.transient_failures:
        print(
            f"searchtome: {len(summary.transient_failures)} unit(s) got no answer from the "
            "endpoint; rerun the same command to retry only those",
            file=sys.stderr,
        )
        return 3
    return 0


def _add_book_options(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("books")
    src.add_argument(
        "--catalog",
        type=Path,
        metavar="FILE",
        help="catalog TOML (default: the packaged catalog v2, the paper's 18 books); with --pdf-dir: optional [[books]] metadata (domain, title, licence)",
    )
    src.add_argument("--books", type=_parse_books, metavar="ID,...", help="only these book ids")
    src.add_argument(
        "--source-dir", type=Path, metavar="DIR", help="folder with already-downloaded PDFs"
    )
    src.add_argument(
        "--pdf-dir",
        type=Path,
        metavar="DIR",
        help="build from every *.pdf in DIR (book id from the file name, domain 'unknown' unless --catalog says)",
    )
    src.add_argument(
        "--infer-toc",
        action="store_true",
        help="infer headings from the layout when a PDF has no outline",
    )


def _add_generation_options(p: argparse.ArgumentParser) -> None:
    llm = p.add_argument_group("question generation")
    llm.add_argument(
        "--endpoint",
        action="append",
        metavar="URL|local|cache",
        help="OpenAI-compatible base URL (e.g. http://localhost:8000/v1); repeat it (or separate "
        "URLs with commas) for replicas of one model: requests go to the least busy, a failing "
        "one is taken out with back-off; 'local' (SmolLM2-135M served on this machine) or "
        "'cache' (replay the reply cache only) stand alone; default: $OPENAI_BASE_URL "
        "(comma-separated for several)",
    )
    llm.add_argument(
        "--base-url", dest="endpoint", action="append", metavar="URL", help="same as --endpoint"
    )
    llm.add_argument(
        "--api-key",
        metavar="KEY",
        help="API key (default: $OPENAI_API_KEY; never written anywhere)",
    )
    llm.add_argument(
        "--model",
        metavar="NAME",
        help=f"model name (default: {DEFAULT_MODEL}; SmolLM2-135M-Instruct with --endpoint local)",
    )
    llm.add_argument("--seed", type=int, help=f"sampling seed and split seed {_default('seed')}")
    llm.add_argument(
        "--questions-per-unit",
        type=_n_questions,
        metavar="N|auto",
        help="questions asked per unit; 'auto' scales 2-10 with unit length "
        "(default: auto; 6 with --endpoint local)",
    )
    llm.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help=_endpoint_default("requests in flight over all endpoints", "concurrency"),
    )
    llm.add_argument(
        "--prompt",
        metavar="VERSION|FILE",
        help=f"prompt template (default: {DEFAULT_PROMPT}; {FEWSHOT_PROMPT} with --endpoint local)",
    )
    llm.add_argument(
        "--strictness",
        choices=STRICTNESS,
        help="how replies are read (default: json; lenient with --endpoint local)",
    )
    llm.add_argument(
        "--no-repair", action="store_true", help="no repair request after an unusable reply"
    )
    llm.add_argument("--temperature", type=float, help=_default("temperature"))
    llm.add_argument("--top-p", type=float, help="nucleus sampling (default: the server's)")
    llm.add_argument("--presence-penalty", type=float, help="(default: the server's)")
    llm.add_argument("--frequency-penalty", type=float, help="(default: the server's)")
    llm.add_argument("--max-tokens", type=int, help=_endpoint_default("reply budget", "max_tokens"))
    llm.add_argument("--stop", action="append", metavar="TEXT", help="stop sequence (repeatable)")
    llm.add_argument(
        "--sampling-extra",
        type=_json_object,
        metavar="JSON",
        help="extra request fields, e.g. '{\"top_k\": 40}'",
    )
    llm.add_argument(
        "--timeout",
        type=float,
        help="seconds per request (default: 120; with --endpoint local 120 per batch a request "
        "may wait behind, 240 at the default concurrency)",
    )
    llm.add_argument(
        "--max-attempts",
        type=int,
        help=f"tries per request on 429/5xx/timeouts {_default('max_attempts')}",
    )
    llm.add_argument(
        "--max-failed-units",
        type=float,
        metavar="SHARE",
        help="fail, writing nothing, when more than this share of units failed "
        f"{_default('max_failed_units')}; 1 writes whatever was answered",
    )
    llm.add_argument(
        "--cache",
        type=Path,
        metavar="FILE",
        help="reply cache (default: $SEARCHTOME_HOME/llm/responses.sqlite)",
    )


def _add_unit_and_split_options(p: argparse.ArgumentParser) -> None:
    flt = p.add_argument_group("units and filters")
    flt.add_argument(
        "--unit-min-chars",
        type=int,
        help=f"merge shorter paragraphs into the next {_default('unit_min_chars')}",
    )
    flt.add_argument(
        "--unit-drop-below",
        type=int,
        help=f"leave out units shorter than this {_default('unit_drop_below')}",
    )
    flt.add_argument(
        "--min-question-chars",
        type=int,
        metavar="N",
        help=f"drop shorter questions (default: {FilterConfig.min_chars})",
    )
    flt.add_argument(
        "--max-question-chars",
        type=int,
        metavar="N",
        help=f"drop longer questions (default: {FilterConfig.max_chars})",
    )
    flt.add_argument(
        "--drop-title-leakage",
        action="store_true",
        help="drop questions that contain their leaf's title",
    )
    flt.add_argument(
        "--no-language-check",
        action="store_true",
        help="keep questions written in another language (script or function words) than "
        "their passage",
    )
    flt.add_argument(
        "--drop-self-reference",
        action="store_true",
        help="drop questions that mention 'the passage'/'the text'",
    )
    spl = p.add_argument_group("splits")
    spl.add_argument("--split-rule", choices=RULES, help=_default("split_rule"))
    spl.add_argument(
        "--split-ratios",
        metavar="TRAIN,DEV,TEST",
        help="default: the paper's shares over its 18 books, 62458,24502,103249 "
        "(32.8/12.9/54.3 %%); with --endpoint local its The Whole Child figures, 1056,388,1746",
    )
    spl.add_argument("--split-seed", type=int, help="default: --seed")
    spl.add_argument(
        "--no-leaves-in-train",
        action="store_true",
        help="do not force one unit of every leaf into train",
    )


def _add_output_options(p: argparse.ArgumentParser) -> None:
    out = p.add_argument_group("output")
    out.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="dataset folder to write (replaced atomically)",
    )
    out.add_argument("--name", help="dataset name (default: the catalog's)")
    out.add_argument("--description", help="one-paragraph description for the card")
    out.add_argument("--no-card", action="store_true", help="do not write README.md")
    # Not build options: these two always have a value.
    out.add_argument(
        "--settings-from",
        type=Path,
        default=None,
        metavar="DATASET|MANIFEST",
        help="take every data-shaping setting (model, prompt, sampling, units, filters, splits) "
        "from an existing dataset's manifest.json, to rebuild it",
    )
    out.add_argument(
        "--check-against",
        type=Path,
        default=None,
        metavar="DATASET|MANIFEST",
        help="after building, compare every file's SHA-256 with this dataset's manifest; "
        "exit 4 when any differs",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "build",
        # Only the flags given land in the namespace: they are the explicit layer.
        argument_default=argparse.SUPPRESS,
        help="build a SearchTome dataset: fetch, extract, generate questions, split, write",
        description="Build a dataset from a catalog (or any folder of PDFs): fetch and verify "
        "the PDFs, extract ToC leaves and paragraphs, ask an OpenAI-compatible endpoint for "
        "questions about every generation unit (replies cached; a rerun resumes), filter, "
        "split, and write parquet files + manifest.json + README.md to --out.",
    )
    _add_book_options(p)
    _add_generation_options(p)
    _add_unit_and_split_options(p)
    _add_output_options(p)
    p.add_argument(
        "--blind",
        metavar="SPLIT",
        help="write a blind release: SPLIT's gold and units go to --private, ids become opaque",
    )
    p.add_argument(
        "--private",
        metavar="DIR",
        help="private folder of a --blind release (default: OUT-private)",
    )
    p.set_defaults(func=_command)
