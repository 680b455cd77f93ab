"""Ordered key-value storage behind one Protocol, with in-memory and RocksDB implementations."""
