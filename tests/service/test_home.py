"""server init / add-team / list / revoke on the command line, and the versioned schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from searchtome.errors import SearchTomeError
from searchtome.service.db import SCHEMA_VERSION, check_version, make_engine, schema_version
from searchtome.service.store import authenticate, hash_token
from tests.service.helpers import add_team, blind_release, cli, init_home


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("home")
    public, private = blind_release(root)
    return root, public, private


def test_init_refuses_what_is_not_a_blind_release(release) -> None:
    root, public, private = release
    done = cli(
        "server",
        "init",
        "--home",
        str(root / "a"),
        "--public",
        str(public),
        "--private",
        str(public),
    )
    assert done.returncode == 1 and "not the private half" in done.stderr
    done = cli(
        "server",
        "init",
        "--home",
        str(root / "b"),
        "--public",
        str(root / "full"),
        "--private",
        str(private),
    )
    assert done.returncode == 1 and "not the public half" in done.stderr
    done = cli(
        "server",
        "init",
        "--home",
        str(root / "c"),
        "--public",
        str(public),
        "--private",
        str(private),
        "--private-fraction",
        "1.5",
    )
    assert done.returncode == 1 and "--private-fraction 1.5" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_tokens_are_stored_as_hashes_and_revoked(release) -> None:
    root, public, private = release
    home = root / "srv"
    init_home(home, public, private)
    assert oct((home).stat().st_mode & 0o777) == "0o700"
    assert "secret" in json.loads((home / "server.json").read_text())
    token = add_team(home, "team-a")
    assert cli("server", "add-team", "--home", str(home), "team-a").returncode == 1  # exists
    assert cli("server", "add-team", "--home", str(home), "bad/name").returncode == 1
    engine = make_engine(f"sqlite:///{home / 'server.db'}")
    secret = token.split("_", 2)[2]
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT token_hash FROM teams")).scalar()
        assert stored == hash_token(secret) and secret not in stored
        assert authenticate(conn, token) is not None
        assert authenticate(conn, token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    listed = cli("server", "list", "--home", str(home))
    assert "team-a" in listed.stdout and "active" in listed.stdout and secret not in listed.stdout
    assert cli("server", "revoke", "--home", str(home), "team-a").returncode == 0
    again = cli("server", "revoke", "--home", str(home), "team-b")
    assert again.returncode == 1 and "unknown team 'team-b'" in again.stderr
    with engine.connect() as conn:
        assert authenticate(conn, token) is None
    assert "revoked" in cli("server", "list", "--home", str(home)).stdout
    engine.dispose()


def test_a_database_of_another_schema_version_is_refused(release) -> None:
    root, public, private = release
    home = root / "versions"
    init_home(home, public, private)
    engine = make_engine(f"sqlite:///{home / 'server.db'}")
    check_version(engine, str(home))
    with engine.begin() as conn:
        conn.execute(schema_version.update().values(version=SCHEMA_VERSION + 1))
    with pytest.raises(SearchTomeError, match=f"schema version {SCHEMA_VERSION + 1}"):
        check_version(engine, str(home))
    engine.dispose()
    done = cli("server", "list", "--home", str(home))
    assert done.returncode == 1 and "schema version" in done.stderr
    done = cli("server", "migrate", "--home", str(home))  # never downgrades a newer one
    assert done.returncode == 1 and "newer than this searchtome" in done.stderr


def test_server_json_is_typed_one_line_per_bad_value_and_unknown_keys_kept(tmp_path: Path) -> None:
    from searchtome.document import write_document
    from searchtome.io import dumps
    from searchtome.service.home import FORMAT, SERVER, SETTINGS_FILE, open_home

    path = tmp_path / SETTINGS_FILE
    path.write_text(json.dumps({"format": FORMAT, "private_fraction": "0.2"}))
    with pytest.raises(SearchTomeError) as err:
        open_home(tmp_path)  # before: accepted here, then a crash at start
    assert str(err.value).startswith(f'{path}: private_fraction: expected a number, got "0.2"; ')
    path.write_text(json.dumps({"format": "searchtome-server-v2"}))
    with pytest.raises(SearchTomeError, match="server-v2 is newer than this searchtome reads"):
        open_home(tmp_path)
    text = dumps({"format": FORMAT, "daily_limit": 9, "later": {"x": 1}})
    path.write_text(text)
    home = open_home(tmp_path)
    assert home.settings.daily_limit == 9 and home.settings.extra == {"later": {"x": 1}}
    assert json.loads(dumps(write_document(SERVER, home.settings)))["later"] == {"x": 1}


def test_add_team_in_bulk_is_one_transaction(release, tmp_path) -> None:
    root, public, private = release
    home = root / "bulk"
    init_home(home, public, private)
    listed = tmp_path / "teams.txt"
    listed.write_text("# one a line\nteam-c\n\nteam-d\n")
    done = cli("server", "add-team", "--home", str(home), "team-a", "team-b", "--from", str(listed))
    assert done.returncode == 0, done.stderr
    lines = [line.split("\t") for line in done.stdout.splitlines()]
    assert [name for name, _ in lines] == ["team-a", "team-b", "team-c", "team-d"]
    engine = make_engine(f"sqlite:///{home / 'server.db'}")
    with engine.connect() as conn:
        assert [authenticate(conn, token).name for _, token in lines] == [n for n, _ in lines]
    # one name taken or malformed: none of the others is added
    for names in (["team-e", "team-a"], ["team-f", "bad/name"], ["team-g", "team-g"]):
        done = cli("server", "add-team", "--home", str(home), *names)
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, names
    listing = cli("server", "list", "--home", str(home)).stdout
    assert "team-d" in listing and not any(f"team-{c}" in listing for c in "efg")
    engine.dispose()


def test_rules_that_cannot_be_read_are_one_line_and_create_nothing(release, tmp_path) -> None:
    root, public, private = release
    home = root / "rules"
    for rules, why in ((tmp_path / "missing.txt", "No such file"), (tmp_path, "Is a directory")):
        done = cli("server", "init", "--home", str(home), "--public", str(public),
                   "--private", str(private), "--rules", str(rules))  # fmt: skip
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert f"--rules {rules}: cannot read it" in done.stderr and why in done.stderr
        assert not home.exists()  # refused before the home is made
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("r\xe8gles".encode("latin-1"))
    done = cli("server", "init", "--home", str(home), "--public", str(public),
               "--private", str(private), "--rules", str(latin))  # fmt: skip
    assert done.returncode == 1 and "give a UTF-8 text file" in done.stderr
