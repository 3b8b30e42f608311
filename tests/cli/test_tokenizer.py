"""``asr-pipeline tokenizer``: every option of the reference trainer, on tiny corpora with small vocabularies."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asr_pipeline.cli import build_parser, main
from asr_pipeline.cli.tokenizer import sentencepiece_options
from asr_pipeline.text.normalize import normalization_for_model
from asr_pipeline.text.sentencepiece_training import SentencePieceOptions
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import TINY_SENTENCES, make_wav

SPM_TRAIN = "/usr/bin/spm_train"  # Debian's sentencepiece package


def tokenizer(*parts: object) -> tuple[int, dict | None, str]:
    """Run the command; (exit status, printed JSON or None, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["tokenizer", *(str(p) for p in parts)])
    return status, (json.loads(out.getvalue()) if status == 0 else None), err.getvalue()


def trained(
    tmp_path: Path, *flags: object, sentences: list[str] | None = TINY_SENTENCES
) -> tuple[dict, Path]:
    """Train on ``sentences`` (a .txt --input; None: only what ``flags`` name) into tmp_path/tok."""
    inputs: list[object] = []
    if sentences is not None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        (tmp_path / "corpus.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
        inputs = ["--input", tmp_path / "corpus.txt"]
    status, summary, err = tokenizer(*inputs, "--output-dir", tmp_path / "tok", *flags)
    assert status == 0, err
    return summary, Path(summary["model"])


def trainer_spec(model: bytes) -> dict[int, list]:
    """Field number -> values of the model's TrainerSpec (ModelProto field 2), read off the protobuf wire
    format, so the test needs no protobuf package. Numbers from sentencepiece_model.proto: 3 model_type
    (1 unigram, 2 bpe, 3 word, 4 char), 10 character_coverage, 11 input_sentence_size,
    19 shuffle_input_sentence, 31 user_defined_symbols, 35 byte_fallback."""
    return _fields(_fields(model)[2][0])


def _fields(data: bytes) -> dict[int, list]:
    out: dict[int, list] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = struct.unpack("<f", data[pos : pos + 4])[0], pos + 4
        else:  # wire 1 (fixed64): not used by these messages' fields of interest
            value, pos = data[pos : pos + 8], pos + 8
        out.setdefault(number, []).append(value)
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def test_flags_have_the_reference_names_and_the_librarys_defaults():
    args = build_parser().parse_args(["tokenizer", "--input", "x"])

    assert (args.output_dir, args.model_prefix) == ("tokenizer", "tokenizer")
    # what the tokenizer stage trains with for unset params
    assert sentencepiece_options(args) == SentencePieceOptions()
    assert (SentencePieceOptions().vocab_size, SentencePieceOptions().shuffle_input_sentence) == (256, True)
    assert (args.user_defined_symbols, args.keep_corpus) == (None, False)
    assert (args.unicode_form, args.no_lowercase, args.keep_punctuation) == ("NFKC", False, False)


def test_defaults_reference_gives_the_reference_trainers_vocab_and_shuffle_and_a_flag_still_wins():
    parse = build_parser().parse_args
    reference = sentencepiece_options(parse(["tokenizer", "--input", "x", "--defaults", "reference"]))
    given = sentencepiece_options(parse(["tokenizer", "--defaults", "reference", "--vocab-size", "300"]))

    assert reference == SentencePieceOptions(vocab_size=5000, shuffle_input_sentence=False)
    assert (given.vocab_size, given.shuffle_input_sentence) == (300, False)


def test_switches_turn_a_default_on_or_off():
    parse = build_parser().parse_args
    assert parse(["tokenizer", "--no-shuffle-input-sentence"]).shuffle_input_sentence is False
    assert parse(["tokenizer", "--byte-fallback"]).byte_fallback is True


def test_writes_model_vocab_and_json_sidecar_under_the_prefix_and_prints_pieces_plus_blank(tmp_path):
    summary, model = trained(tmp_path, "--model-prefix", "spm", "--vocab-size", 30)
    assert model == tmp_path / "tok" / "spm.model"
    loaded = CTCTokenizer.from_file(model)
    assert summary["vocab_size"] == loaded.num_pieces + 1 == 31
    assert len((tmp_path / "tok" / "spm.vocab").read_text(encoding="utf-8").splitlines()) == 30
    sidecar = json.loads((tmp_path / "tok" / "spm.json").read_text(encoding="utf-8"))
    assert sidecar["vocab_size"] == 31 and sidecar["normalization"]["unicode_form"] == "NFKC"
    assert not (tmp_path / "tok" / "spm.corpus.txt").exists()  # deleted without --keep-corpus


@pytest.mark.parametrize(
    ("model_type", "proto_value"), [("unigram", 1), ("bpe", 2), ("word", 3), ("char", 4)]
)
def test_model_type(tmp_path, model_type, proto_value):
    _, model = trained(tmp_path, "--model-type", model_type, "--vocab-size", 30)
    assert trainer_spec(model.read_bytes())[3] == [proto_value]
    pieces = CTCTokenizer.from_file(model).pieces()[1:]
    if model_type == "char":
        assert all(len(piece.lstrip("\u2581")) <= 1 or piece.startswith("<") for piece in pieces)


def test_character_coverage_drops_rare_characters(tmp_path):
    sentences = [*TINY_SENTENCES, "üð"]  # two characters in ~1000: far below 1%
    _, full = trained(tmp_path / "full", "--model-type", "char", "--vocab-size", 40, sentences=sentences)
    _, partial = trained(
        tmp_path / "partial", "--model-type", "char", "--vocab-size", 40, "--character-coverage", 0.99,
        sentences=sentences,
    )  # fmt: skip
    assert trainer_spec(partial.read_bytes())[10] == [pytest.approx(0.99)]
    assert (
        "ü" in CTCTokenizer.from_file(full).pieces() and "ü" not in CTCTokenizer.from_file(partial).pieces()
    )


def test_input_sentence_size_trains_on_the_first_sentences_and_shuffle_samples_them(tmp_path):
    sentences = ["abc abd" for _ in range(150)] + ["xyz" for _ in range(150)]
    flags = ("--model-type", "char", "--vocab-size", 20, "--input-sentence-size", 101)
    _, first = trained(tmp_path / "first", *flags, "--no-shuffle-input-sentence", sentences=sentences)
    spec = trainer_spec(first.read_bytes())
    assert (spec[11], spec[19]) == ([101], [0])
    assert "x" not in CTCTokenizer.from_file(first).pieces()  # only the first 101 sentences were read
    _, sampled = trained(tmp_path / "shuffled", *flags, "--shuffle-input-sentence", sentences=sentences)
    assert trainer_spec(sampled.read_bytes())[19] == [1]
    assert "x" in CTCTokenizer.from_file(sampled).pieces()  # 101 of 300 at random: some "xyz" among them


def test_input_sentence_size_in_spms_forbidden_range_is_rejected_naming_the_limit(tmp_path):
    (tmp_path / "c.txt").write_text("a b\n")
    status, _, err = tokenizer(
        "--input", tmp_path / "c.txt", "--output-dir", tmp_path, "--input-sentence-size", 5
    )
    assert status == 1 and "input_sentence_size must be 0 (every sentence) or above 100" in err


def test_train_extremely_large_corpus_is_passed_and_recorded(tmp_path):
    summary, model = trained(tmp_path, "--train-extremely-large-corpus", "--vocab-size", 30)
    assert summary["options"]["train_extremely_large_corpus"] is True
    CTCTokenizer.from_file(model)


def test_user_defined_symbols_are_single_pieces(tmp_path):
    sentences = [f"{s} <noise>" for s in TINY_SENTENCES]
    _, model = trained(
        tmp_path, "--user-defined-symbols", "<noise>,<laugh>", "--keep-punctuation", "--vocab-size", 40,
        sentences=sentences,
    )  # fmt: skip
    loaded = CTCTokenizer.from_file(model)
    assert trainer_spec(model.read_bytes())[31] == [b"<noise>", b"<laugh>"]
    assert "<noise>" in [loaded.piece(i) for i in loaded.encode("cat <noise>")]


def test_byte_fallback_spells_unseen_characters_as_bytes(tmp_path):
    _, model = trained(tmp_path, "--byte-fallback", "--model-type", "char", "--vocab-size", 300)
    loaded = CTCTokenizer.from_file(model)
    assert trainer_spec(model.read_bytes())[35] == [1]
    assert [loaded.piece(i) for i in loaded.encode("ß")][-2:] == ["<0xC3>", "<0x9F>"]


def test_byte_fallback_with_a_small_vocab_says_why_it_failed(tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(TINY_SENTENCES))
    status, _, err = tokenizer(
        "--input", tmp_path / "c.txt", "--output-dir", tmp_path, "--byte-fallback", "--model-type", "char",
        "--vocab-size", 30,
    )  # fmt: skip
    assert status == 1 and "byte_fallback adds 256 byte pieces" in err


def test_keep_corpus_keeps_the_normalized_training_text_next_to_the_model(tmp_path):
    flags = ("--keep-corpus", "--model-type", "char", "--vocab-size", 30)
    summary, model = trained(tmp_path, *flags, sentences=["Hello, World!"] * 20)
    corpus = model.with_name("tokenizer.corpus.txt")
    assert summary["corpus"] == str(corpus)
    assert corpus.read_text(encoding="utf-8") == "hello world\n" * 20


@pytest.mark.skipif(not Path(SPM_TRAIN).is_file(), reason="Debian's spm_train is not installed")
def test_an_external_spm_train_gets_the_same_flags(tmp_path):
    flags = ("--vocab-size", 30, "--model-type", "bpe", "--user-defined-symbols", "<noise>", "--keep-corpus")
    _, library = trained(tmp_path / "library", *flags)
    summary, external = trained(tmp_path / "external", *flags, "--sentencepiece-command", SPM_TRAIN)
    assert summary["options"]["sentencepiece_command"] == SPM_TRAIN
    library_spec, external_spec = trainer_spec(library.read_bytes()), trainer_spec(external.read_bytes())
    for field in (3, 4, 10, 11, 19, 31, 35, 40, 41, 42, 43):  # type, size, coverage, ..., special ids
        assert external_spec.get(field) == library_spec.get(field), field
    assert CTCTokenizer.from_file(external).vocab_size == summary["vocab_size"] == 31


def test_a_sentencepiece_command_that_does_not_exist_is_a_usage_error(tmp_path):
    (tmp_path / "c.txt").write_text("a b\n")
    status, _, err = tokenizer(
        "--input", tmp_path / "c.txt", "--output-dir", tmp_path, "--sentencepiece-command", tmp_path / "nope"
    )
    assert status == 2 and "--sentencepiece-command" in err and "no such executable" in err


@pytest.mark.skipif(shutil.which("spm_train") is None, reason="no spm_train on PATH")
def test_an_external_spm_train_failure_exits_1_with_its_message(tmp_path):
    (tmp_path / "c.txt").write_text("a tiny corpus\n")
    status, _, err = tokenizer(
        "--input", tmp_path / "c.txt", "--output-dir", tmp_path, "--sentencepiece-command", "spm_train"
    )  # the default --vocab-size (256) on three words
    assert status == 1 and "SentencePiece training failed" in err and "exited" in err


def test_normalization_flags_are_applied_and_recorded_with_the_model(tmp_path):
    sentences = ["Ｆｕｌｌ Width, Text!"] * 20
    flags = ("--model-type", "char", "--vocab-size", 40)
    _, default = trained(tmp_path / "default", *flags, sentences=sentences)
    assert set(CTCTokenizer.from_file(default).pieces()) >= {"f", "w"}
    assert not {"Ｆ", "F", ",", "!"} & set(CTCTokenizer.from_file(default).pieces())
    _, raw = trained(
        tmp_path / "raw",
        *flags,
        "--unicode-form",
        "none",
        "--no-lowercase",
        "--keep-punctuation",
        sentences=sentences,
    )
    assert {"Ｆ", "W", ",", "!"} <= set(CTCTokenizer.from_file(raw).pieces())
    recorded = normalization_for_model(raw)
    assert (recorded.unicode_form, recorded.lowercase, recorded.strip_punctuation) == (None, False, False)


def test_every_input_form_feeds_the_corpus(tmp_path):
    data = tmp_path / "data"
    (data / "audio").mkdir(parents=True)
    (data / "audio" / "a.wav").write_bytes(make_wav())
    (data / "audio" / "a.txt").write_text("From A Sidecar")
    (data / "texts").mkdir()
    (data / "texts" / "one.txt").write_text("plain text one\nplain text two\n")
    (data / "m.jsonl").write_text(json.dumps({"audio_path": "x.wav", "transcription": "From JSONL"}) + "\n")
    (data / "m.tsv").write_text("f.npy\t2\t80\t1 2\tfrom tsv\n")
    pq.write_table(pa.table({"sentence": ["From Parquet"], "audio_path": ["y.wav"]}), data / "m.parquet")
    inputs = [data / "audio", data / "texts", data / "m.jsonl", data / "m.tsv", data / "m.parquet"]
    flags = [part for path in inputs for part in ("--input", path)]
    summary, model = trained(
        tmp_path, *flags, "--keep-corpus", "--model-type", "char", "--vocab-size", 30, sentences=None
    )
    corpus = model.with_name("tokenizer.corpus.txt").read_text(encoding="utf-8").splitlines()
    assert corpus == [
        "from a sidecar",
        "plain text one",
        "plain text two",
        "from jsonl",
        "from tsv",
        "from parquet",
    ]
    assert summary["corpus_sentences"] == 6 and summary["report"]["kept"] == 6


def test_manifest_dir_trains_on_the_training_half(tmp_path):
    (tmp_path / "data").mkdir()
    lines = [
        json.dumps({"id": f"u{i}", "audio_path": f"{i}.wav", "text": s}) for i, s in enumerate(TINY_SENTENCES)
    ]
    (tmp_path / "data" / "train.jsonl").write_text("\n".join(lines) + "\n")
    summary, _ = trained(tmp_path, "--manifest-dir", tmp_path / "data", "--vocab-size", 30, sentences=None)
    split = tmp_path / "tok" / "manifest_split"
    assert summary["corpus_sentences"] == len((split / "train.jsonl").read_text().splitlines())
    assert 0 < summary["corpus_sentences"] < len(TINY_SENTENCES)


def test_strict_mode_stops_at_the_first_bad_record_naming_file_and_line(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_path": "a.wav", "text": "fine"}) + "\n" + '{"text": \n')
    status, _, err = tokenizer("--input", manifest, "--output-dir", tmp_path / "tok", "--strict")
    assert status == 1 and f"{manifest}:2: malformed JSON" in err
    assert not (tmp_path / "tok" / "tokenizer.corpus.txt").exists()


def test_no_usable_transcript_is_an_error_naming_the_inputs(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_path": "a.wav", "tokens": [1]}) + "\n")
    status, _, err = tokenizer("--input", manifest, "--output-dir", tmp_path / "tok")
    assert status == 1 and "no usable transcripts" in err and "'no transcript': 1" in err
