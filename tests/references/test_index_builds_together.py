"""Builds of one reference index that overlap (worker processes starting together) embed the set
once: the later build waits for the earlier one and then finds its rows stored."""

from __future__ import annotations

import threading
import time

from mmverify.core import locks
from mmverify.references import ReferenceIndex
from tests.references.test_index import SpectrumEmbedder, esc50  # noqa: F401  (esc50: a fixture)

SAFETY_S = 60.0  # how long the test waits for what should come: a failing test cannot hang


def test_a_build_waits_for_the_one_under_way_and_reuses_its_rows(esc50, tmp_path, monkeypatch):  # noqa: F811
    index_dir = tmp_path / "index"
    inside, release, refused = threading.Event(), threading.Event(), threading.Event()

    def pause(seconds: float) -> None:  # between two tries of a lock held elsewhere
        refused.set()
        time.sleep(seconds)

    monkeypatch.setattr(locks, "_pause", pause)

    class Holding(SpectrumEmbedder):
        """The first build's embedder: it stays in its first embedding until released."""

        def embed_audio(self, clips):
            inside.set()
            assert release.wait(SAFETY_S)
            return super().embed_audio(clips)

    # flock locks belong to open file descriptions: two threads that each open the folder exclude
    # each other as two processes do
    first, second = Holding(), SpectrumEmbedder()
    built: dict[str, ReferenceIndex] = {}

    def build(name: str, embedder: SpectrumEmbedder) -> None:
        built[name] = ReferenceIndex.build("esc50", esc50, embedder, index_dir)

    threads = [threading.Thread(target=build, args=("first", first)), threading.Thread(target=build, args=("second", second))]
    threads[0].start()
    try:
        assert inside.wait(SAFETY_S)
        threads[1].start()
        deadline = time.monotonic() + SAFETY_S
        while not (second.clips_embedded or refused.is_set()) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        release.set()
    for thread in threads:
        thread.join(SAFETY_S)
    assert first.clips_embedded == 12 and built["first"].embedded == 12
    assert second.clips_embedded == 0 and built["second"].embedded == 0
    assert built["second"].embeddings.tobytes() == built["first"].embeddings.tobytes()
    assert built["second"].labels == built["first"].labels
