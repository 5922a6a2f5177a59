"""The notebooks in colabs/: each runs top to bottom in quick mode and saves its figures; none is committed with
outputs.

Quick mode (NOISY_JAX_COLAB_QUICK=1) swaps in small data, a small model and a few epochs; the figures go to
NOISY_JAX_COLAB_FIGDIR (the test's tmp_path), where they are checked to be real images. The kernel is the
`python3` kernelspec, which jupyter_client starts with this interpreter (checked below), so the notebooks see the
same installed packages as the tests.
"""

import os
import sys

import matplotlib.image
from nbclient import NotebookClient
import nbformat
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLABS = os.path.join(REPO, "colabs")
# Each notebook and the figures it saves, FIGDIR/NAME.png.
FIGURES = {
  "quickstart.ipynb": ("quickstart_noisy_labels", "quickstart_memorisation", "quickstart_comparison"),
  "losses.ipynb": ("losses_values_and_gradients", "losses_transition_matrices"),
  "label_correction.ipynb": (
    "label_correction_recovery",
    "label_correction_gallery",
    "label_correction_most_confident",
    "label_correction_least_confident",
    "label_correction_confidence",
    "label_correction_confusion",
  ),
  "find_label_errors.ipynb": (
    "find_label_errors_gallery",
    "find_label_errors_precision_at_k",
    "find_label_errors_quality",
  ),
}
CELL_TIMEOUT_S = 300
MIN_PNG_BYTES = 5_000


def _execute(notebook):
  """Runs every cell in a fresh `python3` kernel started in colabs/; raises on the first failing cell."""
  client = NotebookClient(
    notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": COLABS}}
  )
  client.execute()
  return notebook


def test_kernel_runs_this_interpreter():
  notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys\nprint(sys.executable)")])
  _execute(notebook)
  assert notebook.cells[0].outputs[0]["text"].strip() == sys.executable


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_runs_and_saves_its_figures(name, tmp_path, monkeypatch):
  # The kernel inherits this process's environment.
  monkeypatch.setenv("NOISY_JAX_COLAB_QUICK", "1")
  monkeypatch.setenv("NOISY_JAX_COLAB_FIGDIR", str(tmp_path))
  _execute(nbformat.read(os.path.join(COLABS, name), as_version=4))

  assert sorted(p.stem for p in tmp_path.glob("*.png")) == sorted(FIGURES[name])
  for figure in FIGURES[name]:
    path = tmp_path / f"{figure}.png"
    assert path.stat().st_size > MIN_PNG_BYTES, (figure, path.stat().st_size)
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[-1] in (3, 4), (figure, image.shape)
    assert min(image.shape[:2]) > 100, (figure, image.shape)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_committed_notebook_is_stripped(name):
  notebook = nbformat.read(os.path.join(COLABS, name), as_version=4)
  nbformat.validate(notebook)
  assert notebook.cells[0].cell_type == "markdown"
  for cell in notebook.cells:
    if cell.cell_type == "code":
      assert cell.outputs == [] and cell.execution_count is None, (name, cell.source[:60])
