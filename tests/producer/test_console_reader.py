"""producer.lines.LineReader reproduces Kafka's LineMessageReader (cases from Kafka's
LineMessageReaderTest: same inputs, same records, same error messages)."""

from __future__ import annotations

import pytest

from kafkasim.errors import InvalidArgumentError
from kafkasim.producer.lines import LineReader

BOTH = {"parse.key": "true", "parse.headers": "true"}


def read(props, text):
    reader = LineReader(props)
    return [tuple(reader.parse(line, i)[:3]) for i, line in enumerate(text.split("\n"), 1)]


def test_key_and_value():
    assert read({"parse.key": "true"}, "key0\tvalue0\nkey1\tvalue1") == [
        (b"key0", b"value0", ()), (b"key1", b"value1", ())]


def test_headers_key_and_value():
    assert read(BOTH, "headerKey0:headerValue0,headerKey1:headerValue1\tkey0\tvalue0") == [
        (b"key0", b"value0", (("headerKey0", b"headerValue0"), ("headerKey1", b"headerValue1")))]


def test_minimal_valid_input_with_header_key_and_value():
    assert read(BOTH, ":\t\t") == [(b"", b"", (("", b""),))]


def test_key_missing_value():
    assert read({"parse.key": "true"}, "key\t") == [(b"key", b"", ())]


def test_demarcations_longer_than_one():
    props = dict(BOTH, **{"key.separator": "\t\t", "headers.delimiter": "\t\t", "headers.separator": "---",
                          "headers.key.separator": "::::"})
    assert read(props, "headerKey0.0::::headerValue0.0---headerKey1.0::::\t\tkey\t\tvalue") == [
        (b"key", b"value", (("headerKey0.0", b"headerValue0.0"), ("headerKey1.0", b"")))]


def test_headers_without_key_and_value_only():
    assert read({"parse.headers": "true"}, "headerKey:headerValue\tvalue") == [
        (None, b"value", (("headerKey", b"headerValue"),))]
    assert read({}, "value") == [(None, b"value", ())]


def test_custom_delimiters_and_varying_header_counts():
    props = dict(BOTH, **{"key.separator": "#", "headers.delimiter": "!", "headers.separator": "&",
                          "headers.key.separator": ":"})
    assert read(props, "headerKey0.0:headerValue0.0&headerKey0.1:headerValue0.1!key0#value0\n"
                       "headerKey1.0:headerValue1.0!key1#value1") == [
        (b"key0", b"value0", (("headerKey0.0", b"headerValue0.0"), ("headerKey0.1", b"headerValue0.1"))),
        (b"key1", b"value1", (("headerKey1.0", b"headerValue1.0"),))]


def test_missing_separators_name_the_line_with_kafkas_words():
    reader = LineReader(BOTH)
    reader.parse("headerKey0.0:headerValue0.0,headerKey0.1:headerValue0.1\tkey0\tvalue0", 1)
    with pytest.raises(InvalidArgumentError) as e:
        reader.parse("headerKey1.0:headerValue1.0\tkey1[MISSING-DELIMITER]value1", 2)
    assert str(e.value) == ("No key separator found on line number 2: "
                            "'headerKey1.0:headerValue1.0\tkey1[MISSING-DELIMITER]value1'")
    with pytest.raises(InvalidArgumentError) as e:
        reader.parse("key[MISSING-DELIMITER]val\tkey0\tvalue0", 1)
    assert str(e.value) == "No header key separator found in pair 'key[MISSING-DELIMITER]val' on line number 1"


