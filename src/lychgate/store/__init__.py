from lychgate.store.store import Change, Store

__all__ = ["Change", "Store"]
