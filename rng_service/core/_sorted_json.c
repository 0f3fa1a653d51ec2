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
 * sorted_members(data, depth, names, keys, at, spelled) answers the same from the same pass
 * and, for such an object of three members whose second value is itself an object of which the
 * member names[at] is spelled exactly `spelled` (a payload of the schema wanted), also gives
 * the members of that object named in `names` (bytes, strictly increasing, each spelled as in
 * the bytes) as a dict under `keys`, and the third member's value: each built here, from bytes
 * the scan vouched for, as orjson's parse of them builds it (else None and None). A reader that
 * needs a few members of a signed payload, and its signature (the audit's first pass, of a
 * round record it checks in full later), takes them so rather than building the whole value.
 * The values are only as good as the True they come with, so they are built after it alone.
 *
 * The recursion goes no deeper than `depth` levels, at most 254 (read_arguments).
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
    /* sorted_members: the names looked for in the second member's object (NULL: none), and
     * where each one's value was found (start NULL: not found) */
    PyObject *names;
    Py_ssize_t next_name;
    const unsigned char **found_start;
    const unsigned char **found_end;
} Reader;

/* Note where the value of the member `name` (`size` bytes) of the second top member's object
 * lies, if it is one of the names looked for. The names looked for are in increasing order, as
 * the members are: each member is compared with the first name not yet passed. */
static void note_member(Reader *r, const unsigned char *name, Py_ssize_t size,
                        const unsigned char *start)
{
    Py_ssize_t count = PyTuple_GET_SIZE(r->names);
    while (r->next_name < count) {
        PyObject *wanted = PyTuple_GET_ITEM(r->names, r->next_name);
        Py_ssize_t wanted_size = PyBytes_GET_SIZE(wanted);
        int order = memcmp(PyBytes_AS_STRING(wanted), name,
                           (size_t)(wanted_size < size ? wanted_size : size));
        if (order == 0) {
            order = wanted_size < size ? -1 : wanted_size > size;
        }
        if (order > 0) {
            return; /* not looked for */
        }
        if (order == 0) {
            r->found_start[r->next_name] = start;
            r->found_end[r->next_name] = r->p;
            r->next_name++;
            return;
        }
        r->next_name++; /* a name looked for that the object lacks */
    }
}

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
        else if (level == 1 && r->names != NULL && r->top_members == 1) {
            /* a member of the second top member's object (its value is being read) */
            note_member(r, name, size, start);
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

/* The arguments (data, depth) checked: the reader over data (less one trailing newline), or
 * 0 with an exception set. */
static int read_arguments(PyObject *const *args, Reader *reader)
{
    if (!PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "sorted_form: data must be bytes");
        return 0;
    }
    Py_ssize_t depth = PyLong_AsSsize_t(args[1]);
    if (depth == -1 && PyErr_Occurred()) {
        return 0;
    }
    /* orjson encodes no value nested 255 levels deep: past 254, bytes this reading lets
     * through would be no sorted encoding (the caller asks with 128 at most) */
    if (depth < 0 || depth > 254) {
        PyErr_SetString(PyExc_ValueError, "sorted_form: depth must be 0..254");
        return 0;
    }
    const unsigned char *start = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    if (size > 0 && start[size - 1] == '\n') {
        size--; /* one trailing newline, as a file or a line ends */
    }
    memset(reader, 0, sizeof(*reader));
    reader->p = start;
    reader->end = start + size;
    reader->depth = depth;
    return 1;
}

/* Whether the reader's bytes are one value in sorted form and nothing after it. */
static int read_all(Reader *reader)
{
    return value(reader, 0) && reader->p == reader->end;
}

/* (start, end) of an object of three members' second value, as offsets into `data`; NULL on a
 * failed allocation. */
static PyObject *span_of(const unsigned char *data, const unsigned char *start,
                         const unsigned char *end)
{
    PyObject *first = PyLong_FromSsize_t(start - data);
    PyObject *last = PyLong_FromSsize_t(end - data);
    PyObject *span = first != NULL && last != NULL ? PyTuple_Pack(2, first, last) : NULL;
    Py_XDECREF(first);
    Py_XDECREF(last);
    return span;
}

static PyObject *py_sorted_form(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "sorted_form(data: bytes, depth: int) takes two arguments");
        return NULL;
    }
    Reader reader;
    if (!read_arguments(args, &reader)) {
        return NULL;
    }
    const unsigned char *data = reader.p;
    if (!read_all(&reader)) {
        Py_RETURN_FALSE;
    }
    if (*data == '{' && reader.top_members == 3) {
        return span_of(data, reader.second_start, reader.second_end);
    }
    Py_RETURN_TRUE;
}

