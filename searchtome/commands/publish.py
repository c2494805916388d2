"""``searchtome publish``: upload a dataset folder to the Hugging Face Hub.

The plan and the upload are :mod:`searchtome.dataset.publish`; this module only parses and prints.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "publish",
        help="upload a dataset folder to the Hugging Face Hub (one commit, then a tag)",
        description=(
            "Merge the dataset card, then upload the folder to a Hub dataset repository in one "
            "commit and tag it. The token comes from HF_TOKEN or the login cache. --dry-run "
            "prints the plan (files, sizes, card diff) without any network call."
        ),
    )
    p.add_argument("data", metavar="DATA", help="dataset folder")
    p.add_argument("--repo", required=True, metavar="ORG/NAME", help="dataset repository")
    p.add_argument("--revision", metavar="TAG", help="tag the commit with this name (e.g. v1.0)")
    p.add_argument("--private", action="store_true", help="create the repository as private")
    p.add_argument("--create-pr", action="store_true", help="open a pull request instead")
    p.add_argument("--dry-run", action="store_true", help="print the plan; no network, no writes")
    p.add_argument(
        "--allow-restricted",
        action="store_true",
        help="publish books whose terms forbid redistribution (only with the rights holder's "
        "permission)",
    )
    p.add_argument("--message", help="commit message")
    p.add_argument(
        "--blind",
        metavar="SPLIT",
        help="publish a blind release: SPLIT's gold, units and source ids are held back and "
        "ids become opaque; DATA itself is left as it is",
    )
    p.add_argument(
        "--held-back",
        metavar="DIR",
        help="where --blind writes the held-back gold, never uploaded (default: DATA-private); "
        "score against it with --qrels DIR",
    )
    p.set_defaults(func=_run_publish)


def _run_publish(args: argparse.Namespace) -> int:
    if args.held_back and not args.blind:
        from searchtome.errors import SearchTomeError

        raise SearchTomeError("--held-back goes with --blind SPLIT")
    return _publish_blind(args) if args.blind else _publish(args)


def _publish_blind(args: argparse.Namespace) -> int:
    """Split DATA into a public and a held-back half in scratch space; upload the public one.

    The held-back half is written to --held-back only by a real publish (a dry run writes
    nothing outside its scratch folder, which is removed either way).
    """
    import shutil
    from pathlib import Path

    from searchtome.dataset.blind import default_private, make_blind
    from searchtome.io import scratch_dir

    data = Path(args.data)
    held = Path(args.held_back) if args.held_back else default_private(data)
    scratch = scratch_dir(data, "blind")
    try:
        private = scratch / "held-back" if args.dry_run else held
        blind = make_blind(data, scratch / "public", private, args.blind)
        args.data = str(blind.public)
        rc = _publish(args)
        where = f"would go to {held} (dry run: not written)" if args.dry_run else f"is in {held}"
        print(
            f"blind {blind.split} split: {blind.n_blind} queries; the held-back gold {where}, "
            f"never uploaded; score with --qrels {held}"
        )
        return rc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _publish(args: argparse.Namespace) -> int:
    # Imported here so that `searchtome --help` does not load pyarrow or huggingface_hub.
    from searchtome.dataset.publish import publish

    result = publish(
        args.data,
        args.repo,
        revision=args.revision,
        private=args.private,
        create_pr=args.create_pr,
        dry_run=args.dry_run,
        allow_restricted=args.allow_restricted,
        commit_message=args.message,
    )
    print(result.plan.render(dry_run=args.dry_run))
    if args.dry_run:
        print(_token_line())
    else:
        print(f"committed: {result.pr_url or result.commit_url}")
        if result.tag:
            print(
                f"tagged: {result.tag} → load with searchtome.load('hf://{args.repo}@{result.tag}')"
            )
    return 0


def _token_line() -> str:
    """Whether a real publish would find a token (read locally: env and login cache; never shown)."""
    from huggingface_hub import get_token

    if get_token():
        return "token: found (HF_TOKEN or the login cache); not shown"
    return (
        "token: none set; the real publish would stop here: set HF_TOKEN or log in once "
        "with `hf auth login`"
    )
