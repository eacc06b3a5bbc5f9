about NVIDIA Jetson Nano (128-core Maxwell GPU at 921.6 MHz, 4 GB LPDDR4), fp32

# Peak: 128 CUDA cores x 2 FLOPs x 921.6 MHz = 235.9 GFLOP/s fp32 (NVIDIA's
# Jetson Nano datasheet gives 472 GFLOP/s fp16, twice this).
# Sustained: x 0.6, an assumed cuDNN/cuBLAS fp32 efficiency (not measured:
# no such board here).
rate conv        1.416e11
rate dense       1.416e11
rate attention   1.416e11
# Memory: 25.6 GB/s LPDDR4, 64-bit (same datasheet) x 0.8, shared with the CPU.
bandwidth        2.048e10
rate depthwise   4.608e10   # bandwidth x 2.25
rate norm        6.827e9    # bandwidth x 4/12
rate elementwise 2.56e9     # bandwidth / 8
rate embedding   2.56e9     # bandwidth / 8
