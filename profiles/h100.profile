about NVIDIA H100 SXM5 80 GB (Hopper GH100, HBM3), fp32

# Peak: 67 TFLOP/s fp32 (NVIDIA H100 datasheet, SXM5; 66.9 with its clocks).
# Sustained: x 0.6, an assumed cuDNN/cuBLAS fp32 efficiency (not measured:
# see docs/models.md). TF32/BF16 tensor cores not modelled.
rate conv        4.014e13
rate dense       4.014e13
rate attention   4.014e13
# Memory: 3.35 TB/s HBM3 (same datasheet) x 0.8.
bandwidth        2.68e12
rate depthwise   6.03e12    # bandwidth x 2.25
rate norm        8.933e11   # bandwidth x 4/12
rate elementwise 3.35e11    # bandwidth / 8
rate embedding   3.35e11    # bandwidth / 8
# No measured step (none this repository can cite).
