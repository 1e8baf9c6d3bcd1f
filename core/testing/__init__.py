"""The suites a store must pass: subclass one with a ``store`` fixture and pytest runs the
contract on your store (see docs/reference/stores.md).

Imports pytest: import this package from tests only.
"""

from typing import TYPE_CHECKING

from mcache import lazy_exports

if TYPE_CHECKING:
    from mcache.testing.async_driver import AsyncStoreContract
    from mcache.testing.store_contract import StoreContract

__all__ = ["AsyncStoreContract", "StoreContract"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AsyncStoreContract": "mcache.testing.async_driver",
        "StoreContract": "mcache.testing.store_contract",
    },
)
