"""The public contract: Avro schemas under `avsc/`, typed records and the codec."""
