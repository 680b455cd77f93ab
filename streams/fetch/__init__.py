"""Fetching pages: the address guard and the bounded HTTP fetcher."""
