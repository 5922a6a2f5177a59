"""Style in CI: the code is as `ruff format` writes it and `ruff check` finds nothing (settings: pyproject.toml).

After an edit: `ruff format . && ruff check .` in the repository (ruff is in the test extra).
"""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("command", [["format", "--check", "--diff"], ["check", "--no-fix"]], ids=["format", "lint"])
def test_ruff(command):
  done = subprocess.run(
    [sys.executable, "-m", "ruff", *command, "."], cwd=REPO, capture_output=True, text=True, timeout=300
  )
  assert done.returncode == 0, f"ruff {' '.join(command)}:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"


def test_ruff_reads_the_projects_settings():
  """The settings apply (a check that always passed because ruff ran with its defaults would prove nothing): a line
  of 122 characters and a four-space indent are reported."""
  bad = "x = 1\nif x:\n    y = '" + "a" * 112 + "'\n"
  done = subprocess.run(
    [sys.executable, "-m", "ruff", "check", "--no-fix", "--stdin-filename", "noisy_jax/x.py", "-"],
    cwd=REPO,
    input=bad,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert "E501" in done.stdout, done.stdout + done.stderr
  done = subprocess.run(
    [sys.executable, "-m", "ruff", "format", "--check", "--stdin-filename", "noisy_jax/x.py", "-"],
    cwd=REPO,
    input=bad,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert done.returncode != 0, done.stdout + done.stderr  # four spaces: not two
