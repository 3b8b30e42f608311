from asr_pipeline.text.normalize import NormalizationOptions, normalize_text


def test_normalization_folds_width_case_and_punctuation_but_keeps_apostrophes():
    assert normalize_text("  Ｈｅｌｌｏ,  WORLD!  Don't   'stop'. ") == "hello world don't stop"


def test_normalization_can_keep_case_and_punctuation():
    options = NormalizationOptions(lowercase=False, strip_punctuation=False)
    assert normalize_text("Hello,   World!", options) == "Hello, World!"


def test_unknown_normalization_option_is_named():
    try:
        NormalizationOptions.from_dict({"lowercase": True, "lower_case": True})
    except ValueError as error:
        assert "lower_case" in str(error)
    else:
        raise AssertionError("expected a ValueError")
