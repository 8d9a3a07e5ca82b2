import os

import torch
from hypothesis import settings

# Two cores on CI: keep torch from oversubscribing them when several workers run.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.load_profile("ci")
