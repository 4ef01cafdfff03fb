"""Shared test settings."""

import os

# Progress bars would only add noise to captured output and notebook cells.
os.environ.setdefault("TQDM_DISABLE", "1")