/* The most names sorted_members looks for at once (a few members of a payload). */
#define MAX_NAMES 16

/* The member names built last, by a hash of their bytes: a name met again (the same few in
 * every record) is the same str, its hash made once, as orjson keeps them. */
#define NAME_SLOTS 256
#define NAME_MOST 32
static struct {
    Py_ssize_t size;
    char text[NAME_MOST];
    PyObject *name;
} names_built[NAME_SLOTS];

/* The str of a member name of `size` UTF-8 bytes at `start` (plain: no escape), a new
 * reference, or NULL with an exception set. */
static PyObject *member_name(const unsigned char *start, Py_ssize_t size)
{
    if (size == 0 || size > NAME_MOST) {
        return PyUnicode_DecodeUTF8((const char *)start, size, "strict");
    }
    size_t slot = ((size_t)size * 31u + start[0] * 7u + start[size - 1]) % NAME_SLOTS;
    if (names_built[slot].name != NULL && names_built[slot].size == size
        && memcmp(names_built[slot].text, start, (size_t)size) == 0) {
        return Py_NewRef(names_built[slot].name);
    }
    PyObject *name = PyUnicode_DecodeUTF8((const char *)start, size, "strict");
    if (name == NULL) {
        return NULL;
    }
    if (PyObject_Hash(name) == -1) {
        Py_DECREF(name);
        return NULL;
    }
    Py_XSETREF(names_built[slot].name, Py_NewRef(name));
    names_built[slot].size = size;
    memcpy(names_built[slot].text, start, (size_t)size);
    return name;
}

/* The value at `*at`, which the scan found in sorted form (so no bound is checked here: every
 * string is closed, valid UTF-8 without an escape, every integer of at most 18 digits, every
 * container closed, nested within the depth the scan allowed), built as orjson's parse builds
 * it; `*at` is left just past it. NULL with an exception set on a failure. */
