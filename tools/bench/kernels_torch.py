"""PyTorch's side of tools/bench/kernels: one training step (forward,
cross-entropy, backward) of ResNet-20 on 1x28x28 input (option-A shortcuts,
the model of tests/unit/resnet_torch_ref.py, i.e. hiernet's cnn:resnet20) on
one thread, timed like bench_kernels --model cnn:resnet20: best of 5 rounds,
by this thread's CPU time. Prints one line, then a JSON object.

  kernels_torch.py BATCH SECONDS"""
import importlib.util
import os
import sys
import time

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "resnet_ref", os.path.join(here, "..", "..", "tests", "unit", "resnet_torch_ref.py"))
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)


def step(model, x, y):
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()


def main():
    batch, seconds = int(sys.argv[1]), float(sys.argv[2])
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = ref.ResNet20().train()
    x = torch.rand(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    step(model, x, y)  # warm-up: allocator, oneDNN primitives
    best = float("inf")
    for _ in range(5):
        n, start = 0, time.thread_time()
        while True:
            step(model, x, y)
            n += 1
            elapsed = time.thread_time() - start
            if elapsed >= seconds / 5:
                break
        best = min(best, elapsed / n)
    print(f"pytorch {torch.__version__} resnet20 batch {batch}: {best * 1e3:.3f} ms/step "
          f"(1 thread, mkldnn {torch.backends.mkldnn.is_available()})")
    print(f'{{"bench":"kernels_torch","batch":{batch},"ms_per_step":{best * 1e3:.3f}}}')


if __name__ == "__main__":
    main()
