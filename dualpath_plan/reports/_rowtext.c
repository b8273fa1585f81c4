/* Rows of text from columns of numbers, a block of rows in one pass: the compiled twin of
 * text_columns.join_cells over float_cells, int_cells and texts picked by codes.
 *
 * text_columns.py defines the text (floats as Python's '%.9g' with ".0" appended where that
 * leaves neither a point nor an exponent, NaN and infinities as the column's "empty" text) and
 * its NumPy writer is the reference: tests/test_recommend_sweep.py checks that both give the
 * same bytes, and this float text against Python's for any float.
 *
 * format_rows(out, rows, columns, end) writes `rows` rows into the bytearray `out` (grown if
 * too small) and returns how many bytes it wrote. Each row is, for each column in turn, its
 * prefix (a CSV comma, a JSON key) and its cell, then `end`. A column is a tuple
 *     (prefix: bytes, "f", float64 array, empty: bytes)     a float per row
 *     (prefix: bytes, "i", int64 array, None)               a whole number per row
 *     (prefix: bytes, "c", codes array, texts: tuple)       texts[code] per row
 * with arrays of `rows` items (1-D, C-contiguous; codes of 1 or 8 bytes).
 *
 * The GIL is released while the rows are written: nothing in the loop touches a Python
 * object (the arrays are held through buffers, the texts copied beforehand).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#endif

/* Blind copies: short texts are copied BLIND bytes at a time (a fixed size the compiler turns
 * into a few wide moves) from sources padded to at least BLIND bytes, into an output with as
 * many spare bytes after any cell's end; the bytes past a text's end are overwritten by what
 * follows. */
#define BLIND 32
/* Room for any float or int cell ("-1.23456789e-308" is 16 bytes, "-9223372036854775808" 20)
 * and the whole words their writing stores past the text's end. */
#define NUMBER_ROOM 24

#if defined(__GNUC__) || defined(__clang__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#define NOINLINE
#define ALWAYS_INLINE inline
#endif

static inline void store64le(char *p, uint64_t x)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    memcpy(p, &x, 8);
}

static inline int leading_zero_bytes(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_clzll(x) >> 3;
#else
    int n = 0;
    while (!(x >> 56)) {
        x <<= 8;
        n++;
    }
    return n;
#endif
}

static inline int trailing_zero_bytes(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x) >> 3;
#else
    int n = 0;
    while (!(x & 0xFF)) {
        x >>= 8;
        n++;
    }
    return n;
#endif
}

/* x / 10^4 and x / 10 for any 32-bit x, x / 100 for x < 43699, by a multiplication (exact:
 * checked for every such x). Written out because a compiler may emit a division instruction,
 * some 25 cycles, in code it guesses to be cold. */
static inline uint32_t div1e4(uint32_t x)
{
    return (uint32_t)(((uint64_t)x * 3518437209ULL) >> 45);
}

static inline uint32_t div10(uint32_t x)
{
    return (uint32_t)(((uint64_t)x * 3435973837ULL) >> 35);
}

static inline uint32_t div100(uint32_t x)
{
    return (x * 5243) >> 19;
}

/* "00" to "99". */
static const char PAIRS[201] = "00010203040506070809101112131415161718192021222324252627282930313233"
                               "34353637383940414243444546474849505152535455565758596061626364656667"
                               "6869707172737475767778798081828384858687888990919293949596979899";

static inline uint64_t pair(uint32_t x) /* x < 100 */
{
    uint16_t two;
    memcpy(&two, PAIRS + 2 * x, 2);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    two = (uint16_t)((two >> 8) | (two << 8));
#endif
    return two;
}

/* The 8 decimal digits of r < 10^8 (leading zeros included) in ASCII, the first digit in the
 * lowest byte: four pairs from a table. */
static inline uint64_t digits8(uint32_t r)
{
    uint32_t hi = div1e4(r), lo = r - hi * 10000;
    uint32_t a = div100(hi), c = div100(lo);
    return pair(a) | pair(hi - a * 100) << 16 | pair(c) << 32 | pair(lo - c * 100) << 48;
}

