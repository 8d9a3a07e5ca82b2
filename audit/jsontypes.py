"""The one JSON value type of ``audit``'s serialisers (``to_json``, ``to_dict``, ``describe``, ``--json`` output).

A public function of ``audit`` that hands over JSON says so with :data:`JSONValue` / :data:`JSONObject`
instead of ``dict[str, Any]``: what it returns is plain data (``json.dumps`` writes it), never a working type.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONObject", "JSONValue"]

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
JSONObject: TypeAlias = dict[str, JSONValue]
