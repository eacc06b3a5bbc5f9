"""PyTorch's side of tools/bench/kernels: one training step (forward,
cross-entropy, backward) of ResNet-20 on 1x28x28 input (option-A shortcuts,
the model of tests/unit/resnet_torch_ref.py, i.e. hiernet's cnn:resnet20) on
one thread, timed like bench_kernels --model cnn:resnet20: best of 5 rounds,
by this thread's CPU time. With DEVICE cuda, on the GPU in float32 with
TF32 off (hiernet's CUDA kernels compute in plain float32), timed by the
wall clock after a synchronize, like bench_kernels_device; the batch is
copied from host memory in every step, as hiernet's peer does.
Prints one line, then a JSON object.

  kernels_torch.py BATCH SECONDS [DEVICE (cpu)]"""
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


def step(model, x, y, device):
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x.to(device)), y.to(device)).backward()
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    batch, seconds = int(sys.argv[1]), float(sys.argv[2])
    device = torch.device(sys.argv[3] if len(sys.argv) > 3 else "cpu")
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True  # its best convolution algorithms, found in the warm-up
    clock = time.thread_time if device.type == "cpu" else time.perf_counter
    model = ref.ResNet20().train().to(device)
    x = torch.rand(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    for _ in range(3 if device.type == "cuda" else 1):
        step(model, x, y, device)  # warm-up: allocator, oneDNN primitives, cuDNN's search
    best = float("inf")
    for _ in range(5):
        n, start = 0, clock()
        while True:
            step(model, x, y, device)
            n += 1
            elapsed = clock() - start
            if elapsed >= seconds / 5:
                break
        best = min(best, elapsed / n)
    where = (f"1 thread, mkldnn {torch.backends.mkldnn.is_available()}" if device.type == "cpu"
             else f"{torch.cuda.get_device_name(device)}, float32, cuDNN {torch.backends.cudnn.version()}")
    print(f"pytorch {torch.__version__} resnet20 batch {batch}: {best * 1e3:.3f} ms/step ({where})")
    print(f'{{"bench":"kernels_torch","device":"{device.type}","batch":{batch},'
          f'"ms_per_step":{best * 1e3:.3f}}}')


if __name__ == "__main__":
    main()
