# The adaptive-k paper's GPU and HDGib server host CPU (adaptive-k-momentum-
# sync, section 5.2: "Intel Xeon Silver 4114 CPU @ 2.20 GHz"): the parameter
# server's CPU, whose memory bandwidth the paper names as a bottleneck
# (section 5.6). Used for aggregation (profile_add_seconds: bandwidth only).
about Intel Xeon Silver 4114 (10 cores, 2.2 GHz, AVX-512, one socket), fp32

# Peak: 10 cores x 2.2 GHz (base clock, Intel ARK) x 32 fp32 FLOPs per cycle
# (one 512-bit FMA unit per core on Xeon Silver) = 704 GFLOP/s.
# Sustained: x 0.5, an assumed efficiency for framework convolutions on a
# CPU (not measured: no such CPU here).
rate conv        3.52e11
rate dense       3.52e11
rate attention   3.52e11
# Memory: DDR4-2400, 6 channels per socket (Intel ARK) = 6 x 8 bytes x
# 2400 MT/s = 115.2 GB/s peak, x 0.8 = 92.16 GB/s. The paper's GPU-cluster
# servers have 4 of its cores: the whole socket's bandwidth is an upper
# bound of what they had.
bandwidth        9.216e10
rate depthwise   2.0736e11  # bandwidth x 2.25
rate norm        3.072e10   # bandwidth x 4/12
rate elementwise 1.152e10   # bandwidth / 8
rate embedding   1.152e10   # bandwidth / 8
