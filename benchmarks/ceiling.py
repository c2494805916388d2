"""Where a system's R@1 misses go on a book, and what R@1 a reader's labels leave reachable.

    python benchmarks/ceiling.py sample DATA DEV_RUN TEST_RUN [--n 100] [--seed 0] --out FILE
    python benchmarks/ceiling.py report DATA DEV_RUN TEST_RUN --labels LABELS [--out docs/ceiling.md]
    python benchmarks/ceiling.py fixed DATA OTHER_DEV_RUN OTHER_TEST_RUN --labels LABELS

``sample`` draws ``--n`` of the runs' first-answer misses (dev and test pooled, a fixed seed)
and writes, for reading, the question, the gold and the predicted leaf's path and text (a
git-ignored file: the texts are the book's). ``report`` counts every miss by where the wrong
leaf sits in the ToC (a sibling of the gold: same parent; the same chapter; elsewhere) and by
the gold's rank, reads the hand labels (``LABELS``: JSON list of ``{"query_id", "label",
"reason"}``) and writes the markdown table with the ceiling estimate:

* ``gold-only``: the question is answered by the gold leaf and not by the predicted one (a real
  retrieval error);
* ``both``: the predicted leaf answers it as well (a reader would accept it);
* ``pred-better``: the predicted leaf answers it better than the gold (a label error);
* ``vague``: the question does not single out one leaf (generic, or about the whole book).

Every label but ``gold-only`` is a question on which the gold leaf is not the only defensible
answer. The ceiling, the R@1 a perfect reader-like system could reach, is estimated as
``R@1 + (share of gold-only among the misses) * miss rate`` (Wilson 95 % interval on that
share): an estimate from a labelled sample of misses and one reader's labels, not a bound.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from searchtome.dataset import load
from searchtome.submissions.reader import read_submission

LABELS = ("gold-only", "both", "pred-better", "vague")


def misses(ds: Any, run_path: Path, split: str) -> tuple[int, list[dict[str, Any]]]:
    """The number of questions of ``split`` and the questions whose first answer is wrong."""
    run = read_submission(run_path).run
    out = []
    questions = ds.queries(split)
    for q in questions:
        ranking = list(run.rankings.get(q.query_id, ()))
        if ranking and ranking[0] == q.leaf_id:
            continue
        rank = ranking.index(q.leaf_id) + 1 if q.leaf_id in ranking else None
        out.append(
            {
                "query_id": q.query_id,
                "split": split,
                "gold": q.leaf_id,
                "pred": ranking[0] if ranking else None,
                "gold_rank": rank,
            }
        )
    return len(questions), out


def relation(ds: Any, gold: str, pred: str | None) -> str:
    """Where ``pred`` is in the ToC relative to ``gold``: sibling, same chapter, or elsewhere."""
    if pred is None:
        return "no answer"
    nodes = ds.nodes
    if nodes[gold].parent_id == nodes[pred].parent_id:
        return "sibling"
    return "same chapter" if nodes[gold].path[0] == nodes[pred].path[0] else "elsewhere"


def all_misses(ds: Any, dev: Path, test: Path) -> tuple[dict[str, int], list[dict[str, Any]]]:
    totals: dict[str, int] = {}
    found: list[dict[str, Any]] = []
    for split, path in (("dev", dev), ("test", test)):
        totals[split], m = misses(ds, path, split)
        found += m
    for m in found:
        m["relation"] = relation(ds, m["gold"], m["pred"])
    return totals, found


def draw(found: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return sorted(rng.sample(found, min(n, len(found))), key=lambda m: m["query_id"])


def best_sentences(text: str, question: str, n: int = 3) -> str:
    """The ``n`` sentences of ``text`` that BM25 scores highest for ``question``, in order:
    what a reader looks at first to tell whether the leaf answers the question."""
    from searchtome.baselines.bm25 import BM25Config, BM25Index, rank_desc
    from searchtome.baselines.text import split_sentences

    sents = split_sentences(text) or [text]
    scores = BM25Index(sents, BM25Config(title="none")).scores(question)
    return " [...] ".join(sents[i] for i in sorted(rank_desc(scores)[:n]))


def cmd_sample(args: argparse.Namespace) -> None:
    ds = load(args.data)
    _, found = all_misses(ds, args.dev_run, args.test_run)
    by_id = ds.query_by_id
    rows = []
    for m in draw(found, args.n, args.seed):
        gold, pred = ds.leaf(m["gold"]), ds.leaf(m["pred"])
        rows.append(
            {
                **m,
                "question": by_id[m["query_id"]].text,
                "gold_path": " > ".join(gold.path),
                "gold_best": best_sentences(gold.text, by_id[m["query_id"]].text),
                "pred_path": " > ".join(pred.path),
                "pred_best": best_sentences(pred.text, by_id[m["query_id"]].text),
            }
        )
    Path(args.out).write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"{len(rows)} of {len(found)} misses written to {args.out}")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def table(counter: Counter[str], total: int, keys: Any) -> list[str]:
    return [f"| {k} | {counter[k]} | {100 * counter[k] / total:.1f} % |" for k in keys]


def cmd_report(args: argparse.Namespace) -> None:
    ds = load(args.data)
    totals, found = all_misses(ds, args.dev_run, args.test_run)
    labels = {x["query_id"]: x for x in json.loads(Path(args.labels).read_text())}
    sample = draw(found, args.n, args.seed)
    assert {m["query_id"] for m in sample} == set(labels), "labels must cover the drawn sample"
    lines = [
        f"# {args.title}",
        "",
        f"Written by `python benchmarks/ceiling.py {' '.join(sys.argv[1:])}` (the labels and "
        "the estimate are defined in its docstring); the prose is in [trained.md](trained.md).",
        "",
    ]
    for split in ("dev", "test"):
        ms = [m for m in found if m["split"] == split]
        n = totals[split]
        rel = Counter(m["relation"] for m in ms)
        ranks = Counter(
            "2-3"
            if m["gold_rank"] and m["gold_rank"] <= 3
            else "4-10"
            if m["gold_rank"] and m["gold_rank"] <= 10
            else "> 10"
            for m in ms
        )
        lines += [
            f"## {split}: {len(ms)} misses of {n} questions (R@1 {100 * (n - len(ms)) / n:.1f})",
            "",
            "| predicted leaf | misses | share |",
            "|---|---:|---:|",
        ]
        lines += table(rel, len(ms), ("sibling", "same chapter", "elsewhere", "no answer"))
        lines += ["", "| gold's rank | misses | share |", "|---|---:|---:|"]
        lines += [*table(ranks, len(ms), ("2-3", "4-10", "> 10")), ""]
    lab = Counter(labels[m["query_id"]]["label"] for m in sample)
    unknown = set(lab) - set(LABELS)
    assert not unknown, f"unknown labels {unknown}"
    k, n = lab["gold-only"], len(sample)
    lo, hi = wilson(k, n)
    lines += [
        f"## {n} misses labelled by reading (seed {args.seed}, dev and test pooled)",
        "",
        "| label | misses | share |",
        "|---|---:|---:|",
    ]
    lines += [*table(lab, n, LABELS), ""]
    by_rel = Counter((m["relation"], labels[m["query_id"]]["label"]) for m in sample)
    lines += ["| predicted leaf | " + " | ".join(LABELS) + " |", "|---|" + "---:|" * len(LABELS)]
    for r in ("sibling", "same chapter", "elsewhere"):
        lines.append(f"| {r} | " + " | ".join(str(by_rel[(r, x)]) for x in LABELS) + " |")
    lines += [
        "",
        "## The ceiling",
        "",
        "| split | R@1 | misses | R@1 a reader accepts | ceiling (point) | ceiling (95 % CI) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    accepted = (lab["both"] + lab["pred-better"]) / n
    for split in ("dev", "test"):
        total = totals[split]
        miss = sum(m["split"] == split for m in found)
        r1 = 100 * (total - miss) / total
        f = [100 * miss / total * x for x in (accepted, k / n, lo, hi)]
        lines.append(
            f"| {split} | {r1:.1f} | {miss} | {r1 + f[0]:.1f} | {r1 + f[1]:.1f} | "
            f"{r1 + f[2]:.1f} – {r1 + f[3]:.1f} |"
        )
    lines += [
        "",
        "*R@1 a reader accepts* counts a miss labelled `both` or `pred-better` as a hit; the "
        "*ceiling* adds to R@1 only the misses labelled `gold-only` (what a better retriever "
        "can still win), with the Wilson 95 % interval of that share in the sample.",
    ]
    lines += [
        "",
        "## The labels",
        "",
        "| query | split | gold | predicted | relation | label | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in sample:
        x = labels[m["query_id"]]
        lines.append(
            f"| {m['query_id']} | {m['split']} | {m['gold']} | {m['pred']} | "
            f"{m['relation']} | {x['label']} | {x['reason']} |"
        )
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: gold-only {k}/{n} (95 % CI {lo:.2f}-{hi:.2f})")


def cmd_fixed(args: argparse.Namespace) -> None:
    """How many of the labelled misses another system answers right, by label: whether its
    gains come from real errors (``gold-only``) or from questions a reader would not count."""
    ds = load(args.data)
    labels = {x["query_id"]: x for x in json.loads(Path(args.labels).read_text())}
    hits: Counter[str] = Counter()
    for split, path in (("dev", args.other_dev), ("test", args.other_test)):
        run = read_submission(path).run
        for q in ds.queries(split):
            if q.query_id in labels and run.rankings.get(q.query_id, ())[:1] == (q.leaf_id,):
                hits[labels[q.query_id]["label"]] += 1
    total = Counter(x["label"] for x in labels.values())
    print("| label | labelled misses | answered right by the other system |")
    print("|---|---:|---:|")
    for label in LABELS:
        print(f"| {label} | {total[label]} | {hits[label]} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(required=True)
    for name, fn in (("sample", cmd_sample), ("report", cmd_report)):
        s = sub.add_parser(name)
        s.add_argument("data")
        s.add_argument("dev_run", type=Path)
        s.add_argument("test_run", type=Path)
        s.add_argument("--n", type=int, default=100)
        s.add_argument("--seed", type=int, default=0)
        s.set_defaults(func=fn)
    fixed = sub.add_parser("fixed")
    fixed.add_argument("data")
    fixed.add_argument("other_dev", type=Path)
    fixed.add_argument("other_test", type=Path)
    fixed.add_argument("--labels", required=True)
    fixed.set_defaults(func=cmd_fixed)
    sub.choices["sample"].add_argument("--out", required=True)
    rep = sub.choices["report"]
    rep.add_argument("--labels", required=True)
    rep.add_argument("--out", default="docs/ceiling.md")
    rep.add_argument("--title", default="The R@1 ceiling on The Whole Child")
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
