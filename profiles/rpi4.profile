about Raspberry Pi 4 Model B (4x Cortex-A72 at 1.5 GHz, LPDDR4), fp32

# Peak: 4 cores x 1.5 GHz (Raspberry Pi 4 product brief) x 16 fp32 FLOPs per
# cycle (two 128-bit NEON pipes, each a 4-wide FMA: Arm Cortex-A72 Software
# Optimization Guide) = 96 GFLOP/s.
# Sustained: x 0.5, an assumed efficiency (not measured: no such board here).
rate conv        4.8e10
rate dense       4.8e10
rate attention   4.8e10
# Memory: LPDDR4-3200 on a 32-bit bus = 12.8 GB/s peak x 0.8. Published
# STREAM runs on this board report less (a few GB/s); this figure is the
# uniform derivation of profiles/README.md, likely optimistic.
bandwidth        1.024e10
rate depthwise   2.304e10   # bandwidth x 2.25
rate norm        3.413e9    # bandwidth x 4/12
rate elementwise 1.28e9     # bandwidth / 8
rate embedding   1.28e9     # bandwidth / 8
