"""Shared fixtures: an isolated cache root and a small synthetic dataset.

The synthetic dataset is written with the real :func:`searchtome.dataset.layout.write_dataset`, so every
part (scorer, baselines, exporters) can be tested before a real build exists. Each leaf has its
own vocabulary, so a lexical retriever can find it and a random one cannot.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from searchtome.dataset.layout import BookInfo, write_dataset, write_manifest
from searchtome.records import Book, Leaf, Paragraph, Query, TocNode, Unit, node_id

SHARED = Path(__file__).resolve().parents[2] / "shared"
REALPDFS = SHARED / "realpdfs"
PEER = SHARED / "peer" / "whole-child"

_VOCABULARY = (
    "amber basalt cedar dolmen ember fjord garnet harbor iris juniper kelp lichen marsh nectar "
    "obsidian prairie quartz reed saffron tundra umber violet willow xylem yarrow zephyr acorn "
    "bramble cobalt delta estuary fern glacier heath inlet jasper knoll loam meadow nettle oasis "
    "pumice quarry ridge sorrel thistle upland vale wetland yew zinc alder birch canyon dune "
    "elm flint grove hollow ivy jade kestrel lagoon moss nimbus orchid pine quill rowan slate "
    "tarn umbra verdant wren yucca zircon aspen bluff cairn dell esker fen gorse hazel isle"
)


# Each xdist worker imports torch and may load a model or two: about this much memory apiece.
_WORKER_MEMORY = 2 << 30
# Past this, more workers only add start-up cost: the longest single test bounds the run.
_MAX_WORKERS = 8


def _share_the_cpus_between_workers() -> None:
    """Give each xdist worker's torch its share of the CPUs, as a fixed SEARCHTOME_THREADS.

    With the default (one thread per usable CPU) in every worker, N workers run N x CPUs
    threads; a parallel region then waits for whichever of its threads another worker has
    descheduled (the demo test's DSI step: 212 s at 2 threads beside one busy process, 15 s at
    1). A fixed count keeps every run deterministic; tests of the default policy unset it
    themselves. A count the user set (``env_threads``' reading of it) is left alone.
    """
    from searchtome import threads

    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if workers.isdigit() and int(workers) > 1 and threads.env_threads() is None:
        os.environ[threads.ENV_THREADS] = str(max(1, threads.usable_cpus() // int(workers)))


_share_the_cpus_between_workers()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): one worker per usable CPU and one more, never more than
    the memory holds; ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still overrides, as in xdist itself.

    The extra worker runs while the others wait: many tests spend seconds on a server coming
    up, a killed process being restarted or a subprocess finishing, and with one worker per
    core that core idled. On an idle 2-core AMD EPYC the suite took 6 min 19-25 s with two
    workers and 5 min 34 s with three (and less CPU: 9 min 46 s of user time against 10 min
    6-16 s). Each worker's torch still gets a fixed share of the CPUs (at least one thread).
    """
    configured = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip()
    if configured.isdigit():
        return int(configured)
    from searchtome.threads import usable_cpus

    workers = usable_cpus() + 1 if usable_cpus() > 1 else 1
    return max(1, min(workers, _available_memory() // _WORKER_MEMORY, _MAX_WORKERS))


def _available_memory() -> int:
    """MemAvailable from /proc/meminfo in bytes; unlimited where there is none (not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 62


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Hand the modules with a ``slow`` test to xdist first, longest first by the marker's
    ``seconds`` (the idle time it was measured at, where given), so the longest tests start
    while the short ones fill the other workers, instead of one worker getting two of them in a
    row or starting one last while everyone else idles. ``--dist loadscope`` keeps each module
    on one worker, so its module-scoped setup runs once and its tests run in order."""
    weight: dict[str, float] = {}
    for item in items:
        if mark := item.get_closest_marker("slow"):
            seconds = float(mark.kwargs.get("seconds", 0))
            weight[_module(item)] = max(weight.get(_module(item), 0.0), seconds)
    # stable: modules stay whole, the rest keep their order
    items.sort(key=lambda item: (_module(item) not in weight, -weight.get(_module(item), 0.0)))


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this run that every pytest-xdist worker shares.

    Each worker's base temporary folder is a child of the controller's (``pytest-N/popen-gw0``),
    so their parent belongs to this run alone; without xdist it is the base folder itself.
    """
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def shared_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One model cache per test run, shared by its xdist workers, so SmolLM2 is converted at
    most once per run (``smollm2_path`` converts under a lock: one worker converts, the others
    wait for the finished folder).

    ``SEARCHTOME_TEST_MODELS`` may point at a persistent folder to skip even that.
    """
    configured = os.environ.get("SEARCHTOME_TEST_MODELS")
    path = Path(configured) if configured else run_dir(tmp_path_factory) / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    shared_models_dir: Path,
) -> Path:
    """Every test gets its own SEARCHTOME_HOME; only the converted models are shared."""
    home = tmp_path_factory.mktemp("home")
    (home / "models").symlink_to(shared_models_dir, target_is_directory=True)
    monkeypatch.setenv("SEARCHTOME_HOME", str(home))
    monkeypatch.setenv("SEARCHTOME_NO_PROGRESS", "1")
    return home


def _book_structure(book_id: str, titles: list[tuple[str, list[tuple[str, list[str]]]]]):
    """Chapters → sections → leaf titles, to TocNodes (a section with no leaves is a leaf)."""
    nodes: list[TocNode] = []
    page = 1
    for ci, (chapter, sections) in enumerate(titles, 1):
        cid = node_id(book_id, (ci,))
        nodes.append(
            TocNode(
                cid,
                book_id,
                chapter,
                1,
                page,
                None,
                False,
                (chapter,),
                text=f"Introduction to {chapter}.",
            )
        )
        for si, (section, leaves) in enumerate(sections, 1):
            sid = node_id(book_id, (ci, si))
            if not leaves:
                nodes.append(TocNode(sid, book_id, section, 2, page, cid, True, (chapter, section)))
                page += 1
                continue
            nodes.append(TocNode(sid, book_id, section, 2, page, cid, False, (chapter, section)))
            for li, leaf in enumerate(leaves, 1):
                nodes.append(
                    TocNode(
                        node_id(book_id, (ci, si, li)),
                        book_id,
                        leaf,
                        3,
                        page,
                        sid,
                        True,
                        (chapter, section, leaf),
                    )
                )
                page += 1
    return nodes


def make_tiny_dataset(root: Path, seed: int = 7) -> Path:
    """Two books, two domains, 3-level ToCs with a repeated leaf title; 6 questions per leaf."""
    rng = random.Random(seed)
    books = [
        BookInfo(
            Book(
                "alpha-bio",
                "Natural Sciences",
                "Alpha Biology",
                authors=("Ada Okafor",),
                license="CC BY 4.0",
            ),
            n_pages=20,
        ),
        BookInfo(
            Book(
                "beta-law",
                "Law",
                "Beta Law",
                authors=("Lin Park", "Sam Rivera"),
                license="CC BY-NC-SA 4.0",
                restrictions=("no-llm-training",),
            ),
            n_pages=18,
        ),
    ]
    structures = {
        "alpha-bio": [
            (
                "Cells",
                [
                    ("Membranes", ["Lipids", "Proteins", "Summary"]),
                    ("Energy", ["Glycolysis", "Summary"]),
                ],
            ),
            ("Organisms", [("Plants", ["Roots", "Leaves"]), ("Animals", [])]),
        ],
        "beta-law": [
            ("Contracts", [("Formation", ["Offer", "Acceptance", "Summary"]), ("Remedies", [])]),
            ("Torts", [("Negligence", ["Duty", "Breach", "Summary"])]),
        ],
    }
    words = _VOCABULARY.split()
    rng.shuffle(words)
    toc, leaves, paragraphs, units, queries = [], [], [], [], []
    w = 0
    for info in books:
        bid = info.book.book_id
        nodes = _book_structure(bid, structures[bid])
        toc.extend(nodes)
        for node in nodes:
            if not node.is_leaf:
                continue
            vocab = [words[(w + k) % len(words)] for k in range(4)]
            w += 4
            paras = []
            for p in range(1, 4):
                text = f"The {node.title.lower()} part discusses {vocab[p % 4]} and {vocab[(p + 1) % 4]} in detail. It also mentions {vocab[p - 1]}."
                paras.append(Paragraph(f"{node.node_id}#p{p}", node.node_id, text, node.page))
            paragraphs.extend(paras)
            leaves.append(
                Leaf(
                    node.node_id,
                    bid,
                    node.path,
                    node.title,
                    "\n\n".join(p.text for p in paras),
                    node.page,
                    node.page,
                )
            )
            for u, para in enumerate(paras, 1):
                unit_id = f"{node.node_id}#u{u}"
                units.append(Unit(unit_id, node.node_id, bid, (para.paragraph_id,), para.text))
                split = ("train", "dev", "test")[u - 1]
                for k in range(2):
                    qid = f"{bid}-{node.node_id.split('/')[1]}-u{u}-q{k + 1:02d}"
                    a, b = vocab[(u + k) % 4], vocab[(u + k + 1) % 4]
                    queries.append(
                        Query(
                            qid,
                            bid,
                            f"What is said about {a} and {b}?",
                            node.node_id,
                            split,
                            unit_id,
                        )
                    )
    write_dataset(
        root,
        books=books,
        toc=toc,
        leaves=leaves,
        queries=queries,
        paragraphs=paragraphs,
        units=units,
    )
    write_manifest(root, {"name": "tiny-synthetic", "seed": seed})
    return root


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_dataset(tmp_path_factory.mktemp("tiny") / "data")
