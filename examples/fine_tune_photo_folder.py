"""
Fine-tuning on a folder of photos
=================================

``clusterable train --data folder:PATH`` trains on a folder of images with one sub-folder per
class. Here the "photos" are 60 small PNG files generated in a temporary folder (three classes of
coloured shapes on a noisy background), and the model is the bundled ``corel-cnn`` (the COREL
paper's CNN), which needs neither torchvision nor timm; an ImageNet backbone
(``--model torchvision:resnet50 --model-arg weights=PATH``) trains the same way. The command line
is called in-process through :func:`clusterable.cli.main`, with the arguments a shell would pass.
"""

# %%
# A folder of photos: ``photos/<class>/<name>.png``, 28 x 28 RGB.
import json
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from clusterable.cli import main

scratch = tempfile.TemporaryDirectory()  # removed with the object, when the script ends
work = Path(scratch.name)
photos = work / "photos"
rng = np.random.default_rng(0)
colours = {"red-square": (220, 40, 40), "green-disc": (40, 200, 60), "blue-bar": (40, 70, 230)}
yy, xx = np.mgrid[:28, :28]
for name, colour in colours.items():
    (photos / name).mkdir(parents=True)
    for i in range(20):
        pixels = rng.integers(0, 90, size=(28, 28, 3))  # a noisy dark background
        cy, cx = rng.integers(9, 19, size=2)
        if name == "red-square":
            shape = (abs(yy - cy) < 6) & (abs(xx - cx) < 6)
        elif name == "green-disc":
            shape = (yy - cy) ** 2 + (xx - cx) ** 2 < 40
        else:
            shape = abs(yy - cy) < 3
        pixels[shape] = colour
        Image.fromarray(pixels.astype(np.uint8)).save(photos / name / f"{i:02d}.png")
print(sorted(p.name for p in photos.iterdir()), len(list(photos.rglob("*.png"))), "images")

# %%
# Train: a seeded stratified 70 % / 30 % split, the triplet loss with semi-hard mining, three
# epochs on the CPU. The banner says what was read and built; the table is the test split's.
run = work / "run"
main(
    [
        "train",
        f"--data=folder:{photos}",
        "--model=corel-cnn",
        "--loss=triplet",
        "--embedding-dim=16",
        "--epochs=3",
        "--batch-size=21",
        "--device=cpu",
        "--no-progress",
        "--no-report",
        f"--out={run}",
    ]
)

# %%
# The run folder holds the settings, the log, the checkpoints and the test metrics; every verb
# that takes a run (``evaluate``, ``embed``, ``index``, ``search``, ``report``) reads it.
print(sorted(p.name for p in run.iterdir()))
scores = json.loads((run / "test_metrics.json").read_text())
print({key: round(scores[key], 3) for key in ("recall@1", "map@r", "nmi", "silhouette")})
