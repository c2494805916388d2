"""The installed layout: every package folder is declared, and the CLI loads every command."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_declared() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = set(config["packages"])
    mapping = config["package-dir"]
    found = set()
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if any(part.startswith((".", "_")) for part in rel.parts):
                continue
            found.add(".".join([package, *rel.parts]))
    assert found <= declared, f"undeclared packages: {sorted(found - declared)}"


def test_top_level_names_stay_inside_the_namespace() -> None:
    import searchtome.baselines

    import searchtome.leaderboard
    import searchtome.submissions

    assert Path(searchtome.baselines.__file__).parent.name == "baselines"
    # The scoring and validating code lives under searchtome/; the top-level folders of those
    # names hold data only (submitted runs, rendered boards).
    assert Path(searchtome.leaderboard.__file__).parent == ROOT / "searchtome" / "leaderboard"
    assert Path(searchtome.submissions.__file__).parent == ROOT / "searchtome" / "submissions"
    assert not list((ROOT / "submissions").glob("*.py"))
    assert not list((ROOT / "leaderboard").glob("**/*.py"))


def test_every_package_data_pattern_names_files_that_exist() -> None:
    """A package-data glob for a folder that is not there ships nothing and hides the typo."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    empty = []
    for package, patterns in config["package-data"].items():
        top = max((p for p in mapping if package == p or package.startswith(p + ".")), key=len)
        folder = ROOT / mapping[top] / package[len(top) :].lstrip(".").replace(".", "/")
        empty += [
            f"{package}: {p}" for p in patterns if not any(f.is_file() for f in folder.glob(p))
        ]
    assert empty == []
