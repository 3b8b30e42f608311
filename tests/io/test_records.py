import pytest

from asr_pipeline.io.records import DefaultIds, check_text


def test_unique_stems_keep_the_stem_as_id():
    ids = DefaultIds()
    assert [ids.for_file(name) for name in ("a.wav", "b.flac", "c.sph")] == ["a", "b", "c"]


def test_a_later_file_sharing_a_stem_keeps_its_extension_in_the_id():
    ids = DefaultIds()
    assert [ids.for_file("stereo.opus"), ids.for_file("stereo.sph")] == ["stereo", "stereo.sph"]


def test_ids_fall_back_to_the_full_name_when_stem_and_extension_are_both_taken():
    ids = DefaultIds()
    names = ["spk1/a.wav", "spk2/a.wav", "spk3/a.wav"]
    assert [ids.for_file(name) for name in names] == ["a", "a.wav", "spk3__a.wav"]


def test_the_same_file_listed_twice_gets_the_same_id_so_it_is_caught_as_a_duplicate():
    ids = DefaultIds()
    assert [ids.for_file("a.wav"), ids.for_file("a.wav")] == ["a", "a"]


def test_a_given_base_replaces_the_stem():
    ids = DefaultIds()
    assert [ids.for_file("d/x.wav", "d__x"), ids.for_file("d/x.flac", "d__x")] == ["d__x", "d__x.flac"]


@pytest.mark.parametrize("value", ["hello", "", None])
def test_string_or_missing_text_passes(value):
    assert check_text(value) == value


@pytest.mark.parametrize("value", [42, 3.5, True, ["a"], {"t": "x"}])
def test_non_string_text_is_rejected_naming_the_field_and_type(value):
    with pytest.raises(ValueError, match=rf"sentence must be a string, got {type(value).__name__}"):
        check_text(value, "sentence")
