"""
Reproducing a paper's experiment
================================

``clusterable reproduce EXPERIMENT`` runs one of the papers' experiments and prints the paper's
numbers beside ours; :func:`clusterable.reproduce.run_experiment` is the same from Python. Here
``aas-synthetic``, the OPML paper's Fig. 5 (Authority Ascent Shift against k-means on three
crescents, three Gaussians and uniform noise), in ``quick`` mode: two seeds, a few seconds. The
default mode is the paper's protocol scaled to a CPU, ``full`` the paper's own budget.
"""

# %%
# Run it into a temporary folder; the report holds the table, the claims and the figures.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

from clusterable.reproduce import Budget, available_experiments, run_experiment

print("experiments:", ", ".join(available_experiments()))
scratch = tempfile.TemporaryDirectory()  # removed with the object, when the script ends
folder = Path(scratch.name) / "aas-synthetic"
report = run_experiment("aas-synthetic", Budget(mode="quick", folder=folder))

# %%
# The Markdown it wrote (``results.md``; ``results.json`` holds the same numbers): ours beside
# the paper's, and whether each of the paper's claims held here.
print((folder / "results.md").read_text())

# %%
# Its figure: the ground truth, AAS and k-means on the first seed's points.
figure, ax = plt.subplots(figsize=(12, 4.2))
ax.imshow(plt.imread(folder / "aas_vs_kmeans.png"))
ax.set_axis_off()
figure.tight_layout()
