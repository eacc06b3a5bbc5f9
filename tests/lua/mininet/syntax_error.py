from mininet.topo import Topo


class Broken(Topo)
    def build(self):
        pass
