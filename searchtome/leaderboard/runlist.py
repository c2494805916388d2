"""A board's run list: the submission folders it ranks, one name per line.

The committed board names the project's own runs in ``leaderboard/whole-child/runs.txt``, so a
researcher's folder merged into ``submissions/`` leaves that board (and the tests that rebuild
it) as they were; the pull-request check ranks every folder on a board of its own
(``scripts/check_submission_pr.sh``). Blank lines and ``#`` comments are skipped.
"""

from __future__ import annotations

from pathlib import Path

from searchtome.errors import SearchTomeError
from searchtome.io import PathLike

RUN_LIST_FILE = "runs.txt"  # beside the board it selects for: leaderboard/whole-child/runs.txt


def read_run_list(path: PathLike) -> list[str]:
    """The folder names ``path`` lists, in its order; one-line errors name the file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SearchTomeError(f"{p}: cannot read the run list ({e}); give a text file") from None
    names: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if "/" in name or "\\" in name or name.startswith((".", "_")):
            raise SearchTomeError(
                f"{p}:{number}: {name!r} is not a folder name; write one submission folder's "
                "name per line"
            )
        if name in names:
            raise SearchTomeError(f"{p}:{number}: {name!r} is listed twice; list each run once")
        names.append(name)
    if not names:
        raise SearchTomeError(f"{p}: names no run; write one submission folder's name per line")
    return names


def select(folders: list[Path], names: list[str], listed_in: PathLike) -> list[Path]:
    """The discovered ``folders`` the list names (sorted as discovered); a listed folder that
    is not there is an error, a folder the list leaves out is simply not ranked."""
    by_name = {f.name: f for f in folders}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise SearchTomeError(
            f"{listed_in}: lists {missing[0]!r}, which is no submission folder here; add the "
            "folder or remove the line"
        )
    wanted = set(names)
    return [f for f in folders if f.name in wanted]
