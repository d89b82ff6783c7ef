"""Semi-hard triplets counted or listed from sorted rows, in O(n^2) memory, never O(|P| n).

FaceNet's semi-hard rule keeps the triplet ``(a, p, q)`` (``p`` a positive and ``q`` a negative
of anchor ``a``) when ``D_ap < D_aq < D_ap + margin``. Listing it the direct way compares every
positive pair with every negative, a ``(|P|, n + m)`` tensor: 470 MB at n = 4096 with classes of 8,
and ``n^3 / 2`` elements with two classes; the triplets themselves can be tens of millions.

Sorted per anchor, the negatives of ``(a, p)`` are a contiguous run of ``a``'s sorted negative
distances, and the positives for which ``(a, q)`` is semi-hard a contiguous run of its sorted
positive distances: two binary searches count each, exactly, from the same floating-point
comparisons as the direct rule (``D_ap + margin`` rounded once, as there). A loss linear in the
distances (the triplet hinge) needs only these counts; a loss that needs the triplets themselves
(OPML) lists them from the runs, in memory proportional to their number.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _sorted_rows(distances: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Each row's distances in ``mask``, ascending, then +inf: values, columns ``(n, n + m)``."""
    return distances.masked_fill(~mask, float("inf")).sort(dim=1)


def _sorted_positives(distances: Tensor, positive: Tensor) -> tuple[Tensor, Tensor]:
    """Each anchor's positive distances, ascending, then +inf: values and columns, ``(n, k)``.

    ``k`` is the most positives an anchor has (7 with classes of 8), so the searches among them
    take a few steps, not ``log2(n + m)``.
    """
    most = int(positive.sum(1).max()) if positive.numel() else 0
    return distances.masked_fill(~positive, float("inf")).topk(most, dim=1, largest=False)


def _positive_runs(
    sorted_negatives: Tensor, sorted_positives: Tensor, margin: float, semi_hard: bool
) -> tuple[Tensor, Tensor]:
    """Per positive ``(a, p)`` of :func:`_sorted_positives`: where its run of violating negatives
    starts in ``a``'s sorted negatives, and how many it holds (0 in the +inf padding), ``(n, k)``.

    A negative violates the margin when ``D_aq < D_ap + margin``, and is semi-hard when also
    ``D_ap < D_aq``: the negatives with ``D_aq <= D_ap`` and those with ``D_aq < D_ap + margin``
    are prefixes of the sorted row, so the window holds the difference of their lengths, clamped
    at 0 where ``D_ap + margin`` rounds to ``D_ap``.
    """
    end = torch.searchsorted(sorted_negatives, sorted_positives + margin, out_int32=True)
    if semi_hard:
        start = torch.searchsorted(sorted_negatives, sorted_positives, right=True, out_int32=True)
    else:
        start = torch.zeros_like(end)
    counts = (end - start).clamp_min_(0).masked_fill_(sorted_positives.isinf(), 0)
    return start, counts


def violation_counts(
    distances: Tensor, positive: Tensor, negative: Tensor, margin: float, semi_hard: bool = True
) -> tuple[Tensor, Tensor]:
    """How many margin-violating triplets each positive and each negative pair of an anchor is in.

    A triplet ``(a, p, q)`` violates the margin when ``D_aq < D_ap + margin``; with
    ``semi_hard`` only those with ``D_ap < D_aq`` too (FaceNet's semi-hard triplets).

    Parameters
    ----------
    distances : Tensor
        ``(n, n + m)`` distances from each anchor to its partners (squared for FaceNet); read
        without gradient.
    positive, negative : Tensor
        ``(n, n + m)`` bool masks of each anchor's positives and negatives.
    margin : float
        The margin, ``> 0``.
    semi_hard : bool
        Count the semi-hard triplets only.

    Returns
    -------
    as_positive : Tensor
        ``(n, n + m)`` int32: for a positive pair ``(a, p)``, the number of negatives ``q``
        making a counted triplet with it; 0 elsewhere.
    as_negative : Tensor
        ``(n, n + m)`` int32: for a negative pair ``(a, q)``, the number of positives ``p``
        making a counted triplet with it; 0 elsewhere. Both sum to the number of triplets.
    """
    distances = distances.detach()
    sorted_positives, positive_columns = _sorted_positives(distances, positive)  # (n, k) each
    sorted_negatives, _ = _sorted_rows(distances, negative)  # (n, n + m)
    _, counts = _positive_runs(sorted_negatives, sorted_positives, margin, semi_hard)  # (n, k)
    del sorted_negatives
    # The padding's columns are distinct non-positive ones, and its counts 0.
    as_positive = torch.zeros_like(distances, dtype=torch.int32).scatter_(
        1, positive_columns, counts
    )  # (n, n + m)
    # Positives with D_ap + margin <= D_aq, and (semi-hard) with D_ap < D_aq: both prefixes of the
    # sorted positives (x -> x + margin rounds monotonically), so the window is their difference,
    # clamped where D_ap + margin rounds to D_ap.
    out_of_reach = torch.searchsorted(
        sorted_positives + margin, distances, right=True, out_int32=True
    )  # (n, n + m)
    if semi_hard:
        below = torch.searchsorted(sorted_positives, distances, out_int32=True)  # (n, n + m)
        as_negative = (below - out_of_reach).clamp_min_(0)
    else:
        as_negative = positive.sum(1, keepdim=True, dtype=torch.int32) - out_of_reach
    return as_positive, as_negative.masked_fill_(~negative, 0)


def semi_hard_triplet_list(
    distances: Tensor, positive: Tensor, negative: Tensor, margin: float
) -> tuple[Tensor, Tensor, Tensor]:
    """The semi-hard triplets ``(anchor, positive, negative)``, each ``(t,)`` int64.

    The set :func:`clusterable.mining.semi_hard_triplets` mines, ordered by anchor, then by
    distance (the positive's, then the negative's), not by index. Memory ``O(n (n + m) + t)``.

    Parameters
    ----------
    distances, positive, negative, margin
        As in :func:`violation_counts`.
    """
    distances = distances.detach()
    sorted_positives, positive_columns = _sorted_positives(distances, positive)  # (n, k) each
    sorted_negatives, negative_columns = _sorted_rows(distances, negative)  # (n, n + m) each
    start, counts = _positive_runs(sorted_negatives, sorted_positives, margin, semi_hard=True)
    del sorted_negatives
    anchor, slot = counts.nonzero(as_tuple=True)  # (q,) each, positives with a triplet
    pair_counts = counts[anchor, slot].long()  # (q,)
    pair_starts = start[anchor, slot].long()  # (q,)
    total = int(pair_counts.sum()) if pair_counts.numel() else 0
    pair = torch.repeat_interleave(
        torch.arange(anchor.numel(), device=distances.device), pair_counts, output_size=total
    )  # (t,)
    first_of_pair = torch.cumsum(pair_counts, 0) - pair_counts  # (q,)
    rank = torch.arange(total, device=distances.device) - first_of_pair[pair]  # (t,)
    anchors = anchor[pair]  # (t,)
    positives = positive_columns[anchors, slot[pair]]  # (t,)
    negatives = negative_columns[anchors, pair_starts[pair] + rank]  # (t,)
    return anchors, positives, negatives
