"""The group coordinator: classic consumer groups and committed offsets."""

from typing import Any


async def attach_group_coordinator(broker: Any) -> None:
    """Create this broker's group coordinator and load its state (being written)."""
