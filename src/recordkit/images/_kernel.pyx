# distutils: language = c++
# cython: language_level=3
"""Compiled image kernels, both run without the GIL (the image pool's threads run them side by side):

* :func:`resize_area` -- ``cv2.resize(INTER_AREA)`` of a uint8 image to a smaller one, pixel for
  pixel. OpenCV's generic area kernel (a scale that is not a whole number) adds each source
  pixel's weighted value into a row buffer in memory, one tab entry at a time: every addition
  waits for the store of the one before, and each source row is weighed again for every output
  row it touches. This kernel keeps the running sums in registers and weighs a source row once;
  the float operations and their order are OpenCV's (``computeResizeAreaTab``,
  ``ResizeArea_Invoker``: float products and sums, rows weighed left to right, output rows summed
  top to bottom, rounded half to even), so the bytes are the same.
* :func:`normalize_lut` -- crop, mirror and ``(x - mean) * inv_std`` of a uint8 HWC image into a
  float32 CHW or HWC output in one pass, through a 256-entry table per channel that holds the
  very float32 values NumPy's ``(x - mean) * inv_std`` gives.
"""
from libc.math cimport ceil, floor
from libc.stdint cimport uint8_t
from libcpp.vector cimport vector


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include <math.h>
    struct Tap { int dst; int src; float alpha; };
    #if defined(__SSE2__)
    #include <emmintrin.h>
    /* The weighed sums of one row of 3-channel pixels (``s1`` bytes apart, channels adjacent), three
       lanes of a 4-lane vector per pixel: float(x) * alpha and the sums in OpenCV's order, per lane.
       The fourth lane reads the byte after the pixel, which lies at or before the next pixel's first
       byte (|s1| >= 3) when there is a next pixel in memory: pixels src in [lo, hi) are read 4 bytes at
       once, the others lane by lane. */
    static inline void rk_area_row3(const uint8_t* row, Py_ssize_t s1, int lo, int hi, const Tap* taps,
                                    const int* first, int dw, float* buf) {
        const __m128i zero = _mm_setzero_si128();
        for (int dx = 0; dx < dw; dx++) {
            __m128 v = _mm_setzero_ps();
            for (int k = first[dx]; k < first[dx + 1]; k++) {
                const uint8_t* px = row + (Py_ssize_t)taps[k].src * s1;
                __m128 f;
                if (taps[k].src >= lo && taps[k].src < hi) {
                    int32_t word;
                    memcpy(&word, px, 4);
                    __m128i b = _mm_cvtsi32_si128(word);
                    f = _mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_unpacklo_epi8(b, zero), zero));
                } else {
                    f = _mm_setr_ps((float)px[0], (float)px[1], (float)px[2], 0.0f);
                }
                __m128 p = _mm_mul_ps(f, _mm_set1_ps(taps[k].alpha));
                v = (k == first[dx]) ? p : _mm_add_ps(v, p);
            }
            _mm_storeu_ps(buf + 3 * dx, v);  /* lane 3 is overwritten by the next pixel (buf has room) */
        }
    }
    /* acc = beta * buf (first) or acc + beta * buf, then saturate_cast<uchar> (cvRound: the current
       nearest-even mode, then clamp; _mm_cvtps_epi32 + the saturating packs do exactly that). */
    static inline void rk_area_accumulate(float* acc, const float* buf, float beta, int n, int first) {
        __m128 b = _mm_set1_ps(beta);
        int k = 0;
        if (first) {
            for (; k + 4 <= n; k += 4) _mm_storeu_ps(acc + k, _mm_mul_ps(b, _mm_loadu_ps(buf + k)));
            for (; k < n; k++) acc[k] = beta * buf[k];
        } else {
            for (; k + 4 <= n; k += 4)
                _mm_storeu_ps(acc + k, _mm_add_ps(_mm_loadu_ps(acc + k), _mm_mul_ps(b, _mm_loadu_ps(buf + k))));
            for (; k < n; k++) acc[k] = acc[k] + beta * buf[k];
        }
    }
    static inline void rk_saturate_u8(const float* acc, uint8_t* out, int n) {
        int k = 0;
        for (; k + 8 <= n; k += 8) {
            __m128i lo = _mm_cvtps_epi32(_mm_loadu_ps(acc + k));
            __m128i hi = _mm_cvtps_epi32(_mm_loadu_ps(acc + k + 4));
            __m128i w = _mm_packus_epi16(_mm_packs_epi32(lo, hi), _mm_setzero_si128());
            _mm_storel_epi64((__m128i*)(out + k), w);
        }
        for (; k < n; k++) {
            int r = _mm_cvtss_si32(_mm_set_ss(acc[k]));
            out[k] = (uint8_t)(r < 0 ? 0 : (r > 255 ? 255 : r));
        }
    }
    /* The same for a row of packed pixels (3 bytes each, ``s1 == 3``): the row is turned into floats
       first, 16 bytes at a time (exact), so that a tap is one unaligned load, a multiply and an add;
       ``frow`` has room for 3 * sw + 16 floats. Every output pixel has ``K`` taps (``src``/``alpha``,
       ``K`` per pixel): a pixel with fewer taps has its last ones padded with weight 0 on a pixel it reads anyway, and
       v + 0.0f * x is v exactly (x finite, v >= 0), so the sums are the same floats; the tap loop then
       runs the same number of times for every pixel (K = 2 or 3 unrolled) instead of mispredicting
       its end at the 2-or-3-tap boundaries every few pixels. */
    static inline void rk_area_row3_fixed(const uint8_t* row, int sw, const int* src, const float* alpha, int K,
                                          int dw, float* buf, float* frow) {
        const __m128i zero = _mm_setzero_si128();
        int n = 3 * sw, i = 0;
        for (; i + 16 <= n; i += 16) {
            __m128i b = _mm_loadu_si128((const __m128i*)(row + i));
            __m128i lo = _mm_unpacklo_epi8(b, zero), hi = _mm_unpackhi_epi8(b, zero);
            _mm_storeu_ps(frow + i, _mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, zero)));
            _mm_storeu_ps(frow + i + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, zero)));
            _mm_storeu_ps(frow + i + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, zero)));
            _mm_storeu_ps(frow + i + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, zero)));
        }
        for (; i < n; i++) frow[i] = (float)row[i];
        frow[n] = 0.0f;
        #define RK_TAP(j) _mm_mul_ps(_mm_loadu_ps(frow + 3 * src[j]), _mm_set1_ps(alpha[j]))
        if (K == 2) {
            for (int dx = 0; dx < dw; dx++) {
                const int j = 2 * dx;
                _mm_storeu_ps(buf + 3 * dx, _mm_add_ps(RK_TAP(j), RK_TAP(j + 1)));
            }
        } else if (K == 3) {
            for (int dx = 0; dx < dw; dx++) {
                const int j = 3 * dx;
                _mm_storeu_ps(buf + 3 * dx, _mm_add_ps(_mm_add_ps(RK_TAP(j), RK_TAP(j + 1)), RK_TAP(j + 2)));
            }
        } else {
            for (int dx = 0; dx < dw; dx++) {
                const int j = K * dx;
                __m128 v = RK_TAP(j);
                for (int k = 1; k < K; k++) v = _mm_add_ps(v, RK_TAP(j + k));
                _mm_storeu_ps(buf + 3 * dx, v);
            }
        }
        #undef RK_TAP
    }
    #define RK_AREA_ROW3 1
    #else
    static inline void rk_area_row3_fixed(const uint8_t*, int, const int*, const float*, int, int, float*, float*) {}
    static inline void rk_area_row3(const uint8_t*, Py_ssize_t, int, int, const Tap*, const int*, int, float*) {}
    static inline void rk_area_accumulate(float* acc, const float* buf, float beta, int n, int first) {
        for (int k = 0; k < n; k++) acc[k] = first ? beta * buf[k] : acc[k] + beta * buf[k];
    }
    static inline void rk_saturate_u8(const float* acc, uint8_t* out, int n) {
        for (int k = 0; k < n; k++) {
            long r = lrintf(acc[k]);
            out[k] = (uint8_t)(r < 0 ? 0 : (r > 255 ? 255 : r));
        }
    }
    #define RK_AREA_ROW3 0
    #endif
    """
    struct Tap:
        int dst      # output pixel
        int src      # input pixel
        float alpha  # its weight
    void rk_area_row3(const uint8_t* row, Py_ssize_t s1, int lo, int hi, const Tap* taps, const int* first, int dw,
                      float* buf) noexcept nogil
    void rk_area_row3_fixed(const uint8_t* row, int sw, const int* src, const float* alpha, int K, int dw,
                            float* buf, float* frow) noexcept nogil
    void rk_area_accumulate(float* acc, const float* buf, float beta, int n, int first) noexcept nogil
    void rk_saturate_u8(const float* acc, uint8_t* out, int n) noexcept nogil
    bint RK_AREA_ROW3


cdef int _area_taps(int ssize, int dsize, double scale, vector[Tap]& taps, vector[int]& first) except -1 nogil:
    """OpenCV's ``computeResizeAreaTab`` (per pixel, not per sample), and where each output pixel's
    taps start (``first[d]`` .. ``first[d + 1]``)."""
    cdef int dx, sx, sx1, sx2
    cdef double fsx1, fsx2, cell
    cdef Tap t
    first.resize(dsize + 1)
    for dx in range(dsize):
        first[dx] = <int>taps.size()
        fsx1 = dx * scale
        fsx2 = fsx1 + scale
        cell = scale if scale < ssize - fsx1 else ssize - fsx1
        sx1 = <int>ceil(fsx1)
        sx2 = <int>floor(fsx2)
        if sx2 > ssize - 1:
            sx2 = ssize - 1
        if sx1 > sx2:
            sx1 = sx2
        t.dst = dx
        if sx1 - fsx1 > 1e-3:
            t.src = sx1 - 1
            t.alpha = <float>((sx1 - fsx1) / cell)
            taps.push_back(t)
        for sx in range(sx1, sx2):
            t.src = sx
            t.alpha = <float>(1.0 / cell)
            taps.push_back(t)
        if fsx2 - sx2 > 1e-3:
            t.src = sx2
            t.alpha = <float>(min(min(fsx2 - sx2, 1.0), cell) / cell)
            taps.push_back(t)
    first[dsize] = <int>taps.size()
    return 0


def resize_area(const uint8_t[:, :, :] src, uint8_t[:, :, ::1] dst) -> None:
    """``dst`` = ``cv2.resize(src, (dst_w, dst_h), interpolation=INTER_AREA)`` where OpenCV takes its
    generic area path (both sides shrink, not both by a whole factor: the caller checks);
    ``src`` may be any strided view (a crop, a mirrored view)."""
    cdef int sh = src.shape[0], sw = src.shape[1], cn = src.shape[2]
    cdef int dh = dst.shape[0], dw = dst.shape[1]
    if dst.shape[2] != cn:
        raise ValueError(f"resize_area: {cn} channels in, {dst.shape[2]} out")
    if sh <= 0 or sw <= 0 or dh <= 0 or dw <= 0 or dh > sh or dw > sw:
        raise ValueError(f"resize_area shrinks: {sh}x{sw} to {dh}x{dw}")
    cdef vector[Tap] xt, yt
    cdef vector[int] xfirst, yfirst
    cdef vector[float] buf, acc, frow
    cdef vector[int] psrc
    cdef vector[float] palpha
    cdef int K = 0, j0, j1
    cdef Py_ssize_t s0 = src.strides[0], s1 = src.strides[1], s2 = src.strides[2]
    cdef const uint8_t* base = &src[0, 0, 0]
    cdef const uint8_t* row
    cdef const uint8_t* px
    cdef int dy, j, dx, k, c, sy, prev_sy, n = dw * cn
    cdef float a, beta
    cdef float v0, v1, v2
    # pixels whose 4-byte read stays inside the image (the next pixel in memory exists)
    cdef int wide_lo = 1 if s1 <= -3 else 0
    cdef int wide_hi = sw - 1 if s1 >= 3 else (sw if s1 <= -3 else 0)
    with nogil:
        _area_taps(sw, dw, 1.0 / (<double>dw / sw), xt, xfirst)
        _area_taps(sh, dh, 1.0 / (<double>dh / sh), yt, yfirst)
        for dx in range(dw):  # the taps padded to K per pixel (weight 0 on the pixel's last tap)
            if xfirst[dx + 1] - xfirst[dx] > K:
                K = xfirst[dx + 1] - xfirst[dx]
        psrc.resize(K * dw)
        palpha.resize(K * dw)
        for dx in range(dw):
            j0 = xfirst[dx]
            j1 = xfirst[dx + 1]
            for k in range(K):
                psrc[K * dx + k] = xt[j0 + k].src if j0 + k < j1 else xt[j1 - 1].src
                palpha[K * dx + k] = xt[j0 + k].alpha if j0 + k < j1 else 0.0
        buf.resize(n + 1)  # rk_area_row3 writes one float past the last pixel
        frow.resize(3 * sw + 16)
        acc.resize(n)
        prev_sy = -1
        for dy in range(dh):
            for j in range(yfirst[dy], yfirst[dy + 1]):
                sy = yt[j].src
                beta = yt[j].alpha
                if sy != prev_sy:  # weigh source row sy (OpenCV: once per tap, the same values)
                    prev_sy = sy
                    row = base + sy * s0
                    if cn == 3 and s2 == 1 and s1 == 3 and RK_AREA_ROW3:
                        rk_area_row3_fixed(row, sw, psrc.data(), palpha.data(), K, dw, buf.data(), frow.data())
                    elif cn == 3 and s2 == 1 and RK_AREA_ROW3:
                        rk_area_row3(row, s1, wide_lo, wide_hi, xt.data(), xfirst.data(), dw, buf.data())
                    else:
                        for dx in range(dw):
                            for c in range(cn):
                                k = xfirst[dx]
                                v0 = row[xt[k].src * s1 + c * s2] * xt[k].alpha
                                for k in range(xfirst[dx] + 1, xfirst[dx + 1]):
                                    v0 = v0 + row[xt[k].src * s1 + c * s2] * xt[k].alpha
                                buf[cn * dx + c] = v0
                rk_area_accumulate(acc.data(), buf.data(), beta, n, j == yfirst[dy])
            rk_saturate_u8(acc.data(), &dst[dy, 0, 0], n)
    return None


def normalize_lut(const uint8_t[:, :, :] src, const float[:, ::1] lut, float[:, :, ::1] out, bint chw,
                  bint mirror) -> None:
    """``out[c, y, x]`` (``chw``) or ``out[y, x, c]`` = ``lut[c, src[y, x', c]]``, ``x' = w - 1 - x`` when
    ``mirror``: crop (``src`` is any strided view), mirror and normalize in one pass."""
    cdef int h = src.shape[0], w = src.shape[1], cn = src.shape[2]
    cdef int y, x, c
    if lut.shape[0] != cn or lut.shape[1] != 256:
        raise ValueError(f"normalize_lut: a ({cn}, 256) table is needed, not ({lut.shape[0]}, {lut.shape[1]})")
    if (chw and (out.shape[0] != cn or out.shape[1] != h or out.shape[2] != w)) or (
            not chw and (out.shape[0] != h or out.shape[1] != w or out.shape[2] != cn)):
        raise ValueError("normalize_lut: output shape does not match the image")
    if h == 0 or w == 0:
        return None
    cdef Py_ssize_t s0 = src.strides[0], s1 = src.strides[1], s2 = src.strides[2], step = -s1 if mirror else s1
    cdef const uint8_t* first = &src[0, w - 1 if mirror else 0, 0]
    cdef const uint8_t* px
    cdef const float* l0 = &lut[0, 0]
    cdef float* o
    cdef float* o1
    cdef float* o2
    cdef Py_ssize_t plane = <Py_ssize_t>h * w
    with nogil:
        for y in range(h):
            px = first + y * s0
            if chw and cn == 3:
                o = &out[0, y, 0]
                o1 = o + plane
                o2 = o1 + plane
                for x in range(w):
                    o[x] = l0[px[0]]
                    o1[x] = l0[256 + px[s2]]
                    o2[x] = l0[512 + px[2 * s2]]
                    px += step
            elif chw:
                o = &out[0, y, 0]
                for x in range(w):
                    for c in range(cn):
                        o[c * plane + x] = l0[256 * c + px[c * s2]]
                    px += step
            else:
                o = &out[y, 0, 0]
                for x in range(w):
                    for c in range(cn):
                        o[x * cn + c] = l0[256 * c + px[c * s2]]
                    px += step
    return None