@pytest.mark.parametrize("props,message", [
    ({"headers.delimiter": "\t", "headers.separator": "\t", "headers.key.separator": "\t"},
     "headers.delimiter and headers.separator may not be equal"),
    ({"headers.delimiter": "\t", "headers.separator": ",", "headers.key.separator": "\t"},
     "headers.delimiter and headers.key.separator may not be equal"),
    ({"headers.delimiter": "\t", "headers.separator": ",", "headers.key.separator": ","},
     "headers.separator and headers.key.separator may not be equal"),
    ({"headers.delimiter": "-", "headers.separator": ":", "headers.key.separator": "/", "null.marker": "-"},
     "null.marker and headers.delimiter may not be equal"),
    ({"headers.delimiter": "-", "headers.separator": ":", "headers.key.separator": "/", "null.marker": ":"},
     "null.marker and headers.separator may not be equal"),
    ({"headers.delimiter": "-", "headers.separator": ":", "headers.key.separator": "/", "null.marker": "/"},
     "null.marker and headers.key.separator may not be equal"),
])
def test_colliding_demarcations_are_refused(props, message):
    with pytest.raises(InvalidArgumentError, match=message):
        LineReader(dict(BOTH, **props))


def test_ignore_error():
    props = dict(BOTH, **{"ignore.error": "true"})
    assert read(props, "headerKey0.0:headerValue0.0\tkey0\tvalue0\n"
                       "headerKey1.0:headerValue1.0,headerKey1.1:headerValue1.1[MISSING-HEADER-DELIMITER]key1\tvalue1\n"
                       "headerKey2.0:headerValue2.0\tkey2[MISSING-KEY-DELIMITER]value2\n"
                       "headerKey3.0:headerValue3.0[MISSING-HEADER-DELIMITER]key3[MISSING-KEY-DELIMITER]value3") == [
        (b"key0", b"value0", (("headerKey0.0", b"headerValue0.0"),)),
        (None, b"value1", (("headerKey1.0", b"headerValue1.0"),
                           ("headerKey1.1", b"headerValue1.1[MISSING-HEADER-DELIMITER]key1"))),
        (None, b"key2[MISSING-KEY-DELIMITER]value2", (("headerKey2.0", b"headerValue2.0"),)),
        (None, b"headerKey3.0:headerValue3.0[MISSING-HEADER-DELIMITER]key3[MISSING-KEY-DELIMITER]value3", ())]
    assert read(props, "key-val\tkey0\tvalue0") == [(b"key0", b"value0", (("key-val", None),))]


def test_null_marker():
    text = "key\t\nkey\t<NULL>\nkey\t<NULL>value\n<NULL>\tvalue\n<NULL>\t<NULL>"
    assert read({"parse.key": "true", "null.marker": "<NULL>"}, text) == [
        (b"key", b"", ()), (b"key", None, ()), (b"key", b"<NULL>value", ()), (None, b"value", ()), (None, None, ())]
    assert read({"parse.key": "true"}, text) == [
        (b"key", b"", ()), (b"key", b"<NULL>", ()), (b"key", b"<NULL>value", ()), (b"<NULL>", b"value", ()),
        (b"<NULL>", b"<NULL>", ())]


def test_null_marker_with_headers():
    h1 = ("h1", b"v1")
    assert read(dict(BOTH, **{"null.marker": "<NULL>"}),
                "h0:v0,h1:v1\t<NULL>\tvalue\n<NULL>\tkey\t<NULL>\nh0:,h1:v1\t<NULL>\t<NULL>\n"
                "h0:<NULL>,h1:v1\tkey\t<NULL>\nh0:<NULL>,h1:<NULL>value\tkey\t<NULL>") == [
        (None, b"value", (("h0", b"v0"), h1)), (b"key", None, ()), (None, None, (("h0", b""), h1)),
        (b"key", None, (("h0", None), h1)), (b"key", None, (("h0", None), ("h1", b"<NULL>value")))]
    with pytest.raises(InvalidArgumentError, match="No header key separator found in pair '<NULL>' on line number 2"):
        LineReader(BOTH).parse("<NULL>\tkey\t<NULL>", 2)


def test_null_marker_header_key_is_refused():
    with pytest.raises(InvalidArgumentError) as e:
        LineReader(dict(BOTH, **{"null.marker": "<NULL>"})).parse("<NULL>:v0,h1:v1\tkey\tvalue", 1)
    assert str(e.value) == "Header keys should not be equal to the null marker '<NULL>' as they can't be null"
    assert read(BOTH, "<NULL>:v0,h1:v1\tkey\tvalue") == [(b"key", b"value", (("<NULL>", b"v0"), ("h1", b"v1")))]
