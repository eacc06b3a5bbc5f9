from mininet.topo import Topo


class HtbTopo(Topo):
    def build(self):
        self.addLink(self.addHost("h1"), self.addSwitch("s1"), bw=10, use_tbf=True)


class LossyTopo(Topo):
    def build(self):
        self.addLink(self.addHost("h1"), self.addSwitch("s1"), loss=150)


class BadNameTopo(Topo):
    def build(self):
        self.addLink(self.addHost("host one"), self.addSwitch("s1"))


class RaisingTopo(Topo):
    def build(self, n=1):
        self.addHost("h1")
        raise ValueError("no topology for n=%d" % n)
