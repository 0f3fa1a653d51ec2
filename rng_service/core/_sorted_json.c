/* Whether JSON bytes are exactly orjson's sorted encoding of their value, in one pass over the
 * bytes, building nothing (rng_service/core/json_input.py, `_parse_canonical`).
 *
 * The strict reading's fast path takes bytes that are exactly `orjson.dumps(value,
 * option=OPT_SORT_KEYS)` of the value they parse to (a signed envelope, a line of the log's
 * leaves): such bytes hold no duplicate member, no whitespace, no NaN, no number spelled two
 * ways, no lone surrogate. It found that out by encoding the parsed value again and comparing
 * (a quarter of a round record's strict reading) and then walked its containers for their
 * nesting (`_nesting.deeper`). This answers both from the bytes: sorted_form(data, depth) is
 * True only if
 *
 *   - `data`, less one trailing newline, is one JSON value with no whitespace;
 *   - every object's member names are strictly increasing by their UTF-8 bytes (orjson's sort:
 *     by code point, which UTF-8's byte order is), so none is there twice;
 *   - every string is valid UTF-8 (no surrogate, no overlong form) without a backslash or a
 *     control character: orjson writes a character raw unless it is `"`, `\` or below U+0020;
 *   - every number is an integer of at most 18 digits without a leading zero, and not `-0`
 *     (orjson reads it as the int it spells and writes it back so);
 *   - no dict or list lies inside `depth` or more dicts and lists (the top value at level 0):
 *     the strict walk's refusal (`_check_containers`, `_nesting.deeper`).
 *
 * If so, and the value is an object of exactly three members, the answer is (start, end):
 * where the second member's value lies in `data`. A signed envelope is such an object (format,
 * payload, signature), and the reader that keeps its bytes slices its payload's encoding there
 * (`rng_service.crypto.signing.payload_span`, which found it by encoding the signature again).
 *
 * False means "not known so", not "not canonical": an escape in a string, a float, a longer
 * integer are each left to the encode-and-compare test, which decides as it always has. So a
 * True must never be wrong; tests/core/test_sorted_json.py holds it to that test on generated
 * values, their encodings and mutated bytes.
 *
 * The recursion goes no deeper than `depth` levels, at most 254 (above).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    Py_ssize_t depth;
    /* the top object's members, and where its second one's value lies */
    Py_ssize_t top_members;
    const unsigned char *second_start;
    const unsigned char *second_end;
} Reader;

/* 1 for a byte a string's plain ASCII run stops at: a control character (NUL among them,
 * which ends every bytes object's buffer, so the run needs no bound of its own), `"`, `\`,
 * and every byte of a multi-byte UTF-8 sequence */
static unsigned char stops[256];

/* A string's body from just past its opening quote: 1 and the reader past its closing quote
 * if it is plain (see above), 0 if not. */
static int plain_string(Reader *r)
{
    const unsigned char *p = r->p, *end = r->end;
    for (;;) {
        while (!stops[*p]) {
            p++;
        }
        if (p >= end) {
            return 0;
        }
        unsigned char c = *p;
        if (c == '"') {
            r->p = p + 1;
            return 1;
        }
        if (c < 0x80) {
            return 0; /* a backslash or a control character */
        }
        /* a multi-byte UTF-8 sequence: the lead byte bounds the second (no overlong form, no
         * surrogate, nothing past U+10FFFF); the rest are continuation bytes */
        unsigned char low = 0x80, high = 0xBF;
        Py_ssize_t more;
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            if (c == 0xE0) {
                low = 0xA0;
            }
            else if (c == 0xED) {
                high = 0x9F;
            }
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            if (c == 0xF0) {
                low = 0x90;
            }
            else if (c == 0xF4) {
                high = 0x8F;
            }
        }
        else {
            return 0;
        }
        if (end - p <= more || p[1] < low || p[1] > high) {
            return 0;
        }
        for (Py_ssize_t i = 2; i <= more; i++) {
            if ((p[i] & 0xC0) != 0x80) {
                return 0;
            }
        }
        p += more + 1;
    }
}

/* An integer as orjson writes one: 1 and the reader past it, 0 if not. */
static int plain_integer(Reader *r)
{
    const unsigned char *p = r->p, *end = r->end;
    int negative = 0;
    if (*p == '-') {
        negative = 1;
        p++;
    }
    const unsigned char *digits = p;
    while (p < end && *p >= '0' && *p <= '9') {
        p++;
    }
    Py_ssize_t count = p - digits;
    if (count == 0 || count > 18) {
        return 0;
    }
    if (*digits == '0' && (count > 1 || negative)) {
        return 0; /* a leading zero, or -0 (read as 0, written "0") */
    }
    r->p = p;
    return 1;
}

static int value(Reader *r, Py_ssize_t level);

