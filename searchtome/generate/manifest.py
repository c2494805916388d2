"""What a build records about itself in ``manifest.json``, and reading it back.

:func:`manifest_info` gathers every input and setting of a build into a
:class:`~searchtome.dataset.manifest.DatasetManifest` (the same settings give the same
manifest, whatever the machine or paths); :func:`read_recorded_settings` reads them back as
a configuration layer for ``--settings-from``; :func:`compare_files` checks a rebuild against a
reference dataset file by file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchtome.dataset.manifest import (
    MANIFEST_FILE,
    BuildSplit,
    CatalogCollection,
    DatasetManifest,
    Extraction,
    Generation,
    GenerationCounts,
    PdfDirCollection,
    UnitSettings,
    Versions,
    diff_hashes,
    read_manifest,
)
from searchtome.errors import SearchTomeError
from searchtome.generate.options import BuildOptions
from searchtome.generate.questions import DEFAULT_PROMPT, GenerationConfig, load_prompt
from searchtome.generate.sources import BookSource, CollectionInfo
from searchtome.generate.splits import SplitResult
from searchtome.generate.summary import BuildSummary
from searchtome.generate.units import UnitConfig
from searchtome.llm.client import SamplingParams
from searchtome.records import SPLITS
from searchtome.version import __version__

BUILD_FORMAT = "searchtome-build-v1"
SPLITS_FILE = "splits.json"


@dataclass(frozen=True)
class BuildFacts:
    """What one build hands its manifest: the books, the stage configurations and results."""

    collection: CollectionInfo
    sources: Sequence[BookSource]
    generation: GenerationConfig
    sampling: SamplingParams
    units: UnitConfig
    gen_info: Mapping[str, Any]  # model, endpoint_kind, note (endpoint.generate)
    split: SplitResult
    summary: BuildSummary


def manifest_info(opts: BuildOptions, facts: BuildFacts) -> DatasetManifest:
    """The manifest's description of a build: collection, versions, generation, split (the
    file hashes and the build record are added when it is written)."""
    import pyarrow
    import pymupdf

    collection = facts.collection
    return DatasetManifest(
        name=collection.name,
        description=opts.description or collection.description,
        collection=collection.record,
        versions=Versions(
            searchtome=__version__, pymupdf=pymupdf.VersionBind, pyarrow=pyarrow.__version__
        ),
        extraction=_extraction_info(opts, facts.sources),
        generation=_generation_info(opts, facts),
        split=_split_info(facts.split),
        restrictions={
            s.book.book_id: tuple(s.book.restrictions) for s in facts.sources if s.book.restrictions
        },
    )


def _generation_info(opts: BuildOptions, facts: BuildFacts) -> Generation:
    gen_cfg, summary = facts.generation, facts.summary
    counts = facts.split.manifest["counts"]
    return Generation(
        **facts.gen_info,
        prompt_version=gen_cfg.prompt.version,
        prompt_sha256=gen_cfg.prompt.sha256,
        seed=opts.seed,
        sampling=facts.sampling.fingerprint(),
        questions_per_unit=gen_cfg.n_questions,
        strictness=gen_cfg.strictness,
        repair=gen_cfg.repair,
        filters=opts.filters.to_dict(),
        units=UnitSettings(min_chars=facts.units.min_chars, drop_below=facts.units.drop_below),
        counts=GenerationCounts(
            units=summary.units,
            units_failed=len(summary.failures),
            units_too_short=summary.units_dropped,
            questions_generated=summary.generated,
            questions_kept=sum(counts[s]["questions"] for s in SPLITS),
            removed=summary.removed,
        ),
    )


def _split_info(split: SplitResult) -> BuildSplit:
    split_m = split.manifest  # splits.json's record (generate.splits owns it)
    counts = split_m["counts"]
    return BuildSplit(
        rule=split_m["rule"],
        algorithm=split_m["algorithm"],
        seed=split_m["seed"],
        ratios=split_m["ratios"],
        leaves_in_train=split_m["leaves_in_train"],
        questions={s: counts[s]["questions"] for s in SPLITS},
        units={s: counts[s]["units"] for s in SPLITS},
        leaf_coverage={s: counts[s]["leaves"] for s in SPLITS},
        leaves_missing_from_train=counts["leaves_missing_from_train"],
        manifest=SPLITS_FILE,
    )


def _extraction_info(opts: BuildOptions, sources: Sequence[BookSource]) -> Extraction:
    """ToC options, and the outline depth of each book that was cut (others: the whole outline);
    the depths only when a book was cut, so other builds' manifests stay as they were."""
    depths = {s.book.book_id: s.leaf_depth for s in sources if s.leaf_depth is not None}
    return Extraction(infer_toc=opts.infer_toc, leaf_depth=dict(sorted(depths.items())) or None)


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
    collection: CatalogCollection | PdfDirCollection | None = None

    def check_prompt(self, prompt: str | None) -> None:
        """Fail when template ``prompt`` is not the one the dataset was built with."""
        template = load_prompt(prompt or DEFAULT_PROMPT)
        if self.prompt_sha256 and template.sha256 != self.prompt_sha256:
            raise SearchTomeError(
                f"{self.path}: was built with a different {self.prompt_version!r} template "
                f"(SHA-256 {self.prompt_sha256[:12]}...); pass --prompt with that template file"
            )

    def check_pdf_dir(self, *, given_pdf_dir: bool) -> None:
        """A dataset built from local PDFs is rebuilt from them: say so before any download."""
        if isinstance(self.collection, PdfDirCollection) and not given_pdf_dir:
            files = ", ".join(sorted(self.collection.files or {})) or "its PDFs"
            raise SearchTomeError(
                f"{self.path}: was built from local PDFs ({files}); rebuild it with "
                f"--settings-from {self.path.parent} --pdf-dir FOLDER, FOLDER holding those "
                "files (their SHA-256 are in the manifest's collection.files)"
            )


