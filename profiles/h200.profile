about NVIDIA H200 SXM 141 GB (Hopper GH100, HBM3e), fp32

# The one profile whose figures were measured, not assumed: on an H200 lent
# to this project for one session (driver 580.159.04, CUDA 13.0, PyTorch
# 2.11.0 with cuDNN 9.19), by tools/bench/profile_torch.py (tools/gpu-check
# runs it): float32 throughout, TF32 off, cuDNN choosing its algorithms,
# each figure the median of 5 rounds timed with CUDA events after a warm-up.
# docs/models.md ("One GPU measured") sets these steps beside the FLOP
# estimates of this profile and of h100.
#
# Peak: 67 TFLOP/s fp32, the H100 SXM's (the same GH100 chip; NVIDIA H200
# datasheet). Sustained: a float32 GEMM of 8192 x 8192 x 8192 (cuBLAS
# through torch.mm) ran at 51.08 TFLOP/s, 0.76 of the peak.
rate conv        5.108e13
rate dense       5.108e13
rate attention   5.108e13
# Memory: a 2 GiB device-to-device copy moved 4.249 TB/s, counting bytes
# read and written (0.885 of the datasheet's 4.8 TB/s).
bandwidth        4.249e12
rate depthwise   9.56e12    # bandwidth x 2.25
rate norm        1.416e12   # bandwidth x 4/12
rate elementwise 5.31e11    # bandwidth / 8
rate embedding   5.31e11    # bandwidth / 8

# Training steps (forward, cross-entropy, backward; no optimizer step) of
# torchvision's models at the zoo's input, 3x224x224, 1000 classes, and of
# Hugging Face's GPT-2 small (random weights, 1024 tokens). The first of
# two runs; the second, on a fresh machine of the same kind, was within 1%
# of each, but for mobilenet_v2 (0.01683 s, 10% less).
measured resnet18     32 0.01359
measured resnet34     32 0.02352
measured resnet50     32 0.03790
measured resnet101    32 0.06521
measured resnet152    32 0.09275
measured vgg16        32 0.05406
measured vgg19        32 0.06457
measured mobilenet_v2 32 0.01860
measured gpt2-small    8 0.1760
