"""Counting a network's cost: its multiply-accumulates and parameters, layer by layer (the unit
of ``bench/model_costs.py`` and ``bench/frame_costs.py``)."""
from __future__ import annotations


class Count:
    """Multiply-accumulates and parameters of a network, summed layer by layer."""

    def __init__(self) -> None:
        self.macs = 0
        self.params = 0

    def conv(self, cin: int, cout: int, k: int, side: int, *, bias: bool = True) -> None:
        """A k × k convolution whose output is side × side."""
        self.macs += k * k * cin * cout * side * side
        self.params += k * k * cin * cout + (cout if bias else 0)

    def fc(self, fin: int, fout: int, *, bias: bool = True, tokens: int = 1) -> None:
        """A linear layer applied to ``tokens`` vectors."""
        self.macs += fin * fout * tokens
        self.params += fin * fout + (fout if bias else 0)

    def depthwise(self, channels: int, k: int, side: int) -> None:
        """A k × k depthwise convolution (one filter per channel) whose output is side × side."""
        self.macs += k * k * channels * side * side
        self.params += k * k * channels + channels

    def matmul(self, m: int, k: int, n: int) -> None:
        """A product of activations (m × k by k × n): no weights."""
        self.macs += m * k * n

    def values(self, n: int) -> None:
        """Stored values that are not a layer's weights (a kept batch norm, a constant)."""
        self.params += n
