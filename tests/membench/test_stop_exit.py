"""How the CLI ends a stopped grid's process (membench/errors.py `end_stopped`): with the stop's exit
status, and at once while a unit thread is still blocked past the kill (a plain exit would join
it and hang); the control shows that hang. Real processes, real threads."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROGRAM = """import threading
from membench.errors import end_stopped
threading.Thread(target=threading.Event().wait, name={name!r}).start()  # blocked for good, not a daemon
end_stopped(130)
"""


def test_a_stopped_grid_with_a_blocked_unit_thread_exits_at_once_with_its_status():
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(name="membench-unit_0")], timeout=60)
    assert proc.returncode == 130


def test_control_a_plain_exit_waits_for_the_blocked_thread():
    with pytest.raises(subprocess.TimeoutExpired):  # the same thread, not a unit's: SystemExit joins it
        subprocess.run([sys.executable, "-c", PROGRAM.format(name="some-other-thread")], timeout=3)


def test_without_a_blocked_unit_thread_the_exit_is_an_ordinary_one():
    proc = subprocess.run([sys.executable, "-c", "from membench.errors import end_stopped\nend_stopped(4)\n"],
                          timeout=60)
    assert proc.returncode == 4
