# The adaptive-k paper's CPU cluster node (adaptive-k-momentum-sync, section
# 5.2: "3.40 GHz 4-cores Intel Core(TM) i5-7500 CPUs, 16 GB Memory").
about Intel Core i5-7500 (4 cores, 3.4 GHz, AVX2), fp32

# Peak: 4 cores x 3.4 GHz (base clock, Intel ARK) x 32 fp32 FLOPs per cycle
# (two 256-bit FMA units per Kaby Lake core) = 435.2 GFLOP/s.
# Sustained: x 0.5, an assumed efficiency for framework convolutions on a
# CPU (not measured: no such CPU here).
rate conv        2.176e11
rate dense       2.176e11
rate attention   2.176e11
# Memory: dual-channel DDR4-2400 (Intel ARK: 38.4 GB/s) x 0.8 = 30.72 GB/s.
bandwidth        3.072e10
rate depthwise   6.912e10   # bandwidth x 2.25
rate norm        1.024e10   # bandwidth x 4/12
rate elementwise 3.84e9     # bandwidth / 8
rate embedding   3.84e9     # bandwidth / 8

# adaptive-k paper, Table 4, Cp column (every synchronization model gives the
# same Cp), CPU cluster, 1 Gbit/s; mini-batch from its Table 3.
# ResNet34 on Cifar10 at mini-batch 32: 23 s per local step.
measured resnet34     32 23
# MobileNet on Cifar10 at mini-batch 64: 4.36 s. The paper's MobileNet is
# MobileNet v1 (4.2 M parameters, 28 layers in its Table 2).
measured mobilenet_v1 64 4.36
