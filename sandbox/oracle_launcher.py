"""Runs a hidden oracle inside the scoring sandbox (mounted read-only at /harness/run_oracle.py).

Started as `python3 -I -B /harness/run_oracle.py ORACLE JUNIT`: isolated mode ignores every
PYTHON* variable and keeps the working directory off sys.path, so nothing in the workspace can
shadow the standard library, pytest or its plugins. The workspace goes on sys.path only *after*
the interpreter's own paths, and pytest starts with plugin autoload off, no cache, its rootdir at
the oracle's directory (so no ini file or conftest.py from the workspace is ever read).
"""

import os
import sys


def main() -> int:
    oracle, junit = sys.argv[1], sys.argv[2]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for key in [k for k in os.environ if k.startswith("PYTEST_") and k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"]:
        del os.environ[key]
    sys.path.append("/workspace")
    import pytest

    rootdir = os.path.dirname(oracle)
    return pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", rootdir, "-c", os.devnull,
                        "--junitxml", junit, oracle])


if __name__ == "__main__":
    sys.exit(main())
