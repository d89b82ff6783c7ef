"""``clusterable cache``: the decoded training images kept on disk (``--cache-images disk``,
:mod:`clusterable.data.image_cache`): ``cache list`` shows them, ``cache clear`` deletes them."""

from __future__ import annotations

import argparse
from pathlib import Path

from clusterable.cli._parser import Verbs

#: The folder caches are kept in, as ``--help`` says it (the library's own rule decides).
ROOT_HELP = (
    "folder of the caches (default: $CLUSTERABLE_CACHE_DIR, else "
    "$XDG_CACHE_HOME/clusterable/decoded-images, ~/.cache without XDG_CACHE_HOME)"
)


def _listing(root: Path) -> list[str]:
    """The lines of ``cache list``: the folder, then one line per cache."""
    from clusterable.data.image_cache import list_caches

    entries = list_caches(root)
    if not entries:
        return [f"no image caches in {root}"]
    lines = [f"image caches in {root}:", f"{'key':24}  {'images':>9}  {'MiB':>9}  created  source"]
    for entry in entries:
        lines.append(
            f"{entry.key:24}  {entry.items:>9,}  {entry.bytes / 2**20:>9,.1f}  {entry.created}  "
            f"{entry.source}"
        )
    total = sum(entry.bytes for entry in entries) / 2**20
    lines.append(f"{len(entries)} cache(s), {total:,.1f} MiB")
    return lines


def command_cache(args: argparse.Namespace) -> int:
    """Run ``clusterable cache`` with the parsed ``args``; its exit status."""
    from clusterable.data.image_cache import cache_root, clear_caches

    root = cache_root() if args.dir is None else Path(args.dir).expanduser()
    if root.exists() and not root.is_dir():
        raise ValueError(f"--dir {root}: it is a file, not a folder of image caches")
    if args.action == "list":
        print("\n".join(_listing(root)))
        return 0
    if bool(args.keys) == args.all:
        given = "both KEY and --all" if args.all else "neither KEY nor --all"
        raise ValueError(
            f"cache clear: {given} given; name the caches to delete (KEY ..., from `clusterable "
            "cache list`), or give --all for every one"
        )
    cleared, busy = clear_caches(None if args.all else args.keys, root)
    print(f"cleared {len(cleared)} image cache(s) from {root}")
    if busy:
        print(f"left {len(busy)} that a run is building now: {', '.join(busy)}")
    return 0


def add_cache(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``cache`` verb's parser: its flags, defaults and help."""
    cache = verbs(
        "cache",
        "list or clear the training images decoded to disk (train --cache-images disk)",
        "clusterable cache list; clusterable cache clear --all",
        command_cache,
        seeded=False,
    )
    actions = cache.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="each cache: key, images, size, created, source")
    clearing = actions.add_parser("clear", help="delete the caches named, or --all")
    clearing.add_argument("keys", nargs="*", metavar="KEY", help="a cache's key (cache list)")
    clearing.add_argument(
        "--all", action="store_true", help="every cache and what killed builds left"
    )
    for action in (listing, clearing):
        action.add_argument("--dir", default=None, help=ROOT_HELP)
    return cache
