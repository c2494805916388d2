"""What a build records about itself in ``manifest.json``, and reading it back.

:func:`manifest_info` gathers every input and setting of a build (the same settings give the
same manifest, whatever the machine or paths); :func:`read_recorded_settings` reads them back as
a configuration layer for ``--settings-from``; :func:`compare_files` checks a rebuild against a
reference dataset file by file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.errors import SearchTomeError
from searchtome.generate.options import BuildOptions
from searchtome.generate.questions import DEFAULT_PROMPT, GenerationConfig, load_prompt
from searchtome.generate.sources import BookSource
from searchtome.generate.summary import BuildSummary
from searchtome.generate.units import UnitConfig
from searchtome.io import read_json
from searchtome.llm.client import SamplingParams
from searchtome.records import SPLITS
from searchtome.version import __version__

BUILD_FORMAT = "searchtome-build-v1"
SPLITS_FILE = "splits.json"


def manifest_info(
    opts: BuildOptions,
    collection: dict[str, Any],
    sources: Sequence[BookSource],
    gen_cfg: GenerationConfig,
    sampling: SamplingParams,
    unit_cfg: UnitConfig,
    gen_info: dict[str, Any],
    split: Any,
    summary: BuildSummary,
) -> dict[str, Any]:
    """The manifest's description of a build: collection, versions, generation, split."""
    import pyarrow
    import pymupdf

    split_m = split.manifest
    counts = split_m["counts"]
    generation = {
        **gen_info,
        "prompt_version": gen_cfg.prompt.version,
        "prompt_sha256": gen_cfg.prompt.sha256,
        "seed": opts.seed,
        "sampling": sampling.fingerprint(),
        "questions_per_unit": gen_cfg.n_questions,
        "strictness": gen_cfg.strictness,
        "repair": gen_cfg.repair,
        "filters": opts.filters.to_dict(),
        "units": {"min_chars": unit_cfg.min_chars, "drop_below": unit_cfg.drop_below},
        "counts": {
            "units": summary.units,
            "units_failed": len(summary.failures),
            "units_too_short": summary.units_dropped,
            "questions_generated": summary.generated,
            "questions_kept": sum(counts[s]["questions"] for s in SPLITS),
            "removed": summary.removed,
        },
    }
    generation = {k: v for k, v in generation.items() if v is not None}
    info: dict[str, Any] = {
        "name": collection.get("name"),
        "description": opts.description or collection.get("description"),
        "collection": collection["collection"],
        "versions": {
            "searchtome": __version__,
            "pymupdf": pymupdf.VersionBind,
            "pyarrow": pyarrow.__version__,
        },
        "extraction": _extraction_info(opts, sources),
        "generation": generation,
        "split": {
            "rule": split_m["rule"],
            "algorithm": split_m["algorithm"],
            "seed": split_m["seed"],
            "ratios": split_m["ratios"],
            "leaves_in_train": split_m["leaves_in_train"],
            "questions": {s: counts[s]["questions"] for s in SPLITS},
            "units": {s: counts[s]["units"] for s in SPLITS},
            "leaf_coverage": {s: counts[s]["leaves"] for s in SPLITS},
            "leaves_missing_from_train": counts["leaves_missing_from_train"],
            "manifest": SPLITS_FILE,
        },
        "restrictions": {
            s.book.book_id: list(s.book.restrictions) for s in sources if s.book.restrictions
        },
    }
    return {k: v for k, v in info.items() if v is not None}


def _extraction_info(opts: BuildOptions, sources: Sequence[BookSource]) -> dict[str, Any]:
    """ToC options, and the outline depth of each book that was cut (others: the whole outline);
    the depths only when a book was cut, so other builds' manifests stay as they were."""
    info: dict[str, Any] = {"infer_toc": opts.infer_toc}
    depths = {s.book.book_id: s.leaf_depth for s in sources if s.leaf_depth is not None}
    if depths:
        info["leaf_depth"] = dict(sorted(depths.items()))
    return info


@dataclass(frozen=True)
class RecordedSettings:
    """The data-shaping settings a dataset's manifest recorded, as a configuration layer.

    ``values`` holds :class:`~searchtome.generate.options.BuildOptions` fields (model, prompt,
    sampling, questions per unit, units, filters, splits, ToC options); the books, endpoint,
    cache and output are not recorded, so they stay as given.
    """

    path: Path
    values: dict[str, Any]
    prompt_version: str
    prompt_sha256: str | None

    def check_prompt(self, prompt: str | None) -> None:
        """Fail when template ``prompt`` is not the one the dataset was built with."""
        template = load_prompt(prompt or DEFAULT_PROMPT)
        if self.prompt_sha256 and template.sha256 != self.prompt_sha256:
            raise SearchTomeError(
                f"{self.path}: was built with a different {self.prompt_version!r} template "
                f"(SHA-256 {self.prompt_sha256[:12]}...); pass --prompt with that template file"
            )


def read_recorded_settings(manifest_path: Path) -> RecordedSettings:
    """The settings recorded by the ``searchtome build`` that wrote a dataset (or manifest)."""
    path = manifest_path / "manifest.json" if manifest_path.is_dir() else manifest_path
    m = read_json(path)
    gen, split = m.get("generation"), m.get("split")
    if not isinstance(gen, dict) or not isinstance(split, dict) or "sampling" not in gen:
        raise SearchTomeError(f"{path}: not the manifest of a `searchtome build` dataset")
    sampling = gen["sampling"]
    units = gen.get("units", {})
    values: dict[str, Any] = {
        "model": gen["model"],
        "prompt": gen["prompt_version"],
        "strictness": gen.get("strictness"),
        "repair": gen.get("repair", True),
        "temperature": sampling.get("temperature"),
        "top_p": sampling.get("top_p"),
        "max_tokens": sampling.get("max_tokens"),
        "presence_penalty": sampling.get("presence_penalty"),
        "frequency_penalty": sampling.get("frequency_penalty"),
        "stop": tuple(sampling.get("stop", ())),
        "sampling_extra": dict(sampling.get("extra", {})),
        "split_seed": split.get("seed"),
        "split_ratios": split.get("ratios"),
        "leaves_in_train": split.get("leaves_in_train", True),
        "infer_toc": bool(m.get("extraction", {}).get("infer_toc", False)),
        "name": m.get("name"),
        "description": m.get("description"),
        "filters": dict(gen.get("filters", {})),
    }
    # Settings an older manifest may lack keep the value they would have had without it.
    optional = {
        "seed": gen.get("seed"),
        "questions_per_unit": gen.get("questions_per_unit"),
        "unit_min_chars": units.get("min_chars"),
        "unit_drop_below": units.get("drop_below"),
        "split_rule": split.get("rule"),
    }
    values.update({k: v for k, v in optional.items() if v is not None})
    return RecordedSettings(path, values, gen["prompt_version"], gen.get("prompt_sha256"))


def compare_files(out: Path, reference: Path) -> list[str]:
    """Files of ``out`` whose SHA-256 differs from a reference dataset's manifest."""
    from searchtome.dataset.layout import diff_hashes

    ref = reference / "manifest.json" if reference.is_dir() else reference
    return diff_hashes(
        read_json(ref).get("files", {}),
        read_json(out / "manifest.json").get("files", {}),
        missing="only in the reference",
        extra="not in the reference",
        changed="differs",
    )
