"""render: a reproducible face-swap video renderer."""

__version__ = "0.1.0"
