# A made-up device with round rates, for tests only (tests/lua/profiled.lua):
# every op kind at 1e10 FLOP/s, so that a grad takes grad FLOPs x batch /
# 1e10 seconds and a test computes the time it expects. Not a real device.
about test device with round rates (not a real one)
rate conv        1e10
rate depthwise   1e10
rate dense       1e10
rate attention   1e10
rate norm        1e10
rate elementwise 1e10
rate embedding   1e10
bandwidth        1e10

# Step times made up for the tests: round numbers they check against.
measured mlp:784-128-10 100 0.5
measured mobilenet_v2 16 0.01
# EASGD's ordering in tests/lua/profiled.lua: the profiled model and its
# surrogate, both at one made-up time.
measured mobilenet_v2 32 0.4
measured mlp:16-32-4 32 0.4