#define ASCII_ZEROS 0x3030303030303030ULL

/* 1..8 digits of r < 10^8, no leading zeros. */
static inline char *put_small(char *p, uint32_t r)
{
    if (r == 0) {
        *p = '0';
        return p + 1;
    }
    uint64_t x = digits8(r);
    int lead = trailing_zero_bytes(x ^ ASCII_ZEROS); /* the first digits are the lowest bytes */
    store64le(p, x >> (8 * lead));
    return p + 8 - lead;
}

static inline char *int_text(char *p, int64_t v)
{
    /* Two's complement: the magnitude, -2^63 included. */
    uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    *p = '-';
    p += v < 0;
    if (LIKELY(a < 100000000ULL))
        return put_small(p, (uint32_t)a);
    uint64_t upper = a / 100000000ULL;
    uint32_t low = (uint32_t)(a - upper * 100000000ULL);
    if (upper < 100000000ULL) {
        p = put_small(p, (uint32_t)upper);
    }
    else {
        uint64_t top = upper / 100000000ULL; /* at most 1844 */
        p = put_small(p, (uint32_t)top);
        store64le(p, digits8((uint32_t)(upper - top * 100000000ULL)));
        p += 8;
    }
    store64le(p, digits8(low));
    return p + 8;
}

/* Exact powers of ten (up to 10^22 a double holds them exactly). */
static const double POW10[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* The fast path's range (as float_cells'): its scaling's powers of ten are exact. */
#define FAST_LOW 1e-13
#define FAST_HIGH 1e15
/* By the binary exponent e2 of the fast range (2^-44 < 1e-13 and 1e15 < 2^50), filled at
 * import: a first guess of a value's decimal exponent, e = floor(e2 log10(2)), or e + 1 from
 * `above` = 10^(e + 1) on (the nearest double: the guess can still be one off where a value
 * is within rounding of a power of ten, corrected below); and the powers of ten that scale a
 * value of either exponent to 9 digits, 10^|8 - e| and 10^|7 - e| (exact: a value is
 * multiplied by one, or divided by it beyond 10^9). Looked up by e2 alone, all at once,
 * rather than one after the other. */
#define E2_MIN (-44)
#define E2_MAX 49
typedef struct {
    int e;
    double above;
    double scale[2];
} Exponent;
static Exponent EXPONENTS[E2_MAX - E2_MIN + 1];

static void fill_exponents(void)
{
    for (int e2 = E2_MIN; e2 <= E2_MAX; e2++) {
        Exponent *x = &EXPONENTS[e2 - E2_MIN];
        x->e = (int)floor(e2 * 0.30102999566398119521);
        x->above = x->e + 1 >= 0 ? POW10[x->e + 1] : 1.0 / POW10[-(x->e + 1)];
        x->scale[0] = POW10[abs(8 - x->e)];
        x->scale[1] = POW10[abs(7 - x->e)];
    }
}

/* a x 10^k in one rounding (|k| <= 22: the power is exact). */
static inline double scale(double a, int k)
{
    return k >= 0 ? a * POW10[k] : a / POW10[-k];
}

/* s rounded to the nearest integer, ties to even (rint's rounding), for 0 <= s < 2^62. */
static inline int64_t round_even(double s)
{
#if defined(__x86_64__) || defined(_M_X64)
    return _mm_cvtsd_si64(_mm_set_sd(s)); /* one instruction (rint: a dozen without SSE4.1) */
#else
    return (int64_t)rint(s);
#endif
}

/* a (finite, in the fast range) as m x 10^(e - 8), m the 9-digit integer nearest to it
 * (10^8 <= m < 10^9), the steps of float_cells: a scaled by an exact power of ten in one
 * rounding (a relative error below 2^-53, so at most 1.1e-7 on the scaled value) and rounded.
 * Returns 0 where that may not be the correctly rounded digits: the scaled value within 1e-5
 * of halfway between two integers, or out of its expected range. */
