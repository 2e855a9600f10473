"""The chain's processors: the models that change a face (face steps, on aligned crops) or a
whole frame (frame steps).

Each processor is a folder here (``swap/``, ``enhance/``) whose ``__init__.py`` declares it
(:mod:`.spec`: its section of options, its kind, the class driving each model contract); the
schema composes the sections and the loader picks the class by the step's model contract
(:mod:`.registry`). The face stage runs the chain by what each step declares (:mod:`.base`).
Adding a processor is a new folder, a line in ``registry.BUILT_IN`` and a profile line — or,
outside render, a package with an entry point in the ``render.processors`` group.
"""
