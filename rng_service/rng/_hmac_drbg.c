/*
 * The arithmetic of HMAC_DRBG(SHA-256) (SP 800-90A rev1, 10.1.2) in C: rng_service/rng/drbg.py.
 *
 * Core(seed_material)           instantiate: Key = 0x00.., V = 0x01.., Update(seed_material)
 * core.update(data)             HMAC_DRBG_Update (10.1.2.2)
 * core.blocks(n, additional=b"") Generate's output loop: V = HMAC(Key, V) until n bytes are
 *                               out, then Update(additional); the caller runs the Update before
 *                               the output when there is additional input
 * core.wipe()                   zeroes the state
 *
 * drbg.py keeps every rule of the standard (input lengths, the reseed counter, additional input)
 * and its pure-Python core, which is the reference: the tests run the NIST CAVP vectors through
 * both cores and compare them on random inputs. This file holds only the HMACs, which are what a
 * one-round shoe's DRBG costs (about 30 of them, 2.7 us each through the `cryptography` package,
 * 0.1 us here). SHA-256 is OpenSSL's libcrypto, the same implementation `cryptography` and
 * Python's hashlib use; the HMAC (RFC 2104) is written out: a key's inner and outer pads are
 * hashed once, and each HMAC continues from copies of those two states.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* the SHA256_* calls: plain structs, copied by assignment */
#include <Python.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <string.h>

#define OUTLEN 32
#define BLOCK 64

typedef struct {
    SHA256_CTX inner; /* after the key XOR ipad block */
    SHA256_CTX outer; /* after the key XOR opad block */
} Keyed;

typedef struct {
    PyObject_HEAD
    Keyed key;
    unsigned char value[OUTLEN];
} Core;

static void set_key(Keyed *k, const unsigned char key[OUTLEN]) {
    unsigned char ipad[BLOCK], opad[BLOCK];
    for (int t = 0; t < BLOCK; t++) {
        unsigned char b = t < OUTLEN ? key[t] : 0;
        ipad[t] = b ^ 0x36;
        opad[t] = b ^ 0x5c;
    }
    SHA256_Init(&k->inner);
    SHA256_Update(&k->inner, ipad, BLOCK);
    SHA256_Init(&k->outer);
    SHA256_Update(&k->outer, opad, BLOCK);
    OPENSSL_cleanse(ipad, BLOCK);
    OPENSSL_cleanse(opad, BLOCK);
}

/* out = HMAC(k, a || b || c); out may alias a */
static void hmac3(const Keyed *k, const unsigned char *a, size_t na, const unsigned char *b,
                  size_t nb, const unsigned char *c, size_t nc, unsigned char out[OUTLEN]) {
    unsigned char inner[OUTLEN];
    SHA256_CTX ctx = k->inner;
    SHA256_Update(&ctx, a, na);
    if (nb) SHA256_Update(&ctx, b, nb);
    if (nc) SHA256_Update(&ctx, c, nc);
    SHA256_Final(inner, &ctx);
    ctx = k->outer;
    SHA256_Update(&ctx, inner, OUTLEN);
    SHA256_Final(out, &ctx);
    OPENSSL_cleanse(inner, OUTLEN);
}

/* HMAC_DRBG_Update (10.1.2.2) */
static void update(Core *self, const unsigned char *data, size_t n) {
    static const unsigned char zero = 0x00, one = 0x01;
    unsigned char key[OUTLEN];
    hmac3(&self->key, self->value, OUTLEN, &zero, 1, data, n, key);
    set_key(&self->key, key);
    hmac3(&self->key, self->value, OUTLEN, NULL, 0, NULL, 0, self->value);
    if (n) {
        hmac3(&self->key, self->value, OUTLEN, &one, 1, data, n, key);
        set_key(&self->key, key);
        hmac3(&self->key, self->value, OUTLEN, NULL, 0, NULL, 0, self->value);
    }
    OPENSSL_cleanse(key, OUTLEN);
}

static int Core_init(Core *self, PyObject *args, PyObject *kwds) {
    Py_buffer material;
    static char *kwlist[] = {"seed_material", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*", kwlist, &material)) return -1;
    unsigned char zero_key[OUTLEN] = {0};
    set_key(&self->key, zero_key); /* 10.1.2.3: Key = 0x00 00...00, V = 0x01 01...01 */
    memset(self->value, 0x01, OUTLEN);
    update(self, (const unsigned char *)material.buf, (size_t)material.len);
    PyBuffer_Release(&material);
    return 0;
}

static PyObject *Core_update(Core *self, PyObject *arg) {
    Py_buffer data;
    if (!PyArg_Parse(arg, "y*", &data)) return NULL;
    update(self, (const unsigned char *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
}

static PyObject *Core_blocks(Core *self, PyObject *args) {
    Py_ssize_t n;
    Py_buffer data = {0};
    if (!PyArg_ParseTuple(args, "n|y*", &n, &data)) return NULL;
    if (n < 0 || n > (1 << 16)) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "blocks: 0 to 65536 bytes");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t done = 0; done < n; done += OUTLEN) {
        hmac3(&self->key, self->value, OUTLEN, NULL, 0, NULL, 0, self->value);
        memcpy(dst + done, self->value, (size_t)(n - done < OUTLEN ? n - done : OUTLEN));
    }
    update(self, (const unsigned char *)data.buf, data.buf ? (size_t)data.len : 0);
    PyBuffer_Release(&data);
    return out;
}

static PyObject *Core_wipe(Core *self, PyObject *Py_UNUSED(ignored)) {
    OPENSSL_cleanse(&self->key, sizeof(self->key));
    OPENSSL_cleanse(self->value, OUTLEN);
    Py_RETURN_NONE;
}

static void Core_dealloc(Core *self) {
    OPENSSL_cleanse(&self->key, sizeof(self->key));
    OPENSSL_cleanse(self->value, OUTLEN);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Core_methods[] = {
    {"update", (PyCFunction)Core_update, METH_O, "HMAC_DRBG_Update with the given data."},
    {"blocks", (PyCFunction)Core_blocks, METH_VARARGS,
     "n bytes of V = HMAC(Key, V) output, then Update with the additional input (default none)."},
    {"wipe", (PyCFunction)Core_wipe, METH_NOARGS, "Zero the working state."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rng_service.rng._hmac_drbg.Core",
    .tp_doc = "HMAC_DRBG(SHA-256) working state (Key, V) and its two operations.",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hmac_drbg", "HMAC_DRBG(SHA-256) arithmetic over libcrypto.", -1,
    NULL,
};

PyMODINIT_FUNC PyInit__hmac_drbg(void) {
    if (PyType_Ready(&CoreType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
