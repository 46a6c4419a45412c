from lychgate.store.store import Change, Read, Store

__all__ = ["Change", "Read", "Store"]
