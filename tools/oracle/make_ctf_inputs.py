#!/usr/bin/env python3
"""Write the CTF oracle inputs: tests/data/ctf_oracle/inputs/<case>.ctf + <case>.json.

    python tools/oracle/make_ctf_inputs.py [--out tests/data/ctf_oracle/inputs]

The inputs are committed; this script is how they were made (bytes such as CRLF, BOM, TAB,
VT/FF are spelled out here rather than hidden in a file). Any Python >= 3.6.

Each sidecar JSON: {"streams": [{"name", "alias", "format", "dim"}], "precision": "float"|"double",
"skip_sequence_ids": bool, "max_errors": int, "about": "..."}.
Every case is valid under CNTK 2.7 except those named *_error (CNTK throws; the golden holds the message).
Validity rules that are easy to break (spec 2.6): every declared stream must occur in every sequence,
and in a multi-line (id mode) sequence at least one stream must have a sample on every line, else
"Number of samples ... is less than expected" costs an error.
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "ctf_oracle", "inputs")

BOM = b"\xef\xbb\xbf"


def S(name, fmt, dim, alias=None):
    return {"name": name, "alias": alias or name, "format": fmt, "dim": dim}


def lines(*rows, **kw):
    """Join rows with eol (default LF); final=False drops the last line end."""
    eol = kw.get("eol", b"\n")
    final = kw.get("final", True)
    data = eol.join(r if isinstance(r, bytes) else r.encode("utf-8") for r in rows)
    return data + (eol if final else b"")


NUMBER_ROWS = (
    "|a +3 5. -2.5E-2 1e3 007 -0.0 02.50 1E+2",
    "|a 0 -0 +0.0 1e-0 12345678 0.1 +0.5e+1 00000.00001",
    "|a 45. 6.78 9.10e-11 -123 1E0 1e00003 +0e-7 10.",
    "|a 0.5e-0 -7e+0 1000000000000 0001.0100 3e-5 -4.E5 8.25 99",
)
# "-4.E5" would be "-4." then a failure at "E": not valid. Replaced below.
NUMBER_ROWS = tuple(r.replace("-4.E5", "-4.0E5") for r in NUMBER_ROWS)

LONG_MANTISSA_ROWS = (
    "|m 0.12345678901234567 1.2345678901234567e-5 9007199254740993 123456789012345678901"
    " 3.14159265358979323846 2.7182818284590452353602874 0.30000000000000004 1.0000000000000002",
    "|m 99999999999999999999 0.000000000000000000012345678901234567 123456.78901234567"
    " 7.0000000000000000001 4.35 0.1e1 0.7 1.9999999999999999",
    "|m 18014398509481985 2.2250738585072011e-308 8.98846567431158e307 0.1000000000000000055511151231257827"
    " 1e23 8.589973e9 5e-324 9007199254740991.4",
)

CASES = []


def case(name, streams, data, precision="float", skip_ids=False, max_errors=0, about=""):
    CASES.append((name, {"streams": streams, "precision": precision, "skip_sequence_ids": skip_ids,
                         "max_errors": max_errors, "about": about}, data))


case("number_syntax", [S("a", "dense", 8)], lines(*NUMBER_ROWS),
     about="signs, trailing period, exponent forms, leading zeros, -0")
case("number_syntax_double", [S("a", "dense", 8)], lines(*NUMBER_ROWS), precision="double",
     about="number_syntax read as double")
case("long_mantissa_float", [S("m", "dense", 8)], lines(*LONG_MANTISSA_ROWS),
     about="17+ digit mantissas, integers beyond 2^53, read as float")
case("long_mantissa_double", [S("m", "dense", 8)], lines(*LONG_MANTISSA_ROWS), precision="double",
     about="17+ digit mantissas, integers beyond 2^53, read as double")
case("float32_rounding", [S("f", "dense", 8)], lines(
    "|f 16777217 16777219 0.1 3.4028235e38 1.00000005960464477539 1.0000000596046447754 1.0000001788139343 0.3",
    "|f 1e-45 7e-46 1e-46 1.17549435e-38 1.1754942e-38 2.5e-45 3e-45 33554435",
    "|f 0.2 0.7 2.675 1.15 -1.15 4.35 5e-8 6e-8",
), about="halfway and double-rounding cases for float32 (text -> double -> float32), float32 denormals")
case("large_exponents", [S("e", "dense", 6)], lines(
    "|e 1e38 3.4e38 -3.4e38 3.4028234e38 1e-38 -1e-39",
    "|e 1e39 -1e39 1e400 3.5e38 1e-400 -1e-400",
    "|e 3.4028235677973366e38 3.4028235677973362e38 1E+38 12345e34 0.0000034e44 1e-37",
    "|e 0e400 -0e400 0.0e999 1e-50 0.00000e500 2e-45",
), about="float32 overflow to inf, underflow to 0, FLT_MAX neighbourhood, zero times a huge power of ten")
case("large_exponents_double", [S("e", "dense", 6)], lines(
    "|e 1e308 1.7976931348623157e308 -1.7976931348623157e308 1.7976931348623158e308 1e309 -1e309",
    "|e 1e38 3.4e38 1e39 1e-38 1e300 123456789e300",
), precision="double", about="double overflow to inf, DBL_MAX neighbourhood")
case("denormals_double", [S("d", "dense", 6)], lines(
    "|d 1e-310 4.9e-324 5e-324 2.2250738585072014e-308 2.225073858507201e-308 1e-320",
    "|d 2.4703282292062328e-324 3e-324 -1e-310 1.5e-323 4.94065645841246544e-324 123e-320",
), precision="double", about="double denormals (all read as 0 in float32 by CNTK)")
case("sparse_unsorted_dup", [S("s", "sparse", 10), S("d", "dense", 2)], lines(
    "|s 5:1 2:2 5:3 0:-1 |d 1 2",
    "|s 9:0.5 9:0.25 1:1 |d 3 4",
    "|s |d 5 6",
    "|s 3:0.001 3:-0.001 7:2 |d 7 8",
    "|d 9 10 |s 8:1 0:1 4:1 0:2",
), about="sparse indices unsorted and duplicated (CNTK sums duplicates), empty sparse sample")
case("crlf_id_mode", [S("a", "dense", 2), S("b", "sparse", 4)], lines(
    "1 |a 1 2 |b 3:1",
    "1 |a 3 4 |b 0:2",
    "2 |a 5 6",
    "2 |b 1:1 |a 9 9",
    "3 |a 7 8 |b 2:1 3:1",
    eol=b"\r\n"), about="CRLF line ends, id mode, multi-line sequences")
case("crlf_line_mode", [S("a", "dense", 3), S("b", "dense", 1)], lines(
    "|a 1 2 3 |b 4", "|b 5 |a 6 7", "|a 0.25 -0.5 1e2 |b 1e-3", eol=b"\r\n", final=False),
    about="CRLF, line mode, short dense sample before CR, no final line end")
case("tabs_and_delimiters", [S("a", "dense", 3), S("b", "dense", 1)], lines(
    b"|a\t1\t2\t3 |b\t4",
    b"|a  1   2    3\t|b 5    ",
    b"\t|a 7 8 9|b 10",
    b"|a 1 2 3\x0b|b 11\x0c",
    b"|a\t\t-1 \t -2\t\t-3\t\t|b\t \t12\t",
), about="TAB/space mixes, several delimiters, a number ended by '|', VT and FF as column delimiters")
case("comments", [S("a", "dense", 2), S("b", "dense", 1)], lines(
    "|# leading comment |a 1 2 |b 3",
    "|a 4 5 |# comment between streams |b 6",
    "|a 7 8 |b 9 |# trailing comment with digits 1 2 3 and colons 1:2",
    "|#c1|#c2 |a 1 1|#c3|b 2",
    "|a 3 3 |#|b 4",
    "|a 5 5 |b 6 |#comment with non-ASCII \u00e9 \u00fc and # signs ##",
), about="|# comments run to the next '|' or line end")
case("aliases", [S("features", "dense", 3, "F"), S("labels", "sparse", 5, "L")], lines(
    "|F 1 2 3 |L 0:1",
    "|Fx 9 9 9 |F 4 5 6 |L 1:1 |LL 3:3",
    "|features 7 7 7 |F 7 8 9 |labels 0:1 |L 4:1",
    "|L 2:1 2:1 |F 1 0 1",
), about="aliases differ from names; names that extend an alias or equal the stream name are unknown")
case("id_mode_multiline", [S("a", "dense", 2), S("b", "sparse", 4)], lines(
    "10 |a 1 2 |b 0:1",
    "10 |a 3 4",
    "10 |a 5 6 |b 3:1",
    "11 |b 2:1 |a 7 8",
    "12 |a 9 10 |b 1:1",
    "12 |b 1:2",
    "13 |a 1 1 |b 0:1",
    "|a 5 5 |b 1:1",
    "\t|a 6 6",
    "14\t|a 2 2 |b 2:0.5",
), about="id mode: multi-line sequences, streams on some lines only, lines without id continue the sequence")
case("large_ids", [S("a", "dense", 1)], lines(
    "18446744073709551615 |a 1",
    "18446744073709551615 |a 2",
    "0 |a 3",
    "18446744073709551614 |a 4",
    "5 |a 7",
    "6 |a 8",
    "5 |a 9",
    "9223372036854775808 |a 10",
), about="ids up to 2^64-1, duplicate non-adjacent ids give separate sequences")
case("no_final_newline_line", [S("a", "dense", 2), S("b", "sparse", 3)], lines(
    "|a 1 2 |b 0:1", "|b 1:1 |a 3 4", final=False),
    about="line mode, last line has no newline and ends with a full dense sample")
case("no_final_newline_id", [S("a", "dense", 2), S("b", "sparse", 3)], lines(
    "1 |a 1 2 |b 0:1", "2 |a 3 4", "2 |a 5 5 |b 1:1 2:2.5", final=False),
    about="id mode, last line has no newline and ends with a sparse sample")
case("short_dense", [S("a", "dense", 5), S("b", "dense", 3)], lines(
    "|a 1 2 |b 1 2 3",
    "|a |b 4",
    "|a 1 2 3 4 5 |b",
    "|a\t1 |b 2",
    "|a -1 |b 7 8 9",
), about="short dense samples are zero-padded, including empty ones")
case("unknown_inputs", [S("a", "dense", 2), S("b", "sparse", 4)], lines(
    "|a 1 2 |zz 3 4 |b 0:1",
    "|unknown_name_longer_than_any_alias 1 2 3 |a 3 4 |b 1:1",
    "|q 1:2:3 |a 5 6 |b 2:2 |r garbage,,;; x",
    "|A 9 9 |B 1:1 |a 7 8 |b 3:3",
    "|aa 1 |a 9 10 |bb 0:1 |b 0:4",
), about="unknown inputs (any content) are skipped; names are case-sensitive")
case("mixed_dense_sparse", [S("x", "dense", 4), S("s", "sparse", 6), S("y", "dense", 1)], lines(
    "|x 1 2 3 4 |s 0:1 5:2 |y 1",
    "|s 1:0.5 |y 0 |x 0.1 0.2 0.3 0.4",
    "|y -1 |x 4 3 2 1 |s",
    "|x 1e-3 2e-3 3e-3 4e-3 |y 2.5 |s 2:1e3 3:-1e-3 4:0",
), about="dense and sparse streams in any order, empty sparse sample, explicit sparse zero")
case("precision_double_mixed", [S("x", "dense", 4), S("s", "sparse", 6)], lines(
    "|x 0.1 0.2 1e-40 16777217 |s 0:0.1 5:1e-40",
    "|x 3.4e39 -3.4e39 0.30000000000000004 2.675 |s 3:16777217 3:1e-20",
), precision="double", about="values that differ between float and double")
case("utf8_bom_line", [S("a", "dense", 2)], BOM + lines("|a 1 2", "|a 3 4"),
     about="UTF-8 BOM before a line-mode file")
case("utf8_bom_id", [S("a", "dense", 2)], BOM + lines("", "", "7 |a 1 2", "7 |a 3 4", "8 |a 5 6"),
     about="UTF-8 BOM, then blank lines, then an id-mode file")
case("skip_sequence_ids", [S("a", "dense", 2), S("b", "sparse", 3)], lines(
    "1 |a 1 2 |b 0:1",
    "1 |a 3 4 |b 1:1",
    "2 |a 5 6 |b 2:1",
), skip_ids=True, about="skipSequenceIds: every line is a sequence, the leading digits are still skipped")
case("leading_whitespace_line", [S("a", "dense", 1)], lines("", " ", "\t", "|a 1", "|a 2"),
     about="leading blank lines are skipped (they still count for line-number keys)")
case("max_errors_recoverable", [S("a", "dense", 2), S("b", "sparse", 4)], lines(
    "1 |a 1 2 |b 0:1",
    "1 |a 3 x |b 1:1",
    "2 |a 5 6 7 |b 2:1",
    "2 |a 8 9 |b 3:1",
), max_errors=2, about="two bad samples (bad number, too many values) dropped within maxErrors=2")
case("max_errors_exceeded_error", [S("a", "dense", 2), S("b", "sparse", 4)], lines(
    "1 |a 1 2 |b 0:1",
    "1 |a 3 x |b 1:1",
    "2 |a 5 6 7 |b 2:1",
    "2 |a 8 9 |b 3:1",
), max_errors=1, about="the same two bad samples with maxErrors=1: CNTK throws")
case("missing_stream_error", [S("a", "dense", 2), S("b", "sparse", 4)], lines(
    "|a 1 2 |b 0:1",
    "|a 3 4",
), max_errors=5, about="a declared stream missing from a sequence: CNTK bails out regardless of maxErrors")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, spec, data in CASES:
        with open(os.path.join(args.out, name + ".ctf"), "wb") as f:
            f.write(data)
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            json.dump(spec, f, indent=1)
            f.write("\n")
    print("wrote %d cases to %s" % (len(CASES), args.out))


if __name__ == "__main__":
    main()
