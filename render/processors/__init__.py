"""Face processors: the models that change a face, run as a chain on aligned face crops.

The profile names the chain (``processors: [swap, enhance]``); each step names a model, and the
model's manifest contract picks the class that drives it (:mod:`.registry`). The face stage runs
the chain without knowing which processors exist; the report records each step with its model.
Adding a processor is a new module here, a line in ``registry.BUILT_IN`` and a profile line.
"""
