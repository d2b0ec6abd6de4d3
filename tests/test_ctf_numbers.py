"""Dense values parse to the correctly rounded float32/float64, as strtod would."""
import ctypes
import ctypes.util

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from helpers import dense, read_all, write

_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.strtof.restype = ctypes.c_float
_libc.strtof.argtypes = [ctypes.c_char_p, ctypes.c_void_p]


def strtof(text: str) -> np.float32:
    """C's strtof: the decimal rounded once, straight to float32 (numpy's astype goes via double)."""
    return np.float32(_libc.strtof(text.encode(), None))


ACCEPTED = ["1e3", "-2.5E-2", "+3", "5.", "02.0", "0", "-0", "1.5e+2", "123456789012345678901234567890",
            "0.000000000000000000000000000001234", "3.4028235e38", "1e-45", "1e-310", "4.9e-324",
            "0.1", "0.30000000000000004", "9007199254740993", "16777217", "1.00000005960464477539",
            "7.038531e-26", "1.17549435e-38", "2.2250738585072011e-308", "1e400", "-1e400"]


@pytest.mark.parametrize("precision,dtype", [("float", np.float32), ("double", np.float64)])
def test_accepted_number_forms_are_correctly_rounded(tmp_path, precision, dtype):
    p = write(tmp_path, "".join(f"|v {t}\n" for t in ACCEPTED))
    seqs, reader, warns = read_all(p, [dense("v", 1)], precision=precision)
    got = [d["v"][0, 0] for _, d in seqs]
    expected = [np.float64(float(t)) if dtype is np.float64 else strtof(t) for t in ACCEPTED]
    for text, g, e in zip(ACCEPTED, got, expected):
        assert g.dtype == dtype
        assert (np.isnan(g) and np.isnan(e)) or (g == e and np.signbit(g) == np.signbit(e)), text
    assert reader.errors_counted == 0


def test_negative_zero_keeps_its_sign(tmp_path):
    p = write(tmp_path, "|v -0 -0.0\n")
    seqs, _, _ = read_all(p, [dense("v", 2)], precision="double")
    assert np.signbit(seqs[0][1]["v"]).all()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=20),
       st.sampled_from(["repr", "%.3g", "%.9g", "%.17g", "%e"]))
def test_double_values_match_python_float(tmp_path_factory, values, style):
    texts = [repr(v) if style == "repr" else style % v for v in values]
    texts = [t.replace("inf", "1e400") for t in texts]
    p = write(tmp_path_factory.mktemp("n"), "|v " + " ".join(texts) + "\n")
    seqs, _, _ = read_all(p, [dense("v", len(values))], precision="double")
    assert seqs[0][1]["v"][0].tolist() == [float(t) for t in texts]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=20),
       st.sampled_from(["%.6g", "%.9g", "%.12g", "%.8e", "%.3f"]))
def test_float_values_are_rounded_once_from_decimal(tmp_path_factory, values, style):
    texts = [style % v for v in values]
    p = write(tmp_path_factory.mktemp("n"), "|v " + " ".join(texts) + "\n")
    seqs, _, _ = read_all(p, [dense("v", len(values))], precision="float")
    expected = np.array([strtof(t) for t in texts], dtype=np.float32)
    np.testing.assert_array_equal(seqs[0][1]["v"][0], expected)


def test_float32_is_not_double_rounded(tmp_path):
    # 7.038531e-26 rounds differently via double (a classic double-rounding case)
    p = write(tmp_path, "|v 7.038531e-26\n")
    seqs, _, _ = read_all(p, [dense("v", 1)], precision="float")
    assert seqs[0][1]["v"][0, 0] == strtof("7.038531e-26")
    assert strtof("7.038531e-26") != np.float32(7.038531e-26)


