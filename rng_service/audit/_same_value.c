/* A rebuilt round record compared with the signed one in C (rng_service/audit/round_checks.py,
 * `_same`).
 *
 * same_value(recorded, replay) is True only if the two are one JSON value of the same exact
 * types at every node: dicts of exact dict type with the same keys (each an exact str), lists of
 * exact list type with the same items in order, and leaves of the same exact type that are
 * equal: a str (without a lone surrogate), an int within the 64-bit range, a bool, None. Then
 * `_same`'s reference decides True too: the two are equal as Python values, and orjson writes
 * them as the same bytes (it writes equal values of one exact type alike, and refuses none of
 * these). Anything else (a float, a tuple, a subclass, an Enum, a deeper nesting, a difference)
 * answers False, and the caller asks the reference, which decides: this only spares it, for the
 * rebuilt record that is the same as the recorded one (the Python reference compares the values
 * and encodes them, 50,000 instructions a snap record; this walks them once, a tenth of that).
 * tests/audit/test_round_compare.py compares the two on generated values.
 *
 * No Python code can run during the walk (only exact built-in types are looked into, and
 * their comparison is C's), so the borrowed references stay valid.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* orjson refuses a value nested deeper than 254 containers: far above any record */
#define MAX_DEPTH 64

/* 1 if the exact str `text` (made ready) has no lone surrogate, so UTF-8 can encode it, as
 * orjson must; else 0 */
static int encodable(PyObject *text)
{
    int kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        return 1;
    }
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (Py_UNICODE_IS_SURROGATE(PyUnicode_READ(kind, data, i))) {
            return 0;
        }
    }
    return 1;
}

/* The same for two exact strs: 1, 0, or -1 with an error set */
static inline int same_str(PyObject *a, PyObject *b)
{
    if (PyUnicode_READY(a) < 0 || PyUnicode_READY(b) < 0) {
        return -1;
    }
    if (!PyUnicode_IS_ASCII(a) && !encodable(a)) {
        return 0;
    }
    if (a == b) {
        return 1;
    }
    /* equal strs are stored alike: the same kind (the narrowest that holds them), length and
     * code units */
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b)
        && memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
}

/* The same for two exact ints: within the 64-bit range, equal. 1, 0, or -1 with an error set */
static inline int same_int(PyObject *a, PyObject *b)
{
    if (a == b && Py_ABS(Py_SIZE(a)) <= 2) { /* one object of at most two 30-bit digits */
        return 1;
    }
    int overflow_a = 0, overflow_b = 0;
    long long x = PyLong_AsLongLongAndOverflow(a, &overflow_a);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    long long y = PyLong_AsLongLongAndOverflow(b, &overflow_b);
    if (y == -1 && PyErr_Occurred()) {
        return -1;
    }
    return overflow_a == 0 && overflow_b == 0 && x == y;
}

/* 1 if the two are the same (see above), 0 if not or if not known so, -1 with an error set */
static int same(PyObject *a, PyObject *b, int depth)
{
    PyTypeObject *type = Py_TYPE(a);
    if (type != Py_TYPE(b)) {
        return 0;
    }
    if (type == &PyUnicode_Type) {
        return same_str(a, b);
    }
    if (type == &PyLong_Type) {
        return same_int(a, b);
    }
    if (type == &PyBool_Type || a == Py_None) { /* bool cannot be subclassed; None is one */
        return a == b;
    }
    if (depth >= MAX_DEPTH) {
        return 0;
    }
    if (type == &PyDict_Type) {
        if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) {
            return 0;
        }
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        /* b's keys first: one of a subclass of str (which orjson refuses as a key) whose hash
         * is an a key's would be compared by the look-up below with its own __eq__, Python
         * code that could free what the walk holds borrowed */
        while (PyDict_Next(b, &pos, &key, &item)) {
            if (!PyUnicode_CheckExact(key)) {
                return 0;
            }
        }
        pos = 0;
        while (PyDict_Next(a, &pos, &key, &item)) {
            if (!PyUnicode_CheckExact(key)) {
                return 0;
            }
            if (PyUnicode_READY(key) < 0) {
                return -1;
            }
            if (!PyUnicode_IS_ASCII(key) && !encodable(key)) {
                return 0;
            }
            /* an exact str key looked up among exact str keys: its hash and comparison are
             * C's, no Python code runs */
            PyObject *other = PyDict_GetItemWithError(b, key);
            if (other == NULL) {
                return PyErr_Occurred() ? -1 : 0;
            }
            int r = same(item, other, depth + 1);
            if (r != 1) {
                return r;
            }
        }
        /* the same number of keys, each of a's in b: the same keys */
        return 1;
    }
    if (type == &PyList_Type) {
        Py_ssize_t n = PyList_GET_SIZE(a);
        if (PyList_GET_SIZE(b) != n) {
            return 0;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            int r = same(PyList_GET_ITEM(a, i), PyList_GET_ITEM(b, i), depth + 1);
            if (r != 1) {
                return r;
            }
        }
        return 1;
    }
    return 0; /* a float, a tuple, a subclass, any other type: the reference decides */
}

static PyObject *py_same_value(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "same_value() takes exactly 2 arguments");
        return NULL;
    }
    int r = same(args[0], args[1], 0);
    if (r < 0) {
        return NULL;
    }
    return PyBool_FromLong(r);
}

static PyMethodDef methods[] = {
    {"same_value", (PyCFunction)(void (*)(void))py_same_value, METH_FASTCALL,
     "same_value(recorded, replay, /) -> bool: the same JSON value of the same exact types "
     "(False: not, or not known so)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_same_value",
    "A rebuilt round record compared with the signed one (see _same_value.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__same_value(void)
{
    return PyModule_Create(&module);
}
