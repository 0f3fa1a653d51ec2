/*
 * The inner loop of the certified shuffle (rng_service/sampling.py), in C.
 *
 * steps(items, i, stop, buf, pos) -> (i, pos)
 *
 * Runs forward Fisher-Yates steps i, i+1, ... (< stop) on the list `items`, drawing from the byte
 * string `buf` starting at offset `pos`, exactly by the convention in sampling.py: for a step with
 * range r = len(items) - i, k = bit length of r - 1, m = ceil(k / 8); take the next m bytes
 * big-endian, keep the low k bits; accept if < r (j = i + value, swap i and j), otherwise reject
 * and draw again from the following bytes. It stops before a draw whose m bytes are not all in
 * `buf` (the caller appends the next DRBG block and calls again) or when step `stop` is reached.
 * It never consumes a byte it does not use and never reuses one. The pure-Python path in
 * sampling.py is the reference; the tests compare the two.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int bit_length(uint64_t x) {
    int k = 0;
    while (x) {
        k++;
        x >>= 1;
    }
    return k;
}

static PyObject *steps(PyObject *self, PyObject *args) {
    PyObject *items;
    Py_ssize_t i, stop, pos;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "O!nny*n", &PyList_Type, &items, &i, &stop, &view, &pos)) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t len = view.len;
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (i < 0 || stop > n - 1 || pos < 0 || pos > len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "steps: arguments outside the shuffle or the buffer");
        return NULL;
    }
    PyObject **cells = ((PyListObject *)items)->ob_item;
    while (i < stop) {
        uint64_t range = (uint64_t)(n - i);
        int k = bit_length(range - 1);
        int m = (k + 7) / 8;
        uint64_t mask = (k >= 64) ? UINT64_MAX : ((UINT64_C(1) << k) - 1);
        if (len - pos < m) {
            break;
        }
        uint64_t value = 0;
        for (int t = 0; t < m; t++) {
            value = (value << 8) | buf[pos + t];
        }
        pos += m;
        value &= mask;
        if (value < range) {
            Py_ssize_t j = i + (Py_ssize_t)value;
            /* a swap of two list cells moves references: no reference counts change */
            PyObject *tmp = cells[i];
            cells[i] = cells[j];
            cells[j] = tmp;
            i++;
        }
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nn", i, pos);
}

static PyMethodDef methods[] = {
    {"steps", steps, METH_VARARGS, "Forward Fisher-Yates steps over a byte buffer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fisher_yates", "The certified shuffle's inner loop.", -1, methods,
};

PyMODINIT_FUNC PyInit__fisher_yates(void) { return PyModule_Create(&module); }
