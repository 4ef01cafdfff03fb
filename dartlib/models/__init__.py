"""Layer ``models``: backbones (``backbones``), source training (``training``), accuracy over a data
set (``evaluation``) and the committed trained artefacts (``artefacts``). Imports ``data`` and the base."""
