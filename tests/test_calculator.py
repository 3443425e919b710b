"""The calculator gives exact, tidy results and refuses hostile input quickly."""

from __future__ import annotations

import time

import pytest

from mas.tools.calculator import calculate


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3", "5"),
        ("10 - 17", "-7"),
        ("6 * 7", "42"),
        ("7 / 2", "3.5"),
        ("8 / 2", "4"),
        ("7 // 2", "3"),
        ("7 % 3", "1"),
        ("2 ** 10", "1024"),
        ("2 ** -2", "0.25"),
        ("-(3 + 4) * +2", "-14"),
        ("(12 + 7) * 3", "57"),
        ("1 / 3", "0.3333333333"),
        ("0.1 + 0.2", "0.3"),
        ("2 ** 0.5", "1.414213562"),
        ("sqrt(16)", "4"),
        ("sqrt(2) ** 2", "2"),
        ("abs(-5)", "5"),
        ("round(2.567, 2)", "2.57"),
        ("round(2.5)", "2"),
        ("min(4, 2, 9)", "2"),
        ("max(4, 2, 9)", "9"),
        ("max(1,234)", "234"),
        ("1.5e3", "1500"),
        ("10 ** 100", str(10**100)),
        ("1e20", "100000000000000000000"),
        ("1.234567891234e20", "123456789100000000000"),
        ("-0.0", "0"),
        ("1e-7", "1e-07"),
    ],
)
def test_results(expression: str, expected: str) -> None:
    assert calculate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("  2 + 3  ", "5"),
        ("`2 + 3`", "5"),
        ("```2 + 3```", "5"),
        ("'2 + 3'", "5"),
        ('"2 + 3"', "5"),
        ("2 + 3 =", "5"),
        ("2 + 3=", "5"),
        ("12 x 3", "36"),
        ("12x3", "36"),
        ("12 X 3", "36"),
        ("12 × 3", "36"),
        ("12 ÷ 4", "3"),
        ("2^8", "256"),
        ("1,234 + 1", "1235"),
        ("1,234,567 * 2", "2469134"),
        ("1,234.5 - 0.5", "1234"),
        ("5 − 2", "3"),
    ],
)
def test_model_isms(expression: str, expected: str) -> None:
    assert calculate(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "__import__('os').system('ls')",
        "().__class__",
        "().__class__.__bases__[0].__subclasses__()",
        "9**9**9",
        "10**1000",
        "2**101",
        "(10**60) * (10**60)",
        "10.0**99 * 10.0**99",
        "'a'*5",
        "'abc'",
        "a",
        "x + 1",
        "pi",
        "True + 1",
        "lambda: 1",
        "(lambda x: x)(1)",
        "abs.__doc__",
        "sqrt.__self__",
        "[1, 2]",
        "{1: 2}",
        "1 if 1 else 2",
        "1 < 2",
        "1 and 2",
        "1 << 1000",
        "1 & 3",
        "~1",
        "1j",
        "min(x for x in (1, 2))",
        "max(*[1, 2])",
        "round(1.5, ndigits=1)",
        "round(1.5, 10**50)",
        "sqrt(-1)",
        "(-8) ** (1/3)",
        "sqrt(1, 2)",
        "open('/etc/passwd')",
        "1/0",
        "1 // 0",
        "1 % 0",
        "0 ** -1",
        "1 +",
        "",
        "   ",
        "1" * 201,
        "1+" * 150 + "1",
        "(" * 300 + "1" + ")" * 300,
        "-" * 199 + "1" * 300,
        "x" * 100_000,
        "1" * 150,
    ],
)
def test_hostile_input_is_refused_quickly(expression: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError):
        calculate(expression)
    assert time.perf_counter() - start < 0.5


def test_error_messages_are_short_and_plain() -> None:
    with pytest.raises(ValueError, match="division by zero"):
        calculate("1/0")
    with pytest.raises(ValueError, match="too long"):
        calculate("1+" * 150 + "1")
    with pytest.raises(ValueError, match="exponent too large"):
        calculate("10**1000")
    with pytest.raises(ValueError, match="unknown name 'a'"):
        calculate("a + 1")


def test_non_text_is_refused() -> None:
    with pytest.raises(ValueError):
        calculate(42)  # type: ignore[arg-type]
