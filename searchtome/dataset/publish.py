"""``searchtome publish``: upload a dataset folder to the Hugging Face Hub.

Publishing uploads a dataset folder exactly as it is on disk — after the card has been merged and
written into the folder — in **one commit**, then tags that commit (``--revision``). So the local
folder loads with ``datasets.load_dataset`` exactly as the published repository does. Downloading
(``hf://ORG/NAME@REV``) is :mod:`searchtome.dataset.hub`.

* The token comes from ``HF_TOKEN`` or the login cache (``huggingface_hub.get_token``); it is
  passed to ``HfApi`` and nowhere else: never printed, never logged.
* ``--dry-run`` makes **no network call**: it prints the files and sizes that would be uploaded and
  the card diff against the folder's own ``README.md``. A real publish also merges the card that
  is already on the Hub (hand-written text and YAML kept), which a dry run cannot see.
* A book whose terms forbid redistributing derived text (restriction ``no-redistribution`` or
  ``no-derivatives``, or a licence such as "All rights reserved") stops the publish unless
  ``--allow-restricted`` is given.
* ``HF_ENDPOINT`` is read at call time, so a private Hub (or a local stand-in) works.
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchtome.dataset.card import build_card, hand_written_text
from searchtome.dataset.hub import REPO_ID_RE, REPO_TYPE, hub_endpoint, short_error
from searchtome.dataset.layout import (
    CARD_FILE,
    MANIFEST_FILE,
    file_hashes,
    verify_manifest,
)
from searchtome.dataset.loader import load
from searchtome.dataset.manifest import FileHash, read_manifest
from searchtome.errors import SearchTomeError
from searchtome.io import PathLike, atomic_write, dumps, sha256_text

log = logging.getLogger(__name__)

_TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_BLOCKING_RESTRICTIONS = ("no-redistribution", "no-derivatives")
_BLOCKING_LICENSE = re.compile(
    r"all rights reserved|proprietary|no[- ]?derivatives|\bnd\b|-nd\b",
    re.IGNORECASE,
)
# Files of our layout: a published repo's copies of these are removed when the folder lacks them.
_MANAGED = re.compile(
    r"^(corpus|books|toc|paragraphs|units)\.parquet$|^(queries|qrels)/[^/]+\.parquet$"
    r"|^id_map\.json$|^manifest\.json$"
)


# -- licences --------------------------------------------------------------------------------------
_UNKNOWN_LICENSE = re.compile(r"^\s*(?:unknown|none|n/?a|other|unspecified|\?)?\s*$", re.IGNORECASE)


def unknown_licences(data_dir: PathLike) -> list[str]:
    """Books whose licence is unknown (empty, ``unknown``, ``other``...): published with a
    warning, since nobody can tell whether their terms allow it (see docs/hub.md)."""
    ds = load(data_dir)
    return [
        bid for bid in ds.book_ids() if _UNKNOWN_LICENSE.fullmatch(ds.books[bid].book.license or "")
    ]


def check_repo_id(repo_id: str) -> None:
    """``repo_id`` as the Hub accepts it (huggingface_hub's own validator: no ``..`` or ``--``,
    no leading or trailing ``-``/``.``, at most 96 characters, no ``.git`` ending), in the
    ORG/NAME form a dataset repository needs."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if not REPO_ID_RE.fullmatch(repo_id):
        raise SearchTomeError(f"--repo {repo_id!r}: expected ORG/NAME (letters, digits, . _ -)")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        detail = str(exc).splitlines()[0].replace(f": '{repo_id}'", "").rstrip(".")
        raise SearchTomeError(
            f"--repo {repo_id!r}: the Hub refuses this name ({detail}); choose another"
        ) from None


def redistribution_blockers(data_dir: PathLike) -> list[str]:
    """One line per book whose terms forbid publishing text derived from it."""
    ds = load(data_dir)
    out = []
    for bid in ds.book_ids():
        book = ds.books[bid].book
        why = [r for r in book.restrictions if r in _BLOCKING_RESTRICTIONS]
        if book.license and _BLOCKING_LICENSE.search(book.license):
            why.append(f"licence {book.license!r}")
        if why:
            out.append(f"{bid} ({', '.join(why)})")
    return out


