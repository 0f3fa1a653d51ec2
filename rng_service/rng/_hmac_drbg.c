/*
 * The arithmetic of HMAC_DRBG(SHA-256) (SP 800-90A rev1, 10.1.2) in C: rng_service/rng/drbg.py.
 *
 * Core(seed_material)           instantiate: Key = 0x00.., V = 0x01.., Update(seed_material)
 * core.update(data)             HMAC_DRBG_Update (10.1.2.2)
 * core.blocks(n, additional=b"") Generate's output loop: V = HMAC(Key, V) until n bytes are
 *                               out, then Update(additional); the caller runs the Update before
 *                               the output when there is additional input
 * core.wipe()                   zeroes the state
 * Shuffle(seed_material, size)  the certified shuffle over a DRBG of its own (below)
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

/* the working state (Key, V) */
typedef struct {
    Keyed key;
    unsigned char value[OUTLEN];
} State;

typedef struct {
    PyObject_HEAD
    State state;
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
static void update(State *self, const unsigned char *data, size_t n) {
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

/* Instantiate's all-zero Key, its pads hashed once at import (set_key costs two compressions) */
static Keyed zero_keyed;

/* Instantiate's working state (10.1.2.3): Key = 0x00 00...00, V = 0x01 01...01, then Update */
static void instantiate(State *self, const unsigned char *material, size_t n) {
    self->key = zero_keyed;
    memset(self->value, 0x01, OUTLEN);
    update(self, material, n);
}

static void wipe(State *self) {
    OPENSSL_cleanse(&self->key, sizeof(self->key));
    OPENSSL_cleanse(self->value, OUTLEN);
}

static int Core_init(Core *self, PyObject *args, PyObject *kwds) {
    Py_buffer material;
    static char *kwlist[] = {"seed_material", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*", kwlist, &material)) return -1;
    instantiate(&self->state, (const unsigned char *)material.buf, (size_t)material.len);
    PyBuffer_Release(&material);
    return 0;
}

static PyObject *Core_update(Core *self, PyObject *arg) {
    Py_buffer data;
    if (!PyArg_Parse(arg, "y*", &data)) return NULL;
    update(&self->state, (const unsigned char *)data.buf, (size_t)data.len);
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
        State *st = &self->state;
        hmac3(&st->key, st->value, OUTLEN, NULL, 0, NULL, 0, st->value);
        memcpy(dst + done, st->value, (size_t)(n - done < OUTLEN ? n - done : OUTLEN));
    }
    update(&self->state, (const unsigned char *)data.buf, data.buf ? (size_t)data.len : 0);
    PyBuffer_Release(&data);
    return out;
}

static PyObject *Core_wipe(Core *self, PyObject *Py_UNUSED(ignored)) {
    wipe(&self->state);
    Py_RETURN_NONE;
}

static void Core_dealloc(Core *self) {
    wipe(&self->state);
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

/*
 * Shuffle(seed_material, size): the certified shuffle of rng_service/rng/sampling.py over a DRBG
 * instantiated on seed_material, in one object, for rng_service/rng/shoe.py's shoes.
 *
 * shuffle.steps(items, stop)    forward Fisher-Yates steps done .. stop-1 on the list `items`
 *                               (of `size` items), drawing from the DRBG's byte stream by
 *                               sampling.py's convention: generate(128) requests, no additional
 *                               input, unread bytes carried over; a step of range r = size - i
 *                               takes m = ceil(k / 8) bytes big-endian (k = bit length of r - 1),
 *                               keeps the low k bits, accepts a value < r (j = i + value, swap i
 *                               and j), else rejects it and draws again from the following bytes
 * shuffle.done                  the steps run so far
 *
 * The same bytes and cards as HmacDrbg and DrbgRandom.shuffle_steps (the reference, which the
 * tests compare it with on random inputs and the known answers), at less cost, in two ways that
 * change no byte of the stream: a request's four HMAC outputs are computed as the stream reaches
 * them, and its closing Update only when a next request is needed. A round dealt from a 2-deck
 * shoe reads about 15 bytes: one HMAC output of its first request, not four and the Update's
 * three HMACs. Holding the state past the outputs it made gives nothing away that a shoe being
 * dealt does not already hold (its seed, its unread bytes). What drbg.py enforces beside the
 * arithmetic is met by construction here: one instantiate (shoe.py checks its inputs), requests of
 * 128 bytes with no additional input, a few dozen of them at most (the reseed interval is 2**48).
 */
#define REQUEST_OUTPUTS 4  /* sampling.BLOCK_BYTES (128) / OUTLEN */
#define MAX_SIZE (1 << 16) /* every draw of one or two bytes; a shoe has at most 832 cards */

typedef struct {
    PyObject_HEAD
    State state;
    unsigned char unread[OUTLEN + 2]; /* the stream's unread bytes, from unread[0] */
    int have;                         /* how many */
    int outputs_left;                 /* outputs of the current request not yet computed */
    int update_due;                   /* the current request's closing Update not yet run */
    Py_ssize_t size;                  /* of the items shuffled */
    Py_ssize_t done;                  /* steps run */
} Shuffle;

/* The stream's next OUTLEN bytes appended to the unread ones (at most one unread byte here). */
static void next_output(Shuffle *self) {
    State *st = &self->state;
    if (self->outputs_left == 0) { /* a new generate(128) request */
        if (self->update_due) update(st, NULL, 0); /* the previous request's closing Update */
        self->outputs_left = REQUEST_OUTPUTS;
        self->update_due = 0;
    }
    hmac3(&st->key, st->value, OUTLEN, NULL, 0, NULL, 0, st->value); /* V = HMAC(Key, V) */
    memcpy(self->unread + self->have, st->value, OUTLEN);
    self->have += OUTLEN;
    if (--self->outputs_left == 0) self->update_due = 1;
}

static int Shuffle_init(Shuffle *self, PyObject *args, PyObject *kwds) {
    Py_buffer material;
    Py_ssize_t size;
    static char *kwlist[] = {"seed_material", "size", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*n", kwlist, &material, &size)) return -1;
    if (size < 1 || size > MAX_SIZE) {
        PyBuffer_Release(&material);
        PyErr_SetString(PyExc_ValueError, "Shuffle: size must be 1 to 65536 items");
        return -1;
    }
    instantiate(&self->state, (const unsigned char *)material.buf, (size_t)material.len);
    PyBuffer_Release(&material);
    self->have = 0;
    self->outputs_left = 0;
    self->update_due = 0;
    self->size = size;
    self->done = 0;
    return 0;
}

static PyObject *Shuffle_steps(Shuffle *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "steps(items: list, stop: int)");
        return NULL;
    }
    PyObject *items = args[0];
    Py_ssize_t stop = PyLong_AsSsize_t(args[1]);
    if (stop == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = self->size, i = self->done;
    if (PyList_GET_SIZE(items) != n || stop < i || stop > n - 1) {
        PyErr_Format(PyExc_ValueError,
                     "steps: %zd..%zd outside a shuffle of %zd items at step %zd, or %zd items",
                     i, stop, n, i, PyList_GET_SIZE(items));
        return NULL;
    }
    PyObject **cells = ((PyListObject *)items)->ob_item;
    int pos = 0, have = self->have;
    while (i < stop) {
        unsigned range = (unsigned)(n - i), k = 0;
        for (unsigned x = range - 1; x; x >>= 1) k++;
        int m = k > 8 ? 2 : 1;
        if (have - pos < m) { /* keep the unread byte, if any, and draw the next output */
            memmove(self->unread, self->unread + pos, (size_t)(have - pos));
            self->have = have - pos;
            pos = 0;
            next_output(self);
            have = self->have;
        }
        unsigned value = self->unread[pos];
        if (m == 2) value = (value << 8) | self->unread[pos + 1];
        pos += m;
        value &= (1u << k) - 1;
        if (value < range) {
            Py_ssize_t j = i + (Py_ssize_t)value;
            /* a swap of two list cells moves references: no reference counts change */
            PyObject *tmp = cells[i];
            cells[i] = cells[j];
            cells[j] = tmp;
            i++;
        }
    }
    memmove(self->unread, self->unread + pos, (size_t)(have - pos));
    self->have = have - pos;
    self->done = i;
    Py_RETURN_NONE;
}

static PyObject *Shuffle_get_done(Shuffle *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->done);
}

static void Shuffle_dealloc(Shuffle *self) {
    wipe(&self->state);
    OPENSSL_cleanse(self->unread, sizeof(self->unread));
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Shuffle_methods[] = {
    {"steps", (PyCFunction)(void (*)(void))Shuffle_steps, METH_FASTCALL,
     "Run the shuffle's steps from done up to stop - 1 on the list items."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Shuffle_getset[] = {
    {"done", (getter)Shuffle_get_done, NULL, "The steps run so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ShuffleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rng_service.rng._hmac_drbg.Shuffle",
    .tp_doc = "The certified shuffle (sampling.py's convention) over an HMAC_DRBG of its own.",
    .tp_basicsize = sizeof(Shuffle),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Shuffle_init,
    .tp_dealloc = (destructor)Shuffle_dealloc,
    .tp_methods = Shuffle_methods,
    .tp_getset = Shuffle_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hmac_drbg", "HMAC_DRBG(SHA-256) arithmetic over libcrypto.", -1,
    NULL,
};

PyMODINIT_FUNC PyInit__hmac_drbg(void) {
    static const unsigned char zero_key[OUTLEN] = {0};
    set_key(&zero_keyed, zero_key);
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&ShuffleType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Core", (PyObject *)&CoreType) < 0 ||
        PyModule_AddObjectRef(m, "Shuffle", (PyObject *)&ShuffleType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
