"""No input from Python may crash the process: random op graphs (tests/fuzz_ops.py) in a child."""
import os
import subprocess
import sys

import pytest


@pytest.mark.subprocess
def test_random_graphs_never_crash(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "fuzz_ops.py")
    p = subprocess.run([sys.executable, script, "0", "1500"], capture_output=True, text=True, cwd=tmp_path, check=False,
                       timeout=300)
    last = p.stderr.strip().splitlines()[-1:] if p.stderr else []
    assert p.returncode == 0, f"fuzz_ops.py died (rc {p.returncode}) at seed {last}: {p.stderr[-2000:]}"
    assert "built" in p.stdout
