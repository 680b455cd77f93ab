"""The embedded Kafka-protocol broker and the compatibility layer it needs."""
