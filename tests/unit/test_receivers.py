from streams.web.pacing import receiver_of


def test_every_spelling_of_one_receiving_host_is_one_receiver():
    spellings = ["127.0.0.1", "127.1", "0x7f.0.0.1", "0177.0.0.1", "127.0.0.1.", "[::ffff:127.0.0.1]"]
    assert {receiver_of(host) for host in spellings} == {"127.0.0.1"}
    assert receiver_of("Example.COM.") == receiver_of("example.com") == "example.com"
    assert receiver_of("bücher.example") == receiver_of("xn--bcher-kva.example")
    assert receiver_of("example.com") != receiver_of("example.org")
