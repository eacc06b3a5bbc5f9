about NVIDIA Tesla V100 SXM2 (Volta GV100, 16/32 GB HBM2), fp32

# Peak: 15.7 TFLOP/s fp32 (NVIDIA Tesla V100 datasheet, SXM2).
# Sustained: x 0.6, an assumed cuDNN/cuBLAS fp32 efficiency (not measured:
# no such GPU here). Tensor cores (125 TFLOP/s fp16) not modelled.
rate conv        9.42e12
rate dense       9.42e12
rate attention   9.42e12
# Memory: 900 GB/s HBM2 (same datasheet) x 0.8.
bandwidth        7.2e11
rate depthwise   1.62e12    # bandwidth x 2.25
rate norm        2.4e11     # bandwidth x 4/12
rate elementwise 9.0e10     # bandwidth / 8
rate embedding   9.0e10     # bandwidth / 8
# No measured step: none published for these zoo models in fp32 that this
# repository can cite.
