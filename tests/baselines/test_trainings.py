"""``searchtome ls trainings``: finished adapters and resumable trainings in the cache."""

from __future__ import annotations

import json

import pytest

from searchtome.cli import main

torch = pytest.importorskip("torch")


def _report(epochs: int, dev: list[float], stopped: str = "") -> dict:
    history = [{"epoch": i + 1, "dev_r1": v, "seconds": 60.0 * (i + 1)} for i, v in enumerate(dev)]
    best = max(range(len(dev)), key=lambda i: dev[i])
    return {
        "epochs": epochs,
        "best_epoch": best + 1,
        "best_dev_r1": dev[best],
        "stopped": stopped,
        "history": history,
        "seconds": 60.0 * epochs,
        "dev_queries": 100,
    }


def test_ls_trainings_shows_finished_and_resumable_adapters(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path))
    adapters = tmp_path / "baselines" / "dsi" / "adapters"
    done = adapters / "aaaa"
    done.mkdir(parents=True)
    meta = {"system": "dsi", "training": _report(3, [0.1, 0.3, 0.2], "early stop")}
    (done / "searchtome.json").write_text(json.dumps(meta))
    (adapters / "bbbb").mkdir()  # an adapter without a report (copied in): not listed
    work = tmp_path / "baselines" / "stair" / "adapters" / ".cccc.work"
    work.mkdir(parents=True)
    state = _report(2, [0.01, 0.13])
    del state["dev_queries"]  # an epoch state's report has no dev count yet
    torch.save({"report": state, "lora": {}}, work / "state.pt")
    (tmp_path / "baselines" / "stair" / "adapters" / ".dddd.work").mkdir()  # no epoch yet

    assert main(["ls", "trainings"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("dsi  aaaa  finished: 3 epoch(s)")
    assert "dev R@1 % per epoch (100 dev questions): 10, 30, 20; best 30 at epoch 2" in lines[0]
    assert lines[0].endswith("; early stop")
    assert lines[1].startswith("stair  cccc  in training (rerun its command to resume): 2 epoch")
    assert "dev R@1 % per epoch: 1, 13; best 13 at epoch 2" in lines[1]


def test_an_unreadable_training_state_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path))
    work = tmp_path / "baselines" / "stair" / "adapters" / ".eeee.work"
    work.mkdir(parents=True)
    (work / "state.pt").write_bytes(b"not a torch file")
    assert main(["ls", "trainings"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "state.pt: cannot be read" in err[0]


def test_a_malformed_adapter_record_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path))
    folder = tmp_path / "baselines" / "dsi" / "adapters" / "ffff"
    folder.mkdir(parents=True)
    (folder / "searchtome.json").write_text('{"training": {"epochs": 3,\n')
    assert main(["ls", "trainings"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ffff/searchtome.json:2: not valid JSON" in err[0]
    assert (folder / "searchtome.json").is_file()  # reading it changed nothing


def test_an_empty_cache_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path))
    assert main(["ls", "trainings"]) == 0
    assert "no trained or resumable adapters" in capsys.readouterr().out


def test_a_mistyped_training_report_names_the_field(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEARCHTOME_HOME", str(tmp_path))
    folder = tmp_path / "baselines" / "dsi" / "adapters" / "gggg"
    folder.mkdir(parents=True)
    report = {**_report(2, [0.1, 0.2]), "history": {"epoch": 1}}
    (folder / "searchtome.json").write_text(json.dumps({"training": report}))
    assert main(["ls", "trainings"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "gggg/searchtome.json: training.history: expected a list of epochs" in err[0]
    )


# -- the adapter card (searchtome.json) ---------------------------------------------------------


def test_an_adapter_card_reads_back_what_it_wrote_and_old_cards_upgrade(tmp_path) -> None:
    from searchtome.baselines.generative.card import (
        CARD_FILE,
        CARD_VERSION,
        new_card,
        read_card,
    )

    from searchtome.errors import SearchTomeError

    assert read_card(tmp_path) is None  # a copied-in adapter without a card
    report = _report(3, [0.1, 0.3, 0.2], "early stop")
    card = new_card("stair", True, 7, {"lr": 0.002, "adapt_toc": True}, report)
    (tmp_path / CARD_FILE).write_text(json.dumps(card.to_dict()))
    back = read_card(tmp_path)
    assert back == card and back.read_version == CARD_VERSION and back.frozen_prefix is True
    assert card.to_dict()["format"] == f"searchtome-adapter-card-v{CARD_VERSION}"
    assert back.training is not None and back.training.to_dict() == report
    # A card from before versions: no version, no frozen_prefix (its readers took false).
    old = {"system": "dsi", "training": report, "seed": 1}
    (tmp_path / CARD_FILE).write_text(json.dumps(old))
    upgraded = read_card(tmp_path)
    assert upgraded is not None and upgraded.read_version == 0 and upgraded.frozen_prefix is False
    current = {**old, "frozen_prefix": False, "format": f"searchtome-adapter-card-v{CARD_VERSION}"}
    assert upgraded.to_dict() == current
    # Version 1 wrote an integer version; it upgrades the same way.
    (tmp_path / CARD_FILE).write_text(json.dumps({**old, "version": 1, "frozen_prefix": True}))
    one = read_card(tmp_path)
    assert one is not None and one.read_version == 1 and one.frozen_prefix is True
    assert "version" not in one.to_dict()
    (tmp_path / CARD_FILE).write_text(json.dumps({**old, "version": 2}))
    with pytest.raises(SearchTomeError, match=r"searchtome\.json: version: expected 0 or 1"):
        read_card(tmp_path)
    newer = {**current, "format": f"searchtome-adapter-card-v{CARD_VERSION + 1}"}
    (tmp_path / CARD_FILE).write_text(json.dumps(newer))
    with pytest.raises(SearchTomeError, match="is newer than this searchtome reads"):
        read_card(tmp_path)
    (tmp_path / CARD_FILE).write_text(json.dumps({**old, "frozen_prefix": "yes"}))
    with pytest.raises(
        SearchTomeError, match=r'searchtome\.json: frozen_prefix: expected true or false, got "yes"'
    ):
        read_card(tmp_path)