# -- the plan --------------------------------------------------------------------------------------
@dataclass
class PlannedFile:
    path: str
    size: int
    sha256: str
    changed: bool = False  # rewritten by the publish (card, manifest)


@dataclass
class PublishPlan:
    data_dir: Path
    repo_id: str
    revision: str | None
    private: bool
    create_pr: bool
    files: list[PlannedFile]
    card: str
    manifest: str
    card_diff: str
    card_base: str
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unknown_licences: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def render(self, *, dry_run: bool) -> str:
        lines = [
            f"publish {self.data_dir} → {self.repo_id} (dataset repository"
            f"{', private' if self.private else ''}"
            f"{', as a pull request' if self.create_pr else ''})",
            f"  one commit; then tag: {self.revision}" if self.revision else "  one commit; no tag",
            f"  files ({len(self.files)}, {_human(self.total_bytes)}):",
        ]
        width = max(len(f.path) for f in self.files)
        for f in self.files:
            mark = "  (rewritten)" if f.changed else ""
            lines.append(f"    {f.path:<{width}}  {_human(f.size):>9}  {f.sha256[:12]}{mark}")
        if self.blockers:
            lines.append("  restricted books (published because --allow-restricted was given):")
            lines += [f"    {b}" for b in self.blockers]
        if self.unknown_licences:
            lines.append(
                f"  warning: licence unknown for {', '.join(self.unknown_licences)}: publish only "
                "if you know its terms allow redistributing derived text"
            )
        for note in self.notes:
            lines.append(f"  note: {note}")
        lines.append(f"  card diff (against {self.card_base}):")
        lines += ["    " + ln for ln in (self.card_diff or "(no change)").splitlines()]
        if dry_run:
            lines.append(
                "  dry run: nothing written or uploaded, no network call made; a real publish "
                "also merges the card already on the Hub, if any"
            )
        return "\n".join(lines)


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def make_plan(
    data_dir: PathLike,
    repo_id: str,
    *,
    revision: str | None = None,
    private: bool = False,
    create_pr: bool = False,
    allow_restricted: bool = False,
    remote_card: str | None = None,
) -> PublishPlan:
    """Everything a publish would upload, computed locally (no network)."""
    root = Path(data_dir)
    _check_request(root, repo_id, revision, create_pr)
    blockers = redistribution_blockers(root)
    if blockers and not allow_restricted:
        raise SearchTomeError(
            f"{root}: the terms of {', '.join(blockers)} forbid redistributing text derived from "
            "the book; leave it out of the build, or pass --allow-restricted if you hold permission"
        )

    local_path = root / CARD_FILE
    local = local_path.read_text(encoding="utf-8") if local_path.is_file() else None
    notes: list[str] = []
    unknown = unknown_licences(root)
    existing = local
    if remote_card is not None:
        existing = _merge_with_remote(local, remote_card, repo_id, local_path)
        notes.append(f"merged the card already on {repo_id}")
    card, card_notes = build_card(root, existing=existing, repo_id=repo_id)
    notes += card_notes
    manifest, files = _planned_files(root, card, local)

    base = f"{local_path}" if local is not None else "an empty card"
    if remote_card is not None:
        base = f"the card on {repo_id}"
    diff = "".join(
        difflib.unified_diff(
            (remote_card if remote_card is not None else local or "").splitlines(keepends=True),
            card.splitlines(keepends=True),
            fromfile=base,
            tofile="README.md (to publish)",
            n=1,
        )
    )
    return PublishPlan(
        data_dir=root,
        repo_id=repo_id,
        revision=revision,
        private=private,
        create_pr=create_pr,
        files=files,
        card=card,
        manifest=manifest,
        card_diff=diff,
        card_base=base,
        blockers=blockers,
        notes=notes,
        unknown_licences=unknown,
    )


def _check_request(root: Path, repo_id: str, revision: str | None, create_pr: bool) -> None:
    """The names are usable and the folder is exactly what its manifest says (card excepted)."""
    check_repo_id(repo_id)
    if revision is not None and not _TAG_RE.fullmatch(revision):
        raise SearchTomeError(f"--revision {revision!r}: a tag name is letters, digits, . _ -")
    if revision is not None and create_pr:
        raise SearchTomeError(
            "--revision with --create-pr: a tag must point at a merged commit; publish as a pull "
            "request, merge it on the Hub, then tag the merged commit"
        )
    if not (root / MANIFEST_FILE).is_file():
        raise SearchTomeError(
            f"{root}: no {MANIFEST_FILE}; publish a folder written by `searchtome build` or "
            "`searchtome import`"
        )
    problems = verify_manifest(root)
    problems = [p for p in problems if not p.startswith(f"{CARD_FILE}:")]
    if problems:
        raise SearchTomeError(
            f"{root}: files differ from {MANIFEST_FILE} ({problems[0]}"
            f"{f' and {len(problems) - 1} more' if len(problems) > 1 else ''}); rebuild the "
            "dataset instead of editing it by hand"
        )


