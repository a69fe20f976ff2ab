"""irrun/arrays.py: atomic writes leave files as a plain open() would."""
import os

import numpy as np

from irrun.arrays import atomic_write, save_npz


def test_atomic_write_gives_the_umask_permissions(tmp_path):
    mask = os.umask(0o027)
    os.umask(mask)
    save_npz(tmp_path / "out.npz", {"x": np.zeros(3)})
    with atomic_write(tmp_path / "plain.bin") as f:
        f.write(b"x")
    with open(tmp_path / "reference", "wb"):
        pass
    want = os.stat(tmp_path / "reference").st_mode & 0o777
    assert os.stat(tmp_path / "out.npz").st_mode & 0o777 == want
    assert os.stat(tmp_path / "plain.bin").st_mode & 0o777 == want
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_a_damaged_npz_is_refused_and_closed(tmp_path):
    """np.load leaves the file of a zip it cannot read open; NpzArchive opens and closes it itself."""
    import gc
    import warnings

    import pytest

    from irrun.arrays import NpzArchive
    from irrun.errors import InputError
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04 not a zip archive at all")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(InputError, match="not a readable .npz archive"):
            NpzArchive(junk)
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
