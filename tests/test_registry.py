"""The lazy registry: names listed without importing, modules imported on first get only."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from searchtome.errors import SearchTomeError
from searchtome.registry import Registry


@pytest.fixture
def plugin_modules(tmp_path, monkeypatch):
    """Two throwaway modules on sys.path: one holding an object, one registering on import."""
    (tmp_path / "g23_reg_direct.py").write_text("VALUE = object()\n")
    (tmp_path / "g23_reg_host.py").write_text(
        "from searchtome.registry import Registry\n"
        "WIDGETS = Registry('widget', {'decorated': 'g23_reg_decorated'})\n"
    )
    (tmp_path / "g23_reg_decorated.py").write_text(
        "from g23_reg_host import WIDGETS\n\n"
        "@WIDGETS.register('decorated')\n"
        "def thing():\n"
        "    return 7\n"
    )
    (tmp_path / "g23_reg_silent.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in _PLUGINS:
        sys.modules.pop(name, None)


_PLUGINS = ("g23_reg_direct", "g23_reg_host", "g23_reg_decorated", "g23_reg_silent")


def test_a_lazy_entry_is_imported_on_first_get_only(plugin_modules) -> None:
    reg: Registry[object] = Registry("widget", {"direct": "g23_reg_direct:VALUE"})
    assert reg.names() == ["direct"] and "direct" in reg and len(reg) == 1
    assert "g23_reg_direct" not in sys.modules and not reg.is_loaded("direct")
    value = reg.get("direct")
    assert "g23_reg_direct" in sys.modules and reg.is_loaded("direct")
    assert value is sys.modules["g23_reg_direct"].VALUE and reg["direct"] is value


def test_a_bare_module_entry_is_the_one_its_import_registers(plugin_modules) -> None:
    from g23_reg_host import WIDGETS

    assert WIDGETS.names() == ["decorated"] and "g23_reg_decorated" not in sys.modules
    assert WIDGETS.get("decorated")() == 7
    assert WIDGETS.values() == [sys.modules["g23_reg_decorated"].thing]


def test_a_module_that_does_not_register_its_name_is_a_clear_bug(plugin_modules) -> None:
    reg: Registry[object] = Registry("widget", {"quiet": "g23_reg_silent"})
    with pytest.raises(LookupError, match="importing g23_reg_silent did not register it"):
        reg.get("quiet")


def test_unknown_names_get_a_did_you_mean_in_one_line() -> None:
    reg: Registry[int] = Registry("widget", {"alpha": "nowhere:x"})
    reg.add("beta", 2)
    with pytest.raises(SearchTomeError) as err:
        reg.get("alpah")
    assert str(err.value) == "unknown widget 'alpah' (did you mean 'alpha'?); known: alpha, beta"
    assert "\n" not in str(err.value)


def test_a_summary_is_read_from_the_declaration_without_importing(plugin_modules) -> None:
    reg: Registry[object] = Registry(
        "widget",
        {"direct": ("g23_reg_direct:VALUE", "one line about it"), "bare": "g23_reg_silent"},
    )
    assert reg.summary("direct") == "one line about it" and reg.summary("bare") == ""
    assert "g23_reg_direct" not in sys.modules and not reg.is_loaded("direct")
    reg.get("direct")
    assert reg.summary("direct") == "one line about it"
    with pytest.raises(SearchTomeError, match="unknown widget 'drect'"):
        reg.summary("drect")
    with pytest.raises(ValueError, match="a summary is one line"):
        reg.declare("two", "mod:attr", "first\nsecond")


def test_two_different_objects_under_one_name_are_refused() -> None:
    reg: Registry[object] = Registry("widget")
    first = object()
    reg.add("a", first)
    reg.add("a", first)  # the same object again (a module imported twice) is fine
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("a", object())
    with pytest.raises(ValueError, match="declared twice"):
        reg.declare("a", "mod:attr")
    with pytest.raises(ValueError, match="write 'module' or 'module:attr'"):
        reg.declare("b", "mod:")


def test_listing_baselines_imports_no_baseline_module_and_run_imports_one() -> None:
    """The real registries: names without imports; one baseline's module for its `get`; every
    declared baseline is registered by its module and nothing else is."""
    code = textwrap.dedent(
        """
        import sys
        from searchtome.baselines import registry
        from searchtome.cli import COMMANDS
        from searchtome.metrics.measures import REGISTRY as MEASURES

        mods = lambda: sorted(
            m for m in sys.modules
            if m.startswith("searchtome.baselines.") and m not in (
                "searchtome.baselines.registry", "searchtome.baselines.phases")
        )
        declared = registry.BASELINES.names()
        print(len(declared), mods(), "searchtome.commands.score" in sys.modules)
        registry.get("bm25")
        print(mods(), "torch" in sys.modules)
        names = [s.name for s in registry.all_baselines()]
        print(names == sorted(declared), "torch" in sys.modules)
        print(len(COMMANDS), [f.name for f in MEASURES.values()])
        try:
            registry.get("bm52")
        except Exception as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "16 [] False"
    assert lines[1].startswith("['searchtome.baselines.bm25'") and lines[1].endswith("False")
    assert "navtree" not in lines[1] and "generative" not in lines[1]
    assert lines[2] == "True False"
    assert lines[3] == (
        "19 ['R', 'Success', 'P', 'nDCG', 'RR', 'InBudget', 'TokensToGold', 'NonLeaf', 'Invalid']"
    )
    assert lines[4].startswith("unknown baseline 'bm52' (did you mean 'bm25'")