static inline int decimal9_fast(double a, uint32_t *m_out, int *e_out)
{
    uint64_t bits;
    memcpy(&bits, &a, 8);
    int e2 = (int)(bits >> 52) - 1023; /* (a normal number: the range holds no subnormal) */
    const Exponent *x = &EXPONENTS[e2 - E2_MIN];
    int up = a >= x->above;
    int e = x->e + up;
    double s = LIKELY(e <= 8) ? a * x->scale[up] : a / x->scale[up];
    /* The guess can be one off where a is within rounding of a power of ten: the scaled
     * value says so, and e moves once, as in float_cells. */
    if (UNLIKELY(s < 1e8)) {
        e--;
        s = scale(a, 8 - e);
    }
    else if (UNLIKELY(s >= 1e9)) {
        e++;
        s = scale(a, 8 - e);
    }
    int64_t m = round_even(s);
    if (UNLIKELY(fabs(s - (double)m) > 0.5 - 1e-5))
        return 0;
    if (UNLIKELY(m >= 1000000000)) { /* rounded up to the next power of ten: 1.00000000 of it */
        if (m != 1000000000)
            return 0;
        m = 100000000;
        e++;
    }
    if (UNLIKELY(m < 100000000))
        return 0;
    *m_out = (uint32_t)m;
    *e_out = e;
    return 1;
}

/* The same, exactly, for any finite a > 0: the C library's "%.8e" (correctly rounded, ties to
 * even, as Python's own formatting) gives the 9 digits and the exponent. Only its digits and
 * exponent are read, so that a locale's decimal point changes nothing. */
static NOINLINE int decimal9_exact(double a, uint32_t *m_out, int *e_out)
{
    char text[64];
    int n = snprintf(text, sizeof text, "%.8e", a);
    if (n <= 0 || n >= (int)sizeof text)
        return 0;
    uint32_t m = 0;
    int digits = 0;
    const char *s = text;
    for (; *s && *s != 'e' && *s != 'E'; s++) {
        if (*s >= '0' && *s <= '9' && digits < 9) {
            m = m * 10 + (uint32_t)(*s - '0');
            digits++;
        }
    }
    if (digits != 9 || !*s)
        return 0;
    s++;
    int negative = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    int e = 0;
    for (; *s >= '0' && *s <= '9' && e < 10000; s++)
        e = e * 10 + (*s - '0');
    *m_out = m;
    *e_out = negative ? -e : e;
    return m >= 100000000 && m < 1000000000;
}

