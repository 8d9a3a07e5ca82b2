import mpmath as mp
import pytest
import torch
from hypothesis import settings

# One torch thread: intra-op parallelism on tiny tensors stalls badly when the two cores are
# shared (measured 25-50x slower with 2 threads under load), and buys nothing for these sizes.
torch.set_num_threads(1)

settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _restore_global_precision():
    """Tests may set mpmath's global precision; restore it so no test depends on test order."""
    dps = mp.mp.dps
    yield
    mp.mp.dps = dps
