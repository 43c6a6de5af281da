"""Run a snippet of Python in a fresh interpreter, as a user's shell would (no COLUMNS from the test
runner), to see what importing and calling gridmix there does (which modules it loads, what it
prints)."""

import os
import subprocess
import sys


def run_python(code: str) -> subprocess.CompletedProcess:
    """``code`` run by ``python -c`` in a child process; its output captured as text; a hang fails
    after 120 s."""
    env = {name: value for name, value in os.environ.items() if name != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
