import pytest

from streams.settings import SettingsError, load_settings


def test_settings_come_from_scrapestream_environment_variables(monkeypatch):
    monkeypatch.setenv("SCRAPESTREAM_KAFKA_BOOTSTRAP", "kafka-1:9092")
    monkeypatch.setenv("SCRAPESTREAM_PARTITIONS", "12")
    monkeypatch.setenv("SCRAPESTREAM_PROFILES", '{"http.fetch": [10000, 5]}')
    settings = load_settings()
    assert settings.kafka_bootstrap == "kafka-1:9092"
    assert settings.partitions == 12
    assert settings.policy().profiles["http.fetch"].max_attempts == 5


def test_invalid_settings_name_each_bad_variable(monkeypatch):
    monkeypatch.setenv("SCRAPESTREAM_PARTITIONS", "0")
    monkeypatch.setenv("SCRAPESTREAM_WEB_PORT", "http")
    with pytest.raises(SettingsError) as raised:
        load_settings()
    message = str(raised.value)
    assert "SCRAPESTREAM_PARTITIONS" in message
    assert "SCRAPESTREAM_WEB_PORT" in message


def test_a_callback_secret_must_be_a_standard_webhooks_secret(monkeypatch):
    monkeypatch.setenv("SCRAPESTREAM_CALLBACK_SECRET", "hunter2")
    with pytest.raises(SettingsError, match="whsec_"):
        load_settings()


def test_the_callback_secret_is_never_shown(monkeypatch):
    monkeypatch.setenv("SCRAPESTREAM_CALLBACK_SECRET", "whsec_c2VjcmV0")
    assert "c2VjcmV0" not in repr(load_settings())


def test_proxy_credentials_are_never_shown(monkeypatch):
    monkeypatch.setenv(
        "SCRAPESTREAM_ROUTES",
        '{"pool": {"kind": "proxy", "proxy_urls": ["http://user:s3cret@proxy-a:8080"]}}',
    )
    assert "s3cret" not in repr(load_settings())
    monkeypatch.setenv(
        "SCRAPESTREAM_ROUTES",
        '{"pool": {"kind": "proxy", "proxy_urls": ["http://user:s3cret@proxy a:8080"]}}',
    )
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert "SCRAPESTREAM_ROUTES at pool" in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_deployments_on_one_broker_get_their_own_consumer_group_unless_told_to_share():
    assert load_settings().consumer_group == "scrapestream"  # the default prefix keeps its group
    assert load_settings(topic_prefix="staging").consumer_group == "staging"
    assert load_settings(topic_prefix="staging", group_id="shared").consumer_group == "shared"
