"""
Index, search and classify
==========================

A trained run put to use: :class:`clusterable.TrainedRun` loads the run's best checkpoint with
its data view, :class:`clusterable.index.EmbeddingIndex` stores a gallery's embeddings with their
ids and labels, ``search`` returns each query's nearest items, and ``classify`` labels queries by
a vote of their neighbours, or answers "none of these" beyond a distance. The same steps on the
command line are ``clusterable index``, ``search`` and ``classify``.
"""

# %%
# A run to use: two epochs of the lifted loss on the digits, in a temporary folder.
import tempfile
from pathlib import Path

import numpy as np

from clusterable import TrainedRun
from clusterable.cli import main
from clusterable.index import EmbeddingIndex

scratch = tempfile.TemporaryDirectory()  # removed with the object, when the script ends
work = Path(scratch.name)
main(
    [
        "train",
        "--data=digits",
        "--loss=lifted",
        "--epochs=2",
        "--device=cpu",
        "--no-progress",
        "--no-report",
        f"--out={work / 'run'}",
    ]
)

# %%
# The run's test split, embedded in the run's own view: the first 400 items are the gallery, the
# others the queries.
run = TrainedRun.load(work / "run", device="cpu")
test = run.embed("digits", split="test")  # .embeddings (n, d), .ids, .labels
gallery, queries = slice(0, 400), slice(400, None)
index = EmbeddingIndex.build(
    test.embeddings[gallery], ids=test.ids[gallery], labels=test.labels[gallery], model=run.model_id
)
index.save(work / "digits-index.npz")  # one checksummed file; load() refuses an edited one
print(len(index), "items of dimension", index.dim)

# %%
# Search: the 5 nearest gallery items of three queries, their distances and ids.
distances, rows, ids = EmbeddingIndex.load(work / "digits-index.npz").search(
    test.embeddings[queries][:3], k=5
)
print("query labels:   ", test.labels[queries][:3])
print("neighbour labels:\n", index.labels[rows])
print("distances:\n", distances.round(3))

# %%
# Classify every query by a vote of its 10 nearest items; the labels are the class names.
decided = index.classify(test.embeddings[queries], k=10)
accuracy = np.mean(decided.labels == test.labels[queries])
print(f"k-NN accuracy {accuracy:.3f}, mean confidence {decided.confidence.mean():.3f}")

# %%
# Open-set: only items within ``max_distance`` vote, and a query with none is "none of these"
# (the label ``""`` for string labels, -1 for integers; confidence 0). Here the distance is the
# 90th percentile of the queries' nearest-item distances.
nearest, _, _ = index.search(test.embeddings[queries], k=1)
cutoff = float(np.quantile(nearest[:, 0], 0.9))
open_set = index.classify(test.embeddings[queries], k=10, max_distance=cutoff)
unlabelled = open_set.labels == ""
print(f"beyond {cutoff:.3f}: {unlabelled.mean():.1%} of the queries left unlabelled")
kept = ~unlabelled
print(f"accuracy on the others {np.mean(open_set.labels[kept] == test.labels[queries][kept]):.3f}")
