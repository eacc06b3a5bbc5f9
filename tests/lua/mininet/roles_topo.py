"""Node classes and link parameters for tests/lua/mininet_examples.lua: a
router that turns on forwarding itself, one that only options.roles names,
classes hiernet does not know (lenient makes them plain), classes it
refuses (a controller, a NAT, a node in the root namespace), parallel
links of different delays, classes given as functools.partial and the
settings of an OpenFlow switch."""
from functools import partial

from mininet.link import TCIntf, TCLink
from mininet.node import Controller, CPULimitedHost, Host, Node, OVSSwitch
from mininet.nodelib import NAT
from mininet.topo import Topo


class ForwardingRouter(Node):
    "Turns forwarding on as Mininet's linuxrouter.py example does."

    def config(self, **params):
        super().config(**params)
        self.cmd("sysctl -w net.ipv4.ip_forward=1")


class StaticRouter(Node):
    "A router whose forwarding the user's own scripts turn on."


class FancyHost(Host):
    "A host class hiernet knows nothing of."


class FancySwitch(OVSSwitch):
    "A switch class hiernet knows nothing of."


class FancyLink(TCLink):
    "A link class hiernet knows nothing of."


class MyController(Controller):
    "An OpenFlow controller in a host's place."


class RouterTopo(Topo):
    "h1 - s1 - r1 = r2 - h2 (r1 = r2: two parallel links, 5 ms and 1 ms)"

    def build(self, extra=False, fancy_link=False, refused=None):
        h1, h2 = self.addHost("h1", ip="10.1.0.10/24"), self.addHost("h2", cls=FancyHost if extra else Host)
        r1 = self.addNode("r1", cls=ForwardingRouter, ip="10.1.0.1/24")
        r2 = self.addHost("r2", cls=StaticRouter)
        s1 = self.addSwitch("s1", cls=FancySwitch if extra else OVSSwitch)
        self.addLink(h1, s1, intfName1="h1-eth0", use_htb=True, bw=20)
        self.addLink(s1, r1, intfName2="r1-eth0", params2={"ip": "10.1.0.1/24"})
        self.addLink(r1, r2, delay="5ms", params1={"ip": "10.9.0.1/30", "mac": "00:00:00:00:00:01"},
                     params2={"ip": "10.9.0.2/30"})
        self.addLink(r1, r2, delay="1ms", params1={"ip": "10.9.1.1/30"})
        self.addLink(r2, h2, **({"speedup": 2, "params2": {"bw": 5}} if extra else {}),
                     **({"cls": FancyLink} if fancy_link else {}))
        if refused == "controller":
            self.addLink(self.addHost("c0", cls=MyController), s1)
        elif refused == "nat":
            self.addLink(self.addNode("nat0", cls=NAT, subnet="10.1.0.0/24"), s1)
        elif refused == "root":
            self.addLink(self.addHost("root", inNamespace=False), s1)


class PartialTopo(Topo):
    "cls=partial(...), as Mininet scripts often pass classes, and OpenFlow switch settings"

    def build(self):
        limited = partial(CPULimitedHost, cpu=0.2)
        h1, h2 = self.addHost("h1", cls=limited), self.addHost("h2", cls=limited, cpu=0.1)  # the call's own wins
        s1 = self.addSwitch("s1", protocols="OpenFlow13", failMode="standalone", stp=False)
        self.addLink(h1, s1, cls=partial(TCLink, bw=7, delay="2ms"), intf=TCIntf)
        self.addLink(h2, s1, cls=partial(TCLink, bw=7), bw=3)
