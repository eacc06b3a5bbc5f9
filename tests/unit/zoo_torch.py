#!/usr/bin/env python3
"""zoo_torch.py — the zoo's derived counts against torch.nn: each zoo
architecture built again with torch.nn modules (torchvision is not in
Debian, so the same layouts are written out here), its parameters counted
by torch and its conv / linear multiply-accumulates measured with forward
hooks on one sample (on PyTorch's meta device: shapes only), against `hiernet models NAME` (parameters exactly,
FLOPs to the 4 decimals of GFLOP it prints). Exits 77 without python3-torch
(tools/setup torch installs it).
Usage: zoo_torch.py HIERNET_BINARY"""
import functools
import re
import subprocess
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: python3-torch is not installed (tools/setup torch)")
    sys.exit(77)

torch.set_num_threads(1)
# Every module on the meta device: shapes without memory or arithmetic, so
# VGG and GPT-2 cost nothing to build and run.
META = torch.device("meta")
Conv2d = functools.partial(nn.Conv2d, device=META)
BatchNorm2d = functools.partial(nn.BatchNorm2d, device=META)
Linear = functools.partial(nn.Linear, device=META)
LayerNorm = functools.partial(nn.LayerNorm, device=META)
Embedding = functools.partial(nn.Embedding, device=META)


def conv_bn(cin, cout, k, stride=1, groups=1):
    return [Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
            BatchNorm2d(cout), nn.ReLU()]


class Residual(nn.Module):
    """A ResNet block: body, shortcut (projection where the shape changes)."""

    def __init__(self, cin, width, stride, bottleneck):
        super().__init__()
        cout = width * 4 if bottleneck else width
        if bottleneck:
            layers = conv_bn(cin, width, 1) + conv_bn(width, width, 3, stride) + conv_bn(width, cout, 1)[:2]
        else:
            layers = conv_bn(cin, width, 3, stride) + conv_bn(width, width, 3)[:2]
        self.body = nn.Sequential(*layers)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(Conv2d(cin, cout, 1, stride, bias=False), BatchNorm2d(cout))
        self.cout = cout

    def forward(self, x):
        return torch.relu(self.body(x) + self.short(x))


def resnet(depths, bottleneck):
    layers = conv_bn(3, 64, 7, 2) + [nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, n in enumerate(depths):
        for i in range(n):
            block = Residual(cin, 64 << stage, 2 if stage and not i else 1, bottleneck)
            layers.append(block)
            cin = block.cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), Linear(cin, 1000))


def vgg(config):
    layers, cin = [], 3
    for c in config:
        if c == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [Conv2d(cin, c, 3, padding=1), nn.ReLU()]
            cin = c
    return nn.Sequential(*layers, nn.Flatten(), Linear(512 * 7 * 7, 4096), nn.ReLU(),
                         Linear(4096, 4096), nn.ReLU(), Linear(4096, 1000))


def mobilenet_v1():
    layers, cin = conv_bn(3, 32, 3, 2), 32
    for cout, s in [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]:
        layers += conv_bn(cin, cin, 3, s, groups=cin) + conv_bn(cin, cout, 1)
        cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), Linear(1024, 1000))


class InvertedResidual(nn.Module):
    def __init__(self, cin, t, cout, stride):
        super().__init__()
        mid = cin * t
        layers = conv_bn(cin, mid, 1) if t != 1 else []
        layers += conv_bn(mid, mid, 3, stride, groups=mid) + conv_bn(mid, cout, 1)[:2]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


def mobilenet_v2():
    layers, cin = conv_bn(3, 32, 3, 2), 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            layers.append(InvertedResidual(cin, t, c, s if i == 0 else 1))
            cin = c
    return nn.Sequential(*layers, *conv_bn(320, 1280, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         Linear(1280, 1000))


def gpt2_small():
    d, vocab, ctx = 768, 50257, 1024
    blocks = [nn.ModuleList([LayerNorm(d), Linear(d, 3 * d), Linear(d, d), LayerNorm(d),
                             Linear(d, 4 * d), Linear(4 * d, d)]) for _ in range(12)]
    model = nn.ModuleDict({"wte": Embedding(vocab, d), "wpe": Embedding(ctx, d),
                           "blocks": nn.ModuleList(blocks), "ln_f": LayerNorm(d),
                           "head": Linear(d, vocab, bias=False)})
    model["head"].weight = model["wte"].weight  # tied, as the released checkpoint
    return model


def params(model):
    return sum(p.numel() for p in model.parameters())  # shared tensors once


def macs(model):
    """Conv and linear multiply-accumulates of one 224x224 sample."""
    total = 0

    def hook(module, inputs, out):
        nonlocal total
        if isinstance(module, nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1]
            total += out.numel() * module.in_channels // module.groups * k
        elif isinstance(module, nn.Linear):
            total += out.numel() * module.in_features
    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model.eval()(torch.zeros(1, 3, 224, 224, device=META))
    for h in handles:
        h.remove()
    return total


def zoo(hiernet, name):
    out = subprocess.run([hiernet, "models", name], capture_output=True, text=True, check=True).stdout
    p = int(re.search(r"parameters (\d+)", out).group(1))
    fwd = sum(float(m.group(2)) for m in re.finditer(r"^(conv|depthwise|dense)\s+([\d.]+)", out, re.M))
    return p, fwd / 2


def main():
    hiernet = sys.argv[1]
    v16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    v19 = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"]
    cnns = {"resnet18": lambda: resnet([2, 2, 2, 2], False), "resnet34": lambda: resnet([3, 4, 6, 3], False),
            "resnet50": lambda: resnet([3, 4, 6, 3], True), "resnet101": lambda: resnet([3, 4, 23, 3], True),
            "vgg16": lambda: vgg(v16), "vgg19": lambda: vgg(v19),
            "mobilenet_v1": mobilenet_v1, "mobilenet_v2": mobilenet_v2}
    failed = checks = 0
    for name, build in cnns.items():
        model = build()
        zp, zmacs = zoo(hiernet, name)
        tp, tmacs = params(model), macs(model) / 1e9
        checks += 2
        if zp != tp:
            failed += 1
            print(f"FAIL: {name}: zoo {zp} parameters, torch.nn {tp}")
        if abs(zmacs - tmacs) > 1e-4 + 1e-6 * tmacs:
            failed += 1
            print(f"FAIL: {name}: zoo {zmacs:.5f} GMACs, torch.nn {tmacs:.5f}")
    zp, _ = zoo(hiernet, "gpt2-small")
    checks += 1
    if zp != params(gpt2_small()):
        failed += 1
        print(f"FAIL: gpt2-small: zoo {zp} parameters, torch.nn {params(gpt2_small())}")
    print(f"{checks - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
