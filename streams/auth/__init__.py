"""Who is asking: principals with roles, bearer tokens for HTTP, signatures for Kafka commands."""
