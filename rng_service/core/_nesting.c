/* The nesting test of a parsed JSON value in C (rng_service/core/json_input.py, `_parse_canonical`).
 *
 * deeper(value, depth) answers whether the strict parse's container walk (`_check_containers`)
 * would refuse `value` as nested too deeply: True if `value` is, or holds, a dict or list that
 * lies inside `depth` or more dicts and lists (the top value at level 0). Only exact dicts and
 * lists are containers, as in that walk (a parse makes no others). The fast path of every strict
 * read (each record, reveal and commitment the audit reads, each line of the log's leaves) asked
 * this before by counting the brackets of the bytes and, past `depth` of them, encoding the value
 * indented: 12 instructions a byte, a sixth of a round record's strict reading; this walks the
 * containers alone (a round record holds a few dozen). tests/core/test_json_input.py holds it to
 * the Python walk.
 *
 * No Python code can run during the walk (only exact built-in containers are looked into), so
 * the borrowed references stay valid. The recursion goes no deeper than `depth`, and each level
 * passes through Py_EnterRecursiveCall: a value nested past the interpreter's limit raises
 * RecursionError, which the caller takes as "not the fast path" (the strict parse decides).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* 1 if `value` (an exact dict or list at `level`) is or holds a container at `depth` or below,
 * 0 if not, -1 with an exception set (RecursionError). */
static int deeper(PyObject *value, Py_ssize_t level, Py_ssize_t depth)
{
    if (level >= depth) {
        return 1;
    }
    if (Py_EnterRecursiveCall(" in the JSON nesting test")) {
        return -1;
    }
    int found = 0;
    if (PyDict_CheckExact(value)) {
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (found == 0 && PyDict_Next(value, &pos, &key, &item)) {
            if (PyDict_CheckExact(item) || PyList_CheckExact(item)) {
                found = deeper(item, level + 1, depth);
            }
        }
    }
    else {
        /* a list: its size read at each step (nothing here can change it; stay in bounds) */
        for (Py_ssize_t i = 0; found == 0 && i < PyList_GET_SIZE(value); i++) {
            PyObject *item = PyList_GET_ITEM(value, i);
            if (PyDict_CheckExact(item) || PyList_CheckExact(item)) {
                found = deeper(item, level + 1, depth);
            }
        }
    }
    Py_LeaveRecursiveCall();
    return found;
}

static PyObject *py_deeper(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "deeper(value, depth) takes two arguments");
        return NULL;
    }
    Py_ssize_t depth = PyLong_AsSsize_t(args[1]);
    if (depth == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *value = args[0];
    if (!PyDict_CheckExact(value) && !PyList_CheckExact(value)) {
        Py_RETURN_FALSE; /* a scalar holds no container */
    }
    int found = deeper(value, 0, depth);
    if (found < 0) {
        return NULL;
    }
    return PyBool_FromLong(found);
}

static PyMethodDef methods[] = {
    {"deeper", (PyCFunction)(void (*)(void))py_deeper, METH_FASTCALL,
     "deeper(value, depth) -> True if value is or holds a dict or list inside depth or more "
     "dicts and lists (value itself at level 0)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_nesting",
    "The nesting test of a parsed JSON value in C (see rng_service/core/json_input.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__nesting(void)
{
    return PyModule_Create(&module);
}
