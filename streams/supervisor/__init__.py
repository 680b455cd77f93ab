"""One worker on every core: a supervisor runs N `scrapestream worker` processes of one consumer group,
restarts the one that dies, and serves the worker's HTTP port, answering its probes and metrics for all
of them and passing every other request to one of them."""
