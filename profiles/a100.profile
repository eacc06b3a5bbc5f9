about NVIDIA A100 SXM4 40 GB (Ampere GA100, HBM2), fp32

# Peak: 19.5 TFLOP/s fp32 (NVIDIA A100 datasheet).
# Sustained: x 0.6, an assumed cuDNN/cuBLAS fp32 efficiency (not measured:
# no such GPU here). TF32 tensor cores (156 TFLOP/s, same datasheet) not
# modelled.
rate conv        1.17e13
rate dense       1.17e13
rate attention   1.17e13
# Memory: 1555 GB/s (A100 40 GB, same datasheet) x 0.8.
bandwidth        1.244e12
rate depthwise   2.799e12   # bandwidth x 2.25
rate norm        4.147e11   # bandwidth x 4/12
rate elementwise 1.555e11   # bandwidth / 8
rate embedding   1.555e11   # bandwidth / 8
# No measured step (none this repository can cite).