/* Bytes n.. of the 16-byte text lo, hi (n <= 9), as a word. */
static inline uint64_t funnel(uint64_t lo, uint64_t hi, int n)
{
#ifdef __SIZEOF_INT128__
    return (uint64_t)((((unsigned __int128)hi << 64) | lo) >> (8 * n));
#else
    char text[16];
    uint64_t out;
    store64le(text, lo);
    store64le(text + 8, hi);
    memcpy(&out, text + n, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    out = __builtin_bswap64(out);
#endif
    return out;
#endif
}

/* m x 10^(e - 8) as '%.9g' writes it, ".0" appended to a whole number in fixed notation:
 * trailing zeros dropped, exponent notation where e < -4 or e >= 9; at p, the end returned.
 * Whole words are stored, a later one overlapping an earlier where it moves digits on; no text
 * is read back (a load across recent narrower stores stalls). */
static ALWAYS_INLINE char *layout(char *p, uint32_t m, int e)
{
    uint32_t q = div10(m);
    uint32_t d8 = m - q * 10;
    uint64_t first8 = digits8(q); /* digits 0..7; digit 0 is not 0 */
    /* Significant digits: up to the last digit not 0 (digit 7 is the highest byte). */
    int sig = d8 ? 9 : 8 - leading_zero_bytes(first8 ^ ASCII_ZEROS);
    uint64_t last = d8 | ASCII_ZEROS; /* digit 8, then "0"s */
    if (LIKELY(e >= 0 && e < 9)) {
        /* Digits 0..e, the point, then digits e + 1..8 and the "0"s after them (the 0 of
         * ".0" after a whole number). */
        store64le(p, first8);
        store64le(p + 8, last);
        p[e + 1] = '.';
        store64le(p + e + 2, funnel(first8, last, e + 1));
        return p + (sig > e + 1 ? sig + 1 : e + 3);
    }
    if (LIKELY(e < 0 && e >= -4)) {
        /* Below 1: "0." and -e - 1 zeros before the digits. */
        int z = -e - 1;
        memcpy(p, "0.000000", 8);
        store64le(p + 2 + z, first8);
        store64le(p + 10 + z, last);
        return p + 2 + z + sig;
    }
    /* The first digit, the point and the others if any, the exponent: 2 digits at least. */
    store64le(p, first8 & 0xFF);
    p[1] = '.';
    store64le(p + 2, funnel(first8, last, 1));
    p += sig > 1 ? sig + 1 : 1;
    unsigned int ae = (unsigned int)(e < 0 ? -e : e);
    *p++ = 'e';
    *p++ = e < 0 ? '-' : '+';
    if (ae >= 100) {
        *p++ = (char)('0' + ae / 100);
        ae %= 100;
    }
    p[0] = (char)('0' + ae / 10);
    p[1] = (char)('0' + ae % 10);
    return p + 2;
}

/* A finite float's text at p; its end, NULL where it could not be written. */
static ALWAYS_INLINE char *float_text(char *p, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    *p = '-';
    p += bits >> 63;
    double a = fabs(v);
    uint32_t m;
    int e;
    if (UNLIKELY(!(a >= FAST_LOW && a < FAST_HIGH && decimal9_fast(a, &m, &e)))) {
        if (a == 0.0) {
            memcpy(p, "0.0", 4);
            return p + 3;
        }
        if (!decimal9_exact(a, &m, &e))
            return NULL;
    }
    return layout(p, m, e);
}

enum { FLOATS, INTS, CODES1, CODES8 };

/* A NaN's bits, where a float column starts: no value matches it (a NaN is written as the
 * column's empty text before the last cell is looked at, and not kept). */
#define NOT_A_FLOAT 0x7FF8000000000001ULL

typedef struct {
    int kind;
    const void *data;
    const char *prefix; /* padded to BLIND bytes */
    Py_ssize_t prefix_len;
    /* The last cell: a value the same as the last one's (bit for bit) is copied, not written
     * again (a P/D pair's values repeated over its agents; a pair's P over the next pair). */
    uint64_t last_bits;
    const char *last;
    Py_ssize_t last_len;
    const char *empty; /* FLOATS: NaN's and the infinities' text, padded */
    Py_ssize_t empty_len;
    /* CODES: each code's prefix and text, padded. */
    const char **texts;
    Py_ssize_t *lengths;
    Py_ssize_t count;
    Py_buffer view;
} Column;

static inline char *put(char *p, const char *s, Py_ssize_t n)
{
    if (LIKELY(n <= BLIND))
        memcpy(p, s, BLIND);
    else
        memcpy(p, s, (size_t)n);
    return p + n;
}

/* a then b, padded to BLIND bytes, from `arena`'s free end. */
static const char *pad(char **arena, const char *a, Py_ssize_t na, const char *b, Py_ssize_t nb)
{
    char *at = *arena;
    memcpy(at, a, (size_t)na);
    memcpy(at + na, b, (size_t)nb);
    memset(at + na + nb, 0, BLIND);
    *arena += na + nb + BLIND;
    return at;
}

/* Whether a buffer's format is one of `letters`, in native byte order. */
static int format_is(const Py_buffer *view, const char *letters)
{
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=')
        f++;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    else if (*f == '>' || *f == '!')
        f++;
#else
    else if (*f == '<')
        f++;
#endif
    return f[0] && !f[1] && strchr(letters, f[0]) != NULL;
}

static void release(Column *cols, Py_ssize_t n)
{
    for (Py_ssize_t c = 0; c < n; c++) {
        if (cols[c].view.obj)
            PyBuffer_Release(&cols[c].view);
        PyMem_Free((void *)cols[c].texts);
        PyMem_Free(cols[c].lengths);
    }
    PyMem_Free(cols);
}

/* A column's parts, checked (first pass): its kind and array, its widest cell with its prefix
 * (`width`) and the arena bytes its padded texts take (`room`). */
static int read_column(PyObject *spec, Py_ssize_t c, Py_ssize_t rows, Column *col,
                       Py_ssize_t *width, Py_ssize_t *room)
{
    PyObject *prefix, *kind, *array, *extra;
    if (!PyTuple_Check(spec)) {
        PyErr_Format(PyExc_TypeError, "column %zd: expected a tuple", c);
        return -1;
    }
    if (!PyArg_ParseTuple(spec, "SUOO;a column is (prefix, kind, array, extra)", &prefix, &kind,
                          &array, &extra))
        return -1;
    const char *k = PyUnicode_AsUTF8(kind);
    if (k == NULL)
        return -1;
    if (PyObject_GetBuffer(array, &col->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        col->view.obj = NULL;
        return -1;
    }
    if (col->view.ndim != 1 || col->view.shape[0] != rows) {
        PyErr_Format(PyExc_ValueError, "column %zd: expected a 1-D array of %zd items", c, rows);
        return -1;
    }
    col->data = col->view.buf;
    col->prefix_len = PyBytes_GET_SIZE(prefix);
    *room = col->prefix_len + BLIND;
    if (strcmp(k, "f") == 0) {
        if (col->view.itemsize != 8 || !format_is(&col->view, "d") || !PyBytes_Check(extra)) {
            PyErr_Format(PyExc_TypeError, "column %zd: expected float64 values and bytes", c);
            return -1;
        }
        col->kind = FLOATS;
        col->empty_len = PyBytes_GET_SIZE(extra);
        *width = col->prefix_len + (col->empty_len > NUMBER_ROOM ? col->empty_len : NUMBER_ROOM);
        *room += col->empty_len + BLIND;
        return 0;
    }
    if (strcmp(k, "i") == 0) {
        if (col->view.itemsize != 8 || !format_is(&col->view, "lq")) {
            PyErr_Format(PyExc_TypeError, "column %zd: expected int64 values", c);
            return -1;
        }
        col->kind = INTS;
        *width = col->prefix_len + NUMBER_ROOM;
        *room += 1 + BLIND; /* (the text of 0, the first value kept) */
        return 0;
    }
    if (strcmp(k, "c") != 0) {
        PyErr_Format(PyExc_ValueError, "column %zd: unknown kind %R", c, kind);
        return -1;
    }
    if (col->view.itemsize == 1 && format_is(&col->view, "?Bb"))
        col->kind = CODES1;
    else if (col->view.itemsize == 8 && format_is(&col->view, "lqLQnN"))
        col->kind = CODES8;
    else {
        PyErr_Format(PyExc_TypeError, "column %zd: expected codes of 1 or 8 bytes", c);
        return -1;
    }
    if (!PyTuple_Check(extra)) {
        PyErr_Format(PyExc_TypeError, "column %zd: expected a tuple of texts", c);
        return -1;
    }
    col->count = PyTuple_GET_SIZE(extra);
    Py_ssize_t widest = 0;
    for (Py_ssize_t t = 0; t < col->count; t++) {
        PyObject *text = PyTuple_GET_ITEM(extra, t);
        if (!PyBytes_Check(text)) {
            PyErr_Format(PyExc_TypeError, "column %zd: texts must be bytes", c);
            return -1;
        }
        Py_ssize_t n = PyBytes_GET_SIZE(text);
        widest = n > widest ? n : widest;
        *room += col->prefix_len + n + BLIND;
    }
    *width = col->prefix_len + widest;
    return 0;
}

/* A column's padded texts in the arena (second pass): the prefix joins each code's text, one
 * copy a cell. */
static int copy_texts(PyObject *spec, Column *col, char **arena)
{
    PyObject *prefix = PyTuple_GET_ITEM(spec, 0), *extra = PyTuple_GET_ITEM(spec, 3);
    const char *pre = PyBytes_AS_STRING(prefix);
    Py_ssize_t npre = PyBytes_GET_SIZE(prefix);
    if (col->kind == FLOATS || col->kind == INTS) {
        col->prefix = pad(arena, pre, npre, "", 0);
        if (col->kind == FLOATS) {
            col->empty = pad(arena, PyBytes_AS_STRING(extra), col->empty_len, "", 0);
            col->last_bits = NOT_A_FLOAT;
            col->last = col->empty;
            col->last_len = 0;
        }
        else { /* (kept: 0 and its text) */
            col->last_bits = 0;
            col->last = pad(arena, "0", 1, "", 0);
            col->last_len = 1;
        }
        return 0;
    }
    size_t count = (size_t)(col->count ? col->count : 1);
    col->texts = PyMem_Malloc(count * sizeof(char *));
    col->lengths = PyMem_Malloc(count * sizeof(Py_ssize_t));
    if (col->texts == NULL || col->lengths == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t t = 0; t < col->count; t++) {
        PyObject *text = PyTuple_GET_ITEM(extra, t);
        Py_ssize_t n = PyBytes_GET_SIZE(text);
        col->texts[t] = pad(arena, pre, npre, PyBytes_AS_STRING(text), n);
        col->lengths[t] = npre + n;
    }
    return 0;
}

/* The rows (the GIL released): the end of the text written, or NULL with the row and column
 * of a code beyond its texts or a float that could not be written. */
static char *write_rows(char *p, Py_ssize_t rows, Column *cols, Py_ssize_t ncols,
                        const char *end_text, Py_ssize_t end_len, Py_ssize_t *bad_row,
                        Py_ssize_t *bad_col)
{
    for (Py_ssize_t i = 0; i < rows; i++) {
        for (Py_ssize_t c = 0; c < ncols; c++) {
            Column *col = &cols[c];
            uint64_t bits, code;
            char *cell;
            switch (col->kind) {
            case CODES1:
                code = ((const uint8_t *)col->data)[i];
                goto codes;
            case CODES8:
                code = ((const uint64_t *)col->data)[i];
            codes:
                if (UNLIKELY(code >= (uint64_t)col->count))
                    goto bad;
                p = put(p, col->texts[code], col->lengths[code]);
                break;
            case INTS:
                p = put(p, col->prefix, col->prefix_len);
                bits = ((const uint64_t *)col->data)[i];
                if (bits == col->last_bits) {
                    /* (memmove: a short row's last cell may lie within the bytes copied) */
                    memmove(p, col->last, BLIND);
                    p += col->last_len;
                    break;
                }
                cell = p;
                p = int_text(p, (int64_t)bits);
                goto keep;
            default: /* FLOATS */
                p = put(p, col->prefix, col->prefix_len);
                bits = ((const uint64_t *)col->data)[i];
                if (UNLIKELY((bits & 0x7FF0000000000000ULL) == 0x7FF0000000000000ULL)) {
                    p = put(p, col->empty, col->empty_len); /* NaN, infinities */
                    break;
                }
                if (bits == col->last_bits) {
                    memmove(p, col->last, BLIND);
                    p += col->last_len;
                    break;
                }
                cell = p;
                {
                    double v;
                    memcpy(&v, &bits, 8);
                    p = float_text(p, v);
                }
                if (UNLIKELY(p == NULL))
                    goto bad;
            keep:
                col->last_bits = bits;
                col->last = cell;
                col->last_len = p - cell;
                break;
            }
            continue;
        bad:
            *bad_row = i;
            *bad_col = c;
            return NULL;
        }
        p = put(p, end_text, end_len);
    }
    return p;
}

static PyObject *format_rows(PyObject *module, PyObject *args)
{
    PyObject *out, *columns;
    Py_ssize_t rows;
    Py_buffer end;
    if (!PyArg_ParseTuple(args, "YnO!y*", &out, &rows, &PyTuple_Type, &columns, &end))
        return NULL;
    PyObject *result = NULL;
    char *arena = NULL;
    Py_ssize_t ncols = PyTuple_GET_SIZE(columns);
    Column *cols = PyMem_Calloc((size_t)(ncols ? ncols : 1), sizeof(Column));
    if (cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (rows < 0) {
        PyErr_SetString(PyExc_ValueError, "rows must be >= 0");
        goto done;
    }
    Py_ssize_t room = end.len + BLIND, row_max = end.len;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        Py_ssize_t width, col_room;
        if (read_column(PyTuple_GET_ITEM(columns, c), c, rows, &cols[c], &width, &col_room) < 0)
            goto done;
        row_max += width;
        room += col_room;
    }
    arena = PyMem_Malloc((size_t)room);
    if (arena == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    char *free_at = arena;
    for (Py_ssize_t c = 0; c < ncols; c++)
        if (copy_texts(PyTuple_GET_ITEM(columns, c), &cols[c], &free_at) < 0)
            goto done;
    const char *end_text = pad(&free_at, end.buf, end.len, "", 0);

    if (row_max > 0 && rows > (PY_SSIZE_T_MAX - 2 * BLIND) / row_max / 2) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t need = rows * row_max + 2 * BLIND;
    if (PyByteArray_GET_SIZE(out) < need && PyByteArray_Resize(out, need + need / 4) < 0)
        goto done;
    Py_buffer target;
    if (PyObject_GetBuffer(out, &target, PyBUF_WRITABLE) < 0) /* (held: no resizing meanwhile) */
        goto done;
    char *const base = target.buf;
    char *stop;
    Py_ssize_t bad_row = -1, bad_col = -1;
    Py_BEGIN_ALLOW_THREADS
    stop = write_rows(base, rows, cols, ncols, end_text, end.len, &bad_row, &bad_col);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&target);
    if (stop == NULL) {
        if (cols[bad_col].kind == FLOATS)
            PyErr_Format(PyExc_ValueError, "column %zd, row %zd: the float could not be written",
                         bad_col, bad_row);
        else
            PyErr_Format(PyExc_ValueError, "column %zd, row %zd: a code beyond the %zd texts",
                         bad_col, bad_row, cols[bad_col].count);
        goto done;
    }
    result = PyLong_FromSsize_t(stop - base);
done:
    PyBuffer_Release(&end);
    PyMem_Free(arena);
    if (cols != NULL)
        release(cols, ncols);
    return result;
}

/* One finite float's cell (for tests: a float column's code). */
static PyObject *float_repr(PyObject *module, PyObject *arg)
{
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    if (!isfinite(v)) {
        PyErr_SetString(PyExc_ValueError, "not a finite float");
        return NULL;
    }
    char text[NUMBER_ROOM + BLIND];
    char *end = float_text(text, v);
    if (end == NULL) {
        PyErr_SetString(PyExc_ValueError, "the float could not be written");
        return NULL;
    }
    return PyBytes_FromStringAndSize(text, end - text);
}

static PyMethodDef methods[] = {
    {"format_rows", format_rows, METH_VARARGS,
     "format_rows(out, rows, columns, end) -> int: rows of text into the bytearray out."},
    {"float_text", float_repr, METH_O, "float_text(v) -> bytes: a finite float's cell."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rowtext",
    "Rows of text from columns of numbers (the compiled twin of text_columns).", -1, methods,
};

PyMODINIT_FUNC PyInit__rowtext(void)
{
    fill_exponents();
    return PyModule_Create(&module);
}
