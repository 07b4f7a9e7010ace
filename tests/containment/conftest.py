from __future__ import annotations

import sys
from pathlib import Path

# The launch kit lives beside the supervisor tests.
sys.path.insert(0, str(Path(__file__).parents[1] / "supervisor"))