static PyObject *build(const unsigned char **at)
{
    const unsigned char *p = *at;
    switch (*p) {
    case '"': {
        const unsigned char *start = ++p;
        while (*p != '"') {
            p++;
        }
        *at = p + 1;
        return PyUnicode_DecodeUTF8((const char *)start, p - start, "strict");
    }
    case 't':
        *at = p + 4;
        Py_RETURN_TRUE;
    case 'f':
        *at = p + 5;
        Py_RETURN_FALSE;
    case 'n':
        *at = p + 4;
        Py_RETURN_NONE;
    case '{': {
        PyObject *dict = PyDict_New();
        if (dict == NULL) {
            return NULL;
        }
        p++;
        while (*p != '}') {
            const unsigned char *name = ++p; /* past its opening quote */
            while (*p != '"') {
                p++;
            }
            PyObject *key = member_name(name, p - name);
            if (key == NULL) {
                Py_DECREF(dict);
                return NULL;
            }
            p += 2; /* past its closing quote and the ':' */
            PyObject *member = build(&p);
            if (member == NULL || PyDict_SetItem(dict, key, member) < 0) {
                Py_DECREF(key);
                Py_XDECREF(member);
                Py_DECREF(dict);
                return NULL;
            }
            Py_DECREF(key);
            Py_DECREF(member);
            if (*p == ',') {
                p++;
            }
        }
        *at = p + 1;
        return dict;
    }
    case '[': {
        PyObject *list = PyList_New(0);
        if (list == NULL) {
            return NULL;
        }
        p++;
        while (*p != ']') {
            PyObject *item = build(&p);
            if (item == NULL || PyList_Append(list, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(list);
                return NULL;
            }
            Py_DECREF(item);
            if (*p == ',') {
                p++;
            }
        }
        *at = p + 1;
        return list;
    }
    default: {
        long long number = 0;
        int negative = *p == '-';
        p += negative;
        while (*p >= '0' && *p <= '9') {
            number = number * 10 + (*p - '0'); /* at most 18 digits: no overflow */
            p++;
        }
        *at = p;
        return PyLong_FromLongLong(negative ? -number : number);
    }
    }
}

static PyObject *py_sorted_members(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "sorted_members(data, depth, names, keys, at, spelled) takes six "
                        "arguments");
        return NULL;
    }
    PyObject *names = args[2], *keys = args[3], *spelled = args[5];
    Py_ssize_t at_name = PyLong_AsSsize_t(args[4]);
    if (at_name == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) > MAX_NAMES
        || !PyTuple_CheckExact(keys) || PyTuple_GET_SIZE(keys) != PyTuple_GET_SIZE(names)) {
        PyErr_SetString(PyExc_TypeError,
                        "sorted_members: names and keys must be tuples of one size, at most 16");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    if (at_name < 0 || at_name >= count || !PyBytes_CheckExact(spelled)) {
        PyErr_SetString(PyExc_ValueError,
                        "sorted_members: at must index names, spelled must be bytes");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyBytes_CheckExact(name) || !PyUnicode_CheckExact(PyTuple_GET_ITEM(keys, i))) {
            PyErr_SetString(PyExc_TypeError, "sorted_members: names are bytes, keys str");
            return NULL;
        }
        if (i > 0) {
            PyObject *before = PyTuple_GET_ITEM(names, i - 1);
            Py_ssize_t a = PyBytes_GET_SIZE(before), b = PyBytes_GET_SIZE(name);
            int order = memcmp(PyBytes_AS_STRING(before), PyBytes_AS_STRING(name),
                               (size_t)(a < b ? a : b));
            if (order > 0 || (order == 0 && a >= b)) {
                PyErr_SetString(PyExc_ValueError,
                                "sorted_members: names must be strictly increasing");
                return NULL;
            }
        }
    }
    Reader reader;
    if (!read_arguments(args, &reader)) {
        return NULL;
    }
    const unsigned char *found_start[MAX_NAMES] = {NULL}, *found_end[MAX_NAMES] = {NULL};
    reader.names = names;
    reader.found_start = found_start;
    reader.found_end = found_end;
    const unsigned char *data = reader.p;
    if (!read_all(&reader)) {
        Py_RETURN_FALSE;
    }
    if (*data != '{' || reader.top_members != 3) {
        Py_RETURN_TRUE;
    }
    /* built only if the member names[at] is spelled `spelled`: what the reader wants */
    const unsigned char *chosen = found_start[at_name];
    Py_ssize_t chosen_size = chosen == NULL ? -1 : found_end[at_name] - chosen;
    if (*reader.second_start != '{' || chosen_size != PyBytes_GET_SIZE(spelled)
        || memcmp(chosen, PyBytes_AS_STRING(spelled), (size_t)chosen_size) != 0) {
        PyObject *first = PyLong_FromSsize_t(reader.second_start - data);
        PyObject *last = PyLong_FromSsize_t(reader.second_end - data);
        PyObject *answer = first != NULL && last != NULL
            ? PyTuple_Pack(4, first, last, Py_None, Py_None) : NULL;
        Py_XDECREF(first);
        Py_XDECREF(last);
        return answer;
    }
    PyObject *members = PyDict_New();
    if (members == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (found_start[i] == NULL) {
            continue;
        }
        const unsigned char *at = found_start[i];
        PyObject *member = build(&at);
        if (member == NULL || PyDict_SetItem(members, PyTuple_GET_ITEM(keys, i), member) < 0) {
            Py_XDECREF(member);
            Py_DECREF(members);
            return NULL;
        }
        Py_DECREF(member);
    }
    /* the third member's value: past the second's, its comma and its name */
    const unsigned char *at = reader.second_end + 1;
    while (*++at != '"') {
    }
    at += 2;
    PyObject *third = build(&at);
    PyObject *first = PyLong_FromSsize_t(reader.second_start - data);
    PyObject *last = PyLong_FromSsize_t(reader.second_end - data);
    PyObject *answer = first != NULL && last != NULL && third != NULL
        ? PyTuple_Pack(4, first, last, members, third) : NULL;
    Py_XDECREF(first);
    Py_XDECREF(last);
    Py_XDECREF(third);
    Py_DECREF(members);
    return answer;
}

static PyMethodDef methods[] = {
    {"sorted_form", (PyCFunction)(void (*)(void))py_sorted_form, METH_FASTCALL,
     "sorted_form(data, depth) -> True only if data (less a trailing newline) is exactly "
     "orjson's sorted encoding of its value and nests no container inside depth others, "
     "(start, end) if so and its value is an object of three members, the second's value "
     "being data[start:end]; False: not known so"},
    {"sorted_members", (PyCFunction)(void (*)(void))py_sorted_members, METH_FASTCALL,
     "sorted_members(data, depth, names, keys, at, spelled) -> sorted_form's answer, and with "
     "a span (start, end, members, third): if the second value is an object whose member "
     "names[at] is spelled exactly spelled, members is the dict of its members named (bytes, "
     "strictly increasing) that it has, under the keys (str) given with the names, and third "
     "the third member's value, each as orjson's parse has it; else None and None"},
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
