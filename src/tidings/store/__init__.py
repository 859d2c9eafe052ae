"""Durable state behind one small interface: `tidings.store.base.Store`."""
