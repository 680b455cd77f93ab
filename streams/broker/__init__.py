"""The brokers scrapestream runs on: the embedded tansu (`embedded`), what differs between it and
Apache Kafka (`compat`), and the one place Kafka clients are built (`clients`)."""
