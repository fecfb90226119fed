"""composer.utils.object_store: URLs, options, the S3 client against moto (authentication on), and the background
uploader's bounded queue and failures."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time

import pytest

from composer.utils.object_store import (
    BackgroundUploader,
    ObjectStoreError,
    ObjectStoreURL,
    S3ObjectStore,
    StorageOptions,
    UploadError,
    parse_location,
)
from tests.common.store_proxy import StoreProxy

# ---- URLs and options --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("s3://bucket-a/runs/r1/", ObjectStoreURL("bucket-a", "runs/r1")),
        ("s3://bucket-a", ObjectStoreURL("bucket-a", "")),
        ("S3://bucket-a/x", ObjectStoreURL("bucket-a", "x")),
    ],
)
def test_s3_urls_parse(value, expected):
    assert parse_location(value, "save_folder") == expected


def test_credentials_in_a_url_are_refused_and_never_shown():
    with pytest.raises(ValueError) as error:
        parse_location("s3://AKIAEXAMPLE:topsecret@bucket-a/runs", "load_path")
    assert "topsecret" not in str(error.value) and "AKIAEXAMPLE" not in str(error.value)
    assert str(error.value).startswith("load_path='s3://***@bucket-a/runs' carries credentials")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"endpoint": "http://x"}, r"unknown key 'endpoint' \(did you mean 'endpoint_url'\?\)"),
        ({"aws_secret_access_key": "s3cr3t"}, r"credentials are not passed here"),
        ({"endpoint_url": "127.0.0.1:5000"}, r"must be an http:// or https:// address"),
        ({"retry_budget": 0}, r"retry_budget=0 must be a positive number"),
        ({"multipart_chunksize_mb": 1}, r"below S3's smallest part"),
    ],
)
def test_storage_options_are_checked(options, message):
    with pytest.raises(ValueError, match=message) as error:
        StorageOptions.from_input(options)
    assert "s3cr3t" not in str(error.value)


# ---- the client ----------------------------------------------------------------------------------------------------


def test_upload_download_list_head_delete_with_multipart(s3_env, tmp_path):
    bucket = s3_env.create_bucket()
    store = S3ObjectStore(
        bucket, {"endpoint_url": s3_env.endpoint_url, "multipart_threshold_mb": 5, "multipart_chunksize_mb": 5}
    )
    data = hashlib.sha256(b"seed").digest() * (7 * 2**15)  # 7 MB, deterministic: two parts
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    sent = []
    store.upload(source, "p/big.bin", metadata={"composer-sha256": "abc"}, progress=sent.append)
    assert sum(sent) == len(data)
    info = store.head("p/big.bin")
    assert info is not None and info.size == len(data) and info.metadata == {"composer-sha256": "abc"}
    assert store.head("p/missing.bin") is None
    assert [o.key for o in store.list_objects("p/")] == ["p/big.bin"]
    store.download("p/big.bin", tmp_path / "copy" / "big.bin")
    assert (tmp_path / "copy" / "big.bin").read_bytes() == data
    store.delete("p/big.bin")
    assert store.list_objects("p/") == []


def test_a_store_that_hangs_fails_within_the_retry_budget(s3_env, tmp_path):
    """A store that accepts connections and never answers: a multipart upload (whose abort hangs too) and a download
    each fail with a clear ObjectStoreError within about retry_budget (2 s here; the bound below is generous), not
    after botocore's own read timeouts and retries (60 s each, three times)."""
    bucket = s3_env.create_bucket()
    proxy = StoreProxy(s3_env.endpoint_url).start()
    options = {"endpoint_url": proxy.endpoint_url, "retry_budget": 2, "multipart_threshold_mb": 5}
    source = tmp_path / "big.bin"
    source.write_bytes(bytes(6 * 2**20))  # two parts
    try:
        store = S3ObjectStore(bucket, {**options, "multipart_chunksize_mb": 5})
        store.upload_bytes(b"small", "p/small.bin")  # through the proxy while it forwards
        proxy.mode = "hang"
        for what, operation in [
            ("uploading", lambda: store.upload(source, "p/big.bin")),
            ("downloading", lambda: store.download("p/small.bin", tmp_path / "copy.bin")),
        ]:
            outcome: list[BaseException] = []
            start = time.monotonic()
            # In a thread, so that a store that is not bounded fails the test after the bound instead of hanging it.
            worker = threading.Thread(target=_record_failure, args=(operation, outcome), daemon=True)
            worker.start()
            worker.join(timeout=2 + 10)
            assert not worker.is_alive(), f"{what} on a hung store still waits after retry_budget + 10 s"
            elapsed = time.monotonic() - start
            assert len(outcome) == 1 and isinstance(outcome[0], ObjectStoreError), outcome
            message = str(outcome[0])
            assert message.startswith(f"{what} ") and f"the store at {proxy.endpoint_url} did not answer" in message
            assert "(retry_budget=2 s)" in message, message
            print(f"{what} failed after {elapsed:.1f} s")
    finally:
        proxy.stop()
    assert not (tmp_path / "copy.bin").exists()


def _record_failure(operation, outcome: list) -> None:
    try:
        operation()
    except BaseException as e:
        outcome.append(e)


# ---- the background uploader --------------------------------------------------------------------------------------


def test_a_full_queue_makes_the_caller_wait():
    release = threading.Event()
    done = []
    uploader = BackgroundUploader(max_pending=1)
    uploader.submit(lambda: (release.wait(5), done.append(1)), "first")
    waited = threading.Event()

    def second():
        uploader.submit(lambda: done.append(2), "second")
        waited.set()

    caller = threading.Thread(target=second)
    caller.start()
    time.sleep(0.2)
    assert not waited.is_set() and uploader.pending == 1  # training waits rather than pile files up
    release.set()
    caller.join(5)
    uploader.close()
    assert done == [1, 2]


def test_a_failed_job_is_raised_at_the_next_submit_and_the_jobs_queued_behind_it_are_dropped():
    gate = threading.Event()
    ran = []
    uploader = BackgroundUploader(max_pending=3)

    def fail():
        gate.wait(5)
        raise OSError("the store went away")

    uploader.submit(fail, "Uploading a.pt", note="a.pt stays local.")
    uploader.submit(lambda: ran.append("b"), "Uploading b.pt")
    gate.set()
    time.sleep(0.2)
    with pytest.raises(UploadError, match=r"^Uploading a.pt failed: OSError: the store went away a.pt stays local.$"):
        uploader.submit(lambda: ran.append("c"), "Uploading c.pt")
    uploader.close()
    assert ran == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_uploads_run_at_a_lower_cpu_priority_than_training():
    seen = []
    uploader = BackgroundUploader(max_pending=1, nice=5)
    uploader.submit(lambda: seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())), "probe")
    uploader.close()
    assert seen == [min(os.getpriority(os.PRIO_PROCESS, 0) + 5, 19)]
