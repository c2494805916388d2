"""The MTEB task and the ir_datasets registration from a Hub id (a local stand-in Hub)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("mteb", reason="needs the mteb extra: pip install 'searchtome[mteb]'")
pytest.importorskip(
    "ir_datasets", reason="needs the ir_datasets extra: pip install 'searchtome[ir_datasets]'"
)

import ir_datasets

from searchtome.dataset.loader import load
from searchtome.dataset.publish import publish
from searchtome.ir_datasets import register
from searchtome.mteb import SearchTomeRetrieval
from tests.fixtures.hub_standin import HubStandIn


def test_bare_and_hf_ids(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants as constants

    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    with HubStandIn() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", "hf_TESTtoken0123456789")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("SEARCHTOME_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        # The stand-in offers no Xet storage: the client takes the LFS path (tests/fixtures/
        # hub_standin.py).
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        publish(data, "org/tiny", revision="v1")
        task = SearchTomeRetrieval.from_folder("org/tiny")  # a bare id that is not a folder
        task.load_data()
        local = load(data)
        assert task.hf_subsets == local.book_ids()
        assert len(task.dataset["beta-law"]["test"]["queries"]) == len(
            local.queries("test", "beta-law")
        )
        ids = register("hf://org/tiny@v1", name="tiny-from-hub", splits=["test"])
    assert "searchtome/tiny-from-hub/alpha-bio/test" in ids
    loaded = ir_datasets.load("searchtome/tiny-from-hub/alpha-bio/test")
    assert loaded.docs_count() == len(local.leaves("alpha-bio"))
