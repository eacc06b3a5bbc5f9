"""Measures a GPU for a device profile (profiles/README.md) with PyTorch:
its float32 GEMM rate (TF32 off, as the profiles count fp32), its memory
copy bandwidth, and the training step (forward, cross-entropy, backward;
no optimizer) of each zoo model PyTorch can build at the zoo's input
(torchvision's resnet18/34/50/101/152, vgg16/19, mobilenet_v2 at 3x224x224;
GPT-2 small from transformers, randomly initialised, 1024 tokens), in
float32 with cuDNN choosing its algorithms. Each figure is the median of
5 rounds timed with CUDA events after a warm-up. Each model's parameter
count is printed, to hold against the zoo's (`hiernet models`).

Prints readable lines, then one JSON object (its "measured" rows are the
profile's `measured MODEL BATCH SECONDS` lines).

  profile_torch.py [BATCH (32)] [SECONDS per model (2)] [GPT2_BATCH (8)]"""
import json
import statistics
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a GPU machine's python without PyTorch: nothing to profile
    print(f"SKIP: no PyTorch for {sys.executable} ({e}); HIERNET_PYTHON names another python")
    sys.exit(77)

ZOO_TORCHVISION = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vgg16", "vgg19",
                   "mobilenet_v2"]


def timed(fn, seconds):
    """Median seconds per call of fn over 5 rounds of about seconds/5 each."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    once = max(start.elapsed_time(end) / 1e3, 1e-6)
    reps = max(1, int(seconds / 5 / once))
    rounds = []
    for _ in range(5):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        rounds.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(rounds)


def gemm_rate(n=8192):
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    return 2 * n**3 / timed(lambda: torch.mm(a, b), 1.0)


def copy_bandwidth(gib=2):
    src = torch.randn(gib * 2**28, device="cuda")  # 4-byte floats
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / timed(lambda: dst.copy_(src), 1.0)  # read + write


def step_time(model, x, y, seconds):
    def step():
        model.zero_grad(set_to_none=True)
        out = model(x)
        logits = out.logits if hasattr(out, "logits") else out
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()

    for _ in range(3):  # warm-up: cuDNN's algorithm search, the allocator
        step()
    return timed(step, seconds)


def vision_model(name, batch):
    import torchvision
    model = getattr(torchvision.models, name)(num_classes=1000).cuda().train()
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    return name, batch, model, x, y


def vision_models(batch):
    for name in ZOO_TORCHVISION:
        yield vision_model(name, batch)


def gpt2(batch):
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as e:
        print(f"gpt2-small: not measured ({e})")
        return
    model = GPT2LMHeadModel(GPT2Config()).cuda().train()  # 124M parameters, tied embedding
    x = torch.randint(0, 50257, (batch, 1024), device="cuda")
    yield "gpt2-small", batch, model, x, x


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    gpt2_batch = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    name = torch.cuda.get_device_name(0)
    print(f"{name}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuDNN {torch.backends.cudnn.version()}, float32 (TF32 off)")
    rate, bw = gemm_rate(), copy_bandwidth()
    print(f"sgemm 8192^3: {rate / 1e12:.2f} TFLOP/s; copy: {bw / 1e12:.3f} TB/s (read + write)")
    result = {"bench": "profile_torch", "device": name, "torch": torch.__version__,
              "sgemm_flops": rate, "copy_bytes_per_s": bw, "measured": []}
    for source in (vision_models(batch), gpt2(gpt2_batch)):
        for model_name, b, model, x, y in source:
            params = sum(p.numel() for p in model.parameters())
            t = step_time(model, x, y, seconds)
            print(f"{model_name:14s} batch {b:3d}: {t * 1e3:9.2f} ms/step  ({params} parameters)")
            result["measured"].append({"model": model_name, "batch": b, "seconds": t,
                                       "params": params})
            del model, x, y
            torch.cuda.empty_cache()
    # TF32 for one model, to show what the fp32 profiles leave out.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    _, _, model, x, y = vision_model("resnet50", batch)
    t = step_time(model, x, y, seconds)
    print(f"resnet50 with TF32: {t * 1e3:.2f} ms/step (not used by the fp32 profile)")
    result["resnet50_tf32_seconds"] = t
    print(json.dumps(result, separators=(",", ":")))


if __name__ == "__main__":
    main()
