/* A signed envelope's signature fields read in C (rng_service/crypto/signing.py,
 * `_signature_fields`).
 *
 * signature_fields(envelope, format, alg) is (key id, signature bytes) when `envelope` is an
 * exact dict of exactly the members format, payload and signature (exact str names), its format
 * the exact str `format`, its signature an exact dict of exactly alg, key_id and value, its alg
 * the exact str `alg`, its key id an exact str, and its value 86 characters of unpadded base64url
 * whose last one keeps two bits and has its other four clear (`A`, `Q`, `g`, `w`): the one
 * spelling of 64 bytes. Anything else answers None, and the Python reading decides, with its
 * errors (the reference: tests/crypto/test_envelope_c.py holds the two alike).
 *
 * Every envelope the audit verifies is read here: the Python reading tested the dicts' keys as
 * sets and decoded the value through binascii after two translations, about 14,000
 * instructions an envelope. Only exact built-in types are looked into and names are compared
 * without a look-up, so no Python code runs and the borrowed references stay valid.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define SIGNATURE_BYTES 64
#define SIGNATURE_CHARS 86 /* 64 bytes in base64url, unpadded: 21 groups of 4, then 2 */

/* base64url's alphabet: a character's six bits, or 64 for a character outside it */
static unsigned char sextet[256];

/* The values of the exact dict `dict`, which must have exactly the members `names` (exact str
 * keys, `count` of them), into `values` in the names' order: 1 if so, else 0. */
static int members(PyObject *dict, const char *const *names, Py_ssize_t count,
                   PyObject **values)
{
    if (!PyDict_CheckExact(dict) || PyDict_GET_SIZE(dict) != count) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        values[i] = NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return 0;
        }
        Py_ssize_t i = 0;
        /* exact str against ASCII text: no Python code, no error (a lone surrogate differs) */
        while (i < count && PyUnicode_CompareWithASCIIString(key, names[i]) != 0) {
            i++;
        }
        if (i == count || values[i] != NULL) {
            return 0;
        }
        values[i] = value;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (values[i] == NULL) {
            return 0;
        }
    }
    return 1;
}

/* 1 if `value` is an exact str equal to the exact str `wanted` */
static int same_text(PyObject *value, PyObject *wanted)
{
    if (!PyUnicode_CheckExact(value)) {
        return 0;
    }
    if (value == wanted) {
        return 1;
    }
    /* both exact str: compares code points, calls no Python code, cannot fail */
    return PyUnicode_Compare(value, wanted) == 0;
}

/* The 64 bytes `text` (86 characters) spells in unpadded base64url, into `out`: 1 if it is
 * their one spelling (every character base64url's, the last one's four low bits clear). */
static int decoded(const unsigned char *text, unsigned char *out)
{
    unsigned int bad = 0;
    Py_ssize_t o = 0;
    Py_ssize_t i = 0;
    for (; i + 4 <= SIGNATURE_CHARS; i += 4) {
        unsigned int a = sextet[text[i]], b = sextet[text[i + 1]];
        unsigned int c = sextet[text[i + 2]], d = sextet[text[i + 3]];
        bad |= (a | b | c | d) & 64u;
        unsigned int group = (a << 18) | (b << 12) | (c << 6) | d;
        out[o++] = (unsigned char)(group >> 16);
        out[o++] = (unsigned char)(group >> 8);
        out[o++] = (unsigned char)group;
    }
    /* the last two characters: 12 bits, of which the byte keeps the first 8 */
    unsigned int a = sextet[text[i]], b = sextet[text[i + 1]];
    bad |= (a | b) & 64u;
    out[o++] = (unsigned char)((a << 2) | ((b >> 4) & 3u));
    return bad == 0 && (b & 15u) == 0 && o == SIGNATURE_BYTES;
}

static const char *const ENVELOPE[] = {"format", "payload", "signature"};
static const char *const SIGNATURE[] = {"alg", "key_id", "value"};

static PyObject *py_signature_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyUnicode_CheckExact(args[1]) || !PyUnicode_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "signature_fields(envelope, format, alg): format and alg are str");
        return NULL;
    }
    PyObject *envelope[3], *signature[3];
    if (!members(args[0], ENVELOPE, 3, envelope) || !same_text(envelope[0], args[1])
            || !members(envelope[2], SIGNATURE, 3, signature)
            || !same_text(signature[0], args[2]) || !PyUnicode_CheckExact(signature[1])) {
        Py_RETURN_NONE;
    }
    PyObject *value = signature[2];
    if (!PyUnicode_CheckExact(value)) {
        Py_RETURN_NONE;
    }
    if (PyUnicode_READY(value) < 0) { /* out of memory: the Python reading decides */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!PyUnicode_IS_ASCII(value)
            || PyUnicode_GET_LENGTH(value) != SIGNATURE_CHARS) {
        Py_RETURN_NONE;
    }
    unsigned char raw[SIGNATURE_BYTES];
    if (!decoded(PyUnicode_1BYTE_DATA(value), raw)) {
        Py_RETURN_NONE;
    }
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)raw, SIGNATURE_BYTES);
    if (bytes == NULL) {
        return NULL;
    }
    PyObject *kid = signature[1];
    Py_INCREF(kid);
    PyObject *out = PyTuple_New(2);
    if (out == NULL) {
        Py_DECREF(kid);
        Py_DECREF(bytes);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, kid);
    PyTuple_SET_ITEM(out, 1, bytes);
    return out;
}

static PyMethodDef methods[] = {
    {"signature_fields", (PyCFunction)(void (*)(void))py_signature_fields, METH_FASTCALL,
     "signature_fields(envelope, format, alg) -> (key id, signature bytes), or None: the "
     "Python reading decides (see rng_service/crypto/signing.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_envelope",
    "A signed envelope's signature fields read in C (see rng_service/crypto/signing.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__envelope(void)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    memset(sextet, 64, sizeof sextet);
    for (unsigned int i = 0; i < 64; i++) {
        sextet[(unsigned char)alphabet[i]] = (unsigned char)i;
    }
    return PyModule_Create(&module);
}
