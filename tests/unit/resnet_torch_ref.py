"""PyTorch's side of tests/unit/test_resnet_torch.c: cnn:resnet20 (kernels/model.h)
built as He et al.'s CIFAR ResNet-20 with option-A shortcuts on 1x28x28 input,
loaded from the flat tensor the test wrote, run on the test's batch.

  resnet_torch_ref.py DIR BATCH
reads DIR/params.f32, x.f32, y.i32; moves the batch norms' betas a little
so that no ReLU input of the training pass lies within MARGIN of 0 (see
keep_off_zero) and writes the parameters so moved to DIR/params.f32 for the
test to use; then writes DIR/ref_grad.f32 (the gradient in the flat layout,
the tail holding the batch mean and unbiased variance of every batch norm),
ref_loss.txt (training-mode loss), ref_eval.txt (loss with the running
statistics) and ref_margin.txt (the smallest |input| of a ReLU in training
mode, at least MARGIN). Exits 77 when torch cannot be imported."""
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"resnet_torch_ref: no PyTorch here ({e})")
    sys.exit(77)


# A ReLU input within float rounding of 0 may be masked differently by
# the two sides (hiernet's float32 kernels and PyTorch's differ by a few
# 1e-6 after 19 layers), and a flipped mask element moves every gradient
# before it by up to 1e-2 of a block's largest: seeds 34 and 39 of 26..40
# failed so. Each ReLU input here is a batch norm's output (plus the
# shortcut), so moving that batch norm's beta of a channel moves every
# input of the channel by the same amount: keep_off_zero shifts each
# channel, layer by layer in forward order, to the middle of the nearest
# gap of at least 4 MARGIN around 0 among its inputs (channel_shift).
# MARGIN is 1e-4, about 30 times the two sides' differences. Measured on
# six random cases: one channel in seven moves, by at most 5e-3 to 1.2e-2
# (the betas themselves are 0 +- 0.05), every ReLU input ends at least
# 2e-4 from 0, and every ReLU still masks 26-51% of its inputs.
MARGIN = 1e-4
relu_inputs = []  # the smallest |input| of each ReLU of the last pass
adjusting = False  # keep_off_zero's pass: move betas as the ReLUs come


def channel_shift(values):
    """The smallest shift s for which no value + s lies within 2 MARGIN of
    0: 0 itself, or one that puts 0 in the middle of the nearest gap of 4
    MARGIN between two values, or 2 MARGIN past the smallest or largest."""
    v = np.sort(values)
    if np.abs(v).min() >= 2 * MARGIN:
        return 0.0
    lo, hi = v[:-1], v[1:]
    wide = hi - lo >= 4 * MARGIN
    zeros = np.concatenate(((lo[wide] + hi[wide]) / 2, [v[0] - 2 * MARGIN, v[-1] + 2 * MARGIN]))
    return -float(zeros[np.argmin(np.abs(zeros))])


def relu(t, bn):
    if adjusting:
        x = t.detach().double()
        shifts = torch.tensor([channel_shift(x[:, c].flatten().numpy())
                               for c in range(x.shape[1])], dtype=torch.float64)
        with torch.no_grad():
            bn.bias += shifts.float()
        t = t + shifts.float().view(1, -1, 1, 1)
    relu_inputs.append(t.detach().abs().min().item())
    return F.relu(t)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.pad = (cout - cin) // 2 if stride != 1 or cin != cout else None

    def forward(self, x):
        out = relu(self.bn1(self.conv1(x)), self.bn1)
        out = self.bn2(self.conv2(out))
        short = x
        if self.pad is not None:  # option A: subsample, zero-pad channels
            short = F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))
        return relu(out + short, self.bn2)


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for width, stride in ((16, 1), (32, 2), (64, 2)):
            for b in range(3):
                blocks.append(Block(cin, width, stride if b == 0 else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.linear = nn.Linear(64, 10)

    def forward(self, x):
        out = relu(self.bn1(self.conv1(x)), self.bn1)
        out = self.blocks(out)
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


def batchnorms(model):
    return [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]


def load_flat(model, flat):
    """Parameters in named_parameters() order, then each BN's running mean
    and var: kernels/model.h's layout."""
    at = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(flat[at:at + p.numel()]).view_as(p))
            at += p.numel()
        for bn in batchnorms(model):
            for buf in (bn.running_mean, bn.running_var):
                buf.copy_(torch.from_numpy(flat[at:at + buf.numel()]))
                at += buf.numel()
    assert at == flat.size, (at, flat.size)


def keep_off_zero(flat, x):
    """flat with the betas moved so that every ReLU input of the training
    pass on x lies at least MARGIN from 0 (the running statistics as
    they were: the pass runs on a copy of the model)."""
    global adjusting
    model = ResNet20()
    load_flat(model, flat)
    model.train()
    adjusting = True
    with torch.no_grad():
        model(x)
    adjusting = False
    moved = flat.copy()
    trainable = torch.cat([p.detach().flatten() for p in model.parameters()]).numpy()
    moved[:trainable.size] = trainable
    return moved


def main():
    out, batch = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    flat = np.fromfile(f"{out}/params.f32", dtype=np.float32)
    x = torch.from_numpy(np.fromfile(f"{out}/x.f32", dtype=np.float32)).view(batch, 1, 28, 28)
    y = torch.from_numpy(np.fromfile(f"{out}/y.i32", dtype=np.int32).astype(np.int64))
    flat = keep_off_zero(flat, x)
    flat.astype(np.float32).tofile(f"{out}/params.f32")
    model = ResNet20()
    load_flat(model, flat)
    model.eval()
    with torch.no_grad():
        eval_loss = F.cross_entropy(model(x), y).item()
    model.train()
    for bn in batchnorms(model):  # momentum 1: running stats = this batch's
        bn.momentum = 1.0
    relu_inputs.clear()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    parts = [p.grad.detach().flatten() for p in model.parameters()]
    for bn in batchnorms(model):
        parts += [bn.running_mean.flatten(), bn.running_var.flatten()]
    torch.cat(parts).numpy().astype(np.float32).tofile(f"{out}/ref_grad.f32")
    with open(f"{out}/ref_loss.txt", "w") as f:
        f.write(f"{loss.item():.9g}\n")
    with open(f"{out}/ref_eval.txt", "w") as f:
        f.write(f"{eval_loss:.9g}\n")
    with open(f"{out}/ref_margin.txt", "w") as f:
        f.write(f"{min(relu_inputs):.9g}\n")


if __name__ == "__main__":
    main()
