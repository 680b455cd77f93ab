"""Records are placed as every Kafka client places them: Kafka's murmur2 of the key."""

import pytest
from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st

from streams.runtime.publisher import murmur2, partition_of


@pytest.mark.parametrize(
    ("key", "java"),
    [  # Kafka's own UtilsTest vectors: Java's signed int
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_is_the_java_clients_hash(key, java):
    assert murmur2(key) == java & 0xFFFFFFFF


@given(st.binary(max_size=300), st.integers(min_value=1, max_value=256))
def test_a_key_goes_to_the_partition_aiokafkas_default_partitioner_gives(key, partitions):
    everyone = list(range(partitions))
    assert partition_of.__wrapped__(key, partitions) == DefaultPartitioner()(key, everyone, everyone)