def _merge_with_remote(local: str | None, remote_card: str, repo_id: str, local_path: Path) -> str:
    """The card to merge ours into when the Hub already has one; conflicting prose stops it."""
    mine, theirs = hand_written_text(local), hand_written_text(remote_card)
    if mine and theirs and mine != theirs:
        raise SearchTomeError(
            f"{local_path} and the card on {repo_id} both carry hand-written text and it "
            "differs; make them agree (copy the Hub's text into the local README.md outside "
            "the generated block, or delete the local text to keep the Hub's), then publish"
        )
    return _combine(local, remote_card) if mine else remote_card


def _planned_files(root: Path, card: str, local: str | None) -> tuple[str, list[PlannedFile]]:
    """The manifest to publish (its hashes include the new card) and every file, by path."""
    hashes = file_hashes(root)
    hashes[CARD_FILE] = FileHash(sha256=sha256_text(card), bytes=len(card.encode("utf-8")))
    manifest = dumps(read_manifest(root).with_files(hashes).to_dict())

    files = []
    for rel, h in sorted(hashes.items()):
        changed = rel == CARD_FILE and card != local
        files.append(PlannedFile(rel, h.bytes, h.sha256, changed))
    old_manifest = (root / MANIFEST_FILE).read_text(encoding="utf-8")
    files.append(
        PlannedFile(
            MANIFEST_FILE,
            len(manifest.encode("utf-8")),
            sha256_text(manifest),
            manifest != old_manifest,
        )
    )
    files.sort(key=lambda f: f.path)
    return manifest, files


def _combine(local: str | None, remote: str) -> str:
    """The remote card with YAML keys only the local card has added to it."""
    from huggingface_hub import DatasetCard, DatasetCardData

    if not local:
        return remote
    try:
        loc = DatasetCard(local, ignore_metadata_errors=True).data.to_dict()
        rem_card = DatasetCard(remote, ignore_metadata_errors=True)
    except Exception:
        return remote
    rem = rem_card.data.to_dict()
    for key, value in loc.items():
        rem.setdefault(key, value)
    return f"---\n{DatasetCardData(**rem).to_yaml()}\n---\n{rem_card.text}"


# -- publishing ------------------------------------------------------------------------------------
@dataclass
class PublishResult:
    plan: PublishPlan
    commit_url: str | None = None
    commit_oid: str | None = None
    pr_url: str | None = None
    tag: str | None = None


