# The adaptive-k paper's GPU cluster node (adaptive-k-momentum-sync, section
# 5.2: "1 GeForce RTX 2080Ti GPU").
about NVIDIA GeForce RTX 2080 Ti (Turing TU102, 11 GB GDDR6), fp32

# Peak: 4352 CUDA cores x 2 FLOPs x 1545 MHz boost clock (NVIDIA reference
# specification) = 13.45 TFLOP/s fp32.
# Sustained: x 0.6, an assumed cuDNN/cuBLAS fp32 efficiency (not measured:
# no such GPU here).
rate conv        8.07e12
rate dense       8.07e12
rate attention   8.07e12
# Memory: 616 GB/s (352-bit GDDR6 at 14 Gbit/s, NVIDIA specification) x 0.8.
bandwidth        4.928e11
rate depthwise   1.109e12   # bandwidth x 2.25
rate norm        1.643e11   # bandwidth x 4/12
rate elementwise 6.16e10    # bandwidth / 8
rate embedding   6.16e10    # bandwidth / 8

# adaptive-k paper, Table 4, Cp column, GPU cluster; mini-batch from its
# Table 3. The paper's inputs are TinyImagenet (64x64) and Cifar100 (32x32),
# not the zoo's 224x224; its Cp is the time it measured, whatever it covers.
measured resnet50  32 0.86   # ResNet50 / TinyImagenet
measured resnet101 64 0.89   # ResNet101 / Cifar100
measured vgg16     32 0.98   # VGG16 / Cifar100
