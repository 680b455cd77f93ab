"""The shell: everything that does I/O (Kafka, HTTP, storage, browser, clock, CLI)."""
