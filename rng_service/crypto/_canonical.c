/* The canonical encoding's domain check in C (rng_service/crypto/signing.py, `_check`).
 *
 * check(value) walks a payload once and answers what signing.py's `_check(value, 0)` decides:
 *   0   within the domain, every object key in the Basic Multilingual Plane;
 *   1   within the domain, some key above U+FFFF (JCS orders keys by UTF-16 code units: the
 *       payload goes through the rfc8785 package);
 *  -1   outside the domain: the caller runs the Python check, which raises with the path.
 *
 * The domain (the module docstring of signing.py): exact dict with exact str keys, exact list or
 * tuple, exact str, bool, None, exact int within +-(2**53 - 1); nothing else (no float, no
 * subclass); containers nested at most MAX_DEPTH levels below the top. The Python walk costs
 * 25-35 us on a round record, most of it the interpreter's per-item dispatch; this costs about
 * 1 us. tests/crypto/test_canonical_c.py compares the two on generated values.
 *
 * No Python code can run during the walk (only exact built-in types are looked into), so the
 * borrowed references stay valid.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_DEPTH 64
#define MAX_INT ((1LL << 53) - 1)

/* 0 or 1 as above, or -1 for a value outside the domain. Mirrors _check: leaves are judged
 * before the depth, so a leaf below the deepest container allowed is still fine. */
static int check(PyObject *value, int depth)
{
    if (PyUnicode_CheckExact(value) || PyBool_Check(value) || value == Py_None) {
        return 0;
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow != 0 || v > MAX_INT || v < -MAX_INT) {
            return -1;
        }
        return 0;
    }
    if (depth > MAX_DEPTH) {
        return -1;
    }
    int needs_jcs = 0;
    if (PyDict_CheckExact(value)) {
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (PyDict_Next(value, &pos, &key, &item)) {
            if (!PyUnicode_CheckExact(key)) {
                return -1;
            }
            if (PyUnicode_READY(key) < 0) { /* out of memory: the Python walk decides, so no */
                PyErr_Clear();              /* error may stay set behind a plain answer */
                return -1;
            }
            /* PEP 393: a str is stored four bytes a character exactly when one is above U+FFFF */
            if (PyUnicode_KIND(key) == PyUnicode_4BYTE_KIND) {
                needs_jcs = 1;
            }
            int r = check(item, depth + 1);
            if (r < 0) {
                return -1;
            }
            needs_jcs |= r;
        }
        return needs_jcs;
    }
    if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
        /* a list's size is read at each step: nothing here can change it, but stay in bounds */
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(value); i++) {
            int r = check(PySequence_Fast_GET_ITEM(value, i), depth + 1);
            if (r < 0) {
                return -1;
            }
            needs_jcs |= r;
        }
        return needs_jcs;
    }
    return -1; /* float, a subclass, any other type */
}

static PyObject *py_check(PyObject *module, PyObject *value)
{
    (void)module;
    return PyLong_FromLong(check(value, 0));
}

static PyMethodDef methods[] = {
    {"check", py_check, METH_O,
     "check(value) -> 0 (canonical domain, keys in the BMP), 1 (domain, a key above U+FFFF), "
     "-1 (outside the domain)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_canonical",
    "The canonical encoding's domain check in C (see rng_service/crypto/signing.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__canonical(void)
{
    return PyModule_Create(&module);
}