static int literal(Reader *r, const char *word, Py_ssize_t size)
{
    if (r->end - r->p < size || memcmp(r->p, word, (size_t)size) != 0) {
        return 0;
    }
    r->p += size;
    return 1;
}

/* An object from just past its `{`, at `level`. */
static int object(Reader *r, Py_ssize_t level)
{
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return 1;
    }
    const unsigned char *last = NULL;
    Py_ssize_t last_size = 0;
    for (;;) {
        if (r->p >= r->end || *r->p != '"') {
            return 0;
        }
        const unsigned char *name = ++r->p;
        if (!plain_string(r)) {
            return 0;
        }
        Py_ssize_t size = r->p - 1 - name;
        if (last != NULL) {
            /* strictly after the previous name, byte by byte (a prefix comes first); names
             * are short, and differ early: compared here, not by a call to memcmp */
            Py_ssize_t common = last_size < size ? last_size : size, i = 0;
            while (i < common && last[i] == name[i]) {
                i++;
            }
            if (i < common ? last[i] > name[i] : last_size >= size) {
                return 0;
            }
        }
        last = name;
        last_size = size;
        if (r->p >= r->end || *r->p != ':') {
            return 0;
        }
        r->p++;
        const unsigned char *start = r->p;
        if (!value(r, level + 1)) {
            return 0;
        }
        if (level == 0 && ++r->top_members == 2) {
            r->second_start = start;
            r->second_end = r->p;
        }
        if (r->p >= r->end) {
            return 0;
        }
        if (*r->p == '}') {
            r->p++;
            return 1;
        }
        if (*r->p != ',') {
            return 0;
        }
        r->p++;
    }
}

/* An array from just past its `[`, at `level`. */
static int array(Reader *r, Py_ssize_t level)
{
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return 1;
    }
    for (;;) {
        if (!value(r, level + 1)) {
            return 0;
        }
        if (r->p >= r->end) {
            return 0;
        }
        if (*r->p == ']') {
            r->p++;
            return 1;
        }
        if (*r->p != ',') {
            return 0;
        }
        r->p++;
    }
}

/* One value at `level` (the number of containers around it). */
static int value(Reader *r, Py_ssize_t level)
{
    if (r->p >= r->end) {
        return 0;
    }
    switch (*r->p) {
    case '{':
        if (level >= r->depth) {
            return 0; /* a container inside `depth` containers: the strict walk's refusal */
        }
        r->p++;
        return object(r, level);
    case '[':
        if (level >= r->depth) {
            return 0;
        }
        r->p++;
        return array(r, level);
    case '"':
        r->p++;
        return plain_string(r);
    case 't':
        return literal(r, "true", 4);
    case 'f':
        return literal(r, "false", 5);
    case 'n':
        return literal(r, "null", 4);
    default:
        if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9')) {
            return plain_integer(r);
        }
        return 0;
    }
}

static PyObject *py_sorted_form(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "sorted_form(data: bytes, depth: int) takes two arguments");
        return NULL;
    }
    Py_ssize_t depth = PyLong_AsSsize_t(args[1]);
    if (depth == -1 && PyErr_Occurred()) {
        return NULL;
    }
    /* orjson encodes no value nested 255 levels deep: past 254, bytes this reading lets
     * through would be no sorted encoding (the caller asks with 128 at most) */
    if (depth < 0 || depth > 254) {
        PyErr_SetString(PyExc_ValueError, "sorted_form: depth must be 0..254");
        return NULL;
    }
    const unsigned char *start = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    if (size > 0 && start[size - 1] == '\n') {
        size--; /* one trailing newline, as a file or a line ends */
    }
    Reader reader = {start, start + size, depth, 0, NULL, NULL};
    if (!(value(&reader, 0) && reader.p == reader.end)) {
        Py_RETURN_FALSE;
    }
    if (*start == '{' && reader.top_members == 3) {
        PyObject *first = PyLong_FromSsize_t(reader.second_start - start);
        PyObject *last = PyLong_FromSsize_t(reader.second_end - start);
        PyObject *span = first != NULL && last != NULL ? PyTuple_Pack(2, first, last) : NULL;
        Py_XDECREF(first);
        Py_XDECREF(last);
        return span;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"sorted_form", (PyCFunction)(void (*)(void))py_sorted_form, METH_FASTCALL,
     "sorted_form(data, depth) -> True only if data (less a trailing newline) is exactly "
     "orjson's sorted encoding of its value and nests no container inside depth others, "
     "(start, end) if so and its value is an object of three members, the second's value "
     "being data[start:end]; False: not known so"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sorted_json",
    "Whether JSON bytes are exactly orjson's sorted encoding (see rng_service/core/json_input.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__sorted_json(void)
{
    for (int c = 0; c < 256; c++) {
        stops[c] = c < 0x20 || c >= 0x80 || c == '"' || c == '\\';
    }
    return PyModule_Create(&module);
}