def read_recorded_settings(manifest_path: Path) -> RecordedSettings:
    """The settings recorded by the ``searchtome build`` that wrote a dataset (or manifest)."""
    path = manifest_path / MANIFEST_FILE if manifest_path.is_dir() else manifest_path
    m = read_manifest(path)
    gen, split = m.generation, m.split
    if not isinstance(gen, Generation) or gen.sampling is None or not isinstance(split, BuildSplit):
        raise SearchTomeError(f"{path}: not the manifest of a `searchtome build` dataset")
    sampling = gen.sampling  # SamplingParams.fingerprint(), the llm layer's own record
    units = gen.units or UnitSettings()
    values: dict[str, Any] = {
        "model": gen.model,
        "prompt": gen.prompt_version,
        "strictness": gen.strictness,
        "repair": True if gen.repair is None else gen.repair,
        "temperature": sampling.get("temperature"),
        "top_p": sampling.get("top_p"),
        "max_tokens": sampling.get("max_tokens"),
        "presence_penalty": sampling.get("presence_penalty"),
        "frequency_penalty": sampling.get("frequency_penalty"),
        "stop": tuple(sampling.get("stop", ())),
        "sampling_extra": dict(sampling.get("extra", {})),
        "split_seed": split.seed,
        "split_ratios": split.ratios,
        "leaves_in_train": True if split.leaves_in_train is None else split.leaves_in_train,
        "infer_toc": bool(m.extraction.infer_toc) if m.extraction else False,
        "name": m.name,
        "description": m.description,
        "filters": dict(gen.filters or {}),
    }
    # Settings an older manifest may lack keep the value they would have had without it.
    optional = {
        "seed": gen.seed,
        "questions_per_unit": gen.questions_per_unit,
        "unit_min_chars": units.min_chars,
        "unit_drop_below": units.drop_below,
        "split_rule": split.rule,
    }
    values.update({k: v for k, v in optional.items() if v is not None})
    return RecordedSettings(path, values, gen.prompt_version or "", gen.prompt_sha256, m.collection)


def compare_files(out: Path, reference: Path) -> list[str]:
    """Files of ``out`` whose SHA-256 differs from a reference dataset's manifest."""
    return diff_hashes(
        read_manifest(reference).files,
        read_manifest(out).files,
        missing="only in the reference",
        extra="not in the reference",
        changed="differs",
    )
