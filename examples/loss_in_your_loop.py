"""
A loss in your own training loop
================================

Any loss of :mod:`clusterable.losses` drops into a plain PyTorch loop: it takes a batch of
embeddings ``(n, d)`` and their labels ``(n,)`` and returns a scalar to back-propagate. Here a
small network learns an embedding of scikit-learn's 8 x 8 digits with the triplet loss on
semi-hard triplets mined in each batch (FaceNet; Eq. 2 of Oh Song et al., CVPR 2016), and MAP@R
(Musgrave et al. 2020) on the test split is measured before and after.
"""

# %%
# The data: scikit-learn's digits, split by the library (1,797 images, 10 classes).
import torch

from clusterable.data import load_dataset
from clusterable.evaluate import map_at_r
from clusterable.losses import build_loss

train = load_dataset("digits", split="train")
test = load_dataset("digits", split="test")
x_train = torch.from_numpy(train.x).flatten(1)  # (n, 64)
y_train = torch.from_numpy(train.labels)  # (n,)
x_test = torch.from_numpy(test.x).flatten(1)
print(f"{len(x_train)} training and {len(x_test)} test images")

# %%
# A network, the loss and an optimiser: nothing of clusterable's but the loss.
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))
loss_fn = build_loss("triplet", mining="semi-hard")
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)


def test_map_at_r() -> float:
    with torch.no_grad():
        return map_at_r(net(x_test), test.labels, device="cpu")


print(f"MAP@R before training: {test_map_at_r():.3f}")

# %%
# The loop: shuffled batches of 128, five epochs.
for epoch in range(5):
    order = torch.randperm(len(x_train))
    for batch in order.split(128):
        loss = loss_fn(net(x_train[batch]), y_train[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch + 1}: last batch's loss {loss.item():.4f}")
print(f"MAP@R after training: {test_map_at_r():.3f}")
