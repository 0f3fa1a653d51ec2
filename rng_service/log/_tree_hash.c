/* RFC 9162's leaf and node hashes in one C call each, over OpenSSL's libcrypto SHA-256:
 * SHA-256(0x00 || entry) and SHA-256(0x01 || left || right), without the prefixed copy of the
 * entry and the hashlib object that hashing.py's Python form makes (some 3,500 instructions a
 * hash beside the compression; a transition makes two or three). hashing.py keeps the Python
 * form as the reference and for a build without this; tests/log/test_tree_hash_c.py compares
 * the two on random input (hypothesis). */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_*: the one-shot needs no EVP context */
#include <Python.h>
#include <openssl/sha.h>

static PyObject *digest_of(const unsigned char prefix, const Py_buffer *a, const Py_buffer *b)
{
    unsigned char out[SHA256_DIGEST_LENGTH];
    SHA256_CTX ctx;
    if (!SHA256_Init(&ctx) || !SHA256_Update(&ctx, &prefix, 1) ||
        !SHA256_Update(&ctx, a->buf, (size_t)a->len) ||
        (b != NULL && !SHA256_Update(&ctx, b->buf, (size_t)b->len)) || !SHA256_Final(out, &ctx)) {
        PyErr_SetString(PyExc_RuntimeError, "SHA-256 failed");
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)out, SHA256_DIGEST_LENGTH);
}

static PyObject *leaf_hash(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_buffer entry;
    if (PyObject_GetBuffer(arg, &entry, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = digest_of(0x00, &entry, NULL);
    PyBuffer_Release(&entry);
    return out;
}

static PyObject *node_hash(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "node_hash(left, right)");
        return NULL;
    }
    Py_buffer left, right;
    if (PyObject_GetBuffer(args[0], &left, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &right, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&left);
        return NULL;
    }
    PyObject *out = digest_of(0x01, &left, &right);
    PyBuffer_Release(&left);
    PyBuffer_Release(&right);
    return out;
}

static PyMethodDef methods[] = {
    {"leaf_hash", leaf_hash, METH_O, "SHA-256(0x00 || entry)"},
    {"node_hash", (PyCFunction)(void (*)(void))node_hash, METH_FASTCALL,
     "SHA-256(0x01 || left || right)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_tree_hash",
                                        "RFC 9162's leaf and node hashes in C.", -1, methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__tree_hash(void) { return PyModule_Create(&module_def); }
