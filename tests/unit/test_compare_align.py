"""Name matching and shape/layout alignment."""
import numpy as np
import pytest

from refinterp.compare.align import fit_shape, load_mapping, match_names
from refinterp.errors import DumpError


def test_exact_then_sanitised_then_loose_and_one_side_lists():
    nm = match_names(["a/b:0", "c.d", "x-y", "only_model", "e"], ["a_b_0", "c_d", "x_y", "e", "only_dump"])
    assert nm.pairs == {"e": ("e", "exact"), "a/b:0": ("a_b_0", "sanitised"), "c.d": ("c_d", "sanitised"),
                        "x-y": ("x_y", "sanitised")}
    assert nm.model_only == ["only_model"] and nm.dump_only == ["only_dump"]


def test_ambiguous_loose_names_are_not_guessed():
    nm = match_names(["a-b", "a+b"], ["a_b"])
    assert nm.pairs == {} and nm.ambiguous == ["a+b", "a-b"] and nm.dump_only == ["a_b"]


def test_mapping_file_wins_and_null_ignores(tmp_path):
    f = tmp_path / "map.yaml"
    f.write_text("tensors:\n  m1: d2\n  m2: null\n")
    mp = load_mapping(str(f))
    nm = match_names(["m1", "m2", "d2"], ["d2", "m2"], mp)
    assert nm.pairs == {"m1": ("d2", "mapping")} and nm.model_only == ["d2"] and nm.dump_only == ["m2"]
    with pytest.raises(DumpError):
        match_names(["m1"], ["x"], {"m1": "nope"})
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(DumpError):
        load_mapping(str(tmp_path / "bad.json"))


def test_nhwc_dump_of_nchw_model_is_transposed_and_reported():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    r = fit_shape([x.transpose(0, 2, 3, 1)], (2, 3, 4, 5), "NCHW", None)
    assert np.array_equal(r.samples[0], x) and "NHWC" in r.layout_note
    r = fit_shape([x], (2, 3, 4, 5), "NCHW", None)
    assert r.layout_note is None
    # NCHW dump of an NHWC model
    r = fit_shape([x], (2, 4, 5, 3), "NHWC", None)
    assert np.array_equal(r.samples[0], x.transpose(0, 2, 3, 1))


def test_symmetric_shape_follows_the_layout_hint():
    x = np.arange(1 * 4 * 4 * 4).reshape(1, 4, 4, 4)
    r = fit_shape([x], (1, 4, 4, 4), "NCHW", "NHWC")
    assert np.array_equal(r.samples[0], x.transpose(0, 3, 1, 2))
    assert np.array_equal(fit_shape([x], (1, 4, 4, 4), "NCHW", None).samples[0], x)


def test_flat_raw_data_and_samples():
    x = np.arange(24).reshape(1, 2, 3, 4)
    nhwc_flat = x.transpose(0, 2, 3, 1).ravel()
    r = fit_shape([nhwc_flat], (1, 2, 3, 4), "NCHW", "NHWC")
    assert np.array_equal(r.samples[0], x)
    r = fit_shape([np.concatenate([x.ravel(), x.ravel() + 1])], (1, 2, 3, 4), "NCHW", None)
    assert len(r.samples) == 2 and np.array_equal(r.samples[1], x + 1)
    r = fit_shape([np.stack([x, x])], (1, 2, 3, 4), "NCHW", None)
    assert len(r.samples) == 2
    r = fit_shape([np.concatenate([x, x + 1])], (1, 2, 3, 4), "NCHW", None)
    assert len(r.samples) == 2 and np.array_equal(r.samples[1], x + 1)
    assert fit_shape([np.zeros(5)], (1, 2, 3, 4), "NCHW", None) is None