def test_float32_fast_path_near_rounding_boundaries(tmp_path):
    """Decimals m / 10**k (m <= 2**24, k <= 10) closest to float32 halfway points, and multiples of
    5**k, parse to the correctly rounded float32 (the fast path multiplies by the double nearest
    10**-k instead of dividing; exact rational arithmetic is the reference)."""
    import decimal
    from fractions import Fraction
    from recordkit import StreamSpec
    from recordkit.formats.ctf import CTFReader
    rng = np.random.default_rng(3)
    texts = []
    for k in range(1, 11):
        for H in rng.integers(1 << 24, 1 << 25, 300) | 1:
            q = int(H * 10 ** k).bit_length() - 24  # H / 2**q * 10**k just below 2**24
            m0 = round(Fraction(int(H) * 10 ** k, 2 ** q))
            for m in (m0 - 1, m0, m0 + 1):
                if 1 <= m <= 1 << 24:
                    texts.append(f"{m}e-{k}")
        for m in rng.integers(1, max(2, (1 << 24) // 5 ** k), 50) * 5 ** k:
            texts.append(f"{m}e-{k}")
    p = tmp_path / "b.ctf"
    p.write_text("".join(f"|a {t}\n" for t in texts))
    r = CTFReader(p, [StreamSpec("a", "dense", 1)], precision="float")
    got = np.concatenate([c.columns["a"].values.reshape(-1) for c in r.iter_chunks()])
    for t, g in zip(texts, got):
        exact = Fraction(decimal.Decimal(t))
        f0 = np.float32(float(exact))
        cands = [np.nextafter(f0, np.float32(-np.inf)), f0, np.nextafter(f0, np.float32(np.inf))]
        want = min(cands, key=lambda c: (abs(Fraction(float(c)) - exact), int(np.float32(c).view(np.uint32)) & 1))
        assert g == want, (t, g, want)


def _short_forms():
    """Tokens of the forms the 8-bytes-at-a-time path takes ([+-]d{1,7}[.d{0,7}]) and of those it
    hands back to the byte loop (8+ digit runs, exponents, '5.' before 'e', 24+ significant digits)."""
    rng = np.random.default_rng(11)
    forms = ["0", "-0", "+0", "-0.0", "0.0000000", "007", "007.50", "5.", "-5.", "+5.5", "1234567", "1234567.1234567",
             "9999999.9999999", "0.1234567", "0.12345678", "12345678", "12345678.5", "1.5e3", "-2.5E-2",
             "16777216", "16777217", "1677721.7", "0.16777217", "3.4028235", "-0.000001", "1e-45", "0.0000001",
             "8388608.5", "8388609.5", "0.30000001192092896", "123456789012345678901234"]
    for _ in range(3000):
        n1 = int(rng.integers(1, 9))
        n2 = int(rng.integers(0, 9))
        int_part = "".join(rng.choice(list("0123456789"), n1))
        text = int_part + ("." + "".join(rng.choice(list("0123456789"), n2)) if rng.random() < 0.8 else "")
        forms.append(("-" if rng.random() < 0.3 else "") + text)
    return forms


@pytest.mark.parametrize("precision", ["float", "double"])
def test_short_numbers_parse_alike_in_mid_line_and_at_the_end_of_the_data(tmp_path, precision):
    """Numbers with at least 24 bytes after them take the 8-bytes-at-a-time path; the same tokens
    last in the file take the byte loop. Both give strtof/strtod's value, sign of zero included."""
    forms = _short_forms()
    pad = " 0" * 12  # 24 bytes: every token of a line but the last few is mid-line
    mid = write(tmp_path, "".join(f"|v {t}{pad}\n" for t in forms), "mid.ctf")
    seqs, reader, _ = read_all(mid, [dense("v", 13)], precision=precision)
    assert reader.errors_counted == 0
    got_mid = np.array([d["v"][0, 0] for _, d in seqs])
    ends = [read_all(write(tmp_path, f"|v {t}", f"end{i}.ctf"), [dense("v", 1)], precision=precision)[0][0][1]["v"][0, 0]
            for i, t in enumerate(forms[:40])]
    want = np.array([strtof(t) if precision == "float" else np.float64(float(t)) for t in forms])
    np.testing.assert_array_equal(got_mid, want)
    assert (np.signbit(got_mid) == np.signbit(want)).all()
    np.testing.assert_array_equal(np.array(ends), want[:40])
    assert (np.signbit(np.array(ends)) == np.signbit(want[:40])).all()


def test_malformed_numbers_are_reported_where_the_byte_loop_reports_them(tmp_path):
    """The 8-bytes-at-a-time path hands anything it does not take to the byte loop: errors keep
    their column whether the token is mid-line or not."""
    from recordkit.errors import FormatError
    for token, col in [("-x", 5), ("1.5e", 8), ("+.5", 5), ("1.2.3", 7), ("12a", 6), ("1.e5", 6)]:
        for tail in (" 0" * 12, ""):
            p = write(tmp_path, f"|v {token}{tail}\n", "bad.ctf")
            with pytest.raises(FormatError, match=f":1:{col}"):
                read_all(p, [dense("v", 13)])
