from lychgate.store.store import Change, Read, Store, reached

__all__ = ["Change", "Read", "Store", "reached"]
