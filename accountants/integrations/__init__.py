"""dpaudit's accountants inside the tools people already use.

* :mod:`accountants.integrations.opacus`: :class:`~accountants.integrations.opacus.DpauditAccountant`,
  an Opacus ``IAccountant`` backed by dpaudit (RDP or certified PLD; Poisson or fixed-size sampling).
* :mod:`accountants.integrations.dp_accounting`: dp_accounting ``DpEvent`` trees (or their JSON form)
  to dpaudit descriptions and back.

Each module imports its peer library lazily; when the peer is needed and absent the error names the
extra to install (``pip install dpaudit[peers]``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import InputError

__all__ = ["PeerMissingError", "require_peer"]

PEERS_EXTRA = "pip install dpaudit[peers]"


class PeerMissingError(InputError, ImportError):
    """The peer library an integration needs is not installed (the message names the extra)."""


def require_peer(module: str, *, for_what: str) -> ModuleType:
    """Import ``module`` or raise :class:`PeerMissingError` naming the ``peers`` extra."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise PeerMissingError(
            f"{for_what} needs the peer library {module.split('.')[0]!r}, which is not installed; "
            f"install it with `{PEERS_EXTRA}`"
        ) from e
