#!/usr/bin/python3
"""startup_mininet.py N: Debian's Mininet on single,N, for tools/bench/startup --mininet.

Builds Mininet's single-switch topology of N hosts, starts it and stops it,
timing both with Mininet's own API (the same steps as `mn --topo single,N
--test none`). The switch is Mininet's LinuxBridge with no controller, the
closest match to hiernet's switch (a Linux bridge): Open vSwitch would need
its daemons, which Debian's mininet does not start. Hosts get no link
shaping (TCLink), as hiernet's star here gets only a rate.
Last line: "mininet UP_S DOWN_S".
"""
import sys
import time

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.nodelib import LinuxBridge
from mininet.topo import SingleSwitchTopo


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    setLogLevel("warning")
    t0 = time.monotonic()
    net = Mininet(topo=SingleSwitchTopo(n), switch=LinuxBridge, controller=None,
                  autoSetMacs=True, waitConnected=False)
    net.start()
    t1 = time.monotonic()
    net.stop()
    t2 = time.monotonic()
    print("mininet %.3f %.3f" % (t1 - t0, t2 - t1))


if __name__ == "__main__":
    main()
