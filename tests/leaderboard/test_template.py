"""The page is a jinja2 template shipped as package data, rendered with autoescape on."""

from __future__ import annotations

import tomllib
from pathlib import Path

from searchtome.leaderboard.html import TEMPLATES, template

ROOT = Path(__file__).resolve().parents[2]


def test_the_template_ships_as_package_data_and_jinja2_is_a_core_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["searchtome.leaderboard"]
    shipped = {
        p.name for pattern in patterns for p in (ROOT / "searchtome" / "leaderboard").glob(pattern)
    }
    assert "page.html.j2" in shipped
    assert TEMPLATES == ROOT / "searchtome" / "leaderboard" / "templates"
    assert any(d.startswith("jinja2") for d in project["project"]["dependencies"])


def test_autoescape_is_on_and_undefined_names_fail() -> None:
    env = template().environment
    assert env.autoescape is True
    page = env.from_string("{{ x }}|{{ y.text }}").render(x="<b>&'\"", y={"text": "<i>"})
    assert page == "&lt;b&gt;&amp;&#39;&#34;|&lt;i&gt;"
    try:
        env.from_string("{{ missing }}").render()
    except Exception as exc:  # StrictUndefined: a typo in the template is an error, not ""
        assert "missing" in str(exc)
    else:
        raise AssertionError("an undefined name rendered")
