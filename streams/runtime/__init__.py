"""Running stages on Kafka: the consumer, publisher, transactions, topics, routing, dead input, and
the answers, schema registry, metrics and logs around them."""
