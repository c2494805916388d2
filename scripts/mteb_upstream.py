"""Write what a pull request adding SearchTome to MTEB carries, for one dataset folder.

    python scripts/mteb_upstream.py DATA OUT [--hub ORG/NAME@COMMIT]

OUT gets ``searchtome_retrieval.py`` (the task file; only with --hub, since MTEB loads the data
from the uploaded revision), ``descriptive_stats/Retrieval/{TaskName}.json``,
``results/{model}/{revision}/{TaskName}.json`` for the reference models and ``summary.json``
(their main scores and which weights produced them). docs/mteb-upstream/ is this script's
output for the imported Whole Child (docs/integrations.md). Needs the ``mteb`` extra.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # MTEB writes some sets (a model's training datasets) in iteration order, which follows
        # the string hash seed: a fixed seed makes two runs write the same bytes.
        os.execve(
            sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"}
        )
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a SearchTome dataset folder (or hf://ORG/NAME@COMMIT)")
    parser.add_argument("out", type=Path, help="folder to write (replaced)")
    parser.add_argument("--hub", help="the uploaded MTEB export, ORG/NAME@COMMIT")
    args = parser.parse_args(argv)

    from searchtome.integrations.mteb_upstream import (
        evaluate_reference_models,
        task_file_source,
        write_descriptive_statistics,
    )
    from searchtome.mteb import SearchTomeRetrieval

    task = SearchTomeRetrieval.from_folder(args.data, hub=args.hub)
    if not task.metadata.is_filled():
        print(f"{args.data}: MTEB says the metadata is not filled", file=sys.stderr)
        return 1
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    name = task.metadata.name
    if args.hub:
        (args.out / "searchtome_retrieval.py").write_text(task_file_source(task), "utf-8")
    write_descriptive_statistics(
        task, args.out / "descriptive_stats" / "Retrieval" / f"{name}.json"
    )
    summary = evaluate_reference_models(task, args.out)
    for model, values in sorted(summary.items()):
        scores = {k: v for k, v in values.items() if k != "provenance"}
        print(model, scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
