"""Exceptions of the contract layer.

ScrapestreamError        base of every scrapestream exception
└── CodecError           bytes that cannot be turned into a known record, or a record into bytes
    ├── UnknownSchemaError   a fingerprint or registry id that no known schema has
    └── TruncatedRecordError bytes that end before the record does
"""


class ScrapestreamError(Exception):
    """Base of every scrapestream exception."""


class CodecError(ScrapestreamError):
    """Bytes that cannot be decoded to a known record, or a record that cannot be encoded."""


class UnknownSchemaError(CodecError):
    """The bytes name a schema this codec does not know."""


class TruncatedRecordError(CodecError):
    """The bytes end before the record does."""
