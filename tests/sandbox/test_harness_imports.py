"""The harness's modules start inside the scoring sandbox, where their start-up CPU is measured:
importing one must not import `typing` (nor `re` and `enum`, which it pulls in). Type-only names
come from an `if TYPE_CHECKING:` block the interpreter never runs."""

import subprocess
import sys

import pytest

from membench.sandbox.scoring import HARNESS

COSTLY = ("typing", "re", "enum")


def imported_by(module: str, mount: str) -> set[str]:
    """The modules importing membench_harness.MODULE adds, as the fast runner starts it (-I -S)."""
    code = ("import sys; before = set(sys.modules); "
            f"sys.path.insert(0, {mount!r}); import membench_harness.{module}; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", code], capture_output=True, text=True,
                          check=True)
    return set(done.stdout.split())


@pytest.fixture(scope="module")
def mount(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("harness-mount")
    (root / "membench_harness").symlink_to(HARNESS, target_is_directory=True)
    return str(root)


@pytest.mark.parametrize("module", ["oracle_runner", "oracle_client", "production_server", "pytest_standin",
                                    "wire"])
def test_a_harness_module_imports_no_typing(module, mount):
    assert not set(COSTLY) & imported_by(module, mount)


def test_the_check_sees_a_typing_import(tmp_path):
    # control: a harness-like module that imports typing at run time is caught
    (tmp_path / "membench_harness").mkdir()
    (tmp_path / "membench_harness" / "__init__.py").write_text("")
    (tmp_path / "membench_harness" / "typed.py").write_text("from typing import Any\n")
    assert "typing" in imported_by("typed", str(tmp_path))
