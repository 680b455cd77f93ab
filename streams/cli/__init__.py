"""The `scrapestream` command: its parser (`main`), each command's module, and what they print."""
