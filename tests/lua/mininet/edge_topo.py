"""A custom Mininet topology for tests/lua/mininet_import.lua: two sites
behind a core switch, every TCLink parameter hiernet maps, a CPU-limited
host class, addresses hiernet drops, and the `topos` dict of `mn --custom`."""
from mininet.link import TCLink
from mininet.node import CPULimitedHost, OVSKernelSwitch
from mininet.topo import Topo


class EdgeTopo(Topo):
    "sites x hosts_per_site hosts, one switch per site, a core switch"

    def build(self, sites=2, hosts_per_site=2, core_bw=100):
        core = self.addSwitch("core", cls=OVSKernelSwitch)
        for s in range(1, sites + 1):
            sw = self.addSwitch("s%d" % s, dpid="%016x" % s)
            self.addLink(sw, core, cls=TCLink, bw=core_bw, delay="10ms", jitter="1ms", loss=0.5,
                         max_queue_size=200)
            for h in range(1, hosts_per_site + 1):
                host = self.addHost("h%d%d" % (s, h), cls=CPULimitedHost, cpu=0.25,
                                    ip="10.0.%d.%d/24" % (s, h))
                self.addLink(host, sw, cls=TCLink, bw=10.5, delay="2.5msec", max_queue_size=50)
        # A bare number: Mininet hands it to tc, which reads microseconds.
        self.addLink("h11", "h21", cls=TCLink, delay=250)


topos = {"edge": lambda *args, **kwargs: EdgeTopo(*args, **kwargs)}
