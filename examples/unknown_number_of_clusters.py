"""
Clustering with an unknown number of clusters
=============================================

Three of the registered clusterers find the number of clusters themselves: k-means with
``n_clusters="auto"`` (the count of highest silhouette), Authority Ascent Shift (the OPML paper's
clustering) and HDBSCAN, the last two marking noise ``-1``. They meet the OPML paper's synthetic
set (its Fig. 5): three crescents and three Gaussians, 900 points, with 300 points of uniform
noise; k-means told the true count (6) is the reference. DSCL's spectral partition chooses by
its eigengap too, but in two dimensions it can see at most two groups.
"""

# %%
# The set, with the noise labelled -1.
import matplotlib.pyplot as plt

from clusterable import cluster
from clusterable.data import crescents_and_gaussians
from clusterable.evaluate import nmi, pairwise_f1

points = crescents_and_gaussians(seed=0)
print(points.x.shape, "points,", int((points.labels == -1).sum()), "of them noise")

# %%
# Each method by name, with the same call; all 1,200 points are scored, the noise as a class of
# its own, as the paper scores them.
methods = {
    "k-means, k = 6": ("kmeans", {"n_clusters": 6}),
    "k-means, auto": ("kmeans", {"n_clusters": "auto"}),
    "AAS, eps 0.9, theta_min 1": ("aas", {"eps": 0.9, "theta_min": 1.0}),
    "HDBSCAN": ("hdbscan", {}),
}
partitions = {}
for title, (name, options) in methods.items():
    partition = cluster.fit(points.x, name, seed=0, **options)
    partitions[title] = partition
    found = partition.labels_
    f1 = pairwise_f1(points.labels, found)[2]
    print(
        f"{title:26s} {partition.n_clusters:3d} clusters, {int((found == -1).sum()):3d} noise, "
        f"NMI {nmi(points.labels, found):.3f}, F {f1:.3f}"
    )

# %%
# The partitions (noise in grey).
figure, axes = plt.subplots(1, 4, figsize=(14, 3.6))
for ax, (title, partition) in zip(axes, partitions.items(), strict=True):
    found = partition.labels_
    ax.scatter(*points.x[found == -1].T, s=3, c="0.8")
    ax.scatter(*points.x[found >= 0].T, s=3, c=found[found >= 0], cmap="tab20")
    ax.set_title(f"{title}: {partition.n_clusters}")
    ax.set_xticks([])
    ax.set_yticks([])
figure.tight_layout()
