"""What the leaderboard's columns read from a run: its system type and parameter count."""

from __future__ import annotations

import pytest
from searchtome.baselines import registry
from searchtome.baselines.registry import count_parameters
from searchtome.baselines.runner import execute

from searchtome.dataset.loader import load
from searchtome.records import BASELINE_TYPES, SYSTEM_TYPES


def test_every_registered_baseline_has_a_system_type() -> None:
    names = [spec.name for spec in registry.all_baselines()]
    missing = [n for n in names if n not in BASELINE_TYPES]
    assert not missing, f"add these baselines to searchtome.records.BASELINE_TYPES: {missing}"
    assert set(BASELINE_TYPES.values()) <= set(SYSTEM_TYPES)


def test_a_lexical_run_records_its_type_and_no_parameters(tiny_dataset) -> None:
    _, meta, info = execute("bm25", load(tiny_dataset), "dev")
    assert info.system_type == "lexical" and info.parameters == 0
    assert meta.run_info is info


def test_a_dense_run_counts_its_encoders_parameters(tiny_dataset) -> None:
    pytest.importorskip("torch")
    _, _, info = execute("dpr", load(tiny_dataset), "dev")
    # all-MiniLM-L6-v2: 22.7M parameters (its model card)
    assert info.system_type == "dense"
    assert info.parameters is not None and 22_000_000 < info.parameters < 23_000_000


def test_count_parameters() -> None:
    torch = pytest.importorskip("torch")
    assert count_parameters(torch.nn.Linear(3, 2)) == 8 and count_parameters(object()) is None


def test_training_and_prediction_are_timed_and_measured_apart(tiny_dataset) -> None:
    from searchtome.baselines.phases import Phases

    phases = Phases()
    phases.start("training")
    big = bytearray(300 * 2**20)  # 300 MiB held during training only
    big[::4096] = b"x" * len(big[::4096])
    del big
    phases.start("prediction")
    phases.finish()
    train, predict = phases.records["training"], phases.records["prediction"]
    if phases.scope == "phase":  # Linux: each phase's own peak
        assert train["peak_rss_mib"] - predict["peak_rss_mib"] > 250
    _, _, info = execute("bm25", load(tiny_dataset), "dev")
    assert set(info.phases or {}) == {"prediction"} and info.training_wall_s is None
    assert info.prediction_wall_s == info.phase("prediction").wall_s
    assert info.prediction_wall_s is not None and info.prediction_wall_s > 0
