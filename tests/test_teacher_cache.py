"""The teacher cache with several writers: train/label.py labels into the folder a training run also
labels into, and either may be killed mid-chunk (the two cases that once corrupted a real cache)."""

import hashlib

import numpy as np

from edge_xsent.train.teacher import cache_folder, label, text_key


class Hashed:
    """A teacher whose vector of a text is fixed by the text (checkable), with a hook run after
    each batch it encodes: what another process does while this one is labelling."""

    key, version, dim = "hashed", "1", 8

    def __init__(self, during=None):
        self.during, self.calls = during, 0

    def encode(self, sentences, batch_size=32):
        self.calls += len(sentences)
        out = np.stack([np.frombuffer(hashlib.sha256(s.encode()).digest()[:32], dtype=np.float32) for s in sentences])
        if self.during:
            hook, self.during = self.during, None  # once
            hook()
        return np.nan_to_num(out)


def expected(texts):
    return Hashed().encode(texts)


def test_a_second_writer_between_chunks_keeps_both_writers_rows(tmp_path):
    ours = [f"our sentence {i}" for i in range(30)]
    theirs = [f"their sentence {i}" for i in range(25)] + ours[:5]  # some texts both label
    other = Hashed()
    vecs, rows = label(ours, Hashed(during=lambda: label(theirs, other, tmp_path, chunk_rows=10, progress=False)),
                       tmp_path, chunk_rows=10, progress=False)
    assert np.array_equal(vecs[rows], expected(ours))
    again = Hashed()
    vecs, rows = label(theirs + ours, again, tmp_path, chunk_rows=10, progress=False)
    assert again.calls == 0 and np.array_equal(vecs[rows], expected(theirs + ours))


def test_a_writer_killed_mid_chunk_does_not_misalign_a_running_one(tmp_path):
    folder = cache_folder(tmp_path, "hashed")
    label(["first"], Hashed(), tmp_path, progress=False)

    def killed_writer():  # another process wrote half a chunk, then died before recording it
        for name, size in (("vectors.f32", 5 * 8 * 4 + 3), ("keys.bin", 7)):
            with open(folder / name, "ab") as f:
                f.write(b"\x01" * size)

    texts = [f"sentence {i}" for i in range(12)]
    label(texts, Hashed(during=killed_writer), tmp_path, chunk_rows=6, progress=False)
    fresh = Hashed()
    vecs, rows = label(["first"] + texts, fresh, tmp_path, progress=False)
    assert fresh.calls == 0, "a chunk written after the torn bytes failed its checksum"
    assert np.array_equal(vecs[rows], expected(["first"] + texts))
    assert (folder / "keys.bin").stat().st_size == 13 * 16 and text_key("first") == (folder / "keys.bin").read_bytes()[:16]
