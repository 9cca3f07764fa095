"""The streaming intent reader: the fragment table, chunking, bytes, and properties."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jiter
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracing import IntentStreamReader, StreamingIntent, read_streaming_intent

S = StreamingIntent

# (argument prefix, expected result of read_streaming_intent)
FRAGMENTS: list[tuple[str, StreamingIntent | None]] = [
    ("", None),
    ("   ", None),
    ("{", None),
    ('{"in', None),
    ('{"intent', None),
    ('{"intent"', None),
    ('{"intent" :', None),
    ('{"intent":"', S("", False)),
    ('{"intent":"Sea', S("Sea", False)),
    ('{"intent":"Searching for \\"OAuth', S('Searching for "OAuth', False)),
    ('{"intent":"Searching for \\"OAuth\\" handlers"', S('Searching for "OAuth" handlers', True)),
    ('{"intent":"C:\\\\Users\\\\', S("C:\\Users\\", False)),
    ('{"intent":"C:\\\\', S("C:\\", False)),
    ('{"intent":"C:\\', S("C:", False)),  # half an escape is held back
    ('{"intent":"one\\ntwo', S("one\ntwo", False)),
    ('{"intent":"tab\\t/\\/', S("tab\t//", False)),
    ('{"intent":"caf\\u', S("caf", False)),
    ('{"intent":"caf\\u00', S("caf", False)),
    ('{"intent":"caf\\u00e9', S("café", False)),
    ('{"intent":"smile \\uD83D', S("smile ", False)),
    ('{"intent":"smile \\uD83D\\', S("smile ", False)),
    ('{"intent":"smile \\uD83D\\u', S("smile ", False)),
    ('{"intent":"smile \\uD83D\\uDE0', S("smile ", False)),
    ('{"intent":"smile \\uD83D\\uDE00', S("smile 😀", False)),
    ('{"intent":"smile \\ud83d\\ude00!"', S("smile 😀!", True)),
    ('{"intent":"lone \\uD83Dx', S("lone \ufffdx", False)),
    ('{"intent":"lone \\uDE00x', S("lone \ufffdx", False)),
    ('{"intent":"high then \\uD83D\\n', S("high then \ufffd\n", False)),
    ('{"intent":"Searching"', S("Searching", True)),
    (
        '{"intent":"Searching for OAuth", "query": "oauth", "limit": 5}',
        S("Searching for OAuth", True),
    ),
    ('\n {\n  "intent" \t:\r "Spaced out" ,', S("Spaced out", True)),
    ('{"intent":"Searching"} trailing garbage', S("Searching", True)),
    ('{"intent":"😀 and 日本語', S("😀 and 日本語", False)),
    ('{"query":"oauth","intent":"Searching"}', None),  # reordered: not first
    ('{"intentional":"x"}', None),
    ('{"int":"x"}', None),
    ('{"intent":null}', None),
    ('{"intent":42}', None),
    ('{"intent":"bad escape \\x41"}', None),
    ('{"intent":"bad hex \\u00zz"}', None),
    ("[1, 2, 3]", None),
    ("garbage", None),
    ('{"intent"garbage', None),
    ("{}", None),
    ("null", None),
]


@pytest.mark.parametrize(("prefix", "expected"), FRAGMENTS)
def test_fragment_table(prefix: str, expected: StreamingIntent | None) -> None:
    assert read_streaming_intent(prefix) == expected
    assert read_streaming_intent(prefix.encode()) == expected
    # the same prefix one character at a time ends in the same state
    reader = IntentStreamReader()
    for ch in prefix:
        reader.feed(ch)
    assert reader.result == expected


def test_escaped_key_is_decoded() -> None:
    assert read_streaming_intent('{"\\u0069ntent":"x"}') == S("x", True)
    assert read_streaming_intent('{"\\u0069nt') is None


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def test_utf8_split_across_byte_chunks() -> None:
    text = "Lesen der Datei 日本語 😀 naïve"
    data = json.dumps({"intent": text, "path": "x"}, ensure_ascii=False).encode()
    for size in (1, 2, 3, 5):
        reader = IntentStreamReader()
        seen: list[str] = []
        for chunk in _chunks(data, size):
            result = reader.feed(chunk)
            if result is not None:
                seen.append(result.text)
                assert "\ufffd" not in result.text
        assert reader.result == S(text, True)
        assert all(text.startswith(s) for s in seen)


def test_invalid_utf8_becomes_replacement_character() -> None:
    assert read_streaming_intent(b'{"intent":"a\xffb"') == S("a\ufffdb", True)


def test_reader_stops_working_once_done() -> None:
    reader = IntentStreamReader()
    reader.feed('{"intent":"Done"')
    assert reader.done and reader.complete
    first = reader.result
    assert reader.feed(', "x": "\\uZZZZ garbage that would kill the reader"') is first
    assert reader.feed(b"\xff\xfe") is first

    dead = IntentStreamReader()
    dead.feed('{"query"')
    assert dead.done and not dead.complete
    assert dead.feed(':"x","intent":"late"}') is None


def test_returns_same_object_when_nothing_new() -> None:
    reader = IntentStreamReader()
    a = reader.feed('{"intent":"ab')
    b = reader.feed("\\")  # half an escape: nothing new to show
    assert a is b and a == S("ab", False)
    assert reader.feed("n") == S("ab\n", False)


def test_never_raises_on_odd_input() -> None:
    reader = IntentStreamReader()
    for chunk in ["{", '"intent"', ":", '"x', b"\x80", "y"]:
        reader.feed(chunk)  # mixing str and bytes is tolerated
    assert read_streaming_intent(bytearray(b'{"intent":"x"')) == S("x", True)  # pyright: ignore[reportArgumentType]


# --- properties ------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def intent_first_args(draw: st.DrawFn) -> tuple[str, str]:
    intent = draw(st.text(max_size=40))
    rest = draw(
        st.dictionaries(
            st.text(max_size=8).filter(lambda k: k != "intent"), json_values, max_size=4
        )
    )
    ensure_ascii = draw(st.booleans())
    indent = draw(st.sampled_from([None, 1]))
    text = json.dumps({"intent": intent, **rest}, ensure_ascii=ensure_ascii, indent=indent)
    return intent, text


@given(
    intent_first_args(),
    st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=40),
    st.booleans(),
)
def test_any_split_gives_the_one_shot_result(
    case: tuple[str, str], sizes: list[int], as_bytes: bool
) -> None:
    intent, text = case
    data: str | bytes = text.encode() if as_bytes else text
    one_shot = read_streaming_intent(data)
    assert one_shot == S(intent, True)
    assert one_shot is not None
    assert one_shot.text == jiter.from_json(text.encode())["intent"]  # a full parse agrees

    reader = IntentStreamReader()
    texts: list[str] = []
    pos = 0
    i = 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        i += 1
        result = reader.feed(data[pos : pos + size])
        pos += size
        if result is not None:
            texts.append(result.text)
    assert reader.result == one_shot
    for t in texts:  # every intermediate text is a prefix of the final one
        assert intent.startswith(t)


@given(st.text(max_size=60) | st.binary(max_size=60))
def test_garbage_never_raises(data: str | bytes) -> None:
    result = read_streaming_intent(data)
    assert result is None or isinstance(result, StreamingIntent)
    reader = IntentStreamReader()
    for i in range(0, len(data), 3):
        reader.feed(data[i : i + 3])


@given(intent_first_args(), st.integers(min_value=0, max_value=400))
def test_every_prefix_is_a_prefix_of_the_final_text(case: tuple[str, str], cut: int) -> None:
    intent, text = case
    result = read_streaming_intent(text[:cut])
    if result is not None:
        assert intent.startswith(result.text)
        if result.complete:
            assert result.text == intent


@pytest.mark.parametrize(
    "text",
    [
        " " * 200 + '{"intent":"x"}',  # more white space than the preamble buffer holds
        "{" + "\n" * 100 + '"intent"' + "\t" * 70 + ":" + " " * 90 + '"x"',
        '{"\\u0069ntent": "x"}',
    ],
)
@pytest.mark.parametrize("size", [1, 7, 1000])
def test_long_or_escaped_preamble(text: str, size: int) -> None:
    reader = IntentStreamReader()
    for i in range(0, len(text), size):
        reader.feed(text[i : i + size])
    assert reader.result == S("x", True)


def test_one_huge_byte_chunk() -> None:
    data = json.dumps(
        {"intent": "Reading é", "content": "é" * 300_000}, ensure_ascii=False
    ).encode()
    assert read_streaming_intent(data) == S("Reading é", True)
    cut = data[:100_001]  # may end inside a UTF-8 sequence
    assert read_streaming_intent(cut) == S("Reading é", True)
    assert read_streaming_intent(b" " * 100_000 + data) == S("Reading é", True)
