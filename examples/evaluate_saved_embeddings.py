"""
Evaluating saved embeddings
===========================

Embeddings made elsewhere, saved as ``.npy`` files, are scored by
:func:`clusterable.evaluate.evaluate_embeddings`: retrieval (Recall@K, MAP@R, R-precision) from
one exact kNN search, and clustering scores (NMI, pairwise F1, Hungarian accuracy, ARI,
silhouette) of one k-means partition, whose rule the table states. ``clusterable evaluate
EMB.npy LABELS.npy`` prints the same table.
"""

# %%
# Embeddings to score: a PCA of the digits, saved the way another tool would save them.
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA

from clusterable.evaluate import evaluate_embeddings

digits = load_digits()
scratch = tempfile.TemporaryDirectory()  # removed with the object, when the script ends
folder = Path(scratch.name)
np.save(folder / "embeddings.npy", PCA(16, random_state=0).fit_transform(digits.data))
np.save(folder / "labels.npy", digits.target)

# %%
# Load and score them; the table is a mapping of scores in [0, 1].
embeddings = np.load(folder / "embeddings.npy")
labels = np.load(folder / "labels.npy")
table = evaluate_embeddings(embeddings, labels, clustering="kmeans", seed=0, device="cpu")
for key, value in table.items():
    print(f"{key:>12s} {100 * value:6.2f} %")

# %%
# The partition the clustering scores were computed on comes with the table, with the rule.
print(table.partition.n_clusters, "clusters:", table.partition.rule)
print("first labels:", table.partition.labels_[:12])

# %%
# Only what the metrics asked for read is computed: here one kNN search and no clustering, with
# cosine distance.
retrieval = evaluate_embeddings(
    embeddings, labels, metrics=["recall@k", "map@r"], distance="cosine", device="cpu"
)
print({key: round(value, 3) for key, value in retrieval.items()})