def publish(
    data_dir: PathLike,
    repo_id: str,
    *,
    revision: str | None = None,
    private: bool = False,
    create_pr: bool = False,
    dry_run: bool = False,
    allow_restricted: bool = False,
    commit_message: str | None = None,
) -> PublishResult:
    """Publish ``data_dir`` to the dataset repository ``repo_id`` (see the module docstring)."""
    root = Path(data_dir)
    if dry_run:
        plan = make_plan(
            root,
            repo_id,
            revision=revision,
            private=private,
            create_pr=create_pr,
            allow_restricted=allow_restricted,
        )
        return PublishResult(plan)

    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError

    from searchtome.settings import require_online

    # Everything that can fail locally fails before any network call.
    first = make_plan(
        root, repo_id, revision=revision, create_pr=create_pr, allow_restricted=allow_restricted
    )
    if first.unknown_licences:
        log.warning(
            "%s: the licence of %s is unknown; publishing anyway: be sure its terms allow "
            "redistributing derived text (set license in the --catalog entry and rebuild)",
            root,
            ", ".join(first.unknown_licences),
        )
    require_online(f"publishing to {repo_id}")
    token = get_token()
    if not token:
        raise SearchTomeError(
            "no Hugging Face token: set HF_TOKEN or log in once with `hf auth login`"
        )
    api = HfApi(endpoint=hub_endpoint(), token=token)
    try:
        exists, remote_files, remote_card = _remote_state(api, repo_id, revision)
        plan = make_plan(
            root,
            repo_id,
            revision=revision,
            private=private,
            create_pr=create_pr,
            allow_restricted=allow_restricted,
            remote_card=remote_card,
        )
        # The folder becomes exactly what is published.
        with atomic_write(root / CARD_FILE) as fh:
            fh.write(plan.card)
        with atomic_write(root / MANIFEST_FILE) as fh:
            fh.write(plan.manifest)
        if not exists:
            api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
        result = _commit_and_tag(api, plan, remote_files, commit_message)
    except (HfHubHTTPError, HFValidationError) as exc:
        raise SearchTomeError(f"publishing to {repo_id} failed: {short_error(exc)}") from None
    except Exception as exc:
        cause = _transport_cause(exc)
        if cause is None:
            raise
        # huggingface_hub wraps a failed LFS upload in a RuntimeError naming the file.
        what = f"{short_error(exc)} " if cause is not exc else ""
        raise SearchTomeError(
            f"publishing to {repo_id} failed: {what}cannot reach {hub_endpoint()} "
            f"({type(cause).__name__}: {short_error(cause)}); check the network or HF_ENDPOINT "
            "and run the same command again (files already uploaded are not sent again)"
        ) from None
    log.info("published %s to %s (%s)", root, repo_id, result.commit_oid)
    return result


def _is_transport_error(exc: BaseException) -> bool:
    """Connection refused, DNS, TLS, timeouts: OSErrors, or the HTTP library's transport errors
    (huggingface_hub's HTTP library changes between releases, so they are known by name)."""
    names = {c.__name__ for c in type(exc).__mro__}
    return isinstance(exc, OSError) or bool(names & {"TransportError", "ConnectionError"})


def _transport_cause(exc: BaseException) -> BaseException | None:
    """``exc`` or the first exception it was raised from that is a transport error."""
    seen: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; the bound guards against a cycle
        if seen is None:
            return None
        if _is_transport_error(seen):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _remote_state(
    api: Any, repo_id: str, revision: str | None
) -> tuple[bool, list[str], str | None]:
    """Whether the repository exists, its files, and its card; a taken tag stops the publish."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    exists = True
    try:
        refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
    except RepositoryNotFoundError:
        exists, refs = False, None
    if revision and refs is not None and any(t.name == revision for t in refs.tags):
        raise SearchTomeError(
            f"tag {revision!r} already exists on {repo_id}; choose another --revision"
        )
    remote_card = None
    remote_files: list[str] = []
    if exists:
        remote_files = api.list_repo_files(repo_id, repo_type=REPO_TYPE)
        if CARD_FILE in remote_files:
            try:
                card_path = api.hf_hub_download(repo_id, CARD_FILE, repo_type=REPO_TYPE)
                remote_card = Path(card_path).read_text(encoding="utf-8")
            except (EntryNotFoundError, RevisionNotFoundError):
                remote_card = None
    return exists, remote_files, remote_card


def _commit_and_tag(
    api: Any, plan: PublishPlan, remote_files: list[str], commit_message: str | None
) -> PublishResult:
    """One commit with every planned file (stale layout files deleted), then the tag."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    root, repo_id, revision = plan.data_dir, plan.repo_id, plan.revision
    local = {f.path for f in plan.files}
    operations: list[Any] = [
        CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=str(root / f.path))
        for f in plan.files
    ]
    operations += [
        CommitOperationDelete(path_in_repo=p)
        for p in sorted(remote_files)
        if _MANAGED.match(p) and p not in local
    ]
    message = commit_message or (
        f"SearchTome dataset {revision}" if revision else "SearchTome dataset"
    )
    info = api.create_commit(
        repo_id,
        operations,
        commit_message=message,
        repo_type=REPO_TYPE,
        create_pr=plan.create_pr,
    )
    result = PublishResult(
        plan, commit_url=str(info.commit_url), commit_oid=info.oid, pr_url=info.pr_url
    )
    if revision:
        api.create_tag(
            repo_id,
            tag=revision,
            revision=info.oid,
            repo_type=REPO_TYPE,
            tag_message=message,
        )
        result.tag = revision
    return result
