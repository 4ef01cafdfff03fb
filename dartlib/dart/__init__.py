"""Layer ``dart``: the refinement module g_phi and its test-time use (``refiner``: Eqs. 2-4,
Algorithm 2), its intermediate training with Dirichlet-sampled batches (``intermediate``:
Algorithm 1; DART-split, Algorithm 3), and its fit to a classifier of your own (``fit``). Imports ``models``,
``data`` and the base."""
