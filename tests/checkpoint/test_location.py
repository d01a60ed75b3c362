from sparkstate.checkpoint.location import StoreLocation, open_file_manager, query_key, spark_store_location, state_root
from sparkstate.config import Settings
from sparkstate.storage import LocalFileIO
from sparkstate.storage.s3 import S3FileIO


def test_query_key_is_stable_readable_and_distinct():
    assert query_key("/tmp/c") == query_key("file:/tmp/c") == query_key("file:///tmp/c/")
    assert query_key("/tmp/c").startswith("c-") and query_key("/tmp/c") != query_key("/tmp/d/c")
    assert query_key("s3://bucket/a/ckpt").startswith("ckpt-")


def test_a_store_lives_under_its_checkpoint_location_or_under_state_location():
    plain = StoreLocation("file:/tmp/c/state/0/1", 0, 1)
    assert plain.checkpoint_root() == "file:/tmp/c"
    assert plain.state_location() == "file:/tmp/c/state/0/1"
    named = StoreLocation("/tmp/c/state/2/3/left-keyToNumValues", 2, 3, "left-keyToNumValues", "s3://b/p/")
    assert named.checkpoint_root() == "/tmp/c"
    assert named.state_location() == f"s3://b/p/{query_key('/tmp/c')}/2/3/left-keyToNumValues"
    # gc and the CLI find the stores of a query under the same root the stores compute
    assert named.state_location().startswith(state_root("/tmp/c", "s3://b/p") + "/")
    assert plain.state_location().startswith(state_root("file:/tmp/c", None) + "/")


def test_spark_store_location_is_sparks_layout_and_inverts_checkpoint_root():
    assert spark_store_location("s3://b/ckpt/", 1, 7) == "s3://b/ckpt/state/1/7"
    assert spark_store_location("/c", 0, 2, "right-keyWithIndexToValue") == "/c/state/0/2/right-keyWithIndexToValue"
    for name in ("default", "left-keyToNumValues"):
        location = StoreLocation(spark_store_location("file:/tmp/c", 3, 4, name), 3, 4, name)
        assert location.checkpoint_root() == "file:/tmp/c"


def test_open_file_manager_picks_the_storage_and_the_io_parallelism():
    settings = Settings.parse({"spark.sql.streaming.stateStore.sparkstate.checkpoint.ioThreads": "7"})
    local = open_file_manager("/tmp/c/state/0/1", settings)
    assert isinstance(local.fileio, LocalFileIO) and local.io_threads == 7
    remote = open_file_manager("s3://b/p/q/0/1", settings, {"fs.s3a.endpoint": "http://127.0.0.1:9"})
    assert isinstance(remote.fileio, S3FileIO) and remote.fileio.options.endpoint == "http://127.0.0.1:9"
